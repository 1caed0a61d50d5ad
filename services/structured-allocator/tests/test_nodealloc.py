"""Node-allocatable resources backed by devices (DRANodeAllocatableResources): the claim statuses
kube-scheduler v1.37.1 computes (``nodeallocatabledynamicresources.go``), what they add to a pod's
requests (component-helpers ``addDRANodeAllocatableClaimResources``), and node fit counting them for
pods already on a node."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from structured_allocator.core import SliceIndex
from structured_allocator.nodealloc import claim_statuses, dra_requests, fit_reasons, mapped
from structured_allocator.nodealloc_plan import shared_mapped_claim
from structured_allocator.nodefit import pod_demand

DEVICES: dict[str, dict[str, Any]] = {
    "ccx-0": {"name": "ccx-0", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "8"}}}},
    "ccx-1": {"name": "ccx-1", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "8"}}}},
    "mem": {"name": "mem", "nodeAllocatableResources": {"memory": {"mapping": {
        "capacityKey": "dra.example.com/memory", "capacityMultiplier": "2"}}}},
    "gpu": {"name": "gpu", "nodeAllocatableResources": {"memory": {"overhead": {
        "perPod": "1Gi", "perContainer": "512Mi"}}}},
    "plain": {"name": "plain"},
}


def device_of(result: Any) -> dict[str, Any] | None:
    return DEVICES.get(result["device"])


def alloc(*devices: str, consumed: dict[str, str] | None = None) -> dict[str, Any]:
    results = [{"request": "r", "driver": "d", "pool": "p", "device": d,
                **({"consumedCapacity": consumed} if consumed else {})} for d in devices]
    return {"devices": {"results": results}}


def claim(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name + "-uid"}}


POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {
    "initContainers": [{"name": "init", "resources": {"claims": [{"name": "gpus"}]}}],
    "containers": [{"name": "a", "resources": {"claims": [{"name": "cpus"}, {"name": "gpus"}]}},
                   {"name": "b", "resources": {"claims": [{"name": "gpus"}]}}]}}


def test_statuses_sum_mappings_and_overheads_per_claim_with_the_referencing_containers() -> None:
    statuses = claim_statuses(POD, [
        ("gpus", claim("gpu-claim"), alloc("gpu", "plain")),
        ("cpus", claim("cpu-claim"),
         alloc("ccx-0", "ccx-1", "mem", consumed={"dra.example.com/memory": "4Gi"})),
        ("other", claim("plain-claim"), alloc("plain")),
    ], device_of)
    assert statuses == [
        {"resourceClaimName": "cpu-claim", "containers": ["a"],
         "mapping": [{"name": "cpu", "quantity": "16"}, {"name": "memory", "quantity": "8Gi"}],
         "overhead": []},
        {"resourceClaimName": "gpu-claim", "containers": ["init", "a", "b"], "mapping": [],
         "overhead": [{"name": "memory", "perContainer": "512Mi", "perPod": "1Gi"}]},
    ]
    # 16 cpu; memory: 8Gi mapped + 1Gi per pod + 3 x 512Mi per referencing container
    assert dra_requests(statuses) == {"cpu": Fraction(16), "memory": Fraction(8 * 2**30 + 2**30 + 3 * 2**29)}


def test_only_a_mapping_makes_a_claim_unshareable() -> None:
    assert mapped(alloc("plain", "ccx-0"), device_of)
    assert not mapped(alloc("gpu"), device_of)
    assert not mapped(alloc("plain"), device_of)


def test_the_plugin_checks_cpu_memory_storage_and_hugepages_only() -> None:
    allocatable = {"cpu": 64000, "memory": 100, "hugepages-2Mi": 10, "example.com/foo": 1}
    used = {"cpu": 60000, "memory": 50}
    assert fit_reasons({"cpu": 4000, "memory": 50, "example.com/foo": 5}, allocatable, used) == []
    assert fit_reasons({"cpu": 4001, "hugepages-2Mi": 11}, allocatable, used) == [
        "Insufficient cpu", "Insufficient hugepages-2Mi"]


def test_node_fit_counts_what_a_bound_pods_claim_statuses_say_its_devices_take() -> None:
    bound = {**POD, "spec": {**POD["spec"], "nodeName": "n", "containers": [
        {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                    "claims": [{"name": "cpus"}]}}]},
        "status": {"nodeAllocatableResourceClaimStatuses": [
            {"resourceClaimName": "cpu-claim", "containers": ["a"],
             "mapping": [{"name": "cpu", "quantity": "16"}],
             "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "1Gi"}]}]}}
    assert pod_demand(bound, use_status=True).requests == {"cpu": 17000, "memory": 3 * 2**30}


def test_an_allocated_claim_with_a_mapped_device_is_only_for_the_pod_it_is_reserved_for() -> None:
    slices = SliceIndex([{"metadata": {"name": "s"}, "spec": {
        "driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
        "devices": [DEVICES["ccx-0"], DEVICES["gpu"]]}}])
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}

    def reserved(for_uid: str) -> dict[str, Any]:
        return {**claim("c"), "status": {"reservedFor": [{"resource": "pods", "name": "x", "uid": for_uid}]}}

    assert shared_mapped_claim(pod, [(reserved("other"), alloc("ccx-0"))], slices) == (
        'node allocatable resource claim "c" has a mapped device and cannot be shared across pods')
    assert shared_mapped_claim(pod, [(reserved("u"), alloc("ccx-0"))], slices) is None  # its own
    assert shared_mapped_claim(pod, [(reserved("other"), alloc("gpu"))], slices) is None  # overhead only
    assert shared_mapped_claim(pod, [(claim("c"), alloc("ccx-0"))], slices) is None  # reserved for nobody
