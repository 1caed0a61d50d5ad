"""kube-scheduler v1.37.1 DynamicResources ``nodeallocatabledynamicresources_test.go``
``TestValidateNodeAllocatableDRAClaimSharing``: a claim with a device that *maps* node resources
(DRANodeAllocatableResources) is one pod's; overhead-only claims may be shared. Restated on
:func:`~structured_allocator.nodealloc_plan.shared_mapped_claim` (reservations) and on a pod-group cycle's
decision (a pending allocation another member of the cycle decided)."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import alloc, res
from test_decision_budget import decider
from test_decision_pod_groups import GroupState, add_claim, member, pod_group
from test_nodealloc_nodes import STATUS, ccx, pool_slice
from test_nodealloc_nodes import setup as nodes_setup

from structured_allocator.core import SliceIndex
from structured_allocator.decision import Placement, Unschedulable
from structured_allocator.groupcycle import GroupCycle
from structured_allocator.nodealloc import fit_reasons
from structured_allocator.nodealloc_plan import shared_mapped_claim

CPU = {"name": "cpu0", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "1"}}}}
GPU = {"name": "gpu0", "nodeAllocatableResources": {"memory": {"overhead": {"perContainer": "100"}}}}
BOTH = {"name": "combined", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "1"},
                                                                 "overhead": {"perContainer": "100"}}}}
SLICES = SliceIndex([{"metadata": {"name": f"s-{d['name']}"}, "spec": {
    "driver": "d", "nodeName": "n", "devices": [d],
    "pool": {"name": f"pool-{d['name']}", "generation": 1, "resourceSliceCount": 1}}}
    for d in (CPU, GPU, BOTH)])
POD = {"metadata": {"name": "test-pod", "namespace": "test-ns", "uid": "pod-uid"}, "spec": {}}
GROUPED = {**POD, "spec": {"schedulingGroup": {"podGroupName": "my-pod-group"}}}
MESSAGE = 'node allocatable resource claim "c" has a mapped device and cannot be shared across pods'


def on(device: dict[str, Any]) -> dict[str, Any]:
    name = device["name"]
    return {"devices": {"results": [{"request": "r", "driver": "d", "pool": f"pool-{name}", "device": name}]}}


def claim(*reserved: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "test-ns", "uid": "claim-uid"},
            "status": {"reservedFor": list(reserved)} if reserved else {}}


OTHER_POD = {"resource": "pods", "name": "other-pod", "uid": "other-pod-uid"}


def group_ref(name: str) -> dict[str, str]:
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": name}


@pytest.mark.parametrize(("pod", "pairs", "pod_groups", "refused"), [
    pytest.param(POD, [], False, False, id="empty claim"),
    pytest.param(POD, [(claim(), {})], False, False, id="claim not allocated yet"),
    pytest.param(POD, [(claim(), on(CPU))], False, False,
                 id="mapped claim, not shared (no other pods on node)"),
    pytest.param(POD, [(claim(OTHER_POD), on(CPU))], False, True,
                 id="mapped claim, shared (other pod using it)"),
    pytest.param(POD, [(claim(OTHER_POD), on(GPU))], False, False,
                 id="overhead-only mapped claim, shared (other pod using it)"),
    pytest.param(POD, [(claim(), on(CPU))], False, False,
                 id="mapped claim, same name but different namespace (sharing allowed)"),
    pytest.param(POD, [(claim(OTHER_POD), on(CPU))], False, True,
                 id="mapped claim, shared (other pod using it via template)"),
    pytest.param(POD, [(claim(OTHER_POD), on(CPU))], False, True,
                 id="mapped claim, already reserved for another pod - early exit"),
    pytest.param(GROUPED, [(claim(group_ref("my-pod-group")), on(CPU))], True, False,
                 id="mapped claim, reserved for same pod group, workload claims enabled"),
    pytest.param(GROUPED, [(claim(group_ref("other-pod-group")), on(CPU))], True, True,
                 id="mapped claim, reserved for different pod group, workload claims enabled - exit early"),
    pytest.param(POD, [(claim(OTHER_POD), on(BOTH))], False, True,
                 id="mapping and overhead in same device, shared (other pod using it)"),
])
def test_validate_node_allocatable_dra_claim_sharing(pod: dict[str, Any], pairs: list[Any], pod_groups: bool,
                                                      refused: bool) -> None:
    assert shared_mapped_claim(pod, pairs, SLICES, pod_groups) == (MESSAGE if refused else None)


@pytest.mark.parametrize(("device", "pending_for", "refused"), [
    pytest.param(CPU, "uid-first", True, id="mapped claim, pending allocation by another pod in same group"),
    pytest.param(CPU, "uid-p", False, id="mapped claim, pending allocation by same pod in same group"),
    pytest.param(GPU, "uid-first", False,
                 id="overhead-only claim, pending allocation by another pod in same group"),
])
async def test_a_pending_allocation_of_the_cycle_with_a_mapped_device_is_one_pods(
        device: dict[str, Any], pending_for: str, refused: bool) -> None:
    state = GroupState({"n1": [{**device, "name": "d0"}]}, [pod_group(resourceClaimName="shared")])
    state.nodes.items["n1"]["status"]["allocatable"].update(cpu="8", memory="8Gi")
    add_claim(state, "shared")
    allocation = alloc(res("gpu", "d0", pool="n1"), node_selector=None)
    state.assume.assume("uid-shared", "ns/shared", allocation, "ns/first")
    cycle = GroupCycle()
    cycle.allocated("uid-shared", pending_for)
    out = await decider(state, pod_groups=True, node_allocatable=True).decide(
        member({"resourceClaimName": "shared"}), cycle=cycle)
    if refused:
        assert isinstance(out, Unschedulable)
        assert out.explanation.message() == (
            'node allocatable resource claim "shared" has a mapped device and cannot be shared across pods')
    else:
        assert isinstance(out, Placement) and out.claims[0].shares_pending


GI = 1024**3


@pytest.mark.parametrize(("requests", "allocatable", "used", "reasons"), [
    pytest.param({}, {}, {}, [], id="empty pod request"),
    pytest.param({"cpu": 1000, "memory": GI}, {"cpu": 2000, "memory": 2 * GI}, {}, [],
                 id="sufficient cpu and memory"),
    pytest.param({"cpu": 3000}, {"cpu": 2000}, {}, ["Insufficient cpu"], id="insufficient cpu"),
    pytest.param({"memory": 3 * GI}, {"memory": 5 * GI}, {"memory": 4 * GI}, ["Insufficient memory"],
                 id="insufficient memory"),
    pytest.param({"hugepages-2Mi": 1, "hugepages-1Gi": 2}, {"hugepages-2Mi": 1, "hugepages-1Gi": 2}, {}, [],
                 id="sufficient hugepages"),
    pytest.param({"hugepages-2Mi": 2}, {"hugepages-2Mi": 1}, {}, ["Insufficient hugepages-2Mi"],
                 id="insufficient hugepages 2Mi"),
    pytest.param({"hugepages-1Gi": 3}, {"hugepages-1Gi": 2}, {}, ["Insufficient hugepages-1Gi"],
                 id="insufficient hugepages 1Gi"),
    pytest.param({"cpu": 1000, "memory": GI, "hugepages-2Mi": 1},
                 {"cpu": 2000, "memory": 2 * GI, "hugepages-2Mi": 1}, {}, [], id="all resources sufficient"),
])
def test_node_fits_native_resources(requests: dict[str, int], allocatable: dict[str, int],
                                    used: dict[str, int], reasons: list[str]) -> None:
    assert fit_reasons(requests, allocatable, used) == reasons


@pytest.mark.parametrize("where", [
    pytest.param({"nodeName": "n1"}, id="matches NodeName exactly"),
    pytest.param({"allNodes": True}, id="matches AllNodes"),
    pytest.param({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}]}}, id="matches NodeSelector"),
])
async def test_filter_slices_for_node_a_slice_that_reaches_the_node_counts(where: dict[str, Any]) -> None:
    state, the_pod = nodes_setup(pool_slice("s", [ccx("ccx-0")], **where), "ccx-0")
    out = await decider(state, node_allocatable=True).decide(the_pod)
    assert isinstance(out, Placement) and out.node_allocatable == STATUS
