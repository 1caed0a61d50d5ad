"""Certificates and kubeconfigs of the local environment (pure functions over ``cryptography``).

One self-signed CA signs the kube-apiserver serving certificate (the kubeconfigs'
``certificate-authority-data``); a second one, ``CLIENT_CA_NAME``, signs every client certificate and is
the API server's ``--client-ca-file``. Two, because OpenSSL (Python's ``ssl``) sends the issuer of a
client's certificate along with it whenever that issuer is in the client's trust store: with one CA every
Python request made kube-apiserver verify a longer chain (0.18 ms against 0.09 ms per request,
docs/benchmarks.md "what draflow costs the API server"), which Go clients and ServiceAccount tokens never
cause. Keys are ECDSA P-256 (fast to generate, accepted by Kubernetes).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from draflow_testenv import servers

_VALIDITY = datetime.timedelta(days=365)
CLIENT_CA_NAME = "draflow-testenv-client-ca"


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, orgs: list[str] | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs or []]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str = "draflow-testenv-ca") -> KeyPair:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _issue(
    ca: KeyPair, cn: str, orgs: list[str] | None, *, server: bool,
    dns: list[str] | None = None, ips: list[str] | None = None,
) -> KeyPair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, orgs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns or []]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips or []]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_serving_cert(ca: KeyPair, dns: list[str], ips: list[str]) -> KeyPair:
    return _issue(ca, dns[0] if dns else ips[0], None, server=True, dns=dns, ips=ips)


def make_client_cert(ca: KeyPair, user: str, groups: list[str] | None = None) -> KeyPair:
    """A client certificate: CN is the user name, O entries are the groups (``system:masters`` = admin)."""
    return _issue(ca, user, groups, server=False)


def make_signing_key() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) of a ServiceAccount token signing key (ES256)."""
    key = _key()
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), pub


def write_private(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` readable by the owner only (atomic: temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)
    return path


def kubeconfig(
    server: str, ca_pem: bytes, *, user: str, client: KeyPair | None = None, token: str | None = None,
    namespace: str | None = None,
) -> bytes:
    """A self-contained kubeconfig (all credentials inline) with one cluster, user and context."""
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    creds: dict[str, str] = {}
    if client is not None:
        creds = {"client-certificate-data": b64(client.cert_pem), "client-key-data": b64(client.key_pem)}
    if token is not None:
        creds["token"] = token
    context: dict[str, str] = {"cluster": "draflow", "user": user}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "draflow", "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}
        ],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": "draflow", "context": context}],
        "current-context": "draflow",
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def write_apiserver_pki(d: Path, apiserver_url: str, admin_kubeconfig: Path) -> tuple[
        servers.ApiserverFiles, KeyPair, KeyPair]:
    """Every certificate and key of a new environment, written under ``d`` (owner-only files): the CA
    (``ca.crt``/``ca.key``), the client CA (``client-ca.*``, :data:`CLIENT_CA_NAME`), kube-apiserver's
    serving certificate, its ServiceAccount signing key, and the admin's client certificate (``admin.*``,
    ``draflow-admin`` in ``system:masters``) with its kubeconfig at ``admin_kubeconfig``.
    -> (the files kube-apiserver takes, the CA, the client CA)."""
    ca = make_ca()
    client_ca = make_ca(CLIENT_CA_NAME)  # client certificates: a CA the kubeconfigs do not carry (above)
    serving = make_serving_cert(
        ca, ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local"], [servers.HOST, "10.96.0.1"])
    admin = make_client_cert(client_ca, "draflow-admin", ["system:masters"])
    sa_key, sa_pub = make_signing_key()
    files = servers.ApiserverFiles(
        ca_cert=write_private(d / "ca.crt", ca.cert_pem),
        client_ca_cert=write_private(d / "client-ca.crt", client_ca.cert_pem),
        serving_cert=write_private(d / "apiserver.crt", serving.cert_pem),
        serving_key=write_private(d / "apiserver.key", serving.key_pem),
        sa_key=write_private(d / "sa.key", sa_key),
        sa_pub=write_private(d / "sa.pub", sa_pub),
    )
    write_private(d / "ca.key", ca.key_pem)
    write_private(d / "client-ca.key", client_ca.key_pem)
    write_private(d / "admin.crt", admin.cert_pem)
    write_private(d / "admin.key", admin.key_pem)
    write_private(admin_kubeconfig,
                  kubeconfig(apiserver_url, ca.cert_pem, user="draflow-admin", client=admin))
    return files, ca, client_ca
