"""The one way to deallocate a ResourceClaim (shared by the claim-controller and the allocator).

Allocation, ``reservedFor`` and the drivers' device status live in ``status`` (the ``status``
subresource); the delete-protection finalizer lives in ``metadata`` (the main resource). So deallocating
is two writes, each a JSON merge patch that carries the claim's ``metadata.uid`` and
``metadata.resourceVersion``:

1. :func:`clear_allocation` — ``PATCH .../resourceclaims/<name>/status`` setting ``reservedFor``,
   ``allocation`` and ``devices`` to null. The resourceVersion makes it a compare-and-swap: a pod
   reserved or a new allocation written meanwhile makes it fail with ``Conflict``, and the caller decides
   again from fresh state. The uid guards against a claim replaced under the same name.
2. :func:`release_finalizer` — ``PATCH .../resourceclaims/<name>`` with the finalizer list minus
   ``resource.kubernetes.io/delete-protection``, again compare-and-swap, only while the claim is neither
   allocated nor reserved (an allocator may allocate it again right after step 1; then the finalizer
   must stay).

A merge patch sends only the fields it changes. A status PUT re-sends the whole object: the spec's and
the device status's opaque raw JSON, re-encoded, which the API server may refuse as a change of an
immutable field (see ``docs/runtime-api.md`` on raw JSON), and every field a newer API server added.

:func:`deallocate` is both steps, with the second retried from a fresh GET on ``Conflict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .dra import DELETE_PROTECTION_FINALIZER
from .errors import Conflict, NotFound
from .kube import RESOURCE_CLAIMS, KubeClient
from .retry import conflict_attempts

__all__ = ["FINALIZER_ATTEMPTS", "clear_allocation", "deallocate", "needs_clearing", "release_finalizer"]

#: Compare-and-swap attempts of :func:`deallocate`'s finalizer step.
FINALIZER_ATTEMPTS = 8

Obj = Mapping[str, Any]


def _cas(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}


def needs_clearing(claim: Obj) -> bool:
    """The claim has an allocation, a reservation or device status that :func:`clear_allocation` clears."""
    status = claim.get("status") or {}
    return bool(status.get("allocation") or status.get("reservedFor") or status.get("devices"))


def _holds_finalizer(claim: Obj) -> bool:
    """The finalizer is there and must go: nothing allocated or reserved."""
    meta = claim.get("metadata") or {}
    return DELETE_PROTECTION_FINALIZER in (meta.get("finalizers") or ()) and not needs_clearing(claim)


async def clear_allocation(kube: KubeClient, claim: Obj, *, field_manager: str) -> dict[str, Any]:
    """Empty ``reservedFor`` and clear ``allocation`` and ``devices`` of ``claim`` (the copy the caller
    decided on) in one status merge patch; returns the claim as written. Raises ``Conflict`` when the
    claim changed since that copy (decide again from fresh state), ``NotFound`` when it is gone.
    Idempotent: clearing a cleared claim writes nothing."""
    meta = claim["metadata"]
    patch = {"metadata": _cas(meta), "status": {"reservedFor": None, "allocation": None, "devices": None}}
    return await kube.patch(RESOURCE_CLAIMS, meta["name"], patch, meta["namespace"],
                            subresource="status", field_manager=field_manager)


async def release_finalizer(kube: KubeClient, claim: Obj, *, field_manager: str) -> dict[str, Any] | None:
    """Remove the delete-protection finalizer of ``claim`` (compare-and-swap on its resourceVersion);
    returns the claim as written, or None (nothing written) when it has no such finalizer. Raises ``Conflict``
    when ``claim`` is allocated or reserved (the finalizer must stay: decide again) or changed since
    this copy, ``NotFound`` when it is gone."""
    meta = claim["metadata"]
    finalizers = list(meta.get("finalizers") or ())
    if DELETE_PROTECTION_FINALIZER not in finalizers:
        return None
    if needs_clearing(claim):
        raise Conflict(409, "Conflict", "claim was allocated or reserved again; deciding again")
    kept = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
    patch = {"metadata": {**_cas(meta), "finalizers": kept}}
    return await kube.patch(RESOURCE_CLAIMS, meta["name"], patch, meta["namespace"],
                            field_manager=field_manager)


async def deallocate(kube: KubeClient, claim: Obj, *, field_manager: str,
                     attempts: int = FINALIZER_ATTEMPTS) -> None:
    """Deallocate ``claim`` (the copy the caller decided on): :func:`clear_allocation` when there is
    anything to clear (``Conflict`` raised: decide again), then :func:`release_finalizer`, retried from
    a fresh GET on ``Conflict``; a claim allocated or reserved again by then keeps its finalizer, one that
    is gone or replaced (other uid) is left alone. Idempotent. Raises ``Conflict`` when the finalizer
    step lost ``attempts`` races in a row."""
    meta = claim["metadata"]
    current: Obj = claim
    if needs_clearing(current):
        current = await clear_allocation(kube, current, field_manager=field_manager)
    async for attempt in conflict_attempts(attempts):
        if attempt:  # after a Conflict and the backoff: decide again from fresh state
            try:
                current = await kube.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])
            except NotFound:
                return
            if current["metadata"].get("uid") != meta.get("uid"):
                return
        if not _holds_finalizer(current):
            return
        try:
            await release_finalizer(kube, current, field_manager=field_manager)
            return
        except Conflict:
            continue
    raise Conflict(409, "Conflict", "too many conflicts removing the delete-protection finalizer")
