"""Asking the allocator over NATS to allocate the claims of a pod that already has ``spec.nodeName``.

Kubernetes has no verb for "allocate these claims on that node", so this is NATS request/reply on
``draflow.allocator.allocate`` (setting ``allocator_subject``). JSON for now::

    request  {"namespace": str, "pod": str, "podUID": str, "node": str}
    reply    {"ok": bool, "message": str}

``ok: true`` means the allocator accepted and wrote (or will write) the allocation; the controller does
not trust the reply for anything else: it waits for the claims to show up allocated in its cache (the
outcome always follows Kubernetes state). The responder must be idempotent: the same request may come
again after a timeout, a restart or a lagging cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from draflow_runtime.bus import BusError, NoResponders, RequestTimeout
from draflow_runtime.errors import DraflowError

__all__ = [
    "AllocationRefused",
    "AllocatorClient",
    "AllocatorUnavailable",
    "decode_reply",
    "encode_request",
]


class AllocatorUnavailable(DraflowError):
    """Nobody answered the allocation request (no responder, timeout, NATS down). Retried with backoff."""

    def __init__(self, message: str, *, pod: str, node: str) -> None:
        super().__init__(message)
        self.pod = pod
        self.node = node


class AllocationRefused(DraflowError):
    """The allocator answered ``ok: false`` (e.g. the devices do not fit on that node). Retried with
    backoff."""

    def __init__(self, message: str, *, pod: str, node: str) -> None:
        super().__init__(message)
        self.pod = pod
        self.node = node


class _Requester(Protocol):
    async def request(
        self, subject: str, data: bytes, timeout: float, headers: Mapping[str, str] | None = None  # noqa: ASYNC109
    ) -> bytes: ...


def encode_request(pod: Mapping[str, Any]) -> bytes:
    meta = pod.get("metadata") or {}
    return orjson.dumps(
        {
            "namespace": meta.get("namespace", ""),
            "pod": meta.get("name", ""),
            "podUID": meta.get("uid", ""),
            "node": (pod.get("spec") or {}).get("nodeName", ""),
        }
    )


def decode_reply(data: bytes) -> tuple[bool, str]:
    """``(ok, message)``; a reply that is not the documented JSON counts as a refusal."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False, f"malformed reply from the allocator: {data[:200]!r}"
    if not isinstance(body, dict):
        return False, "malformed reply from the allocator"
    return bool(body.get("ok")), str(body.get("message") or "")


@dataclass
class AllocatorClient:
    """Sends allocation requests. ``bus`` None (NATS disabled) makes every request unavailable."""

    bus: _Requester | None
    subject: str
    timeout: float

    async def allocate(self, pod: Mapping[str, Any]) -> str:
        """Ask for the pod's claims to be allocated on its node; return the allocator's message.

        Raises :class:`AllocatorUnavailable` or :class:`AllocationRefused`.
        """
        meta = pod.get("metadata") or {}
        pod_key = f"{meta.get('namespace')}/{meta.get('name')}"
        node = (pod.get("spec") or {}).get("nodeName", "")
        if self.bus is None:
            raise AllocatorUnavailable("NATS is disabled", pod=pod_key, node=node)
        try:
            reply = await self.bus.request(self.subject, encode_request(pod), self.timeout)
        except NoResponders as exc:
            raise AllocatorUnavailable(
                f"no allocator answers on {self.subject}", pod=pod_key, node=node
            ) from exc
        except RequestTimeout as exc:
            raise AllocatorUnavailable(
                f"the allocator did not answer within {self.timeout:g}s", pod=pod_key, node=node
            ) from exc
        except BusError as exc:
            raise AllocatorUnavailable(f"allocation request failed: {exc}", pod=pod_key, node=node) from exc
        ok, message = decode_reply(reply)
        if not ok:
            raise AllocationRefused(message or "the allocator refused", pod=pod_key, node=node)
        return message
