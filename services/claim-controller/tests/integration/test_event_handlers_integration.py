"""Which keys the claim-controller's event handlers queue for which change, restated from upstream's
``TestEventHandlers`` (kube-controller-manager v1.37.1) against the real kube-apiserver: the controller's
informers run (no worker takes keys), the test makes a change, waits until the informers show it and
drains the queue. ``tests/unit/upstream_map.py`` names the cases; where draflow queues more than upstream
(each such reconcile is a no-op) the README's *Differences from upstream* says why."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from cc_kit import Kit, eventually, plain_claim, pod, template
from test_pod_groups_integration import GPU, member, pod_group

from claim_controller.context import BY_TEMPLATE
from claim_controller.controller import Controller
from claim_controller.settings import Settings
from draflow_runtime.informer import Informer, key_of
from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

Handlers = Callable[..., Awaitable[Controller]]


@pytest_asyncio.fixture(loop_scope="session")
async def handlers(kit: Kit) -> AsyncIterator[Handlers]:
    """Factory: a Controller whose informers run and whose queue nobody takes keys from."""
    started: list[Controller] = []

    async def start(**overrides: Any) -> Controller:
        settings = Settings(http_port=0, nats_url="", device_taint_eviction=False, **overrides)
        controller = Controller(settings, kit.identity.kube, namespace=kit.namespace)
        started.append(controller)
        for informer in _informers(controller):
            await informer.start()
        for informer in _informers(controller):
            await informer.wait_synced()
        return controller

    try:
        yield start
    finally:
        for controller in started:
            for informer in _informers(controller):
                await informer.stop()
            await controller.recorder.aclose()


def _informers(controller: Controller) -> list[Informer]:
    groups = [controller.pod_groups] if controller.pod_groups is not None else []
    return [controller.templates, *groups, controller.claims, controller.pods]


async def drain(controller: Controller) -> set[str]:
    keys: set[str] = set()
    while len(controller.queue):
        key = await controller.queue.get()
        controller.queue.done(key)
        keys.add(str(key))
    return keys


async def shown(informer: Informer, obj: dict[str, Any] | None, key: str = "") -> None:
    """Wait until ``informer`` shows ``obj`` (its resourceVersion) or, ``obj`` None, no ``key``."""
    if obj is None:
        await eventually(lambda: informer.get(key) is None, what=f"{key} gone from the informer")
        return
    rv = int(obj["metadata"]["resourceVersion"])

    def seen() -> bool:
        current = informer.get(key_of(obj))
        return current is not None and int(current["metadata"]["resourceVersion"]) >= rv
    await eventually(seen, what=f"{key_of(obj)} in the informer")


async def test_pods_and_templates(kit: Kit, handlers: Handlers) -> None:
    """new-pods, new-template-for-pod, new-template-for-pod-other-namespace (here: a template no pod uses;
    the controller under test watches one namespace), pod-without-resource-claims, nothing."""
    c = await handlers()
    ns = kit.namespace
    assert await drain(c) == set()  # nothing
    p = await kit.create(PODS, pod("p", {"gpu": {"resourceClaimTemplateName": "my-template"}}))
    await shown(c.pods, p)
    assert await drain(c) == {f"pod:{ns}/p"}
    assert [key_of(x) for x in c.pods.by_index(BY_TEMPLATE, f"{ns}/my-template")] == [f"{ns}/p"]

    plain = pod("plain", {})
    del plain["spec"]["resourceClaims"]
    await shown(c.pods, await kit.create(PODS, plain))
    assert await drain(c) == set()  # pod-without-resource-claims

    await shown(c.templates, await kit.create(RESOURCE_CLAIM_TEMPLATES, template("my-template")))
    assert await drain(c) == {f"pod:{ns}/p"}
    await shown(c.templates, await kit.create(RESOURCE_CLAIM_TEMPLATES, template("other-template")))
    assert await drain(c) == set()


async def test_claim_changes(kit: Kit, handlers: Handlers) -> None:
    """new-claim, update-claim, allocate-claim, allocate-another-claim, deallocate-claim: the claim's key
    (draflow also queues the pod that controls it); delete-deallocated-claim, delete-allocated-claim:
    upstream queues nothing, draflow the claim's key (its reconcile publishes the ``deleted`` event) and
    the owner's. The ``*-admin-access`` and ``*-extended-resources`` variants differ only in the gauge
    (``tests/unit/test_claim_metrics.py``)."""
    c = await handlers()
    ns = kit.namespace
    expected = {f"claim:{ns}/c", f"pod:{ns}/test-pod"}
    body = plain_claim("c")
    body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "test-pod",
                                            "uid": "uidpod1", "controller": True}]
    await shown(c.claims, await kit.create(RESOURCE_CLAIMS, body))
    assert await drain(c) == expected  # new-claim
    labelled = await kit.kube.patch(RESOURCE_CLAIMS, "c", {"metadata": {"labels": {"foo": "bar"}}}, ns)
    await shown(c.claims, labelled)
    assert await drain(c) == expected  # update-claim
    await shown(c.claims, await kit.allocate("c", "node-1"))
    assert await drain(c) == expected  # allocate-claim
    await kit.create(RESOURCE_CLAIMS, plain_claim("c2"))
    await shown(c.claims, await kit.allocate("c2", "node-1", device="gpu-1"))
    assert await drain(c) == {f"claim:{ns}/c2"}  # allocate-another-claim (no owner)
    deallocated = await kit.kube.patch(RESOURCE_CLAIMS, "c", {"status": {"allocation": None}}, ns,
                                       subresource="status")
    await shown(c.claims, deallocated)
    assert await drain(c) == expected  # deallocate-claim
    for name in ("c", "c2"):  # delete-deallocated-claim, delete-allocated-claim
        await kit.kube.patch(RESOURCE_CLAIMS, name, {"metadata": {"finalizers": None}}, ns)
        await kit.kube.delete(RESOURCE_CLAIMS, name, ns)
        await shown(c.claims, None, f"{ns}/{name}")
    assert await drain(c) == {*expected, f"claim:{ns}/c2"}


async def test_finished_pods_queue_their_claims(kit: Kit, handlers: Handlers) -> None:
    """running-pod-with-extended-resource-claim, completed-pod-with-extended-resource-claim,
    faled-pod-with-extended-resource-claim, delete-pod-with-extended-resource-claim,
    completed-pod-with-regular-and-extended-resource-claim: a pod with only an extended resource claim
    is never queued itself; its claim is once the pod is done or gone. Before: the pod was queued too."""
    c = await handlers()
    ns = kit.namespace
    for name, claims in (("ext-running", {}), ("ext-done", {}), ("ext-failed", {}), ("ext-deleted", {}),
                         ("both", {"gpu": GPU})):
        body = pod(name, claims)
        if not claims:
            del body["spec"]["resourceClaims"]
        body["spec"]["containers"][0]["resources"].update(
            limits={"example.com/gpu": "1"}, requests={"example.com/gpu": "1"})
        await kit.create(PODS, body)
        current = await kit.kube.patch(PODS, name, {"status": {"extendedResourceClaimStatus": {
            "resourceClaimName": f"{name}-extended-resources-x", "requestMappings": [
                {"containerName": "main", "resourceName": "example.com/gpu",
                 "requestName": "container-0-request-0"}]}}}, ns, subresource="status")
        await shown(c.pods, current)
    assert await drain(c) == {f"pod:{ns}/both"}  # running-pod-with-extended-resource-claim: not queued

    for name, phase in (("ext-done", "Succeeded"), ("ext-failed", "Failed"), ("both", "Succeeded")):
        await kit.set_phase(name, phase)
        await shown(c.pods, await kit.get(PODS, name))
        expected = {f"claim:{ns}/{name}-extended-resources-x"}
        if name == "both":
            expected.add(f"pod:{ns}/both")
        assert await drain(c) == expected, name
    await kit.kube.delete(PODS, "ext-deleted", ns, grace_period_seconds=0)
    await shown(c.pods, None, f"{ns}/ext-deleted")
    assert await drain(c) == {f"claim:{ns}/ext-deleted-extended-resources-x"}


async def test_podgroups(kit: Kit, handlers: Handlers) -> None:
    """new-podgroup, new-templated-claim-for-podgroup (draflow also queues the PodGroup that controls
    the claim), new-template-for-podgroup, podgroup-claim-status-update (members with claims only),
    new-podgroup-templated-claim-already-exists."""
    c = await handlers()
    ns = kit.namespace
    assert c.pod_groups is not None
    for name, group, claims in (("p-1", "workers", {"gpu": GPU}), ("p-2", "workers", {"gpu": GPU}),
                                ("p-3", "workers-2", {"gpu": GPU}), ("p-4", "workers", {})):
        body = member(name, claims, group=group)
        if not claims:
            del body["spec"]["resourceClaims"]
        await shown(c.pods, await kit.create(PODS, body))
    await drain(c)
    body = pod_group()
    body["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "group-template"  # no pod uses it
    group = await kit.create(POD_GROUPS, body)
    await shown(c.pod_groups, group)
    assert await drain(c) == {f"podgroup:{ns}/workers", f"pod:{ns}/p-1", f"pod:{ns}/p-2"}  # new-podgroup
    recorded = await kit.kube.patch(POD_GROUPS, "workers", {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "workers-gpu-x"}]}}, ns, subresource="status")
    await shown(c.pod_groups, recorded)
    # podgroup-claim-status-update
    assert await drain(c) == {f"podgroup:{ns}/workers", f"pod:{ns}/p-1", f"pod:{ns}/p-2"}

    claim = plain_claim("workers-gpu-x")
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                             "name": "workers", "uid": group["metadata"]["uid"],
                                             "controller": True}]
    await shown(c.claims, await kit.create(RESOURCE_CLAIMS, claim))
    # new-templated-claim-for-podgroup (upstream: the claim only; its PodGroup needs nothing)
    assert await drain(c) == {f"claim:{ns}/workers-gpu-x", f"podgroup:{ns}/workers", f"pod:{ns}/p-1",
                              f"pod:{ns}/p-2"}
    await shown(c.templates, await kit.create(RESOURCE_CLAIM_TEMPLATES, template("group-template")))
    assert await drain(c) == {f"podgroup:{ns}/workers"}  # new-template-for-podgroup

    # new-podgroup-templated-claim-already-exists: a PodGroup whose claims all exist is not queued (before:
    # it was, for every change of it or of its claims); its members with claims are
    labelled = await kit.kube.patch(POD_GROUPS, "workers", {"metadata": {"labels": {"a": "b"}}}, ns)
    await shown(c.pod_groups, labelled)
    assert await drain(c) == {f"pod:{ns}/p-1", f"pod:{ns}/p-2"}


async def test_podgroups_with_workload_claims_off(kit: Kit, handlers: Handlers) -> None:
    """new-podgroup-feature-disabled, podgroup-claim-status-update-feature-disabled: nothing is queued
    for a PodGroup (a new group wakes only its members that have claims: they wait for it)."""
    c = await handlers(feature_gates="DRAWorkloadResourceClaims=false")
    ns = kit.namespace
    assert c.pod_groups is not None
    group = await kit.create(POD_GROUPS, pod_group())
    await shown(c.pod_groups, group)
    assert await drain(c) == set()
    recorded = await kit.kube.patch(POD_GROUPS, "workers", {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "workers-gpu-x"}]}}, ns, subresource="status")
    await shown(c.pod_groups, recorded)
    await shown(c.pods, await kit.create(PODS, member("late", {"gpu": GPU})))
    assert await drain(c) == {f"pod:{ns}/late"}
    labelled = await kit.kube.patch(POD_GROUPS, "workers", {"metadata": {"labels": {"a": "b"}}}, ns)
    await shown(c.pod_groups, labelled)
    assert await drain(c) == set()


async def test_a_placed_pods_own_later_events_queue_no_pod(kit: Kit, handlers: Handlers) -> None:
    """As upstream's ``podNeedsWork``: once a pod's claim is recorded, its own and its claim's later changes
    (the status write's echo, the allocation, the binding) queue the claim but not the pod; a bound pod
    whose claim is not reserved for it, or whose claim is gone, is queued. Before: every one queued the pod
    for a reconcile that found nothing to do (about one per placed pod)."""
    c = await handlers()
    ns = kit.namespace
    p = await kit.create(PODS, pod("placed", {"gpu": {"resourceClaimTemplateName": "t"}}))
    await shown(c.pods, p)
    assert await drain(c) == {f"pod:{ns}/placed"}  # its claim to make
    body = plain_claim("placed-gpu")
    body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "placed",
                                            "uid": p["metadata"]["uid"], "controller": True}]
    await shown(c.claims, await kit.create(RESOURCE_CLAIMS, body))
    assert await drain(c) == {f"claim:{ns}/placed-gpu", f"pod:{ns}/placed"}  # not recorded yet
    recorded = await kit.kube.patch(PODS, "placed", {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "placed-gpu"}]}}, ns, subresource="status")
    await shown(c.pods, recorded)
    assert await drain(c) == set()  # the status write's echo
    await shown(c.claims, await kit.allocate("placed-gpu", "node-1", p))
    assert await drain(c) == {f"claim:{ns}/placed-gpu"}  # allocated and reserved (the allocator)
    await kit.kube.request("POST", f"/api/v1/namespaces/{ns}/pods/placed/binding", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "placed"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}})
    await eventually(lambda: (c.pods.get(f"{ns}/placed") or {}).get("spec", {}).get("nodeName"),
                     what="the binding in the informer")
    assert await drain(c) == set()  # bound, its claim reserved for it
    unreserved = await kit.kube.patch(RESOURCE_CLAIMS, "placed-gpu", {"status": {"reservedFor": None}}, ns,
                                      subresource="status")
    await shown(c.claims, unreserved)
    assert await drain(c) == {f"claim:{ns}/placed-gpu", f"pod:{ns}/placed"}  # to reserve
    await kit.kube.patch(RESOURCE_CLAIMS, "placed-gpu", {"metadata": {"finalizers": None}}, ns)
    await kit.kube.delete(RESOURCE_CLAIMS, "placed-gpu", ns)
    await shown(c.claims, None, f"{ns}/placed-gpu")
    assert f"pod:{ns}/placed" in await drain(c)  # its claim to make again
