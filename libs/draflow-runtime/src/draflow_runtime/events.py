"""Kubernetes Events (core/v1) for what a user must see, de-duplicated like client-go.

The same (object, type, reason, message) recorded again within ``window`` seconds increments ``count``
and ``lastTimestamp`` of the existing Event with a merge patch instead of creating a new one.
Recording never raises: failures are logged (an Event is a courtesy, never a reason to fail a reconcile).
Recordings of one (object, type, reason, message) run one after the other (so a repeat patches the Event
the first one created, and no count is lost); everything else runs concurrently: a slow or throttled
write about one object never holds up Events about others.
"""

from __future__ import annotations

import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from .errors import NotFound
from .keyedlocks import KeyedLocks
from .kube import EVENTS, KubeClient

__all__ = ["EventRecorder"]

log = structlog.get_logger(__name__)

_MAX_CACHE = 4096


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int
    first_timestamp: str
    last_seen: float


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _describe(obj: dict[str, Any], type: str, reason: str,
              message: str) -> tuple[dict[str, str], str, tuple[str, ...]]:
    """``involvedObject``, the Event's namespace and the de-duplication key of one recording."""
    meta = obj.get("metadata") or {}
    involved = {
        "kind": obj.get("kind", ""),
        "apiVersion": obj.get("apiVersion", ""),
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "uid": meta.get("uid", ""),
    }
    involved = {k: v for k, v in involved.items() if v}
    namespace = meta.get("namespace") or "default"
    cache_key = (involved.get("kind", ""), namespace, involved.get("name", ""),
                 involved.get("uid", ""), type, reason, message)
    return involved, namespace, cache_key


class EventRecorder:
    """Records Events about objects for ``component`` (``source.component``/``reportingComponent``).

    Events of cluster-scoped objects go to namespace ``default`` (as client-go does).
    """

    def __init__(
        self,
        kube: KubeClient,
        component: str,
        *,
        host: str | None = None,
        window: float = 600.0,
    ) -> None:
        self._kube = kube
        self.component = component
        self.host = host if host is not None else socket.gethostname()
        self._window = window
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        # One lock per cache key while it is in use (count of holders and waiters), dropped after.
        self._locks = KeyedLocks()  # per (object, type, reason, message)

    async def event(self, obj: dict[str, Any], type: str, reason: str, message: str) -> None:
        """Record ``type`` (``Normal``/``Warning``) ``reason``: ``message`` about ``obj``.

        ``obj`` needs ``kind``, ``apiVersion`` and ``metadata.name`` (``namespace``, ``uid`` if it has
        them). Never raises.
        """
        try:
            involved, namespace, cache_key = _describe(obj, type, reason, message)
            async with self._locks.hold(cache_key):
                await self._record(involved, namespace, cache_key, type, reason, message)
        except Exception:
            log.warning("event not recorded", reason=reason, event_message=message, exc_info=True)

    async def _record(self, involved: dict[str, str], namespace: str, cache_key: tuple[str, ...],
                      type: str, reason: str, message: str) -> None:
        now, mono = _now(), time.monotonic()
        seen = self._seen.get(cache_key)
        if seen is not None and mono - seen.last_seen <= self._window:
            try:
                await self._kube.patch(
                    EVENTS, seen.name, {"count": seen.count + 1, "lastTimestamp": now},
                    namespace=seen.namespace,
                )
                seen.count += 1
                seen.last_seen = mono
                if cache_key in self._seen:  # other keys' recordings may have evicted it meanwhile
                    self._seen.move_to_end(cache_key)
                return
            except NotFound:
                pass  # expired by the API server's event TTL: create a new one
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name', 'unknown')}.{time.time_ns():x}",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
        }
        created = await self._kube.create(EVENTS, body, namespace)
        self._seen[cache_key] = _Seen(created["metadata"]["name"], namespace, 1, now, mono)
        self._seen.move_to_end(cache_key)
        while len(self._seen) > _MAX_CACHE:
            self._seen.popitem(last=False)
