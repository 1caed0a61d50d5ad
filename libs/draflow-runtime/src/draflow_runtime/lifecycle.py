"""Lifecycle events: the claim and pool history every service publishes on NATS JetStream.

The only module that knows subjects, payloads and the stream (``docs/events.md`` is the prose version).
Events are **nudges and history, never the source of truth**: a service that misses one still converges
from its watches, and a consumer must treat an event as "look again", not as state.

Subjects (every token escaped with :func:`subject_token`, ``.`` and ``/`` become ``_``)::

    draflow.events.claim.<namespace>.<name>.<kind>     ClaimEvent   kind: created, allocated, ...
    draflow.events.pool.<driver>.<pool>.changed        PoolChanged

Payloads are protobuf messages of ``protos/draflow_protos/events/v1/events.proto``; the header
``Draflow-Event-Type`` names the message (``draflow.events.v1.ClaimEvent``), ``Nats-Msg-Id`` is a
deterministic id (the same claim state announced twice, by a retry or a second replica, is stored once
within the stream's duplicate window) and the W3C ``traceparent`` is the claim's trace (the current span,
else the claim's ``draflow.dev/traceparent`` annotation).

One JetStream stream holds all of it: :data:`EVENTS_STREAM` (``DRAFLOW_EVENTS`` on ``draflow.events.>``,
limits in :data:`EVENTS_LIMITS`); every service declares it with :func:`ensure_events_stream`, never a
stream of its own (JetStream refuses two streams with overlapping subjects).

Reading: :func:`decode` turns a message into its protobuf (JSON payloads of services not yet moved to
protobuf are converted); :func:`claim_timeline` / :func:`recent_events` read history back in order with a
short-lived ephemeral consumer.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import nats.errors
import orjson
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from opentelemetry import trace

from draflow_protos.events.v1 import events_pb2
from draflow_protos.events.v1.events_pb2 import ClaimEvent, ClaimEventKind, Device, PodRef, PoolChanged
from draflow_runtime.bus import EventBus
from draflow_runtime.log import get_logger
from draflow_runtime.tracing import attach, context_from_annotations, detach

__all__ = [
    "CLAIM_KINDS",
    "CLAIM_PREFIX",
    "EVENTS_LIMITS",
    "EVENTS_STREAM",
    "EVENTS_SUBJECTS",
    "EVENT_TYPE_HEADER",
    "POOL_PREFIX",
    "ClaimEvent",
    "ClaimEventKind",
    "Device",
    "PodRef",
    "PoolChanged",
    "Record",
    "StreamLimits",
    "build_claim_event",
    "build_pool_changed",
    "claim_msg_id",
    "claim_subject",
    "claim_timeline",
    "decode",
    "decode_payload",
    "describe",
    "devices_of",
    "ensure_events_stream",
    "kind_name",
    "node_of",
    "pool_subject",
    "publish_claim_event",
    "publish_pool_changed",
    "recent_events",
    "subject_token",
]

log = get_logger(__name__)

ROOT = "draflow.events"
CLAIM_PREFIX = f"{ROOT}.claim"
POOL_PREFIX = f"{ROOT}.pool"
EVENTS_STREAM = "DRAFLOW_EVENTS"
EVENTS_SUBJECTS = (f"{ROOT}.>",)
EVENT_TYPE_HEADER = "Draflow-Event-Type"
CLAIM_EVENT_TYPE = ClaimEvent.DESCRIPTOR.full_name
POOL_CHANGED_TYPE = PoolChanged.DESCRIPTOR.full_name

_KIND_PREFIX = "CLAIM_EVENT_KIND_"
# Subject token -> enum value: "created", "allocated", "allocation_failed", "reserved", "prepared",
# "prepare_failed", "unprepared", "deallocated", "deleted".
CLAIM_KINDS: dict[str, int] = {
    v.name.removeprefix(_KIND_PREFIX).lower(): v.number
    for v in events_pb2.DESCRIPTOR.enum_types_by_name["ClaimEventKind"].values
    if v.number != 0
}
_KIND_NAMES = {number: token for token, number in CLAIM_KINDS.items()}


@dataclass(frozen=True)
class StreamLimits:
    """Retention of the events stream. Discard policy is "old": when a limit is hit the oldest events go,
    publishing never blocks."""

    max_age_seconds: float = 24 * 3600.0
    max_msgs: int = 1_000_000
    max_bytes: int = 1024**3
    duplicate_window_seconds: float = 120.0


EVENTS_LIMITS = StreamLimits()


# --- subjects ---------------------------------------------------------------------------------------------

_ESCAPES = str.maketrans(dict.fromkeys(".*/> \t", "_"))


def subject_token(name: str) -> str:
    """``name`` as one NATS subject token: ``.`` and ``/`` become ``_`` (DNS names, which namespaces,
    claims, drivers and pools are, never contain ``_``, so distinct names stay distinct); empty → ``_``.
    Wildcards and whitespace cannot occur in Kubernetes names; they are escaped all the same."""
    return name.translate(_ESCAPES) or "_"


def kind_name(kind: int | str) -> str:
    """The subject token of a claim event kind (``"prepare_failed"``); accepts the token itself, the enum
    value or the enum name."""
    if isinstance(kind, str):
        token = kind.removeprefix(_KIND_PREFIX).lower()
        if token not in CLAIM_KINDS:
            raise ValueError(f"unknown claim event kind {kind!r}; one of {sorted(CLAIM_KINDS)}")
        return token
    if kind not in _KIND_NAMES:
        raise ValueError(f"unknown claim event kind {kind!r}")
    return _KIND_NAMES[kind]


def claim_subject(namespace: str, name: str, kind: int | str = "*") -> str:
    """``draflow.events.claim.<ns>.<name>.<kind>``; ``kind="*"`` (default) is the filter of every kind,
    and ``namespace``/``name`` may be ``*`` too."""
    token = "*" if kind == "*" else kind_name(kind)
    ns = "*" if namespace == "*" else subject_token(namespace)
    nm = "*" if name == "*" else subject_token(name)
    return f"{CLAIM_PREFIX}.{ns}.{nm}.{token}"


def pool_subject(driver: str, pool: str) -> str:
    """``draflow.events.pool.<driver>.<pool>.changed`` with both names escaped."""
    return f"{POOL_PREFIX}.{subject_token(driver)}.{subject_token(pool)}.changed"


# --- the stream -------------------------------------------------------------------------------------------


async def ensure_events_stream(bus: EventBus, limits: StreamLimits = EVENTS_LIMITS) -> None:
    """Declare the one events stream on ``bus`` (idempotent; applied now or when NATS is reachable, and
    re-applied after every reconnect). Every service that publishes lifecycle events calls this."""
    await bus.ensure_stream(
        EVENTS_STREAM,
        EVENTS_SUBJECTS,
        max_age_seconds=limits.max_age_seconds,
        max_msgs=limits.max_msgs,
        max_bytes=limits.max_bytes,
        duplicate_window_seconds=limits.duplicate_window_seconds,
    )


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
    meta = claim.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1" and ref.get("controller"):
            return PodRef(
                namespace=meta.get("namespace", ""), name=ref.get("name", ""), uid=ref.get("uid", "")
            )
    return None


def node_of(claim: Mapping[str, Any]) -> str:
    """The node a node-local allocation selects (``matchFields metadata.name In [node]``), else ""."""
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or ():
        for req in term.get("matchFields") or ():
            if req.get("key") == "metadata.name" and req.get("operator") == "In" and req.get("values"):
                return str(req["values"][0])
    return ""


def devices_of(claim: Mapping[str, Any]) -> list[Device]:
    """The devices of ``status.allocation.devices.results`` (empty when not allocated)."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
    return [
        Device(
            request=str(r.get("request", "")),
            driver=str(r.get("driver", "")),
            pool=str(r.get("pool", "")),
            device=str(r.get("device", "")),
            share_id=str(r.get("shareID", "") or ""),
        )
        for r in results or ()
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


# --- reading ----------------------------------------------------------------------------------------------


def decode_payload(
    subject: str, data: bytes, headers: Mapping[str, str] | None = None
) -> ClaimEvent | PoolChanged:
    """The event in a message body. Protobuf per ``Draflow-Event-Type`` (or, without it, per subject);
    a JSON body (services not moved to protobuf yet) is converted. Raises ValueError for other subjects
    or an undecodable body."""
    type_name = (headers or {}).get(EVENT_TYPE_HEADER, "")
    is_pool = type_name == POOL_CHANGED_TYPE or (not type_name and subject.startswith(POOL_PREFIX + "."))
    is_claim = type_name == CLAIM_EVENT_TYPE or (not type_name and subject.startswith(CLAIM_PREFIX + "."))
    if not (is_pool or is_claim):
        raise ValueError(f"not a lifecycle event: subject {subject!r}, type {type_name!r}")
    if not type_name and data[:1] == b"{":
        return _from_json(subject, data, is_pool)
    msg: ClaimEvent | PoolChanged = PoolChanged() if is_pool else ClaimEvent()
    try:
        msg.ParseFromString(data)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ValueError(f"undecodable event on {subject!r}: {exc}") from exc
    return msg


def decode(msg: Any) -> ClaimEvent | PoolChanged:
    """The event in a nats-py message (``.subject``, ``.data``, ``.headers``). An event without a time (a
    JSON body that had none) gets the time JetStream stored it, when the message came from JetStream."""
    event = decode_payload(msg.subject, msg.data, msg.headers)
    if not event.HasField("time"):
        try:
            stored = msg.metadata.timestamp
        except Exception:  # not a JetStream message
            stored = None
        if stored is not None:
            event.time.FromDatetime(stored)
    return event


def _from_json(subject: str, data: bytes, is_pool: bool) -> ClaimEvent | PoolChanged:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"undecodable event on {subject!r}: {exc}") from exc
    when = float(body.get("time") or 0) or None
    if is_pool:
        return build_pool_changed(
            driver=str(body.get("driver", "")), pool=str(body.get("pool", "")),
            node=str(body.get("node") or ""), generation=int(body.get("generation") or 0),
            resource_slice_count=int(body.get("resourceSliceCount") or 0),
            devices=int(body.get("devices") or 0), tainted_devices=int(body.get("taintedDevices") or 0),
            slices_created=int(body.get("created") or 0), slices_updated=int(body.get("updated") or 0),
            slices_deleted=int(body.get("deleted") or 0), when=when,
        )
    tokens = subject.split(".")
    kind = tokens[-1]
    # draflow.events.claim.<ns>.<name>.<kind>: the escaped names, when the body lacks the real ones
    ns_token, name_token = (tokens[3], tokens[4]) if len(tokens) == 6 else ("", "")
    claim = {"metadata": {"namespace": body.get("namespace") or ns_token,
                          "name": body.get("name") or name_token, "uid": body.get("claimUID", "")}}
    devices = body.get("devices") or ()
    reason = str(body.get("reason") or "")
    message = str(body.get("error") or body.get("message") or "")
    if reason and not message and " " in reason:  # the allocator's JSON put its explanation in "reason"
        reason, message = "", reason
    event = build_claim_event(
        kind if kind in CLAIM_KINDS else "created", claim,
        pod=body.get("pod") or None, node=str(body.get("node") or ""), driver=str(body.get("driver") or ""),
        devices=[d if isinstance(d, Mapping) else {"device": str(d)} for d in devices],
        reason=reason, message=message, when=when,
    )
    event.trace_id = ""  # the JSON body had none; the headers may
    if when is None:
        event.ClearField("time")  # decode() falls back to the JetStream timestamp
    if kind not in CLAIM_KINDS:
        event.kind = ClaimEventKind.CLAIM_EVENT_KIND_UNSPECIFIED
    return event


@dataclass(frozen=True)
class Record:
    """One stored event: its stream sequence, subject, decoded message and headers."""

    seq: int
    subject: str
    event: ClaimEvent | PoolChanged
    headers: Mapping[str, str]


async def _read(
    js: JetStreamContext, filter_subject: str, *, start_seq: int | None = None, limit: int | None = None,
    fetch_timeout: float = 2.0,
) -> list[Record]:
    """Every stored message on ``filter_subject`` (from ``start_seq``), in stream order, read with an
    ephemeral pull consumer that is deleted afterwards (and expires on its own if we crash)."""
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start_seq else DeliverPolicy.ALL,
        opt_start_seq=start_seq,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    sub = await js.pull_subscribe(filter_subject, stream=EVENTS_STREAM, config=config)
    consumer = config.name or ""  # pull_subscribe names the ephemeral consumer in the config it is given
    out: list[Record] = []
    try:
        info = await sub.consumer_info()
        pending = int(info.num_pending or 0)
        if limit is not None:
            pending = min(pending, limit)
        while len(out) < pending:
            try:
                msgs = await sub.fetch(min(256, pending - len(out)), timeout=fetch_timeout)
            except nats.errors.TimeoutError:  # messages aged out while reading
                break
            for m in msgs:
                try:
                    event = decode(m)
                except ValueError as exc:
                    log.warning("undecodable event skipped", subject=m.subject, error=str(exc))
                    event = ClaimEvent() if m.subject.startswith(CLAIM_PREFIX) else PoolChanged()
                out.append(Record(m.metadata.sequence.stream, m.subject, event, dict(m.headers or {})))
    finally:
        try:
            await js.delete_consumer(EVENTS_STREAM, consumer)
        except Exception:  # it expires by itself after inactive_threshold
            log.debug("ephemeral consumer not deleted", filter=filter_subject)
        await sub.unsubscribe()
    return out


async def claim_timeline(
    js: JetStreamContext, namespace: str, name: str, *, claim_uid: str | None = None
) -> list[ClaimEvent]:
    """The stored history of claim ``namespace/name`` in the order it happened: by each event's ``time`` (when
    its publisher saw it), ties kept in stream order. Stream order alone is not enough: after a NATS outage
    each service flushes its own outbox when it reconnects, so e.g. ``prepared`` can be stored before
    ``created``. A claim re-created under the same name has its earlier life in the same subject; pass
    ``claim_uid`` to keep one incarnation only."""
    records = await _read(js, claim_subject(namespace, name))
    events = [r.event for r in records if isinstance(r.event, ClaimEvent)]
    events.sort(key=lambda e: e.time.ToNanoseconds())  # stable: equal times keep stream order
    if claim_uid:
        events = [e for e in events if e.claim_uid == claim_uid]
    return events


async def recent_events(
    js: JetStreamContext, filter_subject: str = f"{ROOT}.>", *, last: int = 100
) -> list[Record]:
    """The last ``last`` stored events matching ``filter_subject``, oldest first."""
    info = await js.stream_info(EVENTS_STREAM)
    last_seq = int(info.state.last_seq or 0)
    if last_seq == 0:
        return []
    if filter_subject == f"{ROOT}.>":
        return await _read(js, filter_subject, start_seq=max(1, last_seq - last + 1), limit=last)
    records = await _read(js, filter_subject)
    return records[-last:]


def describe(event: ClaimEvent | PoolChanged) -> str:
    """One readable line for an event (the CLI's format)."""
    if isinstance(event, PoolChanged):
        where = f" node={event.node}" if event.node else ""
        return (
            f"pool {event.driver}/{event.pool} changed{where} gen={event.generation} "
            f"devices={event.devices} tainted={event.tainted_devices} slices={event.resource_slice_count}"
        )
    parts = [f"{kind_name(event.kind) if event.kind else 'unknown':<17}", f"{event.namespace}/{event.name}"]
    if event.pod.name:
        parts.append(f"pod={event.pod.namespace}/{event.pod.name}")
    if event.node:
        parts.append(f"node={event.node}")
    if event.driver:
        parts.append(f"driver={event.driver}")
    if event.devices:
        parts.append("devices=" + ",".join(f"{d.pool}/{d.device}" for d in event.devices))
    if event.service:
        parts.append(f"by={event.service}")
    if event.reason:
        parts.append(f"reason={event.reason}")
    if event.message:
        parts.append(f"message={event.message!r}")
    return " ".join(parts)
