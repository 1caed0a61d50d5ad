"""A nats-server that demands TLS and a password, with each draflow service's own user and permissions.

:func:`write_secure_nats` writes, under one directory (files readable by the owner only):

- ``ca.crt``: a CA generated at start (``cryptography``, :mod:`draflow_testenv.pki`) that signs the server's
  certificate (``127.0.0.1``/``localhost``) and one client certificate per user (mutual TLS: the server
  verifies it);
- ``permissions.conf``: a copy of ``deploy/kustomize/components/nats-auth/permissions.conf``, the
  permissions the deploy manifests give each service, so whatever runs against this server runs under them;
- ``nats.conf``: JetStream, TLS (``verify: true``), and the users: ``claim-controller``,
  ``structured-allocator``, ``slice-publisher``, ``kubelet-dra-shim`` (each with its permissions),
  ``reader`` (``draflow events``) and ``admin`` (no limits: tests and tools), each with a random password.

:meth:`SecureNats.security` gives a bus's :class:`draflow_runtime.busauth.NatsSecurity` for a user,
:meth:`SecureNats.service_args` and :meth:`SecureNats.service_env` a service's flags and environment.
``Environment(secure_nats=True)`` runs its nats-server this way (``make up`` does).
"""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from draflow_runtime.busauth import NatsSecurity
from draflow_testenv import pki
from draflow_testenv.binaries import repo_root

PERMISSIONS_FILE = Path("deploy/kustomize/components/nats-auth/permissions.conf")
#: user -> the permissions variable of PERMISSIONS_FILE ("" = no limits)
USERS: dict[str, str] = {
    "claim-controller": "DRAFLOW_CLAIM_CONTROLLER",
    "structured-allocator": "DRAFLOW_STRUCTURED_ALLOCATOR",
    "slice-publisher": "DRAFLOW_SLICE_PUBLISHER",
    "kubelet-dra-shim": "DRAFLOW_KUBELET_DRA_SHIM",
    "reader": "DRAFLOW_READER",
    "admin": "",
}
ADMIN = "admin"


def env_prefix(service: str) -> str:
    """A service's environment prefix: ``claim-controller`` -> ``DRAFLOW_CLAIM_CONTROLLER_``."""
    return "DRAFLOW_" + service.upper().replace("-", "_") + "_"


@dataclass(frozen=True)
class SecureNats:
    """Where a secure nats-server's files are and the users' passwords."""

    dir: Path
    passwords: dict[str, str]

    @property
    def config(self) -> Path:
        return self.dir / "nats.conf"

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.crt"

    def cert_file(self, user: str) -> Path:
        return self.dir / f"{user}.crt"

    def key_file(self, user: str) -> Path:
        return self.dir / f"{user}.key"

    def argv(self, binary: Path) -> list[str]:
        return [str(binary), "-c", str(self.config)]

    def security(self, user: str = ADMIN, *, password: str | None = None, tls: bool = True) -> NatsSecurity:
        """What a client of ``user`` connects with; ``password``/``tls=False`` to get refused on purpose."""
        return NatsSecurity(
            user=user, password=self.passwords[user] if password is None else password,
            tls_ca_file=str(self.ca_file) if tls else None,
            tls_cert_file=str(self.cert_file(user)) if tls else None,
            tls_key_file=str(self.key_file(user)) if tls else None,
        )

    def service_args(self, user: str) -> list[str]:
        """Flags of a service connecting as ``user`` (the password goes in :meth:`service_env`)."""
        return ["--nats-user", user, "--nats-tls-ca-file", str(self.ca_file),
                "--nats-tls-cert-file", str(self.cert_file(user)),
                "--nats-tls-key-file", str(self.key_file(user))]

    def service_env(self, env_prefix: str, user: str) -> dict[str, str]:
        """``<env_prefix>NATS_PASSWORD`` (e.g. ``DRAFLOW_CLAIM_CONTROLLER_``): not on a command line."""
        return {f"{env_prefix}NATS_PASSWORD": self.passwords[user]}


    def shell_env(self, user: str = "reader") -> dict[str, str]:
        """The ``draflow`` CLI's variables (``NATS_USER``...) for ``user``: what ``env.sh`` exports."""
        return {"NATS_USER": user, "NATS_PASSWORD": self.passwords[user], "NATS_CA": str(self.ca_file),
                "NATS_CERT": str(self.cert_file(user)), "NATS_KEY": str(self.key_file(user))}


def nats_env_security(values: Mapping[str, str]) -> NatsSecurity:
    """The NatsSecurity the CLI's variables in ``values`` describe (none set: an open server)."""
    def get(name: str) -> str | None:
        return values.get(name) or None

    return NatsSecurity(
        creds_file=get("NATS_CREDS"), user=get("NATS_USER"), password=get("NATS_PASSWORD"),
        tls_ca_file=get("NATS_CA"), tls_cert_file=get("NATS_CERT"), tls_key_file=get("NATS_KEY"))


def nats_config(host: str, port: int, monitor_port: int, store_dir: Path, files: SecureNats) -> str:
    """The nats.conf text (JSON strings are valid NATS config strings)."""
    users = []
    for user, variable in USERS.items():
        entry = f"{{user: {json.dumps(user)}, password: {json.dumps(files.passwords[user])}"
        users.append(entry + (f", permissions: ${variable}}}" if variable else "}"))
    q = json.dumps
    return "\n".join([
        "server_name: draflow-testenv-secure",
        f"listen: {q(f'{host}:{port}')}",
        f"http: {q(f'{host}:{monitor_port}')}",
        f"jetstream {{ store_dir: {q(str(store_dir))} }}",
        "include permissions.conf",
        "tls {",
        f"  cert_file: {q(str(files.cert_file('server')))}",
        f"  key_file: {q(str(files.key_file('server')))}",
        f"  ca_file: {q(str(files.ca_file))}",
        "  verify: true",
        "  timeout: 5",
        "}",
        "authorization {",
        "  users: [",
        *(f"    {u}" for u in users),
        "  ]",
        "}",
        "",
    ])


def write_secure_nats(directory: Path, *, host: str, port: int, monitor_port: int, store_dir: Path,
                      root: Path | None = None) -> SecureNats:
    """Generate the CA, certificates, passwords and config under ``directory`` (see the module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = SecureNats(directory, {user: secrets.token_urlsafe(18) for user in USERS})
    ca = pki.make_ca("draflow-testenv-nats-ca")
    pki.write_private(files.ca_file, ca.cert_pem)
    server = pki.make_serving_cert(ca, ["localhost"], [host])
    pki.write_private(files.cert_file("server"), server.cert_pem)
    pki.write_private(files.key_file("server"), server.key_pem)
    for user in USERS:
        client = pki.make_client_cert(ca, user)
        pki.write_private(files.cert_file(user), client.cert_pem)
        pki.write_private(files.key_file(user), client.key_pem)
    shutil.copyfile((root or repo_root()) / PERMISSIONS_FILE, directory / "permissions.conf")
    pki.write_private(files.config, nats_config(host, port, monitor_port, store_dir, files).encode())
    return files
