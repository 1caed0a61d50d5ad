"""CDI spec rendering and files."""

from __future__ import annotations

import json

import pytest

from reference_driver import cdi

UID = "6a1f8e2c-0000-4000-8000-000000000001"


def test_rendered_spec_is_valid_cdi(validate_cdi):
    spec = cdi.render_claim_spec("gpu.draflow.example", "gpu", UID, "ns/claim", [
        cdi.CdiDevice("gpu-0", "gpu-aaaa"),
        cdi.CdiDevice("gpu-1-part-2", "gpu-bbbb", env={"SHARING_STRATEGY": "TimeSlicing"}),
        cdi.CdiDevice("gpu-2", "gpu-cccc", share_id="0a2b3c4d-0000-4000-8000-000000000002"),
    ])
    assert validate_cdi(spec) == []
    assert spec["cdiVersion"] == cdi.CDI_VERSION
    assert spec["kind"] == "gpu.draflow.example/gpu"
    assert [d["name"] for d in spec["devices"]] == [
        f"{UID}-gpu-0", f"{UID}-gpu-1-part-2", f"{UID}-gpu-2-0a2b3c4d-0000-4000-8000-000000000002",
    ]


def test_device_env_names_the_uuid_claim_and_sharing():
    spec = cdi.render_claim_spec("gpu.draflow.example", "gpu", UID, "ns/claim", [
        cdi.CdiDevice(
            "gpu-3", "gpu-uuid-3", env={"SHARING_STRATEGY": "TimeSlicing", "TIMESLICE_INTERVAL": "Short"}
        ),
    ])
    assert spec["devices"][0]["containerEdits"]["env"] == [
        "DRAFLOW_GPU_3=gpu-uuid-3",
        "DRAFLOW_GPU_3_CLAIM=ns/claim",
        "DRAFLOW_GPU_3_SHARING_STRATEGY=TimeSlicing",
        "DRAFLOW_GPU_3_TIMESLICE_INTERVAL=Short",
    ]


def _spec(version="0.6.0", kind="a.b/c", name="x", env=("A=1",)):
    devices = [{"name": name, "containerEdits": {"env": list(env)}}] if name else []
    return {"cdiVersion": version, "kind": kind, "devices": devices}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (_spec(version="9.9.9"), "cdiVersion"),
        (_spec(kind="nokind"), "kind"),
        (_spec(name=""), "devices"),
        (_spec(name="-x"), "device name"),
        (_spec(env=("A",)), "env"),
    ],
    ids=["unknown-version", "bad-kind", "no-devices", "bad-device-name", "env-without-value"],
)
def test_the_validator_catches_invalid_specs(validate_cdi, spec, problem):
    assert any(problem in p for p in validate_cdi(spec))


def test_qualified_ids_and_file_names():
    name = cdi.device_name(UID, "gpu-0")
    qualified = cdi.qualified_device_id("gpu.draflow.example", "gpu", name)
    assert qualified == f"gpu.draflow.example/gpu={UID}-gpu-0"
    assert cdi.spec_file_name("gpu.draflow.example", "gpu", UID) == f"gpu.draflow.example-gpu_{UID}.json"


def test_write_is_atomic_and_remove_is_idempotent(tmp_path, validate_cdi):
    spec = cdi.render_claim_spec("gpu.draflow.example", "gpu", UID, "ns/c", [cdi.CdiDevice("gpu-0", "u")])
    path = cdi.write_spec(tmp_path, "gpu.draflow.example", "gpu", UID, spec)
    assert path.name.endswith(f"_{UID}.json")
    assert validate_cdi(json.loads(path.read_text())) == []
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind
    assert cdi.remove_spec(tmp_path, "gpu.draflow.example", "gpu", UID) is True
    assert cdi.remove_spec(tmp_path, "gpu.draflow.example", "gpu", UID) is False
    assert not path.exists()
