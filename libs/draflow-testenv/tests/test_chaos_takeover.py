"""The chaos faults' pure parts: which pods a stopped allocator had reserved claims for but not bound."""

from __future__ import annotations

from typing import Any

from draflow_testenv.chaos.takeover import reserved_unbound


def _pod(name: str, node: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def _claim(*reserved: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "status": {"allocation": {}, "reservedFor": list(reserved)}}


def _ref(pod: str, resource: str = "pods") -> dict[str, Any]:
    return {"resource": resource, "name": pod, "uid": f"uid-{pod}"}


def test_a_pod_reserved_and_not_bound_is_caught_mid_write() -> None:
    pods = [_pod("a"), _pod("b", node="sim-0"), _pod("c", deleting=True), _pod("d")]
    claims = [_claim(_ref("a"), _ref("b")), _claim(_ref("c")), _claim(_ref("d", resource="podgroups"))]
    assert reserved_unbound(claims, pods) == ["a"]  # b is bound, c going, d's entry a group's
    assert reserved_unbound(claims, [_pod("a", node="sim-1")]) == []
    assert reserved_unbound([], pods) == []
