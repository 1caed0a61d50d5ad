"""The delete-protection finalizer set at create (``--create-with-finalizer``), against the real
kube-apiserver: a generated claim (a pod's or a PodGroup's) carries it from its first version, so an
allocator does not write it; one whose owner goes before any allocation is still deleted, the controller
lifting the finalizer (as kube-controller-manager does for a claim being deleted); with the setting off
the created claim is kube-controller-manager's object (no finalizer)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cc_kit import Kit, eventually, pod, template

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER
from draflow_runtime.errors import TransportError
from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

GPU = {"resourceClaimTemplateName": "t"}


def pod_group(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "gpu", **GPU}]}}


@contextlib.asynccontextmanager
async def claim_events(kit: Kit) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
    """Every watch event of the namespace's claims from now on (the first ADDED of a claim is the version
    its create wrote), collected while the block runs."""
    listed = await kit.kube.list(RESOURCE_CLAIMS, kit.namespace)
    events: list[tuple[str, dict[str, Any]]] = []

    async def collect() -> None:
        rv = listed["metadata"]["resourceVersion"]
        while True:
            with contextlib.suppress(TransportError):
                async for etype, obj in kit.kube.watch(RESOURCE_CLAIMS, kit.namespace, resource_version=rv,
                                                       allow_bookmarks=False, timeout_seconds=60):
                    events.append((etype, obj))
                    rv = obj["metadata"]["resourceVersion"]

    task = asyncio.create_task(collect(), name="claim-events")
    try:
        yield events
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def first_versions(events: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Name -> the claim as its create wrote it (its ADDED event)."""
    return {obj["metadata"]["name"]: obj for etype, obj in events if etype == "ADDED"}


async def claims_named(kit: Kit, count: int) -> list[str] | None:
    names = [c["metadata"]["name"] for c in await kit.claims()]
    return names if len(names) == count else None


async def no_claims(kit: Kit) -> bool:
    return not await kit.claims()


async def test_a_generated_claim_carries_the_finalizer_from_its_first_version(kit: Kit) -> None:
    """Before: claims were created without it and the allocator added it with a write of its own."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    async with claim_events(kit) as events:
        await kit.create(PODS, pod("solo", {"gpu": GPU}))
        await kit.create(POD_GROUPS, pod_group("team"))
        names = await eventually(lambda: claims_named(kit, 2), what="the pod's and the PodGroup's claims")
        created = await eventually(lambda: (lambda f: f if set(names) <= set(f) else None)(
            first_versions(events)), what="both claims' first versions watched")
    owners = sorted(c["metadata"]["ownerReferences"][0]["kind"] for c in created.values())
    assert owners == ["Pod", "PodGroup"]
    for name, claim in created.items():
        assert claim["metadata"].get("finalizers") == [DELETE_PROTECTION_FINALIZER], name
        assert claim.get("status", {}).get("allocation") is None


async def test_claims_whose_owner_goes_before_any_allocation_are_deleted_the_finalizer_lifted(
    kit: Kit,
) -> None:
    """Nobody allocated them, so nobody else would lift the finalizer: the controller deletes the claims of
    the deleted pod and PodGroup and releases them (kube-controller-manager removes it from a claim
    being deleted "whether it was allocated or not")."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    async with claim_events(kit) as events:
        await kit.create(PODS, pod("gone-early", {"gpu": GPU}))
        await kit.create(POD_GROUPS, pod_group("gone-group"))
        names = await eventually(lambda: claims_named(kit, 2), what="the pod's and the PodGroup's claims")
        for name in names:
            claim = await kit.get(RESOURCE_CLAIMS, name)
            assert claim is not None and claim["metadata"].get("finalizers") == [DELETE_PROTECTION_FINALIZER]
        await kit.kube.delete(PODS, "gone-early", kit.namespace, grace_period_seconds=0)
        await kit.kube.delete(POD_GROUPS, "gone-group", kit.namespace)
        await eventually(lambda: no_claims(kit), what="both claims gone")
        deleted = await eventually(lambda: (lambda d: d if set(names) <= set(d) else None)(
            {o["metadata"]["name"]: o for t, o in events if t == "DELETED"}), what="both deletions watched")
    for name in names:  # held by the finalizer once deleted; gone only because the controller lifted it
        last = deleted[name]["metadata"]  # the version before the finalizer release removed it
        assert last.get("deletionTimestamp") and last.get("finalizers") == [DELETE_PROTECTION_FINALIZER], \
            (name, last)


async def test_with_the_setting_off_the_claim_is_created_without_the_finalizer(kit: Kit) -> None:
    """``--no-create-with-finalizer``: kube-controller-manager's object; the allocator adds the finalizer."""
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller(create_with_finalizer=False)
    async with claim_events(kit) as events:
        await kit.create(PODS, pod("plain", {"gpu": GPU}))
        (name,) = await eventually(lambda: claims_named(kit, 1), what="the pod's claim")
        created = await eventually(lambda: first_versions(events).get(name), what="its first version")
    assert "finalizers" not in created["metadata"]
    await kit.kube.delete(PODS, "plain", kit.namespace, grace_period_seconds=0)
    await eventually(lambda: no_claims(kit), what="the claim deleted with its pod")
