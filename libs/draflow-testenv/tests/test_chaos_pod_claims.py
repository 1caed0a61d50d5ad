"""The chaos run's invariants of the claims made for pods (``chaos.podclaims``): each holds on a healthy
hand-made snapshot and names a hand-made violation."""

from __future__ import annotations

from typing import Any

from test_chaos_invariants import NS, _claim, _group, _group_claim, _member, _pod, _slice

from draflow_testenv.chaos import checks, podclaims
from draflow_testenv.chaos import claimkinds as kinds
from draflow_testenv.chaos import invariants as inv


def _generated(name: str, pod: str, device: str, pod_claim: str = "gpu") -> dict[str, Any]:
    claim = _claim(name, [device], reserved=[pod])
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod,
                                             "controller": True}]
    claim["metadata"]["annotations"][kinds.POD_CLAIM_ANNOTATION] = pod_claim
    return claim


def _template_pod(name: str, claim: str | None) -> dict[str, Any]:
    pod = _pod(name, "-")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "part"}]
    if claim:
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return pod


def _snap() -> inv.Snapshot:
    """Pod p1 on its generated claim p1-gpu (gpu-0-part-0), pod p2 on a user's claim c2."""
    return inv.Snapshot(
        pods=[_template_pod("p1", "p1-gpu"), _pod("p2", "c2")],
        claims=[_generated("p1-gpu", "p1", "gpu-0-part-0"), _claim("c2", ["gpu-0-part-1"], reserved=["p2"])],
        slices=[_slice()],
        nodes={"sim-0": inv.NodeFiles(cdi={"uid-p1-gpu", "uid-c2"}, checkpoint={"uid-p1-gpu", "uid-c2"})})


def test_a_healthy_snapshot_with_generated_claims_has_no_violation() -> None:
    assert checks.run_checks(_snap(), checks.SETTLED) == []


def test_two_claims_for_one_pod_claim_are_a_violation() -> None:
    snap = _snap()
    assert podclaims.duplicate_claims(snap) == []
    snap.claims.append(_generated("p1-gpu-x", "p1", "gpu-0"))  # made again by a new shard holder
    assert podclaims.duplicate_claims(snap) == [
        f"pod {NS}/p1 has 2 claims for its claim 'gpu': ['p1-gpu', 'p1-gpu-x']"]
    assert checks.duplicate_claims in checks.CONTINUOUS
    snap.claims[-1] = _generated("p1-gpu-x", "p1", "gpu-0", pod_claim="other")  # another pod claim
    assert podclaims.duplicate_claims(snap) == []


def test_a_claim_of_an_earlier_pod_of_the_same_name_is_not_a_duplicate() -> None:
    snap = _snap()
    old = _generated("p1-gpu-old", "p1", "gpu-0")
    old["metadata"]["ownerReferences"][0]["uid"] = "p1-before"  # the pod was deleted and made again
    snap.claims.append(old)
    assert podclaims.duplicate_claims(snap) == []


def test_a_pod_without_its_claim_after_settling_is_a_violation() -> None:
    snap = _snap()
    snap.pods[0] = _template_pod("p1", None)  # the claim-controller never made it
    assert podclaims.pods_without_claims(snap) == [
        f"pod {NS}/p1: claim 'gpu' not made (ResourceClaim not generated yet)"]
    assert checks.pods_without_claims in checks.SETTLED
    snap.pods[0] = _template_pod("p1", "p1-gone")  # recorded, then lost
    assert podclaims.pods_without_claims(snap) == [
        f"pod {NS}/p1: claim 'gpu' is p1-gone, which does not exist"]
    snap.pods[0] = _template_pod("p1", "c2")  # someone else's
    assert podclaims.pods_without_claims(snap) == [
        f"pod {NS}/p1: claim 'gpu' is c2, neither its own nor its PodGroup's"]
    snap.pods[1] = _pod("p2", "missing")
    snap.pods[0] = _template_pod("p1", "p1-gpu")
    assert podclaims.pods_without_claims(snap) == [
        f"pod {NS}/p2: claim 'gpu' is missing, which does not exist"]


def test_a_pod_being_deleted_needs_no_claim_and_a_member_uses_its_groups() -> None:
    snap = _snap()
    snap.pods[0] = _template_pod("p1", None)
    snap.pods[0]["metadata"]["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    assert podclaims.pods_without_claims(snap) == []
    group = inv.Snapshot(pods=[_member("m1", "gc")], claims=[_group_claim("gc", ["gpu-0"])],
                         slices=[_slice()], pod_groups=[_group()])
    assert podclaims.pods_without_claims(group) == []
    group.pod_groups = [_group("g2")]  # the claim's PodGroup is gone: not the member's group's claim
    assert podclaims.pods_without_claims(group) == [
        f"pod {NS}/m1: claim 'gpu' is gc, neither its own nor its PodGroup's"]
