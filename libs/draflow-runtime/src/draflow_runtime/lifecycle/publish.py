"""Building lifecycle events from a claim and publishing them (see :mod:`draflow_runtime.lifecycle`).

:func:`publish_claim_event` and :func:`publish_pool_changed` queue one event in the bus's outbox;
:func:`announce_claim_event` and :func:`announce_pool_changed` are the same for callers that must never
fail because of an event (every service: Kubernetes is the truth, an event only history and a nudge).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import trace

from draflow_protos.events.v1.events_pb2 import ClaimEvent, Device, PodRef, PoolChanged
from draflow_runtime.bus import EventBus
from draflow_runtime.dra import allocation_node, claim_results, owning_pod
from draflow_runtime.lifecycle.subjects import (
    CLAIM_EVENT_TYPE,
    CLAIM_KINDS,
    EVENT_TYPE_HEADER,
    POOL_CHANGED_TYPE,
    claim_subject,
    kind_name,
    pool_subject,
)
from draflow_runtime.log import get_logger
from draflow_runtime.tracing import attach, context_from_annotations, detach

log = get_logger("draflow_runtime.lifecycle")


# --- building events --------------------------------------------------------------------------------------


def _pod_ref(pod: Any, namespace: str) -> PodRef | None:
    if pod is None or pod == "":
        return None
    if isinstance(pod, PodRef):
        return pod
    if isinstance(pod, str):
        ns, _, name = pod.rpartition("/")
        return PodRef(namespace=ns or namespace, name=name)
    if isinstance(pod, Mapping):
        meta = pod.get("metadata", pod)
        return PodRef(
            namespace=str(meta.get("namespace") or namespace),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
        )
    raise TypeError(f"pod must be 'ns/name', a PodRef or a pod dict, not {type(pod).__name__}")


def _owner_pod(claim: Mapping[str, Any]) -> PodRef | None:
    owner = owning_pod(claim)
    if owner is None:
        return None
    return PodRef(namespace=(claim.get("metadata") or {}).get("namespace", ""), name=owner[0], uid=owner[1])


def node_of(claim: Mapping[str, Any]) -> str:
    """The node a node-local allocation selects, else "" (:func:`draflow_runtime.dra.allocation_node`)."""
    return allocation_node(claim)


def devices_of(claim: Mapping[str, Any]) -> list[Device]:
    """The devices of ``status.allocation.devices.results`` (empty when not allocated)."""
    return [
        Device(
            request=str(r.get("request", "")),
            driver=str(r.get("driver", "")),
            pool=str(r.get("pool", "")),
            device=str(r.get("device", "")),
            share_id=str(r.get("shareID", "") or ""),
        )
        for r in claim_results(claim)
    ]


def _device(d: Any) -> Device:
    if isinstance(d, Device):
        return d
    return Device(
        request=str(d.get("request", "")),
        driver=str(d.get("driver", "")),
        pool=str(d.get("pool", "") or d.get("poolName", "")),
        device=str(d.get("device", "") or d.get("deviceName", "")),
        share_id=str(d.get("shareID", "") or d.get("share_id", "") or ""),
        cdi_device_ids=list(d.get("cdiDeviceIDs") or d.get("cdi_device_ids") or ()),
    )


def _set_time(msg: ClaimEvent | PoolChanged, when: float | None) -> None:
    msg.time.FromNanoseconds(int((time.time() if when is None else when) * 1e9))


def build_claim_event(
    kind: int | str,
    claim: Mapping[str, Any],
    *,
    service: str = "",
    pod: Any = None,
    node: str | None = None,
    driver: str = "",
    devices: Iterable[Any] | None = None,
    reason: str = "",
    message: str = "",
    when: float | None = None,
) -> ClaimEvent:
    """The :class:`ClaimEvent` for ``claim`` (a ResourceClaim dict, or at least its ``metadata``).

    Defaults come from the claim: ``pod`` is the owning pod of a generated claim, ``node`` the node of the
    allocation, ``devices`` the allocation's results (narrowed to ``driver`` when given), ``trace_id`` the
    current span's, else the claim annotation's. Pure apart from reading the clock and the current span.
    """
    meta = claim.get("metadata") or {}
    namespace = str(meta.get("namespace", ""))
    event = ClaimEvent(
        kind=CLAIM_KINDS[kind_name(kind)],  # type: ignore[arg-type]
        claim_uid=str(meta.get("uid", "")),
        namespace=namespace,
        name=str(meta.get("name", "")),
        node=node if node is not None else node_of(claim),
        driver=driver,
        reason=reason,
        message=message,
        service=service,
        resource_version=str(meta.get("resourceVersion", "")),
        trace_id=_trace_id(meta.get("annotations")),
    )
    ref = _pod_ref(pod, namespace) if pod is not None else _owner_pod(claim)
    if ref is not None:
        event.pod.CopyFrom(ref)
    if devices is None:
        found = devices_of(claim)
        event.devices.extend(d for d in found if not driver or d.driver == driver)
    else:
        event.devices.extend(_device(d) for d in devices)
    _set_time(event, when)
    return event


def _trace_id(annotations: Mapping[str, str] | None) -> str:
    span = trace.get_current_span().get_span_context()
    if span.is_valid:
        return format(span.trace_id, "032x")
    ctx = context_from_annotations(annotations)
    if ctx is not None:
        return format(trace.get_current_span(ctx).get_span_context().trace_id, "032x")
    return ""


def claim_msg_id(event: ClaimEvent) -> str:
    """A de-duplication id: the same kind, claim state, pod, node and driver give the same id."""
    key = "|".join(
        (event.claim_uid or f"{event.namespace}/{event.name}", str(event.kind), event.resource_version,
         event.pod.uid or event.pod.name, event.node, event.driver, event.message)
    )
    if not event.resource_version:  # no state to tie it to: every announcement counts
        key += f"|{event.time.ToNanoseconds()}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


# --- publishing -------------------------------------------------------------------------------------------


async def publish_claim_event(
    bus: EventBus, kind: int | str, claim: Mapping[str, Any], *, msg_id: str | None = None, **fields: Any
) -> bool:
    """Publish a :class:`ClaimEvent` (``fields`` as :func:`build_claim_event`; ``service`` defaults to the
    bus name) on ``draflow.events.claim.<ns>.<name>.<kind>``.

    True: queued in the bus's outbox, delivered in the background (:meth:`EventBus.flush` waits for it);
    False: NATS disabled. Never waits for NATS and never raises for it. Idempotent: a repeat within the
    duplicate window is stored once.
    """
    fields.setdefault("service", bus.name)
    event = build_claim_event(kind, claim, **fields)
    subject = claim_subject(event.namespace, event.name, event.kind)
    headers = {EVENT_TYPE_HEADER: CLAIM_EVENT_TYPE}
    # Outside any span (e.g. a watch handler), carry the claim's own trace in the headers.
    token = None
    if not trace.get_current_span().get_span_context().is_valid:
        token = attach(context_from_annotations((claim.get("metadata") or {}).get("annotations")))
    try:
        return await bus.publish(
            subject, event.SerializeToString(), headers, msg_id=msg_id or claim_msg_id(event)
        )
    finally:
        detach(token)


def build_pool_changed(
    *,
    driver: str,
    pool: str,
    node: str = "",
    generation: int = 0,
    resource_slice_count: int = 0,
    devices: int = 0,
    tainted_devices: int = 0,
    unhealthy_devices: int = 0,
    slices_created: int = 0,
    slices_updated: int = 0,
    slices_deleted: int = 0,
    service: str = "",
    when: float | None = None,
) -> PoolChanged:
    event = PoolChanged(
        driver=driver, node=node, pool=pool, generation=generation,
        resource_slice_count=resource_slice_count, devices=devices, tainted_devices=tainted_devices,
        unhealthy_devices=unhealthy_devices, slices_created=slices_created, slices_updated=slices_updated,
        slices_deleted=slices_deleted, service=service,
    )
    _set_time(event, when)
    return event


async def publish_pool_changed(bus: EventBus, *, msg_id: str | None = None, **fields: Any) -> bool:
    """Publish a :class:`PoolChanged` (keyword fields as the message; ``service`` defaults to the bus
    name) on ``draflow.events.pool.<driver>.<pool>.changed``. Returns like :func:`publish_claim_event`;
    the de-duplication id is (driver, pool, generation, slice count, devices, taints), so re-announcing an
    unchanged pool is stored once."""
    fields.setdefault("service", bus.name)
    event = build_pool_changed(**fields)
    if msg_id is None:
        key = "|".join(str(x) for x in (
            event.driver, event.node, event.pool, event.generation, event.resource_slice_count,
            event.devices, event.tainted_devices, event.unhealthy_devices,
            event.slices_created, event.slices_updated, event.slices_deleted,
        ))
        msg_id = hashlib.sha256(key.encode()).hexdigest()[:32]
    return await bus.publish(
        pool_subject(event.driver, event.pool),
        event.SerializeToString(),
        {EVENT_TYPE_HEADER: POOL_CHANGED_TYPE},
        msg_id=msg_id,
    )


async def announce_claim_event(
    bus: EventBus | None, kind: int | str, claim: Mapping[str, Any], **fields: Any
) -> bool:
    """:func:`publish_claim_event` that never fails its caller: False when ``bus`` is None or disabled, and
    when publishing raised (logged as a warning naming the claim and the kind, then dropped; an event is a
    courtesy, never a reason to fail a reconcile, a placement or an RPC)."""
    if bus is None or not bus.enabled:
        return False
    try:
        return await publish_claim_event(bus, kind, claim, **fields)
    except Exception as exc:
        meta = claim.get("metadata") or {}
        log.warning("claim event not published", claim=f"{meta.get('namespace')}/{meta.get('name')}",
                    kind=kind, error=repr(exc))
        return False


async def announce_pool_changed(bus: EventBus | None, **fields: Any) -> bool:
    """:func:`publish_pool_changed` that never fails its caller, like :func:`announce_claim_event`."""
    if bus is None or not bus.enabled:
        return False
    try:
        return await publish_pool_changed(bus, **fields)
    except Exception as exc:
        log.warning("pool event not published", driver=fields.get("driver"), pool=fields.get("pool"),
                    error=repr(exc))
        return False
