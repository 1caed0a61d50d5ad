"""Claim lifecycle events the claim-controller publishes on NATS JetStream: created, reserved (a pod created
with ``spec.nodeName`` added to ``reservedFor``), deallocated and deleted.

Subjects, the protobuf payload (``ClaimEvent``), headers and the one ``DRAFLOW_EVENTS`` stream belong to
:mod:`draflow_runtime.lifecycle` (``docs/events.md``); this module only says which kind to publish when.
The W3C trace context of the claim's trace travels in the message headers (the current span, else the
claim's annotation). Publishing never fails the caller: Kubernetes is the truth, NATS only history and
nudges. The bus keeps events in a bounded outbox while NATS is unreachable; an exception is logged and
dropped (:func:`draflow_runtime.lifecycle.announce_claim_event`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus

__all__ = ["LINGER", "ClaimEvents"]

#: Seconds a published event waits for others to share one write to NATS (and their acks one read): these
#: events are history nobody waits on, and one write per event was about a third of an event's CPU.
LINGER = 0.05


class ClaimEvents:
    """Publishes claim lifecycle events on ``bus`` (None, or a disabled bus: events are not published)."""

    def __init__(self, bus: EventBus | None) -> None:
        self._bus = bus if bus is not None and bus.enabled else None

    async def _send(self, kind: str, claim: Mapping[str, Any], **fields: Any) -> None:
        await lifecycle.announce_claim_event(self._bus, kind, claim, **fields)

    async def created(self, claim: Mapping[str, Any], pod: str, node: str | None) -> None:
        await self._send("created", claim, pod=pod, node=node or None)

    async def reserved(self, claim: Mapping[str, Any], pod: Mapping[str, Any], node: str) -> None:
        """``pod`` (a bound pod) was added to the claim's ``reservedFor``."""
        await self._send("reserved", claim, pod=pod, node=node)

    async def deallocated(self, before: Mapping[str, Any]) -> None:
        """``before``: the claim as it was allocated (so the node and devices are known)."""
        await self._send("deallocated", before)

    async def deleted(self, claim: Mapping[str, Any]) -> None:
        await self._send("deleted", claim)
