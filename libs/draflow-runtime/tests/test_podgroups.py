"""PodGroup facts (upstream k8s.io/dynamic-resource-allocation v0.37.1 ``resourceclaim``: ``BindTo``,
``NameFromPodGroup``, ``IsForPodGroup``) in our words."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_runtime.dra import pod_claims
from draflow_runtime.podgroups import (
    bind_to,
    is_for_pod_group,
    is_pod_group_reference,
    owning_pod_group,
    pod_group_claims,
)

GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "uid-g"}
POD_REF = {"resource": "pods", "name": "p", "uid": "uid-p"}


def group(*entries: dict[str, str], name: str = "g", statuses: list[dict[str, str]] | None = None
          ) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"resourceClaims": list(entries)}, "status": {"resourceClaimStatuses": statuses or []}}


def pod(*entries: dict[str, str], group_name: str | None = "g") -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceClaims": list(entries)}
    if group_name:
        spec["schedulingGroup"] = {"podGroupName": group_name}
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"}, "spec": spec}


BY_NAME = {"name": "gpu", "resourceClaimName": "shared"}
BY_TEMPLATE = {"name": "gpu", "resourceClaimTemplateName": "t"}


@pytest.mark.parametrize(("pod_entry", "group_entries", "group_name", "expected"), [
    pytest.param(BY_NAME, [BY_NAME], "g", GROUP_REF, id="same-claim-name"),
    pytest.param(BY_TEMPLATE, [BY_TEMPLATE], "g", GROUP_REF, id="same-template"),
    pytest.param(BY_NAME, [{"name": "gpu", "resourceClaimName": "other"}], "g", POD_REF, id="other-claim"),
    pytest.param(BY_TEMPLATE, [{"name": "gpu", "resourceClaimTemplateName": "u"}], "g", POD_REF,
                 id="other-template"),
    pytest.param(BY_NAME, [BY_TEMPLATE], "g", POD_REF, id="name-vs-template"),
    pytest.param(BY_NAME, [{**BY_NAME, "name": "other"}], "g", POD_REF, id="other-entry-name"),
    pytest.param(BY_NAME, [BY_NAME], None, POD_REF, id="pod-not-in-a-group"),
    pytest.param(BY_NAME, [BY_NAME], "h", POD_REF, id="pod-in-another-group"),
])
def test_bind_to(pod_entry: dict[str, str], group_entries: list[dict[str, str]], group_name: str | None,
                 expected: dict[str, str]) -> None:
    p = pod(pod_entry, group_name=group_name)
    statuses = [{"name": "gpu", "resourceClaimName": "x"}]
    (pc,) = pod_claims({**p, "status": {"resourceClaimStatuses": statuses}})
    assert bind_to(p, group(*group_entries), pc) == expected


def test_without_a_podgroup_every_claim_binds_to_the_pod() -> None:
    p = pod(BY_NAME)
    assert bind_to(p, None, pod_claims(p)[0]) == POD_REF


def test_a_podgroups_claims_resolve_like_a_pods() -> None:
    g = group(BY_NAME, {"name": "a", "resourceClaimTemplateName": "t"},
              {"name": "b", "resourceClaimTemplateName": "t"},
              {"name": "c", "resourceClaimTemplateName": "t"},
              statuses=[{"name": "a", "resourceClaimName": "g-a-1"}, {"name": "b"}])
    got = [(pc.name, pc.claim_name, pc.generated, pc.needed) for pc in pod_group_claims(g)]
    assert got == [("gpu", "shared", False, True), ("a", "g-a-1", True, True), ("b", None, True, False),
                   ("c", None, True, True)]


def owned(kind: str = "PodGroup", api_version: str = "scheduling.k8s.io/v1beta1", uid: str = "uid-g",
          namespace: str = "ns", controller: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": namespace, "ownerReferences": [
        {"apiVersion": api_version, "kind": kind, "name": "g", "uid": uid, "controller": controller}]}}


@pytest.mark.parametrize(("claim", "expected"), [
    pytest.param(owned(), True, id="controlled"),
    pytest.param(owned(uid="uid-old"), False, id="other-incarnation"),
    pytest.param(owned(namespace="other"), False, id="other-namespace"),
    pytest.param(owned(controller=False), False, id="owner-not-controller"),
    pytest.param(owned(kind="Pod", api_version="v1"), False, id="a-pod"),
])
def test_is_for_pod_group(claim: dict[str, Any], expected: bool) -> None:
    assert is_for_pod_group(claim, group()) is expected


def test_owning_pod_group_accepts_any_scheduling_version_only() -> None:
    assert owning_pod_group(owned(api_version="scheduling.k8s.io/v1alpha3")) == ("g", "uid-g")
    assert owning_pod_group(owned(api_version="example.com/v1")) is None
    assert owning_pod_group(owned(kind="Pod", api_version="v1")) is None


def test_a_podgroup_reference_is_told_by_group_and_resource() -> None:
    assert is_pod_group_reference(GROUP_REF)
    assert not is_pod_group_reference(POD_REF)
    assert not is_pod_group_reference({**GROUP_REF, "apiGroup": "example.com"})
