"""PodGroup entries of ``reservedFor`` and claims generated for a PodGroup (DRAWorkloadResourceClaims) —
upstream kube-controller-manager v1.37.1 ``syncClaim`` in our words: a PodGroup reservation goes when the
PodGroup is gone or replaced (never because its pods ended); the last one gone deallocates; with the gate
off it is left alone. A claim generated for a PodGroup is deleted once the PodGroup is gone (draflow's
stand-in for the garbage collector, as for pods)."""

from typing import Any

import pytest

from claim_controller.reservations import GONE, UNKNOWN, Verdict, plan_claim, reservation_verdict
from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER


def ref(name: str, uid: str, *, resource: str = "pods", group: str = "") -> dict[str, str]:
    return {"apiGroup": group, "resource": resource, "name": name, "uid": uid}


def claim(*refs: dict[str, str]) -> dict[str, Any]:
    status: dict[str, Any] = {"allocation": {"devices": {"results": []}}}
    if refs:
        status["reservedFor"] = list(refs)
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "claim-uid",
                         "finalizers": [DELETE_PROTECTION_FINALIZER]}, "status": status}


def group_ref(name: str = "w", uid: str = "g1") -> dict[str, str]:
    return ref(name, uid, resource="podgroups", group="scheduling.k8s.io")


def group(name: str = "w", uid: str = "g1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "spec": {}}


def group_owned(*refs: dict[str, str]) -> dict[str, Any]:
    c = claim(*refs)
    c["metadata"]["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                         "name": "w", "uid": "g1", "controller": True}]
    return c


@pytest.mark.parametrize(("state", "verdict"), [
    pytest.param(group(), Verdict.KEEP, id="exists"),
    pytest.param(group(uid="g2"), Verdict.REPLACED, id="replaced-same-name"),
    pytest.param(GONE, Verdict.DELETED, id="gone"),
    pytest.param(UNKNOWN, Verdict.UNVERIFIED, id="unknown-is-kept"),
])
def test_a_podgroup_reservation_follows_the_podgroup(state: Any, verdict: Verdict) -> None:
    assert reservation_verdict(group_ref(), state, pod_groups=True) is verdict


def test_the_podgroup_gone_drops_its_reservation_and_deallocates() -> None:
    plan = plan_claim(claim(group_ref()), {}, groups={"w": GONE})
    assert plan.drop == (group_ref(),)
    assert (plan.remaining, plan.deallocate, plan.release_finalizer) == (0, True, True)


def test_the_podgroup_alive_keeps_the_claim_even_with_no_pod_left() -> None:
    assert plan_claim(claim(group_ref()), {}, groups={"w": group()}).empty


def test_pods_and_the_group_are_told_apart_by_kind_not_by_name() -> None:
    plan = plan_claim(claim(ref("w", "u1"), group_ref()), {"w": GONE}, groups={"w": group()})
    assert plan.drop == (ref("w", "u1"),)
    assert plan.remaining == 1 and not plan.deallocate


def test_with_the_gate_off_a_podgroup_reservation_is_left_alone() -> None:
    plan = plan_claim(claim(group_ref()), {}, groups=None)
    assert plan.empty and plan.verdicts == {"g1": Verdict.UNKNOWN_KIND}


def test_a_claim_generated_for_a_podgroup_that_is_gone_is_deleted() -> None:
    plan = plan_claim(group_owned(group_ref()), {}, GONE, groups={"w": GONE})
    assert plan.drop == (group_ref(),) and plan.deallocate
    assert plan_claim(group_owned(), {}, GONE, groups={}).delete


@pytest.mark.parametrize(("owner", "deleted"), [
    pytest.param(group(), False, id="alive"), pytest.param(group(uid="g2"), True, id="replaced"),
    pytest.param(UNKNOWN, False, id="unknown"), pytest.param(GONE, True, id="gone"),
])
def test_a_podgroup_claim_with_nothing_reserved_goes_only_with_its_group(owner: Any, deleted: bool) -> None:
    assert plan_claim(group_owned(), {}, owner, groups={}).delete is deleted
