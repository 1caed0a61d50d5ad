"""How the bus proves who it is to NATS and checks the server: credentials and TLS.

:class:`NatsSecurity` holds one of

- a credentials file (``.creds``: a user JWT and its nkey seed, NATS decentralized auth),
- an nkey seed file (the server lists the user's public nkey),
- a user and password,

and optionally TLS: the CA that signed the server's certificate (``tls_ca_file``; alone it is server-only
TLS) and a client certificate and key (mutual TLS). Any TLS setting upgrades the connection to TLS (the
``nats://`` URL is kept; ``tls://`` works too). :meth:`NatsSecurity.connect_options` gives nats-py's
``connect`` keyword arguments; files are read when the bus connects, so rotated files are picked up on the
next connection.

Who may publish and subscribe to what is the server's side: ``deploy/kustomize/components/nats-auth``
holds each service's permissions (``docs/deploy.md`` "NATS"). One connection attempt with these
credentials is :func:`draflow_runtime.busconnect.connect_once`; this module does not import nats-py, so
the settings (which validate a NatsSecurity) stay cheap to import.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["NatsSecurity"]


@dataclass(frozen=True)
class NatsSecurity:
    """Credentials and TLS of one NATS connection (all optional; none: an open server)."""

    creds_file: str | None = None
    nkey_seed_file: str | None = None
    user: str | None = None
    password: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def __post_init__(self) -> None:
        given = [n for n in ("creds_file", "nkey_seed_file", "user") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(f"NATS credentials: only one of creds file, nkey seed file, user (got {given})")
        if self.password and not self.user:
            raise ValueError("NATS credentials: a password needs a user")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("NATS TLS: the client certificate and its key go together")

    @classmethod
    def from_settings(cls, settings: Any) -> NatsSecurity:
        """From :class:`draflow_runtime.settings.ServiceSettings` (its ``nats_*`` fields)."""
        password = settings.nats_password
        return cls(
            creds_file=settings.nats_creds_file, nkey_seed_file=settings.nats_nkey_seed_file,
            user=settings.nats_user,
            password=password.get_secret_value() if password is not None else None,
            tls_ca_file=settings.nats_tls_ca_file, tls_cert_file=settings.nats_tls_cert_file,
            tls_key_file=settings.nats_tls_key_file,
        )

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca_file or self.tls_cert_file)

    def describe(self) -> str:
        """What is used, for logs (never a secret): e.g. ``user claim-controller, TLS with client cert``."""
        who = (f"creds {self.creds_file}" if self.creds_file else
               f"nkey {self.nkey_seed_file}" if self.nkey_seed_file else
               f"user {self.user}" if self.user else "no credentials")
        tls = "TLS with client cert" if self.tls_cert_file else "TLS" if self.tls else "no TLS"
        return f"{who}, {tls}"

    def ssl_context(self) -> ssl.SSLContext:
        """Verifies the server against ``tls_ca_file`` (else the system CAs); presents the client cert."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca_file)
        if self.tls_cert_file and self.tls_key_file:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return context

    def connect_options(self) -> dict[str, Any]:
        """nats-py ``Client.connect`` keyword arguments. Raises ``OSError``/``ssl.SSLError`` naming the
        file when a file cannot be read."""
        options: dict[str, Any] = {}
        if self.creds_file:
            _readable(self.creds_file, "NATS credentials file")
            options["user_credentials"] = self.creds_file
        elif self.nkey_seed_file:
            _readable(self.nkey_seed_file, "NATS nkey seed file")
            options["nkeys_seed"] = self.nkey_seed_file
        elif self.user:
            options["user"] = self.user
            options["password"] = self.password or ""
        if self.tls:
            options["tls"] = self.ssl_context()
        return options


def _readable(path: str, what: str) -> None:
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
