"""The shape of one ``events.k8s.io/v1`` Event: references, limits, name, time format. Pure functions.

The API server's strict validation of ``events.k8s.io/v1`` writes (``ValidateEventCreate``): ``eventTime``
set; ``type`` Normal or Warning; ``action`` and ``reason`` present and at most 128 bytes;
``reportingInstance`` present and at most 128 bytes; ``note`` at most 1024 bytes; a name that is a DNS
subdomain; ``regarding`` without namespace only in ``default``. client-go sends what it is given and loses
the Event when it is too long; :func:`new_event` cuts the overlong parts instead (marked with ``...``), so
a long error message still reaches the user.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "ACTION_LIMIT",
    "NOTE_LIMIT",
    "REASON_LIMIT",
    "REPORTING_INSTANCE_LIMIT",
    "Ref",
    "event_name",
    "micro_time",
    "new_event",
    "reference",
    "truncate",
]

NOTE_LIMIT = 1024
REASON_LIMIT = 128
ACTION_LIMIT = 128
REPORTING_INSTANCE_LIMIT = 128
_NAME_LIMIT = 253
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_ELLIPSIS = "..."

# (kind, apiVersion, namespace, name, uid): what identifies the object an Event is about. client-go's
# reference also carries resourceVersion; ours does not, so repeats about an object that changed in
# between still fold into one series.
Ref = tuple[str, str, str, str, str]


def reference(obj: dict[str, Any]) -> Ref:
    """The :data:`Ref` of an object (``kind``, ``apiVersion``, ``metadata.name/namespace/uid``)."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind") or ""), str(obj.get("apiVersion") or ""), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""), str(meta.get("uid") or ""))


def _ref_body(ref: Ref) -> dict[str, str]:
    kind, api_version, namespace, name, uid = ref
    body = {"kind": kind, "apiVersion": api_version, "namespace": namespace, "name": name, "uid": uid}
    return {k: v for k, v in body.items() if v}


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (the API server counts bytes), ending in ``...``
    when cut; never splits a character."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - len(_ELLIPSIS)].decode(errors="ignore") + _ELLIPSIS


def micro_time(seconds: float) -> str:
    """A ``metav1.MicroTime`` (RFC 3339 with microseconds, UTC) of a Unix time."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(regarding_name: str, unix_nano: int) -> str:
    """``<name>.<unix nanoseconds in hex>`` as client-go names Events, or a random UUID when that is
    not a valid DNS subdomain (a long or unusual object name). :func:`new_event` takes the nanoseconds
    from the real clock, never from the one ``eventTime`` comes from (a test's)."""
    name = f"{regarding_name}.{unix_nano:x}"
    if len(name) > _NAME_LIMIT or not _DNS_SUBDOMAIN.fullmatch(name):
        return str(uuid.uuid4())
    return name


def new_event(*, regarding: Ref, related: Ref | None, type: str, reason: str, action: str, note: str,
              controller: str, instance: str, now: float) -> dict[str, Any]:
    """The body of a new ``events.k8s.io/v1`` Event (no series yet). Its namespace is the regarding
    object's, or ``default`` for a cluster-scoped one (as client-go does)."""
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(regarding[3] or "unknown", time.time_ns()),
            "namespace": regarding[2] or "default",
        },
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": truncate(instance, REPORTING_INSTANCE_LIMIT),
        "action": truncate(action, ACTION_LIMIT),
        "reason": truncate(reason, REASON_LIMIT),
        "regarding": _ref_body(regarding),
        "note": truncate(note, NOTE_LIMIT),
        "type": type,
    }
    if related is not None:
        body["related"] = _ref_body(related)
    return body
