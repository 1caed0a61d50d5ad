"""Which pods a NoExecute device taint evicts, and when (upstream devicetainteviction cases, our words)."""

from __future__ import annotations

from typing import Any

import pytest

from claim_controller.taints import TaintSource, TaintView, claim_eviction, pod_eviction
from draflow_runtime.devicetaints import parse_time, rule_selects, tolerates

T0 = "2026-01-01T00:00:00Z"
T0S = parse_time(T0)
assert T0S is not None
TAINT = {"key": "example.com/broken", "value": "yes", "effect": "NoExecute", "timeAdded": T0}


def slice_(name: str, devices: dict[str, list[dict[str, Any]]], *, pool: str = "node-1",
           generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "driver": "gpu.example.com", "pool": {"name": pool, "generation": generation},
        "devices": [{"name": d, "taints": t} for d, t in devices.items()]}}


def rule(name: str, effect: str = "NoExecute", selector: dict[str, str] | None = None,
         uid: str = "rule-uid") -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "k", "effect": effect, "timeAdded": T0}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"metadata": {"name": name, "uid": uid, "generation": 1}, "spec": spec}


def view(slices: list[dict[str, Any]], rules: list[dict[str, Any]] = ()) -> TaintView:  # type: ignore[assignment]
    return TaintView(lambda d, p: [s for s in slices if s["spec"]["driver"] == d
                                   and s["spec"]["pool"]["name"] == p], rules)


def claim(tolerations: list[dict[str, Any]] | None = None, device: str = "gpu-0",
          reserved_uid: str = "pod-uid", owner_uid: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1",
                              "device": device}
    if tolerations is not None:
        result["tolerations"] = tolerations
    meta: dict[str, Any] = {"name": "c", "namespace": "ns"}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid,
                                    "controller": True}]
    return {"metadata": meta, "status": {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": reserved_uid}]}}


def pod(*, node: str = "node-1", template: bool = False) -> dict[str, Any]:
    ref = {"resourceClaimTemplateName": "t"} if template else {"resourceClaimName": "c"}
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]} if template else {}
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", **ref}]}, "status": status}


TAINTED = [slice_("s1", {"gpu-0": [TAINT], "gpu-1": []})]


def tol(seconds: int | None = None, **kw: Any) -> dict[str, Any]:
    out = {"operator": "Exists", "effect": "NoExecute", **kw}
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


@pytest.mark.parametrize(("name", "tolerations", "expected_delay"), [
    ("untolerated evicts at timeAdded", None, 0),
    ("tolerated forever is never evicted", [tol()], None),
    ("tolerationSeconds delays", [tol(60)], 60),
    ("the smallest tolerationSeconds wins", [tol(60), tol(30)], 30),
    ("one forever toleration ignores the taint", [tol(60), tol()], None),
    ("negative tolerationSeconds is 0", [tol(-5)], 0),
    ("other key does not tolerate", [tol(20, key="other", operator="Equal", value="yes")], 0),
    ("Equal with the right value tolerates",
     [tol(key="example.com/broken", operator="Equal", value="yes")], None),
    ("Equal with another value does not", [tol(key="example.com/broken", operator="Equal", value="no")], 0),
    ("a toleration without effect does not count for eviction", [{"operator": "Exists"}], 0),
    ("a NoSchedule toleration does not count", [tol(effect="NoSchedule")], 0),
])
def test_claim_eviction_time_follows_tolerations(
    name: str, tolerations: Any, expected_delay: int | None
) -> None:
    eviction = claim_eviction(claim(tolerations), view(TAINTED))
    if expected_delay is None:
        assert eviction is None, name
    else:
        assert eviction is not None, name
        assert eviction.when == T0S + expected_delay, name
        assert eviction.reasons == (TaintSource(slice="s1", driver="gpu.example.com", pool="node-1",
                                                device="gpu-0", index=0),)


def test_only_no_execute_taints_of_the_allocated_device_evict() -> None:
    slices = [slice_("s1", {"gpu-0": [{**TAINT, "effect": "NoSchedule"}, {**TAINT, "effect": "None"}],
                            "gpu-1": [TAINT]})]
    assert claim_eviction(claim(), view(slices)) is None
    assert claim_eviction(claim(device="gpu-1"), view(slices)) is not None


def test_only_the_newest_pool_generation_counts() -> None:
    old = slice_("old", {"gpu-0": [TAINT]}, generation=1)
    new = slice_("new", {"gpu-0": []}, generation=2)
    assert claim_eviction(claim(), view([old, new])) is None
    assert claim_eviction(claim(), view([old])) is not None


@pytest.mark.parametrize(("selector", "evicts"), [
    (None, False),  # no selector: selects nothing
    ({}, True),  # empty selector: every device
    ({"driver": "gpu.example.com"}, True),
    ({"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}, True),
    ({"pool": "node-2"}, False),
    ({"device": "gpu-1"}, False),
])
def test_rule_selector(selector: dict[str, str] | None, evicts: bool) -> None:
    untainted = [slice_("s1", {"gpu-0": []})]
    eviction = claim_eviction(claim(), view(untainted, [rule("r", selector=selector)]))
    assert (eviction is not None) == evicts
    if eviction is not None:
        assert eviction.reasons == (TaintSource(rule="r", rule_uid="rule-uid"),)
        assert eviction.when == T0S


@pytest.mark.parametrize("effect", ["None", "NoSchedule", "SomethingNew"])
def test_rules_without_no_execute_do_not_evict(effect: str) -> None:
    assert claim_eviction(claim(), view([], [rule("r", effect, {})])) is None


def test_reasons_union_rules_first_earliest_time() -> None:
    later = {**TAINT, "timeAdded": "2026-01-01T00:01:00Z"}
    slices = [slice_("s1", {"gpu-0": [later]})]
    rules = [rule("b", selector={}, uid="b"), rule("a", selector={}, uid="a")]
    eviction = claim_eviction(claim(), view(slices, rules))
    assert eviction is not None
    assert [str(r) for r in eviction.reasons] == [
        "DeviceTaintRule a", "DeviceTaintRule b", "ResourceSlice s1 gpu.example.com/node-1/gpu-0 taint #0"]
    assert eviction.when == T0S


def test_pod_eviction_needs_binding_reservation_and_ownership() -> None:
    v = view(TAINTED)
    c = claim()
    assert pod_eviction(pod(), lambda n: c if n == "c" else None, v) is not None
    assert pod_eviction(pod(node=""), lambda n: c, v) is None, "not scheduled"
    assert pod_eviction(pod(), lambda n: None, v) is None, "claim missing"
    assert pod_eviction(pod(), lambda n: claim(reserved_uid="other"), v) is None, "reserved for another pod"
    unallocated = {**c, "status": {"reservedFor": c["status"]["reservedFor"]}}
    assert pod_eviction(pod(), lambda n: unallocated, v) is None, "not allocated"
    assert pod_eviction(pod(template=True), lambda n: claim(owner_uid="pod-uid"), v) is not None
    foreign = claim(owner_uid="other")
    assert pod_eviction(pod(template=True), lambda n: foreign, v) is None, "generated for another pod"


def test_shared_helpers() -> None:
    assert tolerates({"operator": "Exists"}, TAINT)
    assert tolerates({"key": "example.com/broken", "value": "yes"}, TAINT)  # operator defaults to Equal
    assert not tolerates({"key": "example.com/broken", "operator": "Bogus"}, TAINT)
    assert not rule_selects({"spec": {}}, "d", "p", "x")
    assert parse_time(None) is None
