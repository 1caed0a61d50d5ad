"""Claim lifecycle events the claim-controller publishes on NATS: the only module that knows subjects and
payloads.

Subjects: ``draflow.events.claim.<namespace>.<name>.created|deallocated|deleted`` (JetStream, so the
history of a claim can be replayed). The payload is JSON for now (a later issue moves it to a protobuf
message from ``protos/``; only this module changes), with the same keys as the shim's events::

    {"claimUID", "namespace", "name", "pod": "<ns>/<name>" | null, "node": "<node>" | null,
     "time": <unix seconds>}

The W3C trace context of the claim's trace travels in the message headers (the bus injects the current
span). Publishing never fails the caller: Kubernetes is the truth, NATS only history and nudges. The bus
keeps events in a bounded outbox while NATS is unreachable; an exception here is logged and dropped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from draflow_runtime.log import get_logger

from .ownership import owning_pod

__all__ = ["SUBJECT_PREFIX", "ClaimEvents", "payload", "subject"]

log = get_logger(__name__)

SUBJECT_PREFIX = "draflow.events.claim"
Publish = Callable[[str, bytes], Awaitable[Any]]


def subject(namespace: str, name: str, kind: str) -> str:
    return f"{SUBJECT_PREFIX}.{namespace}.{name}.{kind}"


def _node_of(claim: Mapping[str, Any]) -> str | None:
    """The node a node-local allocation selects by name (``matchFields metadata.name In [node]``)."""
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or ():
        for req in term.get("matchFields") or ():
            if req.get("key") == "metadata.name" and req.get("operator") == "In" and req.get("values"):
                return str(req["values"][0])
    return None


def payload(claim: Mapping[str, Any], *, pod: str | None = None, node: str | None = None) -> bytes:
    """The JSON body for ``claim``; ``pod`` defaults to the owning pod of a generated claim."""
    meta = claim.get("metadata") or {}
    namespace = meta.get("namespace", "")
    if pod is None:
        owner = owning_pod(claim)
        pod = f"{namespace}/{owner[0]}" if owner else None
    return orjson.dumps(
        {
            "claimUID": meta.get("uid", ""),
            "namespace": namespace,
            "name": meta.get("name", ""),
            "pod": pod,
            "node": node if node is not None else _node_of(claim),
            "time": time.time(),
        }
    )


class ClaimEvents:
    """Publishes claim lifecycle events through ``publish`` (None: events are not published)."""

    def __init__(self, publish: Publish | None) -> None:
        self._publish = publish

    async def _send(self, kind: str, claim: Mapping[str, Any], data: bytes) -> None:
        if self._publish is None:
            return
        meta = claim.get("metadata") or {}
        try:
            await self._publish(subject(meta.get("namespace", ""), meta.get("name", ""), kind), data)
        except Exception as exc:
            log.warning("claim event not published", claim=f"{meta.get('namespace')}/{meta.get('name')}",
                        kind=kind, error=repr(exc))

    async def created(self, claim: Mapping[str, Any], pod: str, node: str | None) -> None:
        await self._send("created", claim, payload(claim, pod=pod, node=node or None))

    async def deallocated(self, before: Mapping[str, Any]) -> None:
        """``before``: the claim as it was allocated (so the node is known)."""
        await self._send("deallocated", before, payload(before))

    async def deleted(self, claim: Mapping[str, Any]) -> None:
        await self._send("deleted", claim, payload(claim))
