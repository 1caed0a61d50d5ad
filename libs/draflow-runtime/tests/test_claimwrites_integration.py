"""draflow_runtime.claimwrites against a real kube-apiserver: the one way the claim-controller and the
allocator deallocate a claim (status merge patch, then the finalizer), each write a compare-and-swap."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.claimwrites import clear_allocation, deallocate, release_finalizer
from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER
from draflow_runtime.errors import Conflict
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient

pytestmark = pytest.mark.integration

DRIVER = "gpu.draflow.example"
MANAGER = "draflow-test"
OTHER_FINALIZER = "draflow.dev/test-keep"
PARAMETERS = {"z": 1.0, "a": "caf\xe9 <b>", "tiny": 1e-7}  # raw JSON the API server compares byte for byte

MakeNamespace = Callable[..., Awaitable[str]]


def consumer() -> dict[str, str]:
    return {"resource": "pods", "name": f"p-{uuid.uuid4().hex[:6]}", "uid": str(uuid.uuid4())}


async def allocated_claim(kube: KubeClient, ns: str, *reserved: dict[str, str]) -> dict[str, Any]:
    """A claim as an allocator leaves it: finalizers, allocation, reservedFor, the driver's device status."""
    claim = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "finalizers": [OTHER_FINALIZER, DELETE_PROTECTION_FINALIZER]},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": PARAMETERS}}],
        }},
    }, ns, field_manager=MANAGER)
    claim["status"] = {
        "allocation": {"devices": {"results": [
                           {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
        "reservedFor": list(reserved),
        "devices": [{"driver": DRIVER, "pool": "n1", "device": "g0"}],
    }
    return await kube.replace(RESOURCE_CLAIMS, claim, subresource="status", field_manager=MANAGER)


async def test_deallocate_clears_the_status_and_only_its_finalizer(
    kube: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("claimwrites")
    claim = await allocated_claim(kube, ns, consumer())

    await deallocate(kube, claim, field_manager=MANAGER)

    final = await kube.get(RESOURCE_CLAIMS, "c", ns)
    status = final.get("status") or {}
    assert (status.get("allocation"), status.get("reservedFor"), status.get("devices")) == (None, None, None)
    assert final["metadata"]["finalizers"] == [OTHER_FINALIZER]
    assert final["spec"] == claim["spec"]  # the opaque parameters are untouched
    await deallocate(kube, final, field_manager=MANAGER)  # idempotent
    assert (await kube.get(RESOURCE_CLAIMS, "c", ns))["metadata"]["resourceVersion"] == \
        final["metadata"]["resourceVersion"]


async def test_a_reservation_added_meanwhile_makes_the_deallocation_fail_with_conflict(
    kube: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("claimwrites")
    stale = await allocated_claim(kube, ns, consumer())
    newcomer = consumer()
    await kube.patch(RESOURCE_CLAIMS, "c", {"metadata": {"uid": stale["metadata"]["uid"]},
                                            "status": {"reservedFor": [newcomer]}}, ns,
                     patch_type="strategic", subresource="status", field_manager=MANAGER)

    with pytest.raises(Conflict):
        await clear_allocation(kube, stale, field_manager=MANAGER)
    with pytest.raises(Conflict):
        await deallocate(kube, stale, field_manager=MANAGER)

    final = await kube.get(RESOURCE_CLAIMS, "c", ns)
    assert final["status"]["allocation"] == stale["status"]["allocation"]
    assert newcomer["uid"] in {r["uid"] for r in final["status"]["reservedFor"]}
    assert DELETE_PROTECTION_FINALIZER in final["metadata"]["finalizers"]


async def test_the_finalizer_stays_on_a_claim_that_is_allocated(
    kube: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("claimwrites")
    claim = await allocated_claim(kube, ns)

    with pytest.raises(Conflict):
        await release_finalizer(kube, claim, field_manager=MANAGER)

    assert DELETE_PROTECTION_FINALIZER in (await kube.get(RESOURCE_CLAIMS, "c", ns))["metadata"]["finalizers"]


async def test_release_finalizer_writes_nothing_without_the_finalizer(
    kube: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("claimwrites")
    claim = await allocated_claim(kube, ns)
    cleared = await clear_allocation(kube, claim, field_manager=MANAGER)
    released = await release_finalizer(kube, cleared, field_manager=MANAGER)
    assert released is not None and released["metadata"]["finalizers"] == [OTHER_FINALIZER]

    assert await release_finalizer(kube, released, field_manager=MANAGER) is None
