"""Looking a recorded claim up when the informer does not have it (upstream ``TestClaimExists``
"apiserver returns error"): an API server that answers with an error is not taken for "the claim is
gone" (which would generate a second claim); the error goes up and the reconcile is retried. The API
server is a local HTTP server answering 500 (the transport is the seam here)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from stub_apiserver import answering

from claim_controller.allocator import AllocatorClient
from claim_controller.claims import _release_finalizer
from claim_controller.context import BY_OWNER_UID, Context, DeletedPods
from claim_controller.events_bus import ClaimEvents
from claim_controller.ownership import owner_uid
from claim_controller.pods import _existing_claim
from claim_controller.settings import Settings
from draflow_runtime.dra import pod_claims
from draflow_runtime.errors import ServerError
from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import Informer
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_runtime.mutationcache import MutationCache

DOWN = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError",
        "message": "Internal error occurred: apiserver is down", "code": 500}
GONE = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
        "message": "resourceclaims.resource.k8s.io \"p-gpu-x\" not found", "code": 404}


@pytest_asyncio.fixture(loop_scope="session")
async def answers() -> AsyncIterator[tuple[dict[str, Any], Context]]:
    """``(reply, ctx)``: set ``reply["status"]``/``reply["body"]`` for what the API server answers."""
    reply: dict[str, Any] = {"status": 500, "body": DOWN}
    async with answering(reply) as kube:
        ctx = Context(
            settings=Settings(http_port=0, nats_url=""), kube=kube, pods=Informer(kube, PODS),
            claims=Informer(kube, RESOURCE_CLAIMS, indexers={BY_OWNER_UID: owner_uid}),
            templates=Informer(kube, RESOURCE_CLAIM_TEMPLATES),
            recorder=EventRecorder(kube, "claim-controller"), events=ClaimEvents(None),
            allocator=AllocatorClient(None, "unused", 1.0), mutations=MutationCache(60.0, index=owner_uid),
            deleted_pods=DeletedPods(16))
        try:
            yield reply, ctx
        finally:
            await ctx.recorder.aclose()


POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "uidpod1"},
       "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
       "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}}


async def test_an_error_reading_the_recorded_claim_is_raised_not_taken_for_gone(
        answers: tuple[dict[str, Any], Context]) -> None:
    reply, ctx = answers
    [pc] = pod_claims(POD)
    with pytest.raises(ServerError):
        await _existing_claim(ctx, POD, pc)

    reply.update(status=404, body=GONE)  # control: NotFound is "gone", nothing owned either: None
    assert await _existing_claim(ctx, POD, pc) is None


HELD = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "p-gpu-x", "namespace": "ns", "uid": "uidclaim1", "resourceVersion": "41",
                     "deletionTimestamp": "2026-01-01T00:00:00Z",
                     "finalizers": ["resource.kubernetes.io/delete-protection"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uidpod1",
                                          "controller": True}]},
        "spec": {}, "status": {}}


async def test_a_claim_its_finalizer_release_deleted_is_gone_for_the_lookups(
        answers: tuple[dict[str, Any], Context]) -> None:
    """The API server answers the release of a deleted claim's last finalizer with the claim as it went
    (``deletionTimestamp``, no finalizers). Before: that answer went into the mutation cache as a live claim,
    and when the informer had dropped the claim first (its watch event won the race with the answer), the
    pod's claim stayed "there" for the cache's TTL: a live pod's deleted claim was not made again."""
    reply, ctx = answers
    gone = {**HELD, "metadata": {**HELD["metadata"], "resourceVersion": "42", "finalizers": None}}
    reply.update(status=200, body=gone)
    await _release_finalizer(ctx, HELD)
    assert ctx.claim("ns", "p-gpu-x") is None
    assert ctx.claims_owned_by("uidpod1") == []
