"""Claim lifecycle events the shim publishes on NATS: the only module that knows subjects and payloads.

Subjects: ``draflow.events.claim.<namespace>.<name>.prepared|unprepared|prepare_failed``. The payload is
JSON for now (a later issue moves it to a protobuf message from ``protos/``; only this module changes)::

    {"claimUID", "namespace", "name", "node", "driver", "devices": [{"pool", "device", "cdiDeviceIDs"}],
     "pod": "<ns>/<name>" | null, "error": "<message>" (prepare_failed only), "time": <unix seconds>}

Publishing never fails the caller: NATS is the nervous system, Kubernetes is the truth. The bus keeps
events in a bounded outbox while NATS is unreachable; an exception here is logged and dropped.

Consumed: ``draflow.events.claim.*.*.allocated`` (structured-allocator; JSON or the
``draflow.events.v1.ClaimEvent`` protobuf, both read by ``draflow_runtime.lifecycle.decode_payload``) on a
core NATS subscription, as a nudge only: :func:`subscribe_allocated` hands the pod and node named in the
event to a callback, which looks at that pod at once. Missing one costs latency, never correctness.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import orjson

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.log import get_logger

from .checkpoint import ClaimInfo, PreparedDevice

log = get_logger(__name__)

SUBJECT_PREFIX = "draflow.events.claim"
ALLOCATED_SUBJECT = lifecycle.claim_subject("*", "*", "allocated")
Publish = Callable[[str, bytes], Awaitable[None]]


def subject(namespace: str, name: str, kind: str) -> str:
    return f"{SUBJECT_PREFIX}.{namespace}.{name}.{kind}"


def payload(
    info: ClaimInfo,
    node: str,
    driver: str,
    devices: list[PreparedDevice],
    *,
    pod: str | None = None,
    error: str | None = None,
) -> bytes:
    body: dict[str, object] = {
        "claimUID": info.claim_uid,
        "namespace": info.namespace,
        "name": info.claim_name,
        "node": node,
        "driver": driver,
        "devices": [
            {"pool": d.pool_name, "device": d.device_name, "cdiDeviceIDs": d.cdi_device_ids} for d in devices
        ],
        "pod": pod,
        "time": time.time(),
    }
    if error is not None:
        body["error"] = error
    return orjson.dumps(body)


class ClaimEvents:
    """Publishes claim lifecycle events through ``publish`` (None: events are not published)."""

    def __init__(self, publish: Publish | None) -> None:
        self._publish = publish

    async def _send(self, kind: str, info: ClaimInfo, data: bytes) -> None:
        if self._publish is None:
            return
        try:
            await self._publish(subject(info.namespace, info.claim_name, kind), data)
        except Exception as exc:
            log.warning(
                "claim event not published",
                claim=f"{info.namespace}/{info.claim_name}",
                kind=kind,
                error=repr(exc),
            )

    async def prepared(self, info: ClaimInfo, node: str, driver: str, pod: str | None) -> None:
        await self._send("prepared", info, payload(info, node, driver, info.drivers.get(driver, []), pod=pod))

    async def prepare_failed(
        self, info: ClaimInfo, node: str, driver: str, pod: str | None, error: str
    ) -> None:
        await self._send("prepare_failed", info, payload(info, node, driver, [], pod=pod, error=error))

    async def unprepared(self, info: ClaimInfo, node: str, driver: str) -> None:
        await self._send("unprepared", info, payload(info, node, driver, info.drivers.get(driver, [])))


@dataclass(frozen=True)
class Allocated:
    """The pod an ``allocated`` event is about and the node of the allocation ("" when not node-local)."""

    namespace: str
    pod: str
    node: str


def allocated_target(data: bytes, headers: Mapping[str, str] | None = None) -> Allocated | None:
    """The pod and node of one ``allocated`` message (pure); None when it names no pod or is unreadable."""
    try:
        event = lifecycle.decode_payload(ALLOCATED_SUBJECT, data, headers)
    except ValueError:
        return None
    if not isinstance(event, lifecycle.ClaimEvent) or not event.pod.name:
        return None
    return Allocated(event.pod.namespace or event.namespace, event.pod.name, event.node)


async def subscribe_allocated(bus: EventBus, on_allocated: Callable[[Allocated], None]) -> None:
    """Call ``on_allocated`` for every ``draflow.events.claim.*.*.allocated`` message that names a pod
    (core NATS: at most once, nothing while disconnected; the subscription is renewed on reconnect)."""

    async def handler(data: bytes, headers: Mapping[str, str]) -> None:
        target = allocated_target(data, headers)
        if target is None:
            log.debug("allocated event without a pod ignored")
            return
        on_allocated(target)

    await bus.subscribe(ALLOCATED_SUBJECT, handler)
