"""DRANodeAllocatableResources: which device an allocation result is on a candidate node, and a capacity
mapping without consumed capacity — kube-scheduler v1.37.1 (``nodeallocatabledynamicresources.go``:
``filterSlicesForNode``, ``getDeviceFromSlices``, ``deviceMatchesNode``, ``addDeviceMapping``) in our
words. Only slices that reach the node count (``nodeName``, ``allNodes``, a matching ``nodeSelector``,
``perDeviceNodeSelection``), and a device of a per-device slice must itself match the node: a device not
found that way adds nothing, but once another device of the same claim counts, every device of it must
be found, else the pod's attempt fails with that error (upstream's Filter error status); a
``capacityKey`` mapping on a result without ``consumedCapacity`` is such an error too (present but
without the key: nothing is added). Each case that changed failed before the fix."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import DRIVER, claim, req
from test_decision_budget import FakeState, decider

from structured_allocator.decision import Placement, Unschedulable
from structured_allocator.nodealloc import NodeAllocatableError, claim_statuses

CPU8 = {"cpu": {"mapping": {"deviceMultiplier": "8"}}}


def ccx(name: str, **where: Any) -> dict[str, Any]:
    return {"name": name, "nodeAllocatableResources": CPU8, **where}


def pool_slice(name: str, devices: list[dict[str, Any]], **where: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "driver": DRIVER, "pool": {"name": "shared-pool", "generation": 1, "resourceSliceCount": 1},
        "devices": devices, **where}}


def setup(raw_slice: dict[str, Any], *devices: str, cpu: str = "56",
          consumed: dict[str, str] | None = None) -> tuple[FakeState, dict[str, Any]]:
    """Node n1 (64 cpu, label zone=a) and a pod with ``cpu`` whose claim is allocated ``devices``."""
    state = FakeState({"n1": []})
    node = state.nodes.items["n1"]
    node["status"]["allocatable"]["cpu"] = "64"
    node["metadata"]["labels"] = {"zone": "a"}
    state.slices.remove("s-n1")  # the node's own (empty) slice: raw_slice is the only one
    state.slices.upsert(raw_slice)
    c = claim("p-ccx", req("gpu"))
    results = [{"request": "gpu", "driver": DRIVER, "pool": "shared-pool", "device": device,
                **({"consumedCapacity": consumed} if consumed is not None else {})} for device in devices]
    c["metadata"].update(uid="uid-p-ccx", namespace="ns")
    c["status"] = {"allocation": {"devices": {"results": results}}}
    state.assume.observe_claim(c, uid="uid-p-ccx")
    state.claims.items["ns/p-ccx"] = c
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu},
                                                             "claims": [{"name": "ccx"}]}}],
                    "resourceClaims": [{"name": "ccx", "resourceClaimName": "p-ccx"}]}}
    return state, pod


STATUS = [{"resourceClaimName": "p-ccx", "containers": ["c"],
           "mapping": [{"name": "cpu", "quantity": "8"}], "overhead": []}]
PER_DEVICE = {"perDeviceNodeSelection": True}


@pytest.mark.parametrize("where", [
    pytest.param({"nodeName": "n1"}, id="its-node-name"),
    pytest.param({"allNodes": True}, id="all-nodes"),
    pytest.param({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}]}}, id="matching-selector"),
])
async def test_a_per_device_slices_device_that_matches_the_node_counts(where: dict[str, Any]) -> None:
    state, pod = setup(pool_slice("s", [ccx("ccx-0", **where)], **PER_DEVICE), "ccx-0")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Placement) and out.node_allocatable == STATUS


async def test_a_per_device_slices_device_for_another_node_adds_nothing() -> None:
    # Not found for the node: the claim has no node-allocatable device here (60 + 8 would not fit 64).
    state, pod = setup(pool_slice("s", [ccx("ccx-1", nodeName="n2")], **PER_DEVICE), "ccx-1", cpu="60")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Placement) and not out.node_allocatable


async def test_a_counted_claim_with_a_device_for_another_node_is_an_error() -> None:
    state, pod = setup(pool_slice("s", [ccx("ccx-0", nodeName="n1"), ccx("ccx-1", nodeName="n2")],
                                  **PER_DEVICE), "ccx-0", "ccx-1")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Unschedulable)
    assert out.explanation.error == (
        f"claim ns/p-ccx, device ccx-1, driver {DRIVER}: device ccx-1 does not match node n1")


@pytest.mark.parametrize("where", [
    pytest.param({"nodeName": "n2"}, id="another-nodes-slice"),
    pytest.param({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["b"]}]}]}}, id="selector-not-matching"),
])
async def test_a_slice_that_does_not_reach_the_node_adds_nothing(where: dict[str, Any]) -> None:
    # 60 cpus + 8 would not fit 64: the device must not be counted on this node.
    state, pod = setup(pool_slice("s", [ccx("ccx-0")], **where), "ccx-0", cpu="60")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Placement) and not out.node_allocatable


MEMORY_BY_CAPACITY = {"memory": {"mapping": {"capacityKey": "dra.example.com/memory",
                                              "capacityMultiplier": "2"}}}


def statuses(consumed: dict[str, str] | None) -> list[dict[str, Any]]:
    device = {"name": "mem", "nodeAllocatableResources": MEMORY_BY_CAPACITY}
    result = {"request": "r", "driver": "d", "pool": "p", "device": "mem",
              **({"consumedCapacity": consumed} if consumed is not None else {})}
    pod = {"metadata": {"name": "p", "namespace": "ns"},
           "spec": {"containers": [{"name": "c", "resources": {"claims": [{"name": "m"}]}}]}}
    claim_obj = {"metadata": {"name": "mem-claim", "namespace": "ns", "uid": "u"}}
    return claim_statuses(pod, [("m", claim_obj, {"devices": {"results": [result]}})], lambda r: device)


def test_a_capacity_mapping_without_consumed_capacity_is_an_error() -> None:
    with pytest.raises(NodeAllocatableError) as err:
        statuses(None)
    assert str(err.value) == (
        "claim ns/mem-claim, device mem: consumedCapacity is not set, but capacity key "
        "'dra.example.com/memory' is set in nodeAllocatableResources for resource memory")


def test_consumed_capacity_without_the_key_adds_nothing_and_with_it_the_multiple() -> None:
    assert statuses({"other": "1Gi"}) == []
    mapping = statuses({"dra.example.com/memory": "4Gi"})[0]["mapping"]
    assert mapping == [{"name": "memory", "quantity": "8Gi"}]


async def test_in_a_decision_the_missing_consumed_capacity_fails_the_attempt_naming_it() -> None:
    device = {"name": "mem", "nodeAllocatableResources": MEMORY_BY_CAPACITY}
    state, pod = setup(pool_slice("s", [device], nodeName="n1"), "mem")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Unschedulable)
    assert "consumedCapacity is not set, but capacity key 'dra.example.com/memory'" in out.explanation.error
