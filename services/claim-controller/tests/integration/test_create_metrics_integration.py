"""Claim creation as kube-controller-manager's resourceclaim controller counts it (v1.37.1 ``TestSyncHandler``
create cases and their ``dynamic_resource_allocation_resourceclaim_creates_total`` expectations), against
the real kube-apiserver: every create is counted by status, admin access and owner; a create the API server
refuses (here: an admission policy) is counted as a failure and retried until it succeeds; a claim asking for
admin access is made in a namespace labelled for it. ``tests/unit/upstream_map.py`` names the cases."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from cc_kit import Kit, eventually, plain_claim, pod, template
from prometheus_client import REGISTRY
from test_pod_groups_integration import GPU, pod_group
from test_upstream_podgroups_integration import group_statuses
from test_upstream_pods_integration import claim_names, statuses, stays

from draflow_runtime.errors import Forbidden, NotFound
from draflow_runtime.kube import NAMESPACES, POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

VAP = "/apis/admissionregistration.k8s.io/v1"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
POD = ("", "Pod")
GROUP = ("scheduling.k8s.io", "PodGroup")

Labels = tuple[str, str, str, str]


def creates() -> dict[Labels, float]:
    """``draflow_claim_controller_resourceclaim_creates_total`` of this process, by its labels."""
    out: dict[Labels, float] = {}
    for family in REGISTRY.collect():
        if family.name != "draflow_claim_controller_resourceclaim_creates":
            continue
        for s in family.samples:
            if s.name.endswith("_total"):
                labels = s.labels
                out[(labels["status"], labels["admin_access"], labels["owner_api_group"],
                     labels["owner_api_kind"])] = s.value
    return out


def delta(before: dict[Labels, float]) -> dict[Labels, float]:
    now = creates()
    return {k: v - before.get(k, 0.0) for k, v in now.items() if v - before.get(k, 0.0)}


def admin_template(name: str) -> dict[str, Any]:
    body = template(name)
    body["spec"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return body


async def refuse_claims(kit: Kit, name: str) -> None:
    """A ValidatingAdmissionPolicy and binding ``name`` that refuse every ResourceClaim create in the
    test's namespace, in force when this returns."""
    await kit.kube.request("POST", f"{VAP}/validatingadmissionpolicies", body={
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{
                     "apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
                     "resources": ["resourceclaims"]}]},
                 "validations": [{"expression": "false", "message": "no claims here for now",
                                  "reason": "Forbidden"}]}})
    await kit.kube.request("POST", f"{VAP}/validatingadmissionpolicybindings", body={
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": kit.namespace}}}}})

    async def in_force() -> bool:
        try:
            await kit.create(RESOURCE_CLAIMS, plain_claim("probe"))
        except Forbidden:
            return True
        await kit.kube.delete(RESOURCE_CLAIMS, "probe", kit.namespace)
        return False
    await eventually(in_force, what="the policy refuses claims")


async def allow_claims(kit: Kit, name: str) -> None:
    """Delete what :func:`refuse_claims` made (what is already gone is fine)."""
    for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
        with contextlib.suppress(NotFound):
            await kit.kube.request("DELETE", f"{VAP}/{kind}/{name}")


async def test_creates_are_counted_and_a_refused_create_is_retried(kit: Kit) -> None:
    """create, create-for-podgroup, create-conflict, create-conflict-podgroup (the refusal here: an
    admission policy, where upstream's fake client answers Conflict)."""
    policy = f"no-claims-{kit.namespace}"
    try:
        await refuse_claims(kit, policy)
        await kit.create(RESOURCE_CLAIM_TEMPLATES, template("gpu-template"))
        before = creates()
        await kit.start_controller()
        await kit.create(PODS, pod("p", {"gpu": GPU}))
        await kit.create(POD_GROUPS, pod_group())

        def refused() -> bool:
            counted = delta(before)
            return counted.get(("failure", "false", *POD), 0) >= 1 \
                and counted.get(("failure", "false", *GROUP), 0) >= 1
        await eventually(refused, what="the refused creates counted as failures")
        assert await claim_names(kit) == []
        assert not any(k[0] == "success" for k in delta(before))

        await allow_claims(kit, policy)  # the retries go through now
        made = await eventually(lambda: _gpu(statuses(kit, "p")), timeout=60, what="the pod's claim made")
        group = await eventually(lambda: _gpu(group_statuses(kit)), timeout=60, what="the group's claim made")
        await stays(kit, sorted([made, group]), "one claim each")
        counted = delta(before)
        assert counted[("success", "false", *POD)] == 1 and counted[("success", "false", *GROUP)] == 1
        assert set(counted) == {("success", "false", *POD), ("success", "false", *GROUP),
                                ("failure", "false", *POD), ("failure", "false", *GROUP)}
    finally:
        await allow_claims(kit, policy)


async def test_an_admin_access_claim_is_made_once_its_namespace_allows_admin_access(kit: Kit) -> None:
    """create-adminaccess-feature-enabled, create-conflict-admin-access: the API server refuses (Invalid) a
    claim asking for admin access outside a namespace labelled ``resource.kubernetes.io/admin-access:
    "true"``: counted as a failure with admin_access="true", a Warning on the pod, retried; once the
    namespace is labelled the retry makes it. Before: Invalid was a terminal error, never retried, and the
    pod never got its claim (the namespace's label change queues nothing)."""
    await label(kit, "true")  # a template asking for admin access needs the label as well
    await kit.create(RESOURCE_CLAIM_TEMPLATES, admin_template("admin"))
    await label(kit, None)
    before = creates()
    await kit.start_controller()
    await kit.create(PODS, pod("p", {"gpu": {"resourceClaimTemplateName": "admin"}}))
    event = await kit.wait_event("p", "FailedResourceClaimCreation")
    assert "admin" in event["message"]
    await eventually(lambda: delta(before).get(("failure", "true", *POD), 0) >= 1,
                     what="the refused create counted with admin_access=true")
    assert await claim_names(kit) == []

    await label(kit, "true")
    made = await eventually(lambda: _gpu(statuses(kit, "p")), timeout=60, what="the claim made once allowed")
    claim = await kit.get(RESOURCE_CLAIMS, made) or {}
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] is True
    assert delta(before).get(("success", "true", *POD)) == 1


async def label(kit: Kit, value: str | None) -> None:
    await kit.kube.patch(NAMESPACES, kit.namespace, {"metadata": {"labels": {ADMIN_ACCESS_LABEL: value}}})


async def _gpu(probe: Any) -> str | None:
    return (await probe).get("gpu")
