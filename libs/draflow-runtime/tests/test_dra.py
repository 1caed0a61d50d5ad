"""draflow_runtime.dra: which claims a pod uses (upstream ``resourceclaim.Name``) and the claim facts
the services share. Table tests; pure functions, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_runtime.dra import (
    DELETE_PROTECTION_FINALIZER,
    RESERVED_FOR_MAX,
    PodClaim,
    allocation_node,
    allocation_results,
    claim_names,
    claim_results,
    extended_claim_name,
    is_controlled_by,
    is_reserved_for,
    owning_pod,
    pod_claims,
    pod_consumer_ref,
    pod_is_finished,
)


def pod(claims: list[dict[str, Any]] | None = None, statuses: list[dict[str, Any]] | None = None, *,
        uid: str = "uid-1", phase: str | None = None, extended: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if statuses is not None:
        status["resourceClaimStatuses"] = statuses
    if phase:
        status["phase"] = phase
    if extended:
        status["extendedResourceClaimStatus"] = {"resourceClaimName": extended, "requestMappings": []}
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid},
            "spec": {"resourceClaims": claims or []}, "status": status}


def test_the_upstream_constants() -> None:
    assert DELETE_PROTECTION_FINALIZER == "resource.kubernetes.io/delete-protection"
    assert RESERVED_FOR_MAX == 256


@pytest.mark.parametrize(
    ("claims", "statuses", "want"),
    [
        pytest.param([{"name": "a", "resourceClaimName": "shared"}], [],
                     [PodClaim("a", "shared", None, generated=False)], id="direct-claim"),
        pytest.param([{"name": "a", "resourceClaimTemplateName": "t"}], [],
                     [PodClaim("a", None, "t", generated=True)], id="template-not-generated"),
        pytest.param([{"name": "a", "resourceClaimTemplateName": "t"}],
                     [{"name": "a", "resourceClaimName": "p-a-x"}],
                     [PodClaim("a", "p-a-x", "t", generated=True)], id="template-generated"),
        pytest.param([{"name": "a", "resourceClaimTemplateName": "t"}], [{"name": "a"}],
                     [PodClaim("a", None, "t", generated=True, needed=False)], id="template-not-needed"),
        pytest.param([{"name": "a"}], [], [PodClaim("a", None, None, generated=False)],
                     id="neither-name-nor-template"),
        pytest.param([{"name": "a", "resourceClaimName": "shared"}],
                     [{"name": "a", "resourceClaimName": "other"}],
                     [PodClaim("a", "shared", None, generated=False)], id="direct-claim-ignores-the-status"),
    ],
)
def test_pod_claims(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]], want: list[PodClaim]
) -> None:
    assert pod_claims(pod(claims, statuses)) == want


@pytest.mark.parametrize(
    ("claim", "waiting"),
    [
        pytest.param(PodClaim("a", "c", "t", generated=True), "", id="named"),
        pytest.param(PodClaim("a", None, "t", generated=True), "ResourceClaim not generated yet",
                     id="not-created"),
        pytest.param(PodClaim("a", None, "t", generated=True, needed=False), "", id="not-needed"),
        pytest.param(PodClaim("a", None, None, generated=False), "neither resourceClaimName nor template set",
                     id="invalid"),
    ],
)
def test_why_a_claim_has_no_name_yet(claim: PodClaim, waiting: str) -> None:
    assert claim.waiting == waiting


def test_pod_claims_resolve_through_the_status() -> None:
    p = pod(
        claims=[
            {"name": "shared", "resourceClaimName": "my-claim"},
            {"name": "gpu", "resourceClaimTemplateName": "t1"},
            {"name": "nic", "resourceClaimTemplateName": "t2"},
            {"name": "skipped", "resourceClaimTemplateName": "t3"},
        ],
        statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}, {"name": "skipped"}],
    )
    assert pod_claims(p) == [
        PodClaim("shared", "my-claim", None, generated=False),
        PodClaim("gpu", "p-gpu-abcde", "t1", generated=True),
        PodClaim("nic", None, "t2", generated=True),
        PodClaim("skipped", None, "t3", generated=True, needed=False),
    ]
    assert claim_names(p) == ["my-claim", "p-gpu-abcde"]


def test_the_extended_resource_claim_is_last_and_only_when_asked_for() -> None:
    p = pod([{"name": "a", "resourceClaimName": "shared"}], extended="p-extended-resources-x")
    assert extended_claim_name(p) == "p-extended-resources-x"
    assert pod_claims(p) == [PodClaim("a", "shared", None, generated=False)]
    assert pod_claims(p, extended=True) == [PodClaim("a", "shared", None, generated=False),
                                            PodClaim("", "p-extended-resources-x", None, generated=True)]
    assert claim_names(p, extended=True) == ["shared", "p-extended-resources-x"]
    assert extended_claim_name(pod()) is None
    assert pod_claims(pod(), extended=True) == []


@pytest.mark.parametrize(
    ("phase", "finished"),
    [("Pending", False), ("Running", False), ("Succeeded", True), ("Failed", True), (None, False)],
)
def test_pod_is_finished(phase: str | None, finished: bool) -> None:
    assert pod_is_finished(pod(phase=phase)) is finished


def owned(uid: str, *, controller: bool = True, kind: str = "Pod") -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
        {"apiVersion": "v1", "kind": kind, "name": "p", "uid": uid, "controller": controller}]}}


@pytest.mark.parametrize(
    ("claim", "controlled"),
    [
        pytest.param(owned("uid-1"), True, id="controller-pod"),
        pytest.param(owned("uid-2"), False, id="previous-incarnation"),
        pytest.param(owned("uid-1", controller=False), False, id="owner-not-controller"),
        pytest.param(owned("uid-1", kind="ReplicaSet"), False, id="controller-not-a-pod"),
        pytest.param({"metadata": {"name": "c"}}, False, id="no-owner"),
    ],
)
def test_is_controlled_by(claim: dict[str, Any], controlled: bool) -> None:
    assert is_controlled_by(claim, pod(uid="uid-1")) is controlled


def test_owning_pod_is_the_controller_when_it_is_a_pod() -> None:
    refs = [{"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "u0"},
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}]
    assert owning_pod({"metadata": {"ownerReferences": refs}}) == ("p", "u1")
    assert owning_pod(owned("u1", kind="Job")) is None
    assert owning_pod(owned("u1", controller=False)) is None
    assert owning_pod({"metadata": {}}) is None


def test_is_reserved_for_matches_this_pod_incarnation_by_uid() -> None:
    claim = {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-1"}]}}
    assert is_reserved_for(claim, pod(uid="uid-1"))
    assert not is_reserved_for(claim, pod(uid="uid-2"))
    assert not is_reserved_for({"status": {}}, pod(uid="uid-1"))
    assert not is_reserved_for({"status": {"reservedFor": [{"resource": "pods", "name": "p"}]}}, pod(uid=""))


def test_pod_consumer_ref_is_the_reserved_for_entry_of_the_pod() -> None:
    assert pod_consumer_ref(pod(uid="uid-1")) == {"resource": "pods", "name": "p", "uid": "uid-1"}


def allocated(selector: dict[str, Any] | None, results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    allocation: dict[str, Any] = {"devices": {"results": results or []}}
    if selector is not None:
        allocation["nodeSelector"] = selector
    return {"status": {"allocation": allocation}}


def fields(*reqs: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": list(reqs)}]}


@pytest.mark.parametrize(
    ("claim", "node"),
    [
        pytest.param(allocated(fields({"key": "metadata.name", "operator": "In", "values": ["n1"]})), "n1",
                     id="node-local"),
        pytest.param(allocated(None), "", id="no-selector-network-attached"),
        pytest.param(allocated({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}), "", id="label-selector"),
        pytest.param(allocated(fields({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]})), "",
                     id="not-in"),
        pytest.param({"status": {}}, "", id="not-allocated"),
    ],
)
def test_allocation_node(claim: dict[str, Any], node: str) -> None:
    assert allocation_node(claim) == node


def test_device_results_of_an_allocation() -> None:
    results = [{"request": "gpu", "driver": "d", "pool": "p", "device": "g0"}]
    claim = allocated(None, results)
    assert claim_results(claim) == results
    assert allocation_results(claim["status"]["allocation"]) == results
    assert allocation_results(None) == []
    assert claim_results({"status": {}}) == []
    assert claim_results({}) == []
