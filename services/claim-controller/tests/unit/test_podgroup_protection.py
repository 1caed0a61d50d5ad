"""PodGroup protection — upstream kube-controller-manager v1.37.1 podgroup-protection controller cases in
our words: the finalizer of a PodGroup being deleted is lifted only when no pod of the group is active
(terminal pods do not count); a PodGroup not being deleted, or without the finalizer, needs nothing."""

from __future__ import annotations

from typing import Any

import pytest

from claim_controller.podgroup_protection import PROTECTION_FINALIZER, unused


def group(*, deleting: bool = True, finalizers: tuple[str, ...] = (PROTECTION_FINALIZER,)) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "workers", "namespace": "ns", "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def member(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"schedulingGroup": {"podGroupName": "workers"}},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("pg", "members", "expected"), [
    pytest.param(group(), [], True, id="deleting-no-pods"),
    pytest.param(group(), [member("Succeeded"), member("Failed")], True, id="deleting-all-pods-terminal"),
    pytest.param(group(), [member("Succeeded"), member("Running")], False, id="deleting-a-pod-running"),
    pytest.param(group(), [member("Pending")], False, id="deleting-a-pod-pending"),
    pytest.param(group(deleting=False), [], False, id="not-being-deleted"),
    pytest.param(group(finalizers=("other",)), [], False, id="finalizer-already-lifted"),
])
def test_the_finalizer_goes_only_when_no_pod_of_the_group_is_active(
        pg: dict[str, Any], members: list[dict[str, Any]], expected: bool) -> None:
    assert unused(pg, members) is expected
