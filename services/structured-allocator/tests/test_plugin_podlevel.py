# ruff: noqa: E501  (a data table: upstream's cases, one per entry)
"""Pod-level resources and the node-allocatable DRA share: kube-scheduler v1.37.1 DynamicResources
``TestValidatePodLevelResourcesCoverDRA`` restated on :func:`structured_allocator.podlevel.pod_level_reason`,
and what follows for node fit (component-helpers ``PodRequests``): with pod-level requests the devices'
share is inside the pod's budget, for the pod being placed and for pods already bound."""

from __future__ import annotations

from typing import Any

import pytest
from test_decision_budget import decider
from test_decision_nodealloc import setup

from structured_allocator.decision import Placement, Unschedulable
from structured_allocator.nodefit import pod_demand
from structured_allocator.podlevel import pod_level_reason


def pod(level: dict[str, dict[str, str]] | None, *containers: tuple[str, dict[str, dict[str, str]]],
        overhead: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": n, "resources": {**r, "claims": [{"name": "dra-claim"}]}}
                                           for n, r in containers]}
    if level:
        spec["resources"] = level
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": "test-pod", "namespace": "ns"}, "spec": spec}


def mapped(**quantities: str) -> list[dict[str, Any]]:
    return [{"resourceClaimName": "dra-claim", "containers": ["c1"],
             "mapping": [{"name": n, "quantity": q} for n, q in sorted(quantities.items())], "overhead": []}]


def overhead(**parts: str) -> list[dict[str, Any]]:
    return [{"resourceClaimName": "dra-claim", "containers": ["c1"], "mapping": [],
             "overhead": [{"name": "memory", **parts}]}]


def requests(cpu: str, memory: str) -> dict[str, dict[str, str]]:
    return {"requests": {"cpu": cpu, "memory": memory}}


REQ_FAIL = "is insufficient to cover the aggregated container and node-allocatable DRA requests"


@pytest.mark.parametrize(("the_pod", "statuses", "message"), [
    pytest.param(pod(None, ("c1", requests("1", "1Gi"))), mapped(cpu="500m", memory="512Mi"), None,
                 id="PodLevelResources enabled, no pod resources set"),
    pytest.param(pod(requests("2", "2Gi"), ("c1", requests("1", "1Gi"))), mapped(cpu="500m", memory="512Mi"),
                 None, id="PodLevel resources sufficient"),
    pytest.param(pod(requests("1", "2Gi"), ("c1", requests("800m", "1Gi"))), mapped(cpu="300m", memory="512Mi"),
                 "pod level request for cpu " + REQ_FAIL, id="PodLevel insufficient for one of the resource"),
    pytest.param(pod(requests("1", "1Gi"), ("c1", requests("1100m", "1100Mi"))),
                 mapped(cpu="100m", memory="100Mi"), REQ_FAIL, id="PodLevel insufficient for multiple resources"),
    pytest.param(pod(requests("4", "3Gi"), ("c1", requests("1", "1Gi")), overhead={"cpu": "500m", "memory": "512Mi"}),
                 mapped(cpu="1", memory="1Gi"), None, id="PodLevel resources sufficient with overheads"),
    pytest.param(pod(requests("2", "3Gi"), ("c1", requests("1", "1Gi"))), overhead(perPod="1Gi", perContainer="1Gi"),
                 None, id="PodLevel resources sufficient with DRA Overhead"),
    pytest.param(pod(requests("2", "2Gi"), ("c1", requests("1", "1Gi"))), overhead(perPod="1Gi", perContainer="1Gi"),
                 "pod level request for memory " + REQ_FAIL, id="PodLevel resources insufficient with DRA Overhead"),
    pytest.param(pod({"limits": {"memory": "2Gi"}}, ("c1", {"limits": {"memory": "1Gi"}})),
                 overhead(perContainer="512Mi"), None, id="PodLevel limits cover DRA"),
    pytest.param(pod({"limits": {"memory": "2Gi"}}, ("c1", {"limits": {"memory": "1.5Gi"}})),
                 overhead(perContainer="1Gi"),
                 "pod level limit for memory is insufficient to cover the limit and DRA overhead for container c1",
                 id="PodLevel limits does not cover DRA"),
    pytest.param(pod({"limits": {"memory": "4Gi"}}, ("c1", {"limits": {"memory": "3Gi"}}),
                     ("c2", {"limits": {"memory": "3Gi"}})), [], None,
                 id="PodLevel limits overcommitted but individual container limits with DRA covered by pod level limits"),
])
def test_validate_pod_level_resources_cover_dra(the_pod: dict[str, Any], statuses: list[dict[str, Any]],
                                                 message: str | None) -> None:
    got = pod_level_reason(the_pod, statuses)
    if message is None:
        assert got is None
    else:
        assert got is not None and message in got


async def test_pod_level_requests_hold_the_devices_share_on_the_candidate_node() -> None:
    """A 64-cpu node, a device standing for 8 cpus: pod-level 60 cpus hold the container's 50 and the 8
    (upstream counts 60, not 68); pod-level 57 do not (58 > 57)."""
    state, the_pod = setup("50")
    the_pod["spec"]["resources"] = {"requests": {"cpu": "60"}}
    out = await decider(state, node_allocatable=True).decide(the_pod)
    assert isinstance(out, Placement) and out.node_allocatable
    state, the_pod = setup("50")
    the_pod["spec"]["resources"] = {"requests": {"cpu": "57"}}
    out = await decider(state, node_allocatable=True).decide(the_pod)
    assert isinstance(out, Unschedulable)
    assert "pod level request for cpu " + REQ_FAIL in out.explanation.message()


def test_a_bound_pods_pod_level_requests_hold_its_devices_share() -> None:
    bound = {"spec": {"nodeName": "n", "resources": {"requests": {"cpu": "20"}},
                      "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]},
             "status": {"nodeAllocatableResourceClaimStatuses": [
                 {"resourceClaimName": "c", "containers": ["a"], "mapping": [{"name": "cpu", "quantity": "16"}]}]}}
    assert pod_demand(bound, use_status=True).requests == {"cpu": 20000}
