"""The labels and the gauge of kube-controller-manager's resourceclaim metrics, restated from upstream's
``TestGetAdminAccessMetricLabel`` and the metric expectations of ``TestEventHandlers`` (v1.37.1): the
claims the informer holds after each case's changes, and what the gauge reports for them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from claim_controller.claimmetrics import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    ClaimsCollector,
    admin_access,
    claim_counts,
    owner_labels,
    source,
)
from claim_controller.naming import POD_CLAIM_NAME_ANNOTATION


def requests(*reqs: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"devices": {"requests": list(reqs)}}}


def exactly(admin: bool | None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "r", "exactly": {"deviceClassName": "class"}}
    if admin is not None:
        body["exactly"]["adminAccess"] = admin
    return body


@pytest.mark.parametrize(("claim", "want"), [
    pytest.param(None, "false", id="nil-claim"),
    pytest.param(requests(), "false", id="no-requests"),
    pytest.param(requests(exactly(False)), "false", id="admin-access-false"),
    pytest.param(requests(exactly(True)), "true", id="admin-access-true"),
    pytest.param(requests({"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "c"}]}), "false",
                 id="prioritized-list"),
    pytest.param(requests(exactly(False), exactly(True)), "true",
                 id="one-of-multiple-requests-with-admin-access-true"),
    pytest.param(requests(exactly(None), exactly(False)), "false",
                 id="multiple-requests-admin-access-false-or-nil"),
])
def test_admin_access_label(claim: dict[str, Any] | None, want: str) -> None:
    assert admin_access(claim) == want


def claim(name: str, *, allocated: bool = False, admin: bool = False, template: bool = False,
          extended: bool = False, owner: tuple[str, str] | None = None) -> dict[str, Any]:
    annotations = {}
    if template:
        annotations[POD_CLAIM_NAME_ANNOTATION] = "acme-resource"
    if extended:
        annotations[EXTENDED_RESOURCE_CLAIM_ANNOTATION] = "true"
    meta: dict[str, Any] = {"name": name, "namespace": "my-namespace", "annotations": annotations}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": "o", "uid": "u",
                                    "controller": True}]
    body: dict[str, Any] = {"metadata": meta, **(requests(exactly(True)) if admin else requests())}
    if allocated:
        body["status"] = {"allocation": {"devices": {"results": []}}}
    return body


CLAIM = claim("test-pod-acme-resource", owner=("v1", "Pod"))
ALLOCATED = claim("test-pod-acme-resource", allocated=True, owner=("v1", "Pod"))
OTHER_ALLOCATED = claim("test-pod-acme-resource2", allocated=True, owner=("v1", "Pod"))
ADMIN = claim("test-pod-acme-resource--1", admin=True, template=True)
ADMIN_ALLOCATED = claim("test-pod-acme-resource--1", admin=True, template=True, allocated=True)
OTHER_ADMIN_ALLOCATED = claim("test-pod-acme-resource--12", admin=True, template=True, allocated=True)
EXTENDED = claim("test-pod-extended-resources--1", extended=True)
EXTENDED_ALLOCATED = claim("test-pod-extended-resources--1", extended=True, allocated=True)
GROUP_CLAIM = claim("test-pod-acme-resource", owner=("scheduling.k8s.io/v1beta1", "PodGroup"))


def modified(c: dict[str, Any]) -> dict[str, Any]:
    c = copy.deepcopy(c)
    c["metadata"]["labels"] = {"foo": "bar"}
    return c


# upstream TestEventHandlers case -> the claims the informer holds after its changes, and the gauge
CASES = [
    ("nothing", [], {}),
    ("new-claim", [CLAIM], {("false", "false", ""): 1}),
    ("update-claim", [modified(CLAIM)], {("false", "false", ""): 1}),
    ("allocate-claim", [ALLOCATED], {("true", "false", ""): 1}),
    ("allocate-another-claim", [ALLOCATED, OTHER_ALLOCATED], {("true", "false", ""): 2}),
    ("deallocate-claim", [CLAIM, OTHER_ALLOCATED], {("true", "false", ""): 1, ("false", "false", ""): 1}),
    ("delete-deallocated-claim", [OTHER_ALLOCATED], {("true", "false", ""): 1}),
    ("delete-allocated-claim", [], {}),
    ("new-claim-admin-access", [ADMIN], {("false", "true", "resource_claim_template"): 1}),
    ("update-claim-admin-access", [modified(ADMIN)], {("false", "true", "resource_claim_template"): 1}),
    ("allocate-claim-admin-access", [ADMIN_ALLOCATED], {("true", "true", "resource_claim_template"): 1}),
    ("allocate-another-claim-admin-access", [ADMIN_ALLOCATED, OTHER_ADMIN_ALLOCATED],
     {("true", "true", "resource_claim_template"): 2}),
    ("deallocate-claim-admin-access", [ADMIN, OTHER_ADMIN_ALLOCATED],
     {("true", "true", "resource_claim_template"): 1, ("false", "true", "resource_claim_template"): 1}),
    ("delete-deallocated-claim-admin-access", [OTHER_ADMIN_ALLOCATED],
     {("true", "true", "resource_claim_template"): 1}),
    ("delete-allocated-claim-admin-access", [], {}),
    ("new-claim-extended-resources", [EXTENDED], {("false", "false", "extended_resource"): 1}),
    ("allocate-claim-extended-resources", [EXTENDED_ALLOCATED], {("true", "false", "extended_resource"): 1}),
    ("deallocate-claim-extended-resources", [EXTENDED], {("false", "false", "extended_resource"): 1}),
    ("delete-claim-extended-resources", [], {}),
    ("new-podgroup-templated-claim-already-exists", [GROUP_CLAIM], {("false", "false", ""): 1}),
    ("new-templated-claim-for-podgroup", [GROUP_CLAIM], {("false", "false", ""): 1}),
]


@pytest.mark.parametrize(("claims", "expected"), [pytest.param(c, e, id=name) for name, c, e in CASES])
def test_claims_gauge(claims: list[dict[str, Any]], expected: dict[tuple[str, str, str], int]) -> None:
    assert dict(claim_counts(claims)) == expected
    collector = ClaimsCollector()
    collector.source = lambda: claims
    [family] = collector.collect()
    assert family.name == "draflow_claim_controller_resource_claims"
    samples = {(s.labels["allocated"], s.labels["admin_access"], s.labels["source"]): s.value
               for s in family.samples}
    assert samples == expected


def test_a_replica_that_is_not_working_reports_no_claims() -> None:
    [family] = ClaimsCollector().collect()
    assert family.samples == []


def test_source_and_owner_labels() -> None:
    assert source(EXTENDED) == "extended_resource"
    assert source(ADMIN) == "resource_claim_template"
    assert source(CLAIM) == ""
    assert owner_labels(CLAIM) == ("", "Pod")
    assert owner_labels(GROUP_CLAIM) == ("scheduling.k8s.io", "PodGroup")
    assert owner_labels(EXTENDED) == ("", "")
