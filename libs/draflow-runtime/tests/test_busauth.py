"""NATS credentials and TLS settings: what reaches nats-py's connect, and which combinations are refused at
start-up with the settings named (the connection itself: tests/integration/test_secure_nats_flow.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from draflow_runtime.busauth import NatsSecurity
from draflow_runtime.settings import ServiceSettings, load_settings


def test_no_settings_means_an_open_server() -> None:
    security = NatsSecurity.from_settings(ServiceSettings())
    assert security.connect_options() == {}
    assert security.describe() == "no credentials, no TLS"


def test_user_and_password_from_the_environment_are_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFLOW_NATS_PASSWORD", "s3cret")
    settings = load_settings(ServiceSettings, ["--nats-user", "claim-controller"])
    assert "s3cret" not in repr(settings)
    security = NatsSecurity.from_settings(settings)
    assert security.connect_options() == {"user": "claim-controller", "password": "s3cret"}
    assert "s3cret" not in security.describe()


def test_credential_files_are_passed_by_path_and_must_exist(tmp_path: Path) -> None:
    creds = tmp_path / "svc.creds"
    with pytest.raises(FileNotFoundError, match=f"NATS credentials file {creds} does not exist"):
        NatsSecurity(creds_file=str(creds)).connect_options()
    creds.write_text("-----BEGIN NATS USER JWT-----\n")
    assert NatsSecurity(creds_file=str(creds)).connect_options() == {"user_credentials": str(creds)}
    seed = tmp_path / "svc.nk"
    seed.write_text("SUA...\n")
    assert NatsSecurity(nkey_seed_file=str(seed)).connect_options() == {"nkeys_seed": str(seed)}


def test_a_ca_alone_turns_tls_on_and_verifies_the_server() -> None:
    options = NatsSecurity(tls_ca_file=ssl.get_default_verify_paths().cafile or None).connect_options()
    context = options["tls"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


@pytest.mark.parametrize(("argv", "message"), [
    (["--nats-user", "a", "--nats-creds-file", "/x.creds"], "only one of creds file, nkey seed file, user"),
    (["--nats-password", "p"], "a password needs a user"),
    (["--nats-tls-cert-file", "/c.crt"], "the client certificate and its key go together"),
    (["--http-tls-key-file", "/k.key"], "http_tls_cert_file and http_tls_key_file go together"),
])
def test_conflicting_settings_stop_the_start_with_a_clear_message(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load_settings(ServiceSettings, argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
