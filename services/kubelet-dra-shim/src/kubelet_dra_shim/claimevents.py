"""Claim lifecycle events the shim publishes on NATS and the ``allocated`` nudges it reads.

Published (:mod:`draflow_runtime.lifecycle`: protobuf ``ClaimEvent`` on the one ``DRAFLOW_EVENTS`` stream,
subjects ``draflow.events.claim.<namespace>.<name>.prepared|prepare_failed|unprepared``): node, driver,
the devices the driver prepared (with their CDI IDs), the pod (prepare events) and the driver's error
(``prepare_failed``). A prepare event is published inside the ``prepare pod`` span, which continues the
claim's trace. Publishing never fails the caller: NATS is the nervous system, Kubernetes is the truth. The
bus only queues events in a bounded outbox (delivered in the background), so a stalled NATS never delays
a prepare; an exception is logged and dropped (:func:`draflow_runtime.lifecycle.announce_claim_event`).

Consumed: ``draflow.events.claim.*.*.allocated`` (structured-allocator; the ``draflow.events.v1.ClaimEvent``
protobuf, read by ``draflow_runtime.lifecycle.decode_payload``) on a
core NATS subscription, as a nudge only: :func:`subscribe_allocated` hands the pod and node named in the
event to a callback, which looks at that pod at once. Missing one costs latency, never correctness.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.log import get_logger

from .checkpoint import ClaimInfo, PreparedDevice

log = get_logger(__name__)

ALLOCATED_SUBJECT = lifecycle.claim_subject("*", "*", "allocated")


def claim_of(info: ClaimInfo) -> dict[str, Any]:
    """The claim as far as the checkpoint knows it (what :func:`lifecycle.build_claim_event` reads)."""
    return {"metadata": {"namespace": info.namespace, "name": info.claim_name, "uid": info.claim_uid}}


def devices(driver: str, prepared: list[PreparedDevice]) -> list[dict[str, Any]]:
    """The prepared devices of ``driver`` as lifecycle ``Device`` fields."""
    return [
        {
            "request": ",".join(d.request_names),
            "driver": driver,
            "pool": d.pool_name,
            "device": d.device_name,
            "shareID": d.share_id or "",
            "cdiDeviceIDs": list(d.cdi_device_ids),
        }
        for d in prepared
    ]


class ClaimEvents:
    """Publishes claim lifecycle events on ``bus`` (None, or a disabled bus: events are not published)."""

    def __init__(self, bus: EventBus | None) -> None:
        self._bus = bus if bus is not None and bus.enabled else None

    async def _send(self, kind: str, info: ClaimInfo, **fields: Any) -> None:
        await lifecycle.announce_claim_event(self._bus, kind, claim_of(info), **fields)

    async def prepared(self, info: ClaimInfo, node: str, driver: str, pod: str | None) -> None:
        await self._send("prepared", info, node=node, driver=driver, pod=pod,
                         devices=devices(driver, info.drivers.get(driver, [])))

    async def prepare_failed(
        self, info: ClaimInfo, node: str, driver: str, pod: str | None, error: str
    ) -> None:
        await self._send("prepare_failed", info, node=node, driver=driver, pod=pod, devices=[],
                         reason="PrepareFailed", message=error)

    async def unprepared(self, info: ClaimInfo, node: str, driver: str) -> None:
        await self._send("unprepared", info, node=node, driver=driver,
                         devices=devices(driver, info.drivers.get(driver, [])))


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
