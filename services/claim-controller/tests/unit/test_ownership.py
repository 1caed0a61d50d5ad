"""Which claims a pod uses and which claims were generated for it."""

from typing import Any

import pytest

from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION
from claim_controller.ownership import (
    claim_uses,
    is_generated_for,
    pod_is_done,
    referenced_template_names,
)
from draflow_runtime.dra import owning_pod


def pod(uid: str = "uid-1", *, phase: str | None = None, node: str = "", deleting: bool = False,
        claims: list[dict[str, Any]] | None = None, statuses: list[dict[str, Any]] | None = None) -> dict:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if statuses is not None:
        status["resourceClaimStatuses"] = statuses
    return {"metadata": meta, "spec": {"nodeName": node, "resourceClaims": claims or []}, "status": status}


def claim(
    owner_uid: str | None, pod_claim: str | None, *, kind: str = "Pod", controller: bool = True
) -> dict:
    meta: dict[str, Any] = {"name": "c", "namespace": "ns"}
    if pod_claim is not None:
        meta["annotations"] = {POD_CLAIM_NAME_ANNOTATION: pod_claim}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": kind, "name": "p", "uid": owner_uid, "controller": controller}
        ]
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("the_claim", "expected"),
    [
        pytest.param(claim("uid-1", "gpu"), True, id="annotation-and-owner"),
        pytest.param(claim("uid-1", "other"), False, id="other-pod-claim"),
        pytest.param(claim("uid-2", "gpu"), False, id="previous-incarnation-of-the-pod"),
        pytest.param(claim(None, "gpu"), False, id="no-owner"),
        pytest.param(claim("uid-1", None), False, id="no-annotation"),
        pytest.param(claim("uid-1", "gpu", controller=False), False, id="owner-not-controller"),
        pytest.param(claim("uid-1", "gpu", kind="ReplicaSet"), False, id="owner-not-a-pod"),
    ],
)
def test_is_generated_for(the_claim: dict, expected: bool) -> None:
    assert is_generated_for(the_claim, pod("uid-1"), "gpu") is expected


def test_owning_pod_names_the_controller_pod() -> None:
    assert owning_pod(claim("uid-9", "gpu")) == ("p", "uid-9")
    assert owning_pod(claim("uid-9", "gpu", kind="Job")) is None


def test_referenced_template_names_include_claims_that_are_not_needed() -> None:
    p = pod(
        claims=[
            {"name": "shared", "resourceClaimName": "my-claim"},
            {"name": "gpu", "resourceClaimTemplateName": "t1"},
            {"name": "nic", "resourceClaimTemplateName": "t2"},
            {"name": "skipped", "resourceClaimTemplateName": "t3"},
        ],
        statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}, {"name": "skipped"}],
    )
    assert referenced_template_names(p) == ["t1", "t2", "t3"]


@pytest.mark.parametrize(
    ("the_pod", "done"),
    [
        pytest.param(pod(phase="Running", node="n1"), False, id="running"),
        pytest.param(pod(phase="Pending"), False, id="pending"),
        pytest.param(pod(phase="Succeeded", node="n1"), True, id="succeeded"),
        pytest.param(pod(phase="Failed", node="n1"), True, id="failed"),
        pytest.param(pod(phase="Pending", deleting=True), True, id="deleted-before-binding"),
        pytest.param(pod(phase="Running", node="n1", deleting=True), False, id="deleted-while-running"),
    ],
)
def test_pod_is_done(the_pod: dict, done: bool) -> None:
    assert pod_is_done(the_pod) is done


def test_the_extended_resource_claim_of_a_pod_counts_as_one_it_uses() -> None:
    p = pod(claims=[{"name": "gpu", "resourceClaimName": "shared"}])
    assert list(claim_uses(p)) == ["ns/shared"]
    p["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "p-extended-resources-x",
                                                  "requestMappings": []}
    assert list(claim_uses(p)) == ["ns/shared", "ns/p-extended-resources-x"]
