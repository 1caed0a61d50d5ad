"""Lifecycle subjects, claim event kinds and the one events stream (see :mod:`draflow_runtime.lifecycle`)."""

from __future__ import annotations

from dataclasses import dataclass

from draflow_protos.events.v1 import events_pb2
from draflow_protos.events.v1.events_pb2 import ClaimEvent, PoolChanged
from draflow_runtime.bus import EventBus

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
