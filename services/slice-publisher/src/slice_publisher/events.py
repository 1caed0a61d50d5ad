"""Pool-change events on NATS: what slice-publisher announces after every change of a pool.

The subject, the payload and the stream belong to ``draflow_runtime.lifecycle`` (``docs/events.md``); this
module only maps one pool sync onto :func:`~draflow_runtime.lifecycle.publish_pool_changed`:

- subject ``draflow.events.pool.<driver>.<pool>.changed``, both names escaped by
  :func:`~draflow_runtime.lifecycle.subject_token` (``.`` and ``/`` become ``_``);
- payload a ``draflow.events.v1.PoolChanged`` protobuf (driver, node, pool, generation, slice count,
  devices, tainted and unhealthy devices, the writes of this sync); ``devices`` and
  ``resource_slice_count`` are 0 when the pool was deleted;
- stored in the one shared JetStream stream ``DRAFLOW_EVENTS`` (``draflow.events.>``), which the service
  declares with :func:`~draflow_runtime.lifecycle.ensure_events_stream` and never a stream of its own.

Publishing never fails a sync: the bus keeps events in its outbox while NATS is down, anything else is
logged and dropped (the allocator still watches the slices; an event only cuts its latency).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime import lifecycle
from draflow_runtime.bus import BusError, EventBus
from draflow_runtime.log import get_logger
from slice_publisher.pool_sync import ApplyResult, Plan
from slice_publisher.taints import UNHEALTHY_KEY

log = get_logger(__name__)


def counts(driver: str, devices: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(tainted devices, unhealthy devices) of a pool's published devices. Unhealthy: our
    ``draflow.dev/unhealthy`` taint or the driver's own ``<driver>/unhealthy``."""
    unhealthy_keys = {UNHEALTHY_KEY, f"{driver}/unhealthy"}
    tainted = unhealthy = 0
    for dev in devices:
        taints = dev.get("taints") or ()
        if taints:
            tainted += 1
        if any(t.get("key") in unhealthy_keys for t in taints):
            unhealthy += 1
    return tainted, unhealthy


async def declare_stream(bus: EventBus | None) -> None:
    """Declare the shared events stream (idempotent; re-applied by the bus after every reconnect). A
    failure is logged, not raised: the publisher works without NATS."""
    if bus is None or not bus.enabled:
        return
    try:
        await lifecycle.ensure_events_stream(bus)
    except BusError as exc:
        log.warning("events stream not declared", stream=lifecycle.EVENTS_STREAM, error=str(exc))


async def pool_changed(
    bus: EventBus | None,
    plan: Plan,
    result: ApplyResult,
    devices: Iterable[Mapping[str, Any]],
    *,
    node: str,
) -> bool:
    """Announce one pool sync; True if queued for NATS (never waits for it). ``node`` is the node of a
    node-local pool, "" for network-attached pools. Never raises."""
    if bus is None or not bus.enabled:
        return False
    tainted, unhealthy = counts(plan.driver, devices)
    return await lifecycle.announce_pool_changed(
        bus,
        driver=plan.driver,
        pool=plan.pool,
        node=node,
        generation=plan.generation,
        resource_slice_count=plan.slice_count,
        devices=plan.device_count,
        tainted_devices=tainted,
        unhealthy_devices=unhealthy,
        slices_created=result.created,
        slices_updated=result.updated,
        slices_deleted=result.deleted,
    )
