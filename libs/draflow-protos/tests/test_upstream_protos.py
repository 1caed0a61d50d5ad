"""hack/upstream_protos.py (part of `make verify-protos`): our kubelet protos against the pinned upstream
``.proto`` files from the Go module cache, and that a drift in any of them is reported."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from draflow_testenv.binaries import repo_root

pytestmark = pytest.mark.integration  # needs the Go toolchain and the pinned modules in its cache


def _load() -> ModuleType:
    path = repo_root() / "hack" / "upstream_protos.py"
    spec = importlib.util.spec_from_file_location("upstream_protos", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


up = _load()


@pytest.fixture(scope="module")
def upstream_dir() -> Path:
    return up.module_dir(up.staging_version())  # type: ignore[no-any-return]


def test_every_kubelet_proto_matches_upstream(upstream_dir: Path) -> None:
    diffs = up.compare(upstream_dir)
    assert sorted(diffs) == sorted(up.KUBELET_PROTOS)
    assert diffs == {name: [] for name in up.KUBELET_PROTOS}


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        pytest.param(
            "draflow_protos/dra/v1/api.proto",
            "optional string share_id = 5;",
            "optional string share_id = 6;",
            "messages.Device.fields.share_id.number: ours 6, upstream 5", id="field-number",
        ),
        pytest.param(
            "draflow_protos/dra/v1/api.proto", "optional string share_id = 5;", "string share_id = 5;",
            "messages.Device.fields.share_id.optional: ours False, upstream True", id="presence",
        ),
        pytest.param(
            "draflow_protos/drahealth/v1/api.proto", "int64 health_check_timeout_seconds = 4;",
            "int32 health_check_timeout_seconds = 4;",
            "messages.DeviceHealth.fields.health_check_timeout_seconds.type: "
            "ours 'TYPE_INT32', upstream 'TYPE_INT64'",
            id="type",
        ),
        pytest.param(
            "draflow_protos/drahealth/v1alpha1/api.proto", "UNHEALTHY = 2;", "BROKEN = 2;",
            "enums.HealthStatus.UNHEALTHY: missing (upstream has 2)", id="enum-value",
        ),
        pytest.param(
            "draflow_protos/drahealth/v1/api.proto", "package v1;", "package v1beta1;",
            "package: ours 'v1beta1', upstream 'v1'", id="package",
        ),
        pytest.param(
            "draflow_protos/pluginregistration/v1/api.proto", "repeated string supported_versions = 4;",
            "string supported_versions = 4;",
            "messages.PluginInfo.fields.supported_versions.label: "
            "ours 'LABEL_OPTIONAL', upstream 'LABEL_REPEATED'",
            id="label",
        ),
    ],
)
def test_a_drift_is_reported(
    upstream_dir: Path, tmp_path: Path, file: str, old: str, new: str, expected: str
) -> None:
    protos = tmp_path / "protos"
    shutil.copytree(repo_root() / "protos", protos)
    target = protos / file
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new))
    diffs = up.compare(upstream_dir, protos)
    assert expected in diffs[file]
    assert all(not d for name, d in diffs.items() if name != file)
