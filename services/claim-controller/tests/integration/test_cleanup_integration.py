"""reservedFor clean-up, deallocation and deletion against the real kube-apiserver.

There is no scheduler or kubelet here: the test writes what the allocator would (finalizer, allocation,
reservedFor) and sets pod phases through the status subresource, as a kubelet would.
"""

from __future__ import annotations

from typing import Any

import pytest
from cc_kit import Kit, consumer, eventually, plain_claim, pod, template

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

NODE = "node-1"


async def generated_claim(kit: Kit, pod_name: str, pod_claim: str) -> str:
    async def recorded() -> str | None:
        current = await kit.get(PODS, pod_name)
        for s in (current or {}).get("status", {}).get("resourceClaimStatuses") or ():
            if s["name"] == pod_claim:
                return str(s["resourceClaimName"])
        return None
    return await eventually(recorded, what=f"claim of {pod_name}/{pod_claim} recorded")


def released(claim: dict[str, Any] | None) -> bool:
    """Deallocated, unreserved and without the delete-protection finalizer."""
    if claim is None:
        return False
    status = claim.get("status") or {}
    return (status.get("allocation") is None and not status.get("reservedFor")
            and DELETE_PROTECTION_FINALIZER not in (claim["metadata"].get("finalizers") or ()))


async def gone(kit: Kit, name: str) -> bool:
    return await kit.get(RESOURCE_CLAIMS, name) is None


async def test_finished_pod_claims_are_unreserved_deallocated_and_deleted(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    p = await kit.create(PODS, pod("job", {"a": {"resourceClaimTemplateName": "t"},
                                            "b": {"resourceClaimTemplateName": "t"}}))
    names = [await generated_claim(kit, "job", "a"), await generated_claim(kit, "job", "b")]
    for i, name in enumerate(names):
        await kit.allocate(name, NODE, p, device=f"gpu-{i}")

    async def kept() -> bool:
        claims = [await kit.get(RESOURCE_CLAIMS, name) for name in names]
        return all(c is not None and c["status"].get("reservedFor") == [consumer(p)] for c in claims)

    await consistently(kept, 0.5, "a running consumer keeps its claims")
    for name in names:  # a running consumer keeps its claims
        claim = await kit.get(RESOURCE_CLAIMS, name)
        assert claim is not None and claim["status"]["reservedFor"] == [consumer(p)]

    await kit.set_phase("job", "Succeeded")

    for name in names:
        await eventually(lambda name=name: gone(kit, name), what=f"claim {name} deleted")
    assert await kit.claims() == []


async def test_shared_claim_stays_allocated_while_a_consumer_lives_and_is_released_after_the_last(
    kit: Kit,
) -> None:
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    await kit.start_controller()
    first = await kit.create(PODS, pod("first", {"s": {"resourceClaimName": "shared"}}, node=NODE))
    second = await kit.create(PODS, pod("second", {"s": {"resourceClaimName": "shared"}}, node=NODE))
    await kit.allocate("shared", NODE, first, second)

    await kit.set_phase("first", "Failed")

    async def only_second() -> dict[str, Any] | None:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return claim if claim and claim["status"].get("reservedFor") == [consumer(second)] else None

    claim = await eventually(only_second, what="first pod unreserved")
    assert claim["status"]["allocation"] is not None
    assert DELETE_PROTECTION_FINALIZER in claim["metadata"]["finalizers"]

    await kit.kube.delete(PODS, "second", kit.namespace, grace_period_seconds=0)

    async def shared_released() -> dict[str, Any] | None:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return claim if released(claim) else None

    claim = await eventually(shared_released, what="shared claim released")
    assert claim["metadata"]["name"] == "shared"  # a user's claim is never deleted

    async def there() -> bool:
        return await kit.get(RESOURCE_CLAIMS, "shared") is not None

    await consistently(there, 0.5, "the user's claim is not deleted")
    assert await kit.get(RESOURCE_CLAIMS, "shared") is not None


async def test_replaced_pod_loses_its_reservation(kit: Kit) -> None:
    """Same name, new UID: the old incarnation's reservation goes, the claim is deallocated."""
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    old = await kit.create(PODS, pod("web", {"s": {"resourceClaimName": "shared"}}, node=NODE))
    await kit.allocate("shared", NODE, old)
    await kit.kube.delete(PODS, "web", kit.namespace, grace_period_seconds=0)
    await kit.create(PODS, pod("web", {"s": {"resourceClaimName": "shared"}}))  # not bound: no reserve
    await kit.start_controller()  # starts after the delete: the cache holds only the new incarnation

    async def shared_released() -> dict[str, Any] | None:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return claim if released(claim) else None

    await eventually(shared_released, what="stale reservation removed and claim released")


async def test_unknown_reservation_kinds_are_left_alone(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    p = await kit.create(PODS, pod("p", {"s": {"resourceClaimName": "shared"}}, node=NODE))
    await kit.allocate("shared", NODE, p)
    other = {"apiGroup": "example.com", "resource": "widgets", "name": "w", "uid": "0000-widget"}
    await kit.kube.patch(RESOURCE_CLAIMS, "shared", {"status": {"reservedFor": [other]}}, kit.namespace,
                         patch_type="strategic", subresource="status")
    await kit.start_controller()
    await kit.set_phase("p", "Succeeded")

    async def pod_unreserved() -> dict[str, Any] | None:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return claim if claim and claim["status"].get("reservedFor") == [other] else None

    claim = await eventually(pod_unreserved, what="only the widget left")

    async def widget_keeps_it() -> bool:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        status = (claim or {}).get("status") or {}
        return status.get("reservedFor") == [other] and status.get("allocation") is not None

    await consistently(widget_keeps_it, 0.5, "the widget's reservation and the allocation stay")
    claim = await kit.get(RESOURCE_CLAIMS, "shared")
    assert claim is not None and claim["status"]["reservedFor"] == [other]
    assert claim["status"]["allocation"] is not None


async def test_deleted_claim_with_nothing_reserved_is_released(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIMS, plain_claim("doomed"))
    await kit.allocate("doomed", NODE)  # allocated (with finalizer) but never reserved
    await kit.start_controller()

    async def allocated() -> bool:
        claim = await kit.get(RESOURCE_CLAIMS, "doomed")
        return bool(claim and claim["status"].get("allocation"))

    await consistently(allocated, 0.5, "the unreserved claim is left allocated")
    claim = await kit.get(RESOURCE_CLAIMS, "doomed")
    assert claim is not None and claim["status"]["allocation"] is not None  # not reserved: left alone

    await kit.kube.delete(RESOURCE_CLAIMS, "doomed", kit.namespace)

    await eventually(lambda: gone(kit, "doomed"), what="deleted claim released and gone")


async def test_deleted_claim_in_use_waits_for_its_consumer(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIMS, plain_claim("busy"))
    p = await kit.create(PODS, pod("user", {"s": {"resourceClaimName": "busy"}}, node=NODE))
    await kit.allocate("busy", NODE, p)
    await kit.start_controller()
    await kit.kube.delete(RESOURCE_CLAIMS, "busy", kit.namespace)

    async def still_reserved() -> bool:
        claim = await kit.get(RESOURCE_CLAIMS, "busy")
        return bool(claim and claim["status"].get("reservedFor") == [consumer(p)])

    await consistently(still_reserved, 1.0, "the deleted claim stays reserved for its live consumer")
    claim = await kit.get(RESOURCE_CLAIMS, "busy")
    assert claim is not None and claim["status"]["reservedFor"] == [consumer(p)]

    await kit.set_phase("user", "Succeeded")
    await eventually(lambda: gone(kit, "busy"), what="claim gone after its consumer finished")


async def test_pod_deleted_while_reserved_leaves_nothing_behind(kit: Kit) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.start_controller()
    p = await kit.create(PODS, pod("victim", {"gpu": {"resourceClaimTemplateName": "t"}}))
    name = await generated_claim(kit, "victim", "gpu")
    await kit.allocate(name, NODE, p)

    await kit.kube.delete(PODS, "victim", kit.namespace, grace_period_seconds=0)

    await eventually(lambda: gone(kit, name), what="generated claim of the deleted pod gone")


async def test_reservation_of_a_pod_the_cache_does_not_know_is_checked_live(kit: Kit) -> None:
    """A lagging pod cache never removes a live consumer: the pod is looked up with a GET first; once
    the GET says it is gone, the reservation goes."""
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    controller = await kit.start_controller()
    await controller.pods.stop()  # the pod informer lags from now on
    p = await kit.create(PODS, pod("unseen", {"s": {"resourceClaimName": "shared"}}))
    await kit.allocate("shared", NODE, p)  # the claim event makes the controller look at it

    async def reserved() -> bool:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return bool(claim and claim["status"].get("reservedFor") == [consumer(p)])

    await consistently(reserved, 1.0, "the live pod the cache does not know keeps its reservation")
    claim = await kit.get(RESOURCE_CLAIMS, "shared")
    assert claim is not None and claim["status"]["reservedFor"] == [consumer(p)]

    await kit.kube.delete(PODS, "unseen", kit.namespace, grace_period_seconds=0)
    await kit.kube.patch(RESOURCE_CLAIMS, "shared", {"metadata": {"annotations": {"nudge": "1"}}},
                         kit.namespace)  # any claim event

    async def shared_released() -> dict[str, Any] | None:
        claim = await kit.get(RESOURCE_CLAIMS, "shared")
        return claim if released(claim) else None

    await eventually(shared_released, what="reservation of the deleted pod removed")


@pytest.mark.parametrize("written", ["created", "allocated"])
@pytest.mark.parametrize("end", ["deleted", "finished"])
async def test_an_extended_claim_its_pod_never_named_goes_with_the_pod(kit: Kit, written: str,
                                                                        end: str) -> None:
    """The allocator created a pod's extended resource claim (and maybe allocated and reserved it), then
    died before recording it in ``pod.status.extendedResourceClaimStatus``; the pod, which has no
    ``spec.resourceClaims``, is deleted or finishes before any allocator looks at it again. Only the
    claim's owner reference ties it to the pod (upstream's garbage collector deletes it by that): the
    claim-controller deletes it once the pod is gone or done. Chaos run of 2026-12-04, fault "kill
    structured-allocator mid-write": two such claims were left behind."""
    controller = await kit.start_controller()
    body = pod("ext", {})
    del body["spec"]["resourceClaims"]
    body["spec"]["containers"][0]["resources"].update(limits={"example.com/gpu": "1"},
                                                      requests={"example.com/gpu": "1"})
    p = await kit.create(PODS, body)
    claim = plain_claim("ext-extended-resources-x")
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "ext",
                                             "uid": p["metadata"]["uid"], "controller": True}]
    name = (await kit.create(RESOURCE_CLAIMS, claim))["metadata"]["name"]
    if written == "allocated":
        await kit.allocate(name, NODE, p)

    async def seen_and_kept() -> bool:  # the controller has looked at the claim and keeps it
        cached = controller.ctx.claim(kit.namespace, name)
        return cached is not None and await kit.get(RESOURCE_CLAIMS, name) is not None \
            and (written == "created" or bool((cached.get("status") or {}).get("reservedFor")))

    await eventually(seen_and_kept, what="claim in the controller's cache")
    await consistently(seen_and_kept, 0.5, "a live owner keeps its claim")

    if end == "deleted":
        await kit.kube.delete(PODS, "ext", kit.namespace, grace_period_seconds=0)
    else:
        await kit.set_phase("ext", "Succeeded")

    await eventually(lambda: gone(kit, name), what=f"extended claim of the {end} pod gone")
