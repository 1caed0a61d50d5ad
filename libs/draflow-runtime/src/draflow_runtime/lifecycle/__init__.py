"""Lifecycle events: the claim and pool history every service publishes on NATS JetStream.

The only package that knows subjects, payloads and the stream (``docs/events.md`` is the prose version).
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

The package in modules, all re-exported here (import from ``draflow_runtime.lifecycle``):

- :mod:`.subjects`: subjects, kinds, the stream and its limits;
- :mod:`.publish`: building events from a claim, :func:`publish_claim_event`, :func:`publish_pool_changed`
  and their "never fail the caller" twins :func:`announce_claim_event`, :func:`announce_pool_changed`;
- :mod:`.history`: :func:`decode` / :func:`decode_payload` (protobuf only), :func:`claim_timeline` and
  :func:`recent_events` (history read back in order with a short-lived ephemeral consumer).

How the CLI prints an event is the CLI's business (``draflow_cli.events.describe``).
"""

from draflow_protos.events.v1.events_pb2 import ClaimEvent, ClaimEventKind, Device, PodRef, PoolChanged
from draflow_runtime.lifecycle.history import Record, claim_timeline, decode, decode_payload, recent_events
from draflow_runtime.lifecycle.publish import (
    announce_claim_event,
    announce_pool_changed,
    build_claim_event,
    build_pool_changed,
    claim_msg_id,
    devices_of,
    node_of,
    publish_claim_event,
    publish_pool_changed,
)
from draflow_runtime.lifecycle.subjects import (
    CLAIM_EVENT_TYPE,
    CLAIM_KINDS,
    CLAIM_PREFIX,
    EVENT_TYPE_HEADER,
    EVENTS_LIMITS,
    EVENTS_STREAM,
    EVENTS_SUBJECTS,
    POOL_CHANGED_TYPE,
    POOL_PREFIX,
    ROOT,
    StreamLimits,
    claim_subject,
    ensure_events_stream,
    kind_name,
    pool_subject,
    subject_token,
)

__all__ = [
    "CLAIM_EVENT_TYPE",
    "CLAIM_KINDS",
    "CLAIM_PREFIX",
    "EVENTS_LIMITS",
    "EVENTS_STREAM",
    "EVENTS_SUBJECTS",
    "EVENT_TYPE_HEADER",
    "POOL_CHANGED_TYPE",
    "POOL_PREFIX",
    "ROOT",
    "ClaimEvent",
    "ClaimEventKind",
    "Device",
    "PodRef",
    "PoolChanged",
    "Record",
    "StreamLimits",
    "announce_claim_event",
    "announce_pool_changed",
    "build_claim_event",
    "build_pool_changed",
    "claim_msg_id",
    "claim_subject",
    "claim_timeline",
    "decode",
    "decode_payload",
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
