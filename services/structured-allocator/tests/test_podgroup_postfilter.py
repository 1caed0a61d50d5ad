"""PodGroupPostFilter — upstream kube-scheduler v1.37.1 DynamicResources ``PodGroupPostFilter`` /
``deallocatePodGroupClaims`` cases in our words: which claim a PodGroup that cannot be placed gives back
(an unavailable claim reserved for nobody or only the group is deallocated; else the group's own
allocated claim is unreserved), and when it does nothing (a member assumed or bound; a composite or,
with TopologyAwareWorkloadScheduling, topology-constrained group; a pod outside any group; a claim of
the group that is not known yet; a template claim the group does not control)."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import alloc, claim, req, res

from structured_allocator.podgroup_postfilter import group_claim_to_give_back, refusal

GROUP_UID = "uid-pg"
GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "workers", "uid": GROUP_UID}
POD_REF = {"resource": "pods", "name": "a", "uid": "uid-a"}
OTHER_REF = {"resource": "pods", "name": "x", "uid": "uid-x"}


def pod_group(entries: list[dict[str, str]] | None = None, statuses: list[dict[str, str]] | None = None,
              **spec: Any) -> dict[str, Any]:
    pg: dict[str, Any] = {"metadata": {"name": "workers", "namespace": "ns", "uid": GROUP_UID},
                          "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                                   "resourceClaims": entries if entries is not None else
                                   [{"name": "gpu", "resourceClaimTemplateName": "t"}], **spec}}
    pg["status"] = {"resourceClaimStatuses": statuses if statuses is not None else
                    [{"name": "gpu", "resourceClaimName": "workers-gpu-x"}]}
    return pg


def member(group: str | None = "workers") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": "a", "namespace": "ns", "uid": "uid-a"}, "spec": spec}


def a_claim(name: str, *, reserved: list[dict[str, str]] | None = None, allocated: bool = True,
            owned: bool = True) -> dict[str, Any]:
    c = claim(name, req("gpu"), allocation=alloc(res("gpu", "d0")) if allocated else None)
    c["metadata"].update(uid=f"uid-{name}", namespace="ns")
    if owned:
        c["metadata"]["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                             "name": "workers", "uid": GROUP_UID, "controller": True}]
    if reserved is not None:
        c.setdefault("status", {})["reservedFor"] = reserved
    return c


def give_back(unavailable: list[dict[str, Any]], cached: list[dict[str, Any]], *, scheduled: int = 0,
              pg: dict[str, Any] | None = None, pod: dict[str, Any] | None = None) -> tuple[str, str] | None:
    by_name = {c["metadata"]["name"]: c for c in cached}
    action = group_claim_to_give_back(pg or pod_group(), pod or member(), scheduled_members=scheduled,
                                      unavailable=unavailable, claim_of=by_name.get)
    return None if action is None else (action.kind, action.claim_key)


@pytest.mark.parametrize(("unavailable", "cached", "expected"), [
    pytest.param([a_claim("u", reserved=[])], [], ("deallocate", "ns/u"),
                 id="unavailable-reserved-for-nobody"),
    pytest.param([a_claim("u", reserved=[GROUP_REF])], [], ("deallocate", "ns/u"),
                 id="unavailable-reserved-only-for-the-group"),
    pytest.param([a_claim("u", reserved=[POD_REF])], [], None, id="unavailable-but-reserved-for-a-pod"),
    pytest.param([a_claim("u", reserved=[GROUP_REF, OTHER_REF])], [], None,
                 id="unavailable-but-shared-with-another-pod"),
    pytest.param([a_claim("u", reserved=[], allocated=False)], [], None,
                 id="unavailable-not-allocated-anymore"),
    pytest.param([], [a_claim("workers-gpu-x", reserved=[GROUP_REF])], ("unreserve", "ns/workers-gpu-x"),
                 id="groups-claim-reserved-for-the-group-is-unreserved"),
    pytest.param([], [a_claim("workers-gpu-x", reserved=[POD_REF])], ("unreserve", "ns/workers-gpu-x"),
                 id="groups-claim-reserved-for-the-first-member"),
    pytest.param([], [a_claim("workers-gpu-x", reserved=[OTHER_REF])], None,
                 id="groups-claim-reserved-for-someone-else"),
    pytest.param([], [a_claim("workers-gpu-x", reserved=[GROUP_REF], allocated=False)], None,
                 id="groups-claim-not-allocated"),
    pytest.param([], [a_claim("workers-gpu-x", reserved=[GROUP_REF], owned=False)], None,
                 id="template-claim-not-controlled-by-the-group"),
    pytest.param([], [], None, id="groups-claim-not-known-yet"),
    pytest.param([a_claim("u", reserved=[OTHER_REF])], [a_claim("workers-gpu-x", reserved=[GROUP_REF])],
                 ("unreserve", "ns/workers-gpu-x"), id="no-unavailable-candidate-then-unreserve"),
])
def test_which_claim_a_group_gives_back(unavailable: list[dict[str, Any]], cached: list[dict[str, Any]],
                                        expected: tuple[str, str] | None) -> None:
    assert give_back(unavailable, cached) == expected


def test_nothing_while_a_member_is_assumed_or_bound() -> None:
    assert give_back([a_claim("u", reserved=[])], [a_claim("workers-gpu-x", reserved=[GROUP_REF])],
                     scheduled=1) is None


def test_nothing_for_a_pod_outside_any_group() -> None:
    assert give_back([a_claim("u", reserved=[])], [], pod=member(None)) is None


def test_a_claim_by_name_the_group_lists_needs_no_owner() -> None:
    pg = pod_group([{"name": "gpu", "resourceClaimName": "shared"}], statuses=[])
    cached = [a_claim("shared", reserved=[GROUP_REF], owned=False)]
    assert give_back([], cached, pg=pg) == ("unreserve", "ns/shared")


def test_the_first_unavailable_claim_in_cycle_order_wins() -> None:
    assert give_back([a_claim("u1", reserved=[POD_REF]), a_claim("u2", reserved=[]),
                      a_claim("u3", reserved=[])], []) == ("deallocate", "ns/u2")


@pytest.mark.parametrize(("spec", "topology_aware", "expected"), [
    pytest.param({}, False, None, id="plain-group"),
    pytest.param({"parentCompositePodGroupName": "all"}, False,
                 "PodGroupPostFilter does not support CompositePodGroups", id="composite"),
    pytest.param({"schedulingConstraints": {"topology": [{"key": "zone"}]}}, True,
                 "PodGroupPostFilter does not support topology-aware workloads", id="topology-aware"),
    pytest.param({"schedulingConstraints": {"topology": [{"key": "zone"}]}}, False, None,
                 id="constraints-with-the-topology-gate-off"),
])
def test_when_it_refuses(spec: dict[str, Any], topology_aware: bool, expected: str | None) -> None:
    assert refusal(pod_group(**spec), topology_aware=topology_aware) == expected
