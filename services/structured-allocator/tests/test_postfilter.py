"""PostFilter: which allocated claim is given back when no node fits."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import alloc, claim, req, res

from structured_allocator.postfilter import claim_to_deallocate, deallocatable

POD = "pod-uid"


def allocated(name: str, reserved: list[str] | None = None, *, deleting: bool = False,
              allocation: bool = True) -> dict[str, Any]:
    c = claim(name, req("gpu"), allocation=alloc(res("gpu", "gpu-0")) if allocation else None)
    c["metadata"]["uid"] = f"uid-{name}"
    if deleting:
        c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if reserved is not None:
        c.setdefault("status", {})["reservedFor"] = [{"resource": "pods", "name": u, "uid": u}
                                                     for u in reserved]
    return c


@pytest.mark.parametrize(("c", "expected"), [
    pytest.param(allocated("a"), True, id="reserved-for-nobody"),
    pytest.param(allocated("a", [POD]), True, id="reserved-only-for-this-pod"),
    pytest.param(allocated("a", ["other"]), False, id="used-by-another-pod"),
    pytest.param(allocated("a", [POD, "other"]), False, id="shared-with-another-pod"),
    pytest.param(allocated("a", allocation=False), False, id="not-allocated"),
    pytest.param(allocated("a", deleting=True), False, id="being-deleted"),
])
def test_deallocatable(c: dict[str, Any], expected: bool) -> None:
    assert deallocatable(c, POD) is expected


def test_first_candidate_in_pod_order_unless_one_is_unavailable() -> None:
    claims = [allocated("a", ["other"]), allocated("b"), allocated("c", [POD])]
    assert claim_to_deallocate(claims, POD)["metadata"]["name"] == "b"
    assert claim_to_deallocate(claims, POD, ["uid-c"])["metadata"]["name"] == "c"
    assert claim_to_deallocate(claims[:1], POD) is None
    assert claim_to_deallocate([], POD) is None
