"""reservedFor clean-up, deallocation and deletion decisions."""

from typing import Any

import pytest

from claim_controller.reservations import GONE, UNKNOWN, ClaimPlan, Verdict, plan_claim, reservation_verdict
from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER

ALLOCATION = {"devices": {"results": []}}


def ref(name: str, uid: str, *, resource: str = "pods", group: str = "") -> dict[str, str]:
    return {"apiGroup": group, "resource": resource, "name": name, "uid": uid}


def pod(name: str, uid: str, phase: str = "Running", node: str = "n1", deleting: bool = False) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def claim(*refs: dict, allocated: bool = True, finalizer: bool = True, deleting: bool = False,
          owner_uid: str | None = None, devices: bool = False) -> dict:
    meta: dict[str, Any] = {"name": "c", "namespace": "ns", "uid": "claim-uid"}
    if finalizer:
        meta["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid, "controller": True}
        ]
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = ALLOCATION
    if refs:
        status["reservedFor"] = list(refs)
    if devices:
        status["devices"] = [{"driver": "d", "pool": "p", "device": "x"}]
    return {"metadata": meta, "spec": {}, "status": status}


@pytest.mark.parametrize(
    ("reference", "state", "verdict"),
    [
        pytest.param(ref("a", "u1"), pod("a", "u1"), Verdict.KEEP, id="running-pod"),
        pytest.param(ref("a", "u1"), pod("a", "u1", phase="Pending", node=""), Verdict.KEEP,
                     id="pending-pod"),
        pytest.param(ref("a", "u1"), pod("a", "u1", phase="Succeeded"), Verdict.DONE, id="succeeded"),
        pytest.param(ref("a", "u1"), pod("a", "u1", phase="Failed"), Verdict.DONE, id="failed"),
        pytest.param(ref("a", "u1"), pod("a", "u1", node="", deleting=True), Verdict.DONE,
                     id="deleted-before-binding"),
        pytest.param(ref("a", "u1"), pod("a", "u1", deleting=True), Verdict.KEEP, id="terminating-on-node"),
        pytest.param(ref("a", "u1"), pod("a", "u2"), Verdict.REPLACED, id="replaced-same-name"),
        pytest.param(ref("a", "u1"), GONE, Verdict.DELETED, id="gone"),
        pytest.param(ref("a", "u1"), UNKNOWN, Verdict.UNVERIFIED, id="unknown-is-kept"),
        pytest.param(ref("w", "u1", resource="podgroups", group="scheduling.k8s.io"), GONE,
                     Verdict.UNKNOWN_KIND, id="unknown-kind-left-alone"),
        pytest.param(ref("w", "u1", resource="pods", group="example.com"), GONE, Verdict.UNKNOWN_KIND,
                     id="pods-of-another-group"),
    ],
)
def test_reservation_verdict(reference: dict, state: Any, verdict: Verdict) -> None:
    assert reservation_verdict(reference, state) is verdict


def test_running_consumer_keeps_everything() -> None:
    plan = plan_claim(claim(ref("a", "u1")), {"a": pod("a", "u1")})
    assert plan.empty
    assert plan.remaining == 1


def test_last_consumer_done_deallocates_and_releases() -> None:
    plan = plan_claim(claim(ref("a", "u1")), {"a": pod("a", "u1", phase="Succeeded")})
    assert plan.drop == (ref("a", "u1"),)
    assert (plan.remaining, plan.deallocate, plan.release_finalizer, plan.delete) == (0, True, True, False)


def test_shared_claim_stays_allocated_while_one_consumer_lives() -> None:
    plan = plan_claim(
        claim(ref("a", "u1"), ref("b", "u2")), {"a": pod("a", "u1", phase="Succeeded"), "b": pod("b", "u2")}
    )
    assert plan.drop == (ref("a", "u1"),)
    assert (plan.remaining, plan.deallocate, plan.release_finalizer) == (1, False, False)


def test_unknown_kind_keeps_the_claim_allocated() -> None:
    other = ref("w", "u9", resource="podgroups", group="scheduling.k8s.io")
    plan = plan_claim(claim(ref("a", "u1"), other), {"a": GONE})
    assert plan.drop == (ref("a", "u1"),)
    assert not plan.deallocate


def test_unverified_pod_is_not_dropped() -> None:
    assert plan_claim(claim(ref("a", "u1")), {}).empty


def test_allocated_but_never_reserved_is_left_alone() -> None:
    """An allocator may write the allocation before reservedFor: no transition, no deallocation."""
    assert plan_claim(claim(), {}).empty


def test_deleted_claim_with_nothing_reserved_is_released() -> None:
    plan = plan_claim(claim(deleting=True), {})
    assert (plan.deallocate, plan.release_finalizer, plan.delete) == (True, True, False)


def test_deleted_claim_still_reserved_waits() -> None:
    assert plan_claim(claim(ref("a", "u1"), deleting=True), {"a": pod("a", "u1")}).empty


def test_deleted_unallocated_claim_only_loses_its_finalizer() -> None:
    plan = plan_claim(claim(allocated=False, deleting=True), {})
    assert (plan.deallocate, plan.release_finalizer) == (False, True)


@pytest.mark.parametrize("owner", [pytest.param(pod("owner", "o1"), id="owner-running"),
                                   pytest.param(UNKNOWN, id="owner-unknown")])
def test_a_fresh_claim_holding_the_finalizer_before_allocation_keeps_it(owner: Any) -> None:
    """--create-with-finalizer: a generated claim has it before any allocation; nothing to clean up (releasing
    it would undo the saved write and cost one more)."""
    assert plan_claim(claim(allocated=False, owner_uid="o1"), {}, owner).empty


def test_a_claim_with_the_finalizer_whose_owner_went_before_allocation_is_deleted_then_released() -> None:
    """The DELETE first (the API server keeps the claim, being deleted), then the finalizer goes."""
    first = plan_claim(claim(allocated=False, owner_uid="o1"), {}, GONE)
    assert (first.delete, first.release_finalizer, first.deallocate) == (True, False, False)
    then = plan_claim(claim(allocated=False, owner_uid="o1", deleting=True), {}, GONE)
    assert (then.delete, then.release_finalizer, then.deallocate) == (False, True, False)


def test_device_status_alone_is_cleared() -> None:
    plan = plan_claim(claim(allocated=False, deleting=True, devices=True, finalizer=False), {})
    assert (plan.deallocate, plan.release_finalizer) == (True, False)


@pytest.mark.parametrize(
    ("owner", "delete"),
    [
        pytest.param(pod("owner", "o1"), False, id="owner-running"),
        pytest.param(pod("owner", "o1", phase="Succeeded"), True, id="owner-succeeded"),
        pytest.param(pod("owner", "o1", phase="Failed"), True, id="owner-failed"),
        pytest.param(pod("owner", "o2"), True, id="owner-replaced"),
        pytest.param(GONE, True, id="owner-gone"),
        pytest.param(UNKNOWN, False, id="owner-unknown"),
    ],
)
def test_generated_claim_deleted_when_owner_finished(owner: Any, delete: bool) -> None:
    plan = plan_claim(claim(allocated=False, finalizer=False, owner_uid="o1"), {}, owner)
    assert plan.delete is delete


def test_generated_claim_of_finished_pod_is_unreserved_deallocated_and_deleted() -> None:
    done = pod("owner", "o1", phase="Succeeded")
    plan = plan_claim(claim(ref("owner", "o1"), owner_uid="o1"), {"owner": done}, done)
    assert plan == ClaimPlan(
        drop=(ref("owner", "o1"),), remaining=0, deallocate=True, release_finalizer=True, delete=True,
        verdicts={"o1": Verdict.DONE},
    )


def test_generated_claim_being_deleted_is_not_deleted_again() -> None:
    assert not plan_claim(claim(deleting=True, owner_uid="o1"), {}, GONE).delete


def test_plan_is_idempotent_on_a_cleaned_claim() -> None:
    assert plan_claim(claim(allocated=False, finalizer=False), {}, None).empty


def test_deleted_claim_reserved_for_a_gone_pod_is_unreserved_deallocated_and_released() -> None:
    """Upstream clear-reserved-structured-deleted: being deleted, reserved only for a pod that is gone."""
    plan = plan_claim(claim(ref("a", "u1"), deleting=True, owner_uid="u1"), {"a": GONE}, GONE)
    assert plan == ClaimPlan(drop=(ref("a", "u1"),), remaining=0, deallocate=True, release_finalizer=True,
                             delete=False, verdicts={"u1": Verdict.DELETED})


def test_a_gone_consumer_goes_and_a_pending_one_keeps_the_allocation() -> None:
    """Upstream remove-reserved: one consumer the live GET did not find, one that exists and has not
    run yet."""
    pending = pod("a", "u1", phase="Pending", node="")
    plan = plan_claim(claim(ref("a", "u1"), ref("b", "u2")), {"a": pending, "b": GONE})
    assert plan.drop == (ref("b", "u2"),)
    assert (plan.remaining, plan.deallocate, plan.release_finalizer, plan.delete) == (1, False, False, False)
