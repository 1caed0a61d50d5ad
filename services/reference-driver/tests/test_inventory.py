"""Inventory profiles, deterministic UUIDs and the reloadable inventory file."""

from __future__ import annotations

import json
import os

import pytest

from reference_driver.inventory import (
    InventoryConfig,
    InventoryFileError,
    InventorySource,
    build_pool,
    device_uuid,
    gpu_uuid,
    load_inventory_file,
    split_quantity,
    with_partition_type,
)


def config(**kw) -> InventoryConfig:
    return InventoryConfig.model_validate(kw)


def attrs(device) -> dict:
    out = {}
    for key, value in device.attributes.items():
        out[key] = getattr(value, value.WhichOneof("value"))
    return out


def test_plain_profile():
    pool = build_pool("node-1", config(gpu_count=3))
    assert pool.name == "node-1"
    assert pool.node_name == "node-1"
    assert [d.name for d in pool.devices] == ["gpu-0", "gpu-1", "gpu-2"]
    assert not pool.shared_counters
    gpu1 = pool.devices[1]
    assert attrs(gpu1) == {
        "index": 1, "uuid": gpu_uuid("node-1", 1), "model": "draflow-fake-gpu", "driverVersion": "1.0.0",
    }
    assert gpu1.attributes["driverVersion"].WhichOneof("value") == "version_value"
    assert {k: v.value for k, v in gpu1.capacity.items()} == {"memory": "80Gi", "compute": "100"}
    assert not gpu1.HasField("allow_multiple_allocations")


def test_partitionable_profile_shares_counters_between_whole_gpu_and_partitions():
    pool = build_pool("node-1", config(profile="partitionable", gpu_count=2, partitions_per_gpu=4))
    assert [c.name for c in pool.shared_counters] == ["gpu-0-counters", "gpu-1-counters"]
    assert dict(pool.shared_counters[0].counters) == {"memory": "80Gi", "compute": "100"}
    names = [d.name for d in pool.devices]
    assert names[:5] == ["gpu-0", "gpu-0-part-0", "gpu-0-part-1", "gpu-0-part-2", "gpu-0-part-3"]
    assert len(names) == 10
    whole, part = pool.devices[0], pool.devices[3]
    assert [(c.counter_set, dict(c.counters)) for c in whole.consumes_counters] == [
        ("gpu-0-counters", {"memory": "80Gi", "compute": "100"})]
    assert [(c.counter_set, dict(c.counters)) for c in part.consumes_counters] == [
        ("gpu-0-counters", {"memory": "20Gi", "compute": "25"})]
    assert {k: v.value for k, v in part.capacity.items()} == {"memory": "20Gi", "compute": "25"}
    assert attrs(part)["partition"] == 2
    assert attrs(part)["parentUUID"] == gpu_uuid("node-1", 0)
    assert device_uuid(part) != device_uuid(whole)


def test_consumable_profile_allows_multiple_allocations_with_request_policies():
    pool = build_pool("node-1", config(profile="consumable", gpu_count=1))
    gpu = pool.devices[0]
    assert gpu.allow_multiple_allocations is True
    memory = gpu.capacity["memory"]
    assert memory.value == "80Gi"
    assert memory.request_policy.default == "1Gi"
    assert (memory.request_policy.valid_range.min, memory.request_policy.valid_range.max,
            memory.request_policy.valid_range.step) == ("1Gi", "80Gi", "1Gi")
    assert gpu.capacity["compute"].request_policy.valid_range.max == "100"


def test_binding_fields_are_applied_to_every_device():
    pool = build_pool("n", config(gpu_count=2, binds_to_node=True, binding_conditions=["Ready"],
                                  binding_failure_conditions=["Failed"]))
    for device in pool.devices:
        assert device.binds_to_node is True
        assert list(device.binding_conditions) == ["Ready"]
        assert list(device.binding_failure_conditions) == ["Failed"]


def test_uuids_are_deterministic_per_node_and_index():
    assert gpu_uuid("node-1", 0) == gpu_uuid("node-1", 0)
    assert gpu_uuid("node-1", 0) != gpu_uuid("node-2", 0)
    assert gpu_uuid("node-1", 0) != gpu_uuid("node-1", 1)
    assert build_pool("node-1", config()) == build_pool("node-1", config())
    assert gpu_uuid("node-1", 0).startswith("gpu-")


@pytest.mark.parametrize(
    ("quantity", "parts", "want"),
    [("80Gi", 4, "20Gi"), ("100", 4, "25"), ("1Gi", 2, "512Mi"), ("10", 3, "3"), ("8G", 2, "4G")],
)
def test_split_quantity(quantity, parts, want):
    assert split_quantity(quantity, parts) == want


def test_inventory_file_overrides_the_base_and_reloads(tmp_path):
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps({"gpuCount": 2}))
    source = InventorySource(config(gpu_count=8, gpu_model="m"), str(path))
    assert (source.config.gpu_count, source.config.gpu_model, source.revision) == (2, "m", 1)
    assert source.poll() is False
    path.write_text(json.dumps({"gpuCount": 200}))
    os.utime(path, ns=(1, 1))  # a different mtime, even on coarse clocks
    assert source.poll() is True
    assert (source.config.gpu_count, source.revision) == (200, 2)
    path.write_text("gpuCount: [")  # invalid: the previous inventory stays
    os.utime(path, ns=(2, 2))
    assert source.poll() is False
    assert source.config.gpu_count == 200
    path.unlink()  # no file: back to the base
    assert source.poll() is True
    assert source.config.gpu_count == 8


def test_inventory_file_rejects_unknown_fields(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("gpuCount: 2\ncolour: red\n")
    with pytest.raises(InventoryFileError, match="colour: Extra inputs are not permitted"):
        load_inventory_file(str(path), config())


def test_partitionable_profile_names_the_partition_type_of_every_device():
    pool = with_partition_type(build_pool("node-1", config(profile="partitionable", gpu_count=1,
                                                           partitions_per_gpu=4)), "gpu.draflow.example")
    assert pool.partition_type_attribute == "gpu.draflow.example/partitionGroup"
    assert [attrs(d)["partitionType"] for d in pool.devices] == ["whole", "1/4", "1/4", "1/4", "1/4"]
    assert [attrs(d)["partitionGroup"] for d in pool.devices] == ["gpu-0:whole"] + ["gpu-0:1/4"] * 4
    plain = with_partition_type(build_pool("node-1", config(gpu_count=1)), "gpu.draflow.example")
    assert plain.partition_type_attribute == "" and "partitionType" not in attrs(plain.devices[0])


def test_devices_of_one_partition_group_consume_the_same_counters():
    # kube-controller-manager's pool status (v1.37.1 resourcepoolstatusrequest views.go) flags a pool
    # whose devices of one partition type consume different counters (counter set included): with one
    # group per type across GPUs, every pool of two GPUs or more was "PartitionCostMismatch".
    pool = with_partition_type(build_pool("node-1", config(profile="partitionable", gpu_count=3,
                                                           partitions_per_gpu=2)), "gpu.draflow.example")
    costs: dict[str, set[str]] = {}
    for d in pool.devices:
        cost = sorted(f"{c.counter_set}/{k}={v}" for c in d.consumes_counters for k, v in c.counters.items())
        costs.setdefault(attrs(d)["partitionGroup"], set()).add(",".join(cost))
    assert len(costs) == 6 and all(len(c) == 1 for c in costs.values()), costs


def test_a_pool_with_more_partition_groups_than_a_status_lists_names_no_partition_type():
    pool = with_partition_type(build_pool("node-1", config(profile="partitionable", gpu_count=17,
                                                           partitions_per_gpu=2)), "gpu.draflow.example")
    assert pool.partition_type_attribute == ""
