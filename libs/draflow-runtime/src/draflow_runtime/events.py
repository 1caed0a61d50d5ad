"""Kubernetes Events (``events.k8s.io/v1``) for what a user must see, folded into series like client-go's
``tools/events`` recorder.

One Event per key — (regarding, related, type, reason, action, note); reporting controller and instance
are the recorder's own — for as long as it keeps happening:

- the first occurrence creates an Event (``eventTime``, no ``series``);
- the second patches ``series: {count: 2, lastObservedTime}`` onto it;
- later ones only count in memory; a background task writes the series when it has been quiet for
  ``window`` seconds (6 minutes, client-go's ``finishTime``: the series is over and forgotten), every
  ``refresh`` seconds while it goes on (30 minutes, client-go's heartbeat), and at :meth:`aclose`;
- an occurrence more than ``window`` after the Event (no series) or after the series' last observation
  starts a new Event; a series patch that finds its Event gone (the API server's event TTL) creates it
  again with the series.

Unlike client-go the note is part of the key (client-go keeps the first note of a series and drops the
others): a different message about the same object is a new Event, so a changed error reaches the user.
Overlong notes, reasons and actions are cut to the API server's limits (:mod:`.eventshape`), not lost.

Recording never raises: failures are logged (an Event is a courtesy, never a reason to fail a
reconcile). Recordings of one key run one after the other; everything else runs concurrently — there is
no process-wide lock, neither around recording nor around the background writes, so a slow or throttled
write about one object never holds up Events about others. The API server serves the same objects as
core/v1 Events (``involvedObject``, ``message``, ``series``, ``reportingComponent``), which is what
``kubectl describe`` reads.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import AlreadyExists, ApiError, NotFound, ServerError, Timeout, TooManyRequests
from .eventshape import Ref, micro_time, new_event, reference
from .keyedlocks import KeyedLocks
from .kube import EVENTS_V1, KubeClient
from .log import get_logger

__all__ = ["EventRecorder"]

log = get_logger(__name__)

_MAX_CACHE = 4096
WINDOW = 360.0  # client-go tools/events finishTime
REFRESH = 1800.0  # client-go tools/events refreshTime
_TYPES = ("Normal", "Warning")

_Key = tuple[Ref, Ref | None, str, str, str, str]  # regarding, related, type, reason, action, note


@dataclass(slots=True)
class _Seen:
    """One Event this recorder wrote and is still counting."""

    body: dict[str, Any]  # as created (to create it again if it expired)
    created: float
    count: int  # occurrences so far
    last_observed: float
    written: int  # the count the API server has (1: no series yet)
    last_written: float

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    def idle(self, now: float, window: float) -> bool:
        """True when this Event's series is over: nothing for ``window`` seconds."""
        return now - (self.last_observed if self.count > 1 else self.created) > window


def _retryable(err: Exception) -> bool:
    return not isinstance(err, ApiError) or isinstance(err, TooManyRequests | ServerError | Timeout)


class EventRecorder:
    """Records Events about objects as ``component`` (``reportingController``; ``reportingInstance``:
    ``<component>-<host>`` as client-go names it). ``clock`` (Unix seconds) is for tests."""

    def __init__(
        self,
        kube: KubeClient,
        component: str,
        *,
        host: str | None = None,
        window: float = WINDOW,
        refresh: float = REFRESH,
        sweep: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self.component = component
        self.instance = f"{component}-{host if host is not None else socket.gethostname()}"
        self._window = window
        self._refresh = refresh
        self._sweep = sweep
        self._clock = clock
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._locks = KeyedLocks()  # one per key while in use
        self._keeper: asyncio.Task[None] | None = None
        self._closed = False

    async def event(self, regarding: dict[str, Any], type: str, reason: str, note: str, *, action: str,
                    related: dict[str, Any] | None = None) -> None:
        """Record ``type`` (``Normal``/``Warning``) ``reason``: ``note`` about ``regarding``, which
        happened while doing ``action`` (``Scheduling``, ``Binding``, ...); ``related``: a second object
        it involves. Objects need ``kind``, ``apiVersion``, ``metadata.name`` (``namespace``, ``uid`` if
        they have them). Never raises."""
        try:
            if type not in _TYPES:
                raise ValueError(f"event type {type!r} is neither Normal nor Warning")
            key: _Key = (reference(regarding), reference(related) if related is not None else None,
                         type, reason, action, note)
            async with self._locks.hold(key):
                await self._record(key)
        except Exception:
            log.warning("event not recorded", reason=reason, action=action, event_note=note, exc_info=True)

    async def _record(self, key: _Key) -> None:
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and seen.idle(now, self._window):
            await self._finish(key, seen)
            seen = None
        if seen is None:
            regarding, related, type, reason, action, note = key
            body = new_event(regarding=regarding, related=related, type=type, reason=reason,
                             action=action, note=note, controller=self.component,
                             instance=self.instance, now=now)
            try:
                await self._kube.create(EVENTS_V1, body)
            except AlreadyExists:  # two Events about one object in the same nanosecond
                body["metadata"]["name"] = str(uuid.uuid4())
                await self._kube.create(EVENTS_V1, body)
            self._remember(key, _Seen(body, now, 1, now, 1, now))
            return
        seen.count += 1
        seen.last_observed = now
        if key in self._seen:
            self._seen.move_to_end(key)
        if seen.written == 1:  # the second occurrence turns the Event into a series at once
            await self._write_series(seen)
        self._start_keeper()

    def _remember(self, key: _Key, seen: _Seen) -> None:
        self._seen[key] = seen
        self._seen.move_to_end(key)
        while len(self._seen) > _MAX_CACHE:
            _, dropped = self._seen.popitem(last=False)
            if dropped.count > dropped.written:
                log.info("event series dropped from a full cache", event_name=dropped.name,
                         namespace=dropped.namespace, unwritten=dropped.count - dropped.written)

    async def _write_series(self, seen: _Seen) -> None:
        """Write ``seen``'s series (its count and last observation) onto its Event, or create the Event
        with it when the API server no longer has it."""
        count, last = seen.count, seen.last_observed
        series = {"count": count, "lastObservedTime": micro_time(last)}
        try:
            await self._kube.patch(EVENTS_V1, seen.name, {"series": series}, seen.namespace)
        except NotFound:  # expired by the event TTL
            await self._kube.create(EVENTS_V1, {**seen.body, "series": series})
        seen.written = count
        seen.last_written = self._clock()

    async def _finish(self, key: _Key, seen: _Seen) -> None:
        """The series is over: write what is not written yet and forget it (kept only when that write
        failed and may work later)."""
        if seen.count > seen.written:
            try:
                await self._write_series(seen)
            except Exception as err:
                if _retryable(err):
                    raise
                log.warning("event series not written", event_name=seen.name, namespace=seen.namespace,
                            error=repr(err))
        if self._seen.get(key) is seen:
            del self._seen[key]

    # -- background writes of series -----------------------------------------------------------------

    def _start_keeper(self) -> None:
        if self._closed or (self._keeper is not None and not self._keeper.done()):
            return
        self._keeper = asyncio.get_running_loop().create_task(self._keep(), name="event-series")

    async def _keep(self) -> None:
        """Every ``sweep`` seconds: finish the idle series, refresh the due ones. Ends when no series is
        left (the next one starts it again)."""
        while any(seen.count > 1 for seen in self._seen.values()):
            await asyncio.sleep(self._sweep)
            await self.sweep()

    async def sweep(self) -> None:
        """One pass of the background task (public for tests): each due series written under its own
        key's lock, all of them concurrently."""
        now = self._clock()
        due = [(key, seen) for key, seen in list(self._seen.items())
               if seen.idle(now, self._window)
               or (seen.count > seen.written and now - seen.last_written >= self._refresh)]
        await asyncio.gather(*(self._sweep_one(key, seen) for key, seen in due))

    async def _sweep_one(self, key: _Key, seen: _Seen) -> None:
        try:
            async with self._locks.hold(key):
                if self._seen.get(key) is not seen:
                    return  # finished or replaced meanwhile
                if seen.idle(self._clock(), self._window):
                    await self._finish(key, seen)
                elif seen.count > seen.written:
                    await self._write_series(seen)
        except Exception as err:
            log.warning("event series not written", event_name=seen.name, namespace=seen.namespace,
                        error=repr(err))

    async def flush(self) -> None:
        """Write every series count the API server does not have yet, now."""
        pending = [(key, seen) for key, seen in list(self._seen.items()) if seen.count > seen.written]

        async def write(key: _Key, seen: _Seen) -> None:
            try:
                async with self._locks.hold(key):
                    if seen.count > seen.written:
                        await self._write_series(seen)
            except Exception as err:
                log.warning("event series not written", event_name=seen.name, namespace=seen.namespace,
                            error=repr(err))

        await asyncio.gather(*(write(key, seen) for key, seen in pending))

    async def aclose(self) -> None:
        """Stop the background task and write the pending series counts. Recording still works after
        (nothing is counted in the background any more). Idempotent."""
        self._closed = True
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.wait([self._keeper])  # not `await task`: that would swallow our own cancel
            self._keeper = None
        await self.flush()
