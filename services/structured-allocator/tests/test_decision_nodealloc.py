"""DRANodeAllocatableResources in a decision (in memory, the Decider over test_decision_budget's fake
caches): a device standing for 8 cpus is counted on top of the pod's own 60 on a 64-cpu node."""

from __future__ import annotations

from typing import Any

from sa_builders import claim, dev, req
from test_decision_budget import FakeState, decider

from structured_allocator.decision import Placement, Unschedulable

CCX = {**dev("ccx-0"), "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "8"}}}}


def setup(cpu: str) -> tuple[FakeState, dict[str, Any]]:
    state = FakeState({"n1": [CCX]})
    state.nodes.items["n1"]["status"]["allocatable"]["cpu"] = "64"
    c = claim("p-gpu", req("gpu"))
    c["metadata"].update(uid="uid-p-gpu", namespace="ns")
    state.claims.items["ns/p-gpu"] = c
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu},
                                                             "claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}}
    return state, pod


async def test_the_devices_cpu_share_is_counted_and_recorded_for_the_pod() -> None:
    state, pod = setup("56")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Placement)
    assert out.node_allocatable == [{"resourceClaimName": "p-gpu", "containers": ["c"],
                                     "mapping": [{"name": "cpu", "quantity": "8"}], "overhead": []}]
    state, pod = setup("60")
    out = await decider(state, node_allocatable=True).decide(pod)
    assert isinstance(out, Unschedulable)
    assert "Insufficient cpu" in out.explanation.message()


async def test_with_the_gate_off_the_share_is_not_counted() -> None:
    state, pod = setup("60")
    out = await decider(state).decide(pod)
    assert isinstance(out, Placement) and out.node_allocatable == ()


async def test_a_pod_already_bound_to_the_node_skips_node_fit_and_this_part_of_it() -> None:
    # The NATS allocate request (spec.nodeName set by the user): no node fit, as before the gate.
    state, pod = setup("60")
    out = await decider(state, node_allocatable=True).decide(pod, only_node="n1")
    assert isinstance(out, Placement) and out.node == "n1"
