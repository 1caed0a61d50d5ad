"""Reading lifecycle events back: decoding a message and the stored history of a claim or of everything
(see :mod:`draflow_runtime.lifecycle`). Readers use a short-lived ephemeral consumer, never a durable one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import nats.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from draflow_protos.events.v1.events_pb2 import ClaimEvent, PoolChanged
from draflow_runtime.lifecycle.subjects import (
    CLAIM_EVENT_TYPE,
    CLAIM_PREFIX,
    EVENT_TYPE_HEADER,
    EVENTS_STREAM,
    POOL_CHANGED_TYPE,
    POOL_PREFIX,
    ROOT,
    claim_subject,
)
from draflow_runtime.log import get_logger

log = get_logger("draflow_runtime.lifecycle")


def decode_payload(
    subject: str, data: bytes, headers: Mapping[str, str] | None = None
) -> ClaimEvent | PoolChanged:
    """The event in a message body: the protobuf named by ``Draflow-Event-Type`` (or, without it, by the
    subject). Raises ValueError for other subjects or an undecodable body (a JSON body included: every
    publisher sends protobuf)."""
    type_name = (headers or {}).get(EVENT_TYPE_HEADER, "")
    is_pool = type_name == POOL_CHANGED_TYPE or (not type_name and subject.startswith(POOL_PREFIX + "."))
    is_claim = type_name == CLAIM_EVENT_TYPE or (not type_name and subject.startswith(CLAIM_PREFIX + "."))
    if not (is_pool or is_claim):
        raise ValueError(f"not a lifecycle event: subject {subject!r}, type {type_name!r}")
    msg: ClaimEvent | PoolChanged = PoolChanged() if is_pool else ClaimEvent()
    try:
        msg.ParseFromString(data)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ValueError(f"undecodable event on {subject!r}: {exc}") from exc
    return msg


def decode(msg: Any) -> ClaimEvent | PoolChanged:
    """The event in a nats-py message (``.subject``, ``.data``, ``.headers``)."""
    return decode_payload(msg.subject, msg.data, msg.headers)


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
