"""PodGroups (``scheduling.k8s.io/v1beta1``, DRAWorkloadResourceClaims) written wrong or changed under
the services: a pod naming a PodGroup that does not exist, a group whose claim template is missing, two
groups listing the same template, a group deleted while its members wait. Each is reported naming the
object (a missing PodGroup is not: as upstream, its members wait outside the queue), nothing is
half-written, and the pod runs once the input is right."""

from __future__ import annotations

from typing import Any

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.dra import claim_names
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIMS
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration


async def _group(stack: Stack, name: str, template: str) -> dict[str, Any]:
    group: dict[str, Any] = await stack.kube.create(POD_GROUPS, {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"basic": {}},
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}},
        namespace=stack.ns)
    return group


async def _member(stack: Stack, name: str, group: str, template: str = "one-gpu") -> None:
    await stack.pod(name, {"gpu": {"resourceClaimTemplateName": template}}, group=group)


async def _untouched(stack: Stack, pod: str) -> bool:
    obj = await stack.kube.get(PODS, pod, namespace=stack.ns)
    return not claim_names(obj) and not obj["spec"].get("nodeName")


async def _delete_group(stack: Stack, name: str) -> None:
    """Delete the PodGroup and lift the podgroup-protection finalizer (kube-controller-manager's part,
    not run here) so it is really gone."""
    try:
        await stack.kube.delete(POD_GROUPS, name, namespace=stack.ns)
        await stack.kube.patch(POD_GROUPS, name, {"metadata": {"finalizers": None}}, stack.ns)
    except NotFound:
        pass


async def test_a_pod_of_a_missing_podgroup_waits_untouched_and_runs_once_the_group_exists(
    stack: Stack,
) -> None:
    # As upstream (GangScheduling and resourceclaim controller): a member of a PodGroup that does not
    # exist waits outside the queue, nothing is made or written for it (no claim, no binding).
    group, pod = stack.name("later-group"), stack.name("lonely-member")
    await _member(stack, pod, group)
    try:
        await consistently(lambda: _untouched(stack, pod), 2.0, f"{pod} waits for PodGroup {group}")
        # ... but the wait is named: the allocator's log line names the pod and the missing PodGroup
        await stack.wait_log("structured-allocator", lambda r: r.get("event", "").startswith(
            "pod group does not exist") and r.get("podgroup") == f"{stack.ns}/{group}"
            and f"{stack.ns}/{pod}" in (r.get("pods") or []), f"the missing PodGroup {group}")
        await stack.still_serving()

        await _group(stack, group, "one-gpu")
        running = await stack.flow.wait_running(pod)
        claim = await stack.flow.claim_of(running)
        assert claim["metadata"]["name"].startswith(f"{group}-gpu-"), claim["metadata"]["name"]
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        await _delete_group(stack, group)


async def test_a_podgroup_with_a_missing_template_is_told_and_gets_its_claim_once_it_exists(
    stack: Stack,
) -> None:
    group, pod, template = stack.name("tless-group"), stack.name("tless-member"), stack.name("t-group-later")
    await _group(stack, group, template)
    await _member(stack, pod, group, template)
    try:
        event = await stack.wait_event(group, "FailedResourceClaimCreation", template, "not found")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "PodGroup"
        assert not claim_names(await stack.kube.get(PODS, pod, namespace=stack.ns))
        await stack.still_serving()

        await stack.template(template)
        await stack.flow.wait_running(pod)
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        await _delete_group(stack, group)


async def test_a_podgroup_template_of_a_missing_class_names_the_class_on_the_member(stack: Stack) -> None:
    group, pod, template = stack.name("noclass-group"), stack.name("noclass-member"), stack.name("t-noclass")
    missing = stack.name("nosuch-class") + f".{DRIVER}"
    await stack.template(template, missing)
    await _group(stack, group, template)
    await _member(stack, pod, group, template)
    try:
        message = await stack.wait_condition(pod, missing, "does not exist")
        (name,) = claim_names(await stack.kube.get(PODS, pod, namespace=stack.ns))
        claim = await stack.kube.get(RESOURCE_CLAIMS, name, namespace=stack.ns)
        assert not (claim.get("status") or {}).get("allocation"), message
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        await _delete_group(stack, group)


async def test_two_podgroups_with_the_same_template_get_a_claim_each(stack: Stack) -> None:
    groups = [stack.name("twin-group"), stack.name("twin-group")]
    pods = {g: [stack.name(f"{g}-m"), stack.name(f"{g}-m")] for g in groups}
    for g in groups:
        await _group(stack, g, "one-gpu")
        for p in pods[g]:
            await _member(stack, p, g)
    try:
        shared: dict[str, str] = {}
        for g in groups:
            names = {(await stack.flow.claim_of(await stack.flow.wait_running(p)))["metadata"]["name"]
                     for p in pods[g]}
            (shared[g],) = names  # one claim for the whole group
            assert shared[g].startswith(f"{g}-gpu-"), shared
        assert shared[groups[0]] != shared[groups[1]]
        await stack.still_serving()
    finally:
        for g in groups:
            for p in pods[g]:
                await stack.kube.delete(PODS, p, namespace=stack.ns)
            await _delete_group(stack, g)


async def test_a_podgroup_deleted_while_its_member_waits_leaves_no_claim_behind(stack: Stack) -> None:
    group, pod, template = stack.name("doomed-group"), stack.name("doomed-member"), stack.name("t-doomed")
    missing = stack.name("nosuch-class") + f".{DRIVER}"
    await stack.template(template, missing)  # the member waits: its class does not exist
    await _group(stack, group, template)
    await _member(stack, pod, group, template)
    try:
        await stack.wait_condition(pod, missing)
        (name,) = claim_names(await stack.kube.get(PODS, pod, namespace=stack.ns))
        await _delete_group(stack, group)
        await stack.flow.wait_gone(POD_GROUPS, group, f"{group} gone")
        await stack.flow.wait_claim_gone(name, "the deleted PodGroup's claim deleted")
        obj = await stack.kube.get(PODS, pod, namespace=stack.ns)
        assert not obj["spec"].get("nodeName"), obj["spec"].get("nodeName")
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)


async def test_a_podgroup_name_whose_claim_name_cannot_be_made_is_told_on_the_group(stack: Stack) -> None:
    # The generated name's base is cut to 57 characters as upstream does; here the cut ends at a dot, so
    # "<group part>.-gpu-xxxxx" is no DNS subdomain and the API server refuses the claim (upstream's
    # controller would fail the same way): the PodGroup gets a Warning naming the claim and the reason.
    tail = stack.name("g").replace("-", "")
    group = "a" * 51 + "." + "b" * (9 - len(tail)) + tail  # 61 characters: the cut keeps 52, up to the dot
    assert len(group) == 61
    pod = stack.name("dotted-member")
    await _group(stack, group, "one-gpu")
    await _member(stack, pod, group)
    try:
        event = await stack.wait_event(group, "FailedResourceClaimCreation", "PodGroup claim gpu", "invalid")
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "PodGroup", event
        assert not claim_names(await stack.kube.get(PODS, pod, namespace=stack.ns))
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, pod, namespace=stack.ns)
        await _delete_group(stack, group)
