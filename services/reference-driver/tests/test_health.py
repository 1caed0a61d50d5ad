"""The health control file and how health shows up in the health and inventory streams."""

from __future__ import annotations

import json
import os

import pytest

from draflow_protos.drahealth.v1 import api_pb2 as health_pb
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from reference_driver.health import (
    HealthControl,
    HealthFileError,
    apply_health_taints,
    health_response,
    parse_health_file,
)
from reference_driver.inventory import InventoryConfig, build_pool

POOL = build_pool("node-1", InventoryConfig.model_validate({"gpu_count": 3}))


def test_parse_health_file():
    raw = json.dumps({"devices": {"gpu-1": {"health": "unhealthy", "message": "xid 79"},
                                  "gpu-2": {"health": "Unknown"}}}).encode()
    statuses = parse_health_file(raw)
    assert statuses["gpu-1"].health == health_pb.UNHEALTHY
    assert statuses["gpu-1"].message == "xid 79"
    assert statuses["gpu-2"].health == health_pb.UNKNOWN


@pytest.mark.parametrize("raw", [b"nope", b"[]", b'{"devices": {"gpu-1": {"health": "Sick"}}}'])
def test_invalid_health_files_are_rejected(raw):
    with pytest.raises(HealthFileError):
        parse_health_file(raw)


def test_control_file_changes_are_picked_up(tmp_path):
    control = HealthControl(tmp_path / "health.json")
    assert control.poll() is False  # no file: all healthy
    control.path.write_text(json.dumps({"devices": {"gpu-1": {"health": "Unhealthy"}}}))
    assert control.poll() is True
    response = health_response(POOL, control, timeout_seconds=30)
    assert [(d.device.pool_name, d.device.device_name, d.health) for d in response.devices] == [
        ("node-1", "gpu-0", health_pb.HEALTHY),
        ("node-1", "gpu-1", health_pb.UNHEALTHY),
        ("node-1", "gpu-2", health_pb.HEALTHY),
    ]
    assert all(d.health_check_timeout_seconds == 30 and d.last_updated_time > 0 for d in response.devices)
    old = health_response(POOL, control, timeout_seconds=30, pb=health_v1alpha1)  # the same, in v1alpha1
    assert old.DESCRIPTOR.full_name == "v1alpha1.NodeWatchResourcesResponse"
    assert [(d.device.device_name, d.health) for d in old.devices] == [
        (d.device.device_name, d.health) for d in response.devices
    ]
    control.path.write_text("{broken")
    os.utime(control.path, ns=(5, 5))
    assert control.poll() is False
    assert control.status("gpu-1").health == health_pb.UNHEALTHY


def test_unhealthy_devices_get_a_taint_in_a_copy_of_the_pool(tmp_path):
    statuses = parse_health_file(b'{"devices": {"gpu-2": {"health": "Unhealthy"}}}')
    tainted = apply_health_taints(POOL, statuses, "gpu.draflow.example")
    assert [(t.key, t.effect) for t in tainted.devices[2].taints] == [
        ("gpu.draflow.example/unhealthy", "NoSchedule")]
    assert not tainted.devices[0].taints
    assert not POOL.devices[2].taints  # the cached pool is untouched
    assert apply_health_taints(POOL, {}, "gpu.draflow.example") is POOL
