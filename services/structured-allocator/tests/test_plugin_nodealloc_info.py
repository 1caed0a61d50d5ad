# ruff: noqa: E501  (a data table: upstream's cases, one per entry)
"""kube-scheduler v1.37.1 DynamicResources ``TestBuildNodeAllocatableDRAInfo``: the
``nodeAllocatableResourceClaimStatuses`` of a pod (DRANodeAllocatableResources), restated on
:func:`structured_allocator.nodealloc.claim_statuses` with upstream's devices, allocations and
expectations (a status without mapping or overhead lists them empty)."""

from __future__ import annotations

from typing import Any

import pytest

from structured_allocator.core import SliceIndex
from structured_allocator.nodealloc import claim_statuses
from structured_allocator.nodealloc_plan import device_lookup

DRIVER = "dra.example.com"


def mapping(**spec: str) -> dict[str, Any]:
    return {"mapping": spec}


CPU_PER_INSTANCE = {"name": "cpu0", "nodeAllocatableResources": {"cpu": mapping(deviceMultiplier="1")}}
CPU_CAPACITY = {"name": "cpu0", "nodeAllocatableResources": {"cpu": mapping(capacityKey="dra.example.com/cpu")}}
CPU_MEM_CAPACITY = {"name": "device1", "nodeAllocatableResources": {
    "cpu": mapping(capacityKey="dra.example.com/cpu"), "memory": mapping(capacityKey="dra.example.com/memory")}}
GPU_AUX = {"name": "gpu0", "nodeAllocatableResources": {
    "cpu": mapping(deviceMultiplier="2"), "memory": mapping(deviceMultiplier="4Gi")}}
COMBINED = {"name": "combined-device", "nodeAllocatableResources": {"cpu": {
    "mapping": {"deviceMultiplier": "2"}, "overhead": {"perPod": "1", "perContainer": "500m"}}}}


def overhead_device(**overhead: str) -> dict[str, Any]:
    return {"name": "device1", "nodeAllocatableResources": {"memory": {"overhead": overhead}}}


def slices(*devices: dict[str, Any], driver: str = DRIVER) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"{driver}-{d['name']}-{i}"}, "spec": {
        "driver": driver, "nodeName": "test-node", "devices": [d],
        "pool": {"name": "pool1", "generation": 1, "resourceSliceCount": len(devices)}}}
        for i, d in enumerate(devices)]


def pod(*containers: tuple[str, tuple[str, ...]]) -> dict[str, Any]:
    return {"metadata": {"name": "test-pod", "namespace": "test-ns", "uid": "test-uid"},
            "spec": {"containers": [{"name": n, "resources": {"claims": [{"name": c} for c in claims]}}
                                    for n, claims in containers]}}


def result(device: str, driver: str = DRIVER, **consumed: str) -> dict[str, Any]:
    r: dict[str, Any] = {"request": "r", "driver": driver, "pool": "pool1", "device": device}
    if consumed:
        r["consumedCapacity"] = {f"dra.example.com/{k}": v for k, v in consumed.items()}
    return r


def status(claim: str, containers: list[str], mapped: dict[str, str] | None = None,
           overhead: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    return {"resourceClaimName": claim, "containers": containers,
            "mapping": [{"name": n, "quantity": q} for n, q in sorted((mapped or {}).items())],
            "overhead": [{"name": n, **o} for n, o in sorted((overhead or {}).items())]}


C1 = ("c1", ("claim1",))
MEM = {"perPod": "1Gi", "perContainer": "500Mi"}

CASES = [
    pytest.param(pod(), [], [], [], id="empty"),
    pytest.param(pod(("c1", ("node-allocatable-claim",))), slices(CPU_PER_INSTANCE),
                 [("node-allocatable-claim", [result("cpu0")])],
                 [status("node-allocatable-claim", ["c1"], {"cpu": "1"})],
                 id="one container, one claim, per instance quantity"),
    pytest.param(pod(("c1", ("node-allocatable-claim",))), slices(CPU_MEM_CAPACITY),
                 [("node-allocatable-claim", [result("device1", cpu="4", memory="8Gi")])],
                 [status("node-allocatable-claim", ["c1"], {"cpu": "4", "memory": "8Gi"})],
                 id="Pod with Standard and DRA CPU and Memory Request"),
    pytest.param(pod(("c1", ("fungible-claim",))), slices({"name": "gpu0"}),
                 [("fungible-claim", [result("gpu0")])], [], id="Fungible GPU/CPU claim - GPU selected"),
    pytest.param(pod(("c1", ("fungible-claim",))), slices(CPU_CAPACITY),
                 [("fungible-claim", [result("cpu0", cpu="30")])],
                 [status("fungible-claim", ["c1"], {"cpu": "30"})], id="Fungible GPU/CPU claim - CPU selected"),
    pytest.param(pod(("c1", ("gpu-claim", "cpu-claim"))), slices(CPU_CAPACITY, GPU_AUX),
                 [("cpu-claim", [result("cpu0", cpu="10")]), ("gpu-claim", [result("gpu0")])],
                 [status("cpu-claim", ["c1"], {"cpu": "10"}), status("gpu-claim", ["c1"], {"cpu": "2", "memory": "4Gi"})],
                 id="Combined CPU request and Auxiliary Request"),
    pytest.param(pod(("c1", ("cpu-claim",)), ("c2", ("cpu-claim",)), ("sidecar1", ()), ("sidecar2", ())),
                 slices(CPU_CAPACITY), [("cpu-claim", [result("cpu0", cpu="10")])],
                 [status("cpu-claim", ["c1", "c2"], {"cpu": "10"})],
                 id="Pod Level Resources with shared CPU claim and sidecar containers"),
    pytest.param(pod(("c1", ("claim1", "claim2"))), slices(CPU_CAPACITY, CPU_MEM_CAPACITY),
                 [("claim1", [result("cpu0", cpu="4")]), ("claim2", [result("device1", memory="8Gi")])],
                 [status("claim1", ["c1"], {"cpu": "4"}), status("claim2", ["c1"], {"memory": "8Gi"})],
                 id="Multiple Claims per Container"),
    pytest.param(pod(("c1", ())), slices(CPU_CAPACITY), [("unref-claim", [result("cpu0", cpu="4")])],
                 [status("unref-claim", [], {"cpu": "4"})], id="Unreferenced Claims"),
    pytest.param(pod(("c1", ())), slices(overhead_device(**MEM)), [("unref-claim", [result("device1")])],
                 [status("unref-claim", [], overhead={"memory": MEM})], id="Unreferenced Claims with Overhead"),
    pytest.param(pod(("c1", ())), slices(overhead_device(perContainer="500Mi")),
                 [("unref-claim", [result("device1")])],
                 [status("unref-claim", [], overhead={"memory": {"perContainer": "500Mi"}})],
                 id="Unreferenced Claims with Overhead Per Container Only"),
    pytest.param(pod(C1), slices({"name": "device1", "nodeAllocatableResources": {"cpu": mapping(
        capacityKey="dra.example.com/cores", capacityMultiplier="2")}}),
                 [("claim1", [result("device1", cores="4")])], [status("claim1", ["c1"], {"cpu": "8"})],
                 id="Combined Capacity and PerAllocatedUnitQuantity"),
    pytest.param(pod(C1), slices(CPU_CAPACITY), [("claim1", [result("cpu0", wrong="4")])], [],
                 id="Capacity Key Missing in Allocation - Should be Ignored"),
    pytest.param(pod(C1), slices(overhead_device(**MEM)), [("claim1", [result("device1")])],
                 [status("claim1", ["c1"], overhead={"memory": MEM})], id="Overhead Mappings"),
    pytest.param(pod(C1), slices(overhead_device(perPod="1Gi")), [("claim1", [result("device1")])],
                 [status("claim1", ["c1"], overhead={"memory": {"perPod": "1Gi"}})],
                 id="Overhead Mappings - Only PerPod"),
    pytest.param(pod(C1), slices(overhead_device(perContainer="500Mi")), [("claim1", [result("device1")])],
                 [status("claim1", ["c1"], overhead={"memory": {"perContainer": "500Mi"}})],
                 id="Overhead Mappings - Only PerContainer"),
    pytest.param(pod(C1, ("c2", ("claim1",))), slices(overhead_device(**MEM)), [("claim1", [result("device1")])],
                 [status("claim1", ["c1", "c2"], overhead={"memory": MEM})],
                 id="Overhead Mappings - Multiple Containers"),
    pytest.param(pod(C1), slices({"name": "device1", "nodeAllocatableResources": {"memory": {
        "mapping": {"deviceMultiplier": "2Gi"}, "overhead": MEM}}}), [("claim1", [result("device1")])],
                 [status("claim1", ["c1"], {"memory": "2Gi"}, {"memory": MEM})],
                 id="Combined direct mapped and overhead mappings for the same resource"),
    pytest.param(pod(C1), slices(COMBINED), [("claim1", [result("combined-device")])],
                 [status("claim1", ["c1"], {"cpu": "2"}, {"cpu": {"perPod": "1", "perContainer": "500m"}})],
                 id="device with both mapped and overhead"),
    pytest.param(pod(C1), [*slices(CPU_PER_INSTANCE, driver="driver-a.example.com"),
                           *slices({**CPU_PER_INSTANCE, "nodeAllocatableResources": {"cpu": mapping(
                               deviceMultiplier="8")}}, driver="driver-b.example.com")],
                 [("claim1", [result("cpu0", driver="driver-b.example.com")])],
                 [status("claim1", ["c1"], {"cpu": "8"})], id="Driver name collision with same pool and device name"),
]


@pytest.mark.parametrize(("the_pod", "the_slices", "claims", "want"), CASES)
def test_build_node_allocatable_dra_info(the_pod: dict[str, Any], the_slices: list[dict[str, Any]],
                                         claims: list[tuple[str, list[dict[str, Any]]]],
                                         want: list[dict[str, Any]]) -> None:
    device_of = device_lookup(SliceIndex(the_slices))
    triples = [(name, {"metadata": {"name": name, "namespace": "test-ns", "uid": f"{name}-uid"}},
                {"devices": {"results": results}}) for name, results in claims]
    got = claim_statuses(the_pod, triples, device_of)
    for s in got:  # the order of the overhead fields does not matter
        s["overhead"] = [dict(sorted(o.items())) for o in s["overhead"]]
    for s in want:
        s["overhead"] = [dict(sorted(o.items())) for o in s["overhead"]]
    assert got == want
