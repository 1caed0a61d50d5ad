"""Settings: flag > environment > default, clear validation errors, reference table."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import Field, ValidationError
from pydantic_settings import SettingsConfigDict

from draflow_runtime.settings import FeatureGatesSettings, ServiceSettings, load_settings, settings_reference


class DemoSettings(ServiceSettings):
    """Settings of a demo service."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_DEMO_")
    workers: int = Field(4, ge=1, description="Concurrent reconciles.")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("DRAFLOW_DEMO_"):
            monkeypatch.delenv(key)


def test_defaults_apply_without_flags_or_environment() -> None:
    s = load_settings(DemoSettings, [])
    assert s.nats_url == "nats://127.0.0.1:4222"
    assert s.http_port == 8080
    assert s.leader_elect is False
    assert s.kubeconfig is None
    assert s.workers == 4
    assert s.identity  # hostname_pid


def test_environment_overrides_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFLOW_DEMO_HTTP_PORT", "9000")
    monkeypatch.setenv("DRAFLOW_DEMO_LEADER_ELECT", "true")
    monkeypatch.setenv("DRAFLOW_DEMO_LOG_LEVEL", "DEBUG")
    s = load_settings(DemoSettings, [])
    assert (s.http_port, s.leader_elect, s.log_level) == (9000, True, "debug")


def test_flag_overrides_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFLOW_DEMO_HTTP_PORT", "9000")
    monkeypatch.setenv("DRAFLOW_DEMO_LEADER_ELECT", "true")
    s = load_settings(DemoSettings, ["--http-port", "9100", "--no-leader-elect", "--workers=8"])
    assert (s.http_port, s.leader_elect, s.workers) == (9100, False, 8)


def test_empty_nats_url_flag_disables_nats() -> None:
    assert load_settings(DemoSettings, ["--nats-url", ""]).nats_url == ""


def test_invalid_value_exits_with_message_naming_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        load_settings(DemoSettings, ["--workers", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "workers (--workers / DRAFLOW_DEMO_WORKERS)" in err
    assert "Traceback" not in err


def test_invalid_environment_value_names_the_field(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRAFLOW_DEMO_LOG_FORMAT", "xml")
    with pytest.raises(SystemExit):
        load_settings(DemoSettings, [])
    assert "log_format (--log-format / DRAFLOW_DEMO_LOG_FORMAT)" in capsys.readouterr().err


def test_inconsistent_leader_timing_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load_settings(DemoSettings, ["--renew-deadline", "20"])
    assert "lease_duration > renew_deadline > retry_period" in capsys.readouterr().err


def test_help_names_environment_variable_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        load_settings(DemoSettings, ["--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--http-port" in out
    assert "DRAFLOW_DEMO_HTTP_PORT" in out
    assert "Concurrent reconciles." in out


def test_reference_table_lists_every_field() -> None:
    table = settings_reference(DemoSettings)
    lines = table.strip().splitlines()
    assert lines[0] == "| flag | environment variable | default | description |"
    assert len(lines) == 2 + len(DemoSettings.model_fields)
    assert "| `--workers` | `DRAFLOW_DEMO_WORKERS` | `4` | Concurrent reconciles. |" in lines
    assert any(line.startswith("| `--leader-elect, --no-leader-elect` |") for line in lines)
    assert any("`<hostname>_<pid>`" in line for line in lines)


class GatedSettings(ServiceSettings, FeatureGatesSettings):
    model_config = SettingsConfigDict(env_prefix="DRAFLOW_GATED_")


def test_feature_gates_mixin_validates_at_start_up_and_keeps_the_service_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DRAFLOW_GATED_FEATURE_GATES", "DRADerivedAttributes=false")
    settings = GatedSettings(something_else="ignored, as ServiceSettings says (extra=ignore)")
    assert settings.gates["DRADerivedAttributes"] is False
    assert settings.gates["DRAPrioritizedList"] is True
    with pytest.raises(ValidationError, match="NoSuchGate"):
        GatedSettings(feature_gates="NoSuchGate=true")


@pytest.mark.parametrize("given", ["", "DRADerivedAttributes=false", "DRAWorkloadResourceClaims=true"])
def test_with_gate_off_turns_one_gate_off_and_keeps_the_others(given: str) -> None:
    settings = GatedSettings(feature_gates=given, nats_url="nats://elsewhere:4222")
    off = settings.with_gate_off("DRAWorkloadResourceClaims")
    assert off.gates == {**settings.gates, "DRAWorkloadResourceClaims": False}
    assert off.nats_url == "nats://elsewhere:4222"
    assert settings.gates["DRAWorkloadResourceClaims"] is True  # the original is left alone


def test_with_gate_off_refuses_to_break_a_dependency() -> None:
    with pytest.raises(ValueError, match="DRAPartitionableDevicesType is enabled, but depends"):
        GatedSettings().with_gate_off("DRAResourcePoolStatus")


def test_importing_settings_loads_no_network_client() -> None:
    """Every service's settings module imports this one, and so do the tests that start a process per
    case: nats-py and aiohttp (half a second of import) are loaded by the bus when it connects."""
    probe = ("import sys, draflow_runtime.settings; "
             "print(' '.join(m for m in ('nats', 'aiohttp', 'grpc') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == []
