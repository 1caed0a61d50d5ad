"""Typed service settings: every field has a default, a doc line, an environment variable and a flag.

A service subclasses :class:`ServiceSettings`, sets its environment prefix and adds its own fields::

    class Settings(ServiceSettings):
        model_config = SettingsConfigDict(env_prefix="DRAFLOW_CLAIM_CONTROLLER_")
        leader_election_id: str = Field("claim-controller", description="Name of the leader-election Lease.")
        workers: int = Field(4, ge=1, description="Concurrent reconciles.")

    settings = load_settings(Settings, sys.argv[1:])

Precedence is flag > environment variable > default. The environment variable of field ``http_port`` is
``<env_prefix>HTTP_PORT`` and its flag ``--http-port``; boolean fields get ``--name``/``--no-name``.
Invalid values end the process with exit code 2 and a message naming the field, its flag and its
environment variable (never a traceback). :func:`settings_reference` renders the same information as a
Markdown table for the service README.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal, Self, TypeVar

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from . import featuregates
from .busauth import NatsSecurity

__all__ = [
    "FeatureGatesSettings",
    "ServiceSettings",
    "env_var_name",
    "flag_name",
    "load_settings",
    "settings_reference",
]

S = TypeVar("S", bound="ServiceSettings")

#: Key in ``Field(json_schema_extra=...)`` for the default shown in help and docs when the real default
#: is computed at start-up (e.g. the hostname).
DEFAULT_DOC_KEY = "default_doc"

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["json", "console"]
EventLoop = Literal["uvloop", "asyncio"]
HttpAuthMode = Literal["auto", "on", "off"]


def _default_identity() -> str:
    """Leader-election identity unique per process: ``<hostname>_<pid>``."""
    return f"{socket.gethostname()}_{os.getpid()}"


class FeatureGatesSettings(BaseModel):
    """The ``feature_gates`` setting of a service that follows the DRA feature gates (the allocator as
    kube-scheduler's ``--feature-gates``, the shim as the kubelet's): validated at start-up, read through
    :attr:`gates`. Mixed in last (``class Settings(ServiceSettings, FeatureGatesSettings)``): a plain model
    adds no configuration of its own. A subclass restates the field only to describe what the gates change
    for it."""

    feature_gates: str = Field(
        "",
        description="DRA feature gates (Name=true|false, comma-separated); unset: draflow's defaults.",
    )

    @field_validator("feature_gates")
    @classmethod
    def _gates(cls, value: str) -> str:
        featuregates.parse(value)  # ValueError names the bad entry
        return value

    @property
    def gates(self) -> dict[str, bool]:
        """Every DRA feature gate's value (see :mod:`draflow_runtime.featuregates`)."""
        return featuregates.parse(self.feature_gates)

    def with_gate_off(self, gate: str) -> Self:
        """A copy with ``gate`` off after all (e.g. its API is not served: :mod:`draflow_runtime.served`).
        Raises ValueError when an enabled gate depends on it."""
        value = ",".join(part for part in (self.feature_gates, f"{gate}=false") if part)
        featuregates.parse(value)
        return self.model_copy(update={"feature_gates": value})


class ServiceSettings(BaseSettings):
    """Settings every draflow service has. Subclasses set ``model_config["env_prefix"]``."""

    model_config = SettingsConfigDict(
        env_prefix="DRAFLOW_",
        extra="ignore",
        validate_default=True,
        case_sensitive=False,
    )

    kubeconfig: str | None = Field(
        None,
        description="Path of the kubeconfig file; unset uses $KUBECONFIG, then the in-cluster config.",
    )
    nats_url: str = Field(
        "nats://127.0.0.1:4222",
        description="NATS server URL (JetStream enabled); empty disables NATS.",
    )
    nats_creds_file: str | None = Field(
        None, description="NATS credentials file (.creds: user JWT + nkey seed); one of three credentials."
    )
    nats_nkey_seed_file: str | None = Field(
        None, description="NATS nkey seed file (the server lists its public key)."
    )
    nats_user: str | None = Field(None, description="NATS user (with --nats-password).")
    nats_password: SecretStr | None = Field(
        None, description="NATS password of --nats-user (better set by its environment variable)."
    )
    nats_tls_ca_file: str | None = Field(
        None, description="CA bundle that signed the NATS server's certificate; any TLS setting turns TLS on."
    )
    nats_tls_cert_file: str | None = Field(
        None, description="Client certificate for NATS mutual TLS (with --nats-tls-key-file)."
    )
    nats_tls_key_file: str | None = Field(None, description="Private key of --nats-tls-cert-file.")
    event_loop: EventLoop = Field(
        "uvloop",
        description="asyncio event loop: uvloop (libuv; its TCP and TLS transports are compiled) or "
        "asyncio (the standard library's).",
    )
    log_level: LogLevel = Field("info", description="Minimum log level: debug, info, warning, error.")
    log_format: LogFormat = Field("json", description="Log line format on stderr: json or console.")
    http_port: int = Field(
        8080, ge=0, le=65535, description="Port of /metrics, /healthz and /readyz; 0 turns the server off."
    )
    http_host: str = Field("0.0.0.0", description="Address the metrics and health server listens on.")
    http_auth: HttpAuthMode = Field(
        "auto",
        description="Bearer token checked with a TokenReview, then a SubjectAccessReview (verb get on the "
        "path, a non-resource URL) for every HTTP path but /healthz and /readyz (and /metrics unless "
        "--http-metrics-auth): on, off, or auto (on unless --http-host is a loopback address). 401 without "
        "or with a bad token, 403 when denied.",
    )
    http_metrics_auth: bool = Field(
        False, description="Also require the token and authorization for /metrics (when --http-auth applies)."
    )
    http_auth_cache_seconds: float = Field(
        10.0, ge=0, description="Seconds a TokenReview or SubjectAccessReview answer is reused (0: never)."
    )
    http_tls_cert_file: str | None = Field(
        None, description="Serve HTTPS with this certificate (and --http-tls-key-file): tokens never cross "
        "the network in the clear; probes then use scheme HTTPS."
    )
    http_tls_key_file: str | None = Field(None, description="Private key of --http-tls-cert-file.")
    leader_elect: bool = Field(False, description="Run only while holding the leader-election Lease.")
    leader_election_namespace: str = Field(
        "draflow-system", description="Namespace of the leader-election Lease."
    )
    leader_election_id: str = Field("draflow", description="Name of the leader-election Lease.")
    lease_duration: float = Field(
        15.0, gt=0, description="Seconds a non-leader waits after the last renewal before taking over."
    )
    renew_deadline: float = Field(
        10.0, gt=0, description="Seconds the leader keeps retrying a renewal before it gives up leading."
    )
    retry_period: float = Field(2.0, gt=0, description="Seconds between leader-election attempts.")
    identity: str = Field(
        default_factory=_default_identity,
        min_length=1,
        description="Holder identity in the leader-election Lease.",
        json_schema_extra={DEFAULT_DOC_KEY: "<hostname>_<pid>"},
    )

    @field_validator("log_level", "log_format", "http_auth", "event_loop", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("kubeconfig", "http_tls_cert_file", "http_tls_key_file",
                     "nats_creds_file", "nats_nkey_seed_file", "nats_user", "nats_password",
                     "nats_tls_ca_file", "nats_tls_cert_file", "nats_tls_key_file", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @model_validator(mode="after")
    def _check_credentials(self) -> ServiceSettings:
        NatsSecurity.from_settings(self)  # raises ValueError naming the conflicting settings
        if bool(self.http_tls_cert_file) != bool(self.http_tls_key_file):
            raise ValueError("http_tls_cert_file and http_tls_key_file go together")
        return self

    @model_validator(mode="after")
    def _check_leader_timing(self) -> ServiceSettings:
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError(
                "lease_duration > renew_deadline > retry_period must hold "
                f"(got {self.lease_duration} > {self.renew_deadline} > {self.retry_period})"
            )
        return self


def flag_name(field: str) -> str:
    """The command-line flag of a field: ``http_port`` -> ``--http-port``."""
    return "--" + field.replace("_", "-")


def env_var_name(cls: type[BaseSettings], field: str) -> str:
    """The environment variable of a field: ``<env_prefix><FIELD>`` in upper case."""
    prefix = cls.model_config.get("env_prefix") or ""
    return (prefix + field).upper()


def _is_bool(info: FieldInfo) -> bool:
    return info.annotation is bool


def _default_text(info: FieldInfo) -> str:
    extra = info.json_schema_extra
    if isinstance(extra, dict) and DEFAULT_DOC_KEY in extra:
        return str(extra[DEFAULT_DOC_KEY])
    if info.default_factory is not None:
        return "(computed)"
    if info.default is None:
        return "(unset)"
    if info.default == "":
        return '""'
    if isinstance(info.default, bool):
        return str(info.default).lower()
    return str(info.default)


def _metavar(name: str, info: FieldInfo) -> str:
    """``{json,console}`` for a ``Literal`` field (validated by pydantic, case-insensitively), else NAME."""
    choices = _choices(info)
    return "{" + ",".join(choices) + "}" if choices else name.upper()


def _choices(info: FieldInfo) -> list[str] | None:
    """Allowed values of a ``Literal`` field (possibly optional), else None."""
    annotation = info.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    if typing.get_origin(annotation) is Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return None


def build_parser(cls: type[ServiceSettings], prog: str | None = None) -> argparse.ArgumentParser:
    """An argparse parser with one flag per field; flags not given are absent from the namespace."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else None,
        argument_default=argparse.SUPPRESS,
    )
    for name, info in cls.model_fields.items():
        help_text = f"{info.description or ''} [env {env_var_name(cls, name)}; default {_default_text(info)}]"
        help_text = help_text.replace("%", "%%")
        if _is_bool(info):
            parser.add_argument(
                flag_name(name), dest=name, action=argparse.BooleanOptionalAction, help=help_text
            )
        else:
            parser.add_argument(flag_name(name), dest=name, metavar=_metavar(name, info), help=help_text)
    return parser


def _format_validation_error(cls: type[ServiceSettings], exc: ValidationError) -> str:
    lines = [f"invalid settings for {cls.__name__}:"]
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"])
        if field in cls.model_fields:
            where = f"{field} ({flag_name(field)} / {env_var_name(cls, field)})"
            lines.append(f"  {where}: {err['msg']} (got {err.get('input')!r})")
        else:
            lines.append(f"  {field or 'settings'}: {err['msg']}")
    return "\n".join(lines) + "\n"


def load_settings(cls: type[S], argv: Sequence[str] | None = None, *, prog: str | None = None) -> S:
    """Build settings from flags (``argv``, default ``sys.argv[1:]``), the environment and defaults.

    Flags override environment variables, which override defaults. ``--help`` prints every flag with its
    environment variable and default and exits 0. An unknown flag or an invalid value exits with code 2
    and a message naming the field; no traceback is shown.
    """
    parser = build_parser(cls, prog=prog)
    args = vars(parser.parse_args(list(sys.argv[1:] if argv is None else argv)))
    try:
        return cls(**args)
    except ValidationError as exc:
        parser.exit(2, _format_validation_error(cls, exc))


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_reference(cls: type[ServiceSettings]) -> str:
    """A Markdown table of every setting: flag, environment variable, default, description."""
    rows = [
        "| flag | environment variable | default | description |",
        "|---|---|---|---|",
    ]
    for name, info in cls.model_fields.items():
        flag = flag_name(name)
        if _is_bool(info):
            flag = f"{flag}, --no-{flag[2:]}"
        rows.append(
            f"| `{flag}` | `{env_var_name(cls, name)}` | `{_md_escape(_default_text(info))}` "
            f"| {_md_escape(info.description or '')} |"
        )
    return "\n".join(rows) + "\n"
