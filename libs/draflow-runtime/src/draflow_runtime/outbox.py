"""The bus's outbox: every published message waits here until NATS has it.

- :class:`Outbox` is the bounded FIFO, a pure data structure: :meth:`Outbox.push` appends (a full outbox
  evicts the oldest message), :meth:`Outbox.head` reads the oldest, :meth:`Outbox.discard` removes one
  once NATS acknowledged (or refused) it.
- :class:`OutboxDelivery` is the background task of :class:`~draflow_runtime.bus.EventBus` that drains it
  in order: up to ``max_in_flight`` messages written at once and their acks awaited together, retried
  with backoff while NATS is unreachable or stalled, a message JetStream refuses (4xx) dropped and logged.
  With a ``linger``, a batch leaves that long after its first message, so messages published meanwhile
  share one write to the server and their acks one read (about a third of the CPU of each history event
  in the claim-controller, whose events arrive a few milliseconds apart; docs/benchmarks.md).

Metrics (label ``name``): ``draflow_bus_published_total``, ``draflow_bus_outboxed_total``,
``draflow_bus_dropped_total{reason=outbox_full|rejected}``, ``draflow_bus_delivered_from_outbox_total``,
``draflow_bus_outbox_depth``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import nats.js.errors
from prometheus_client import Counter, Gauge

from draflow_runtime.buserrors import _TRANSIENT, _is_rejection, _rejected
from draflow_runtime.log import get_logger

__all__ = ["Outbox", "OutboxDelivery", "OutboxMessage"]

log = get_logger("draflow_runtime.bus")

MSG_ID_HEADER = "Nats-Msg-Id"

PUBLISHED = Counter(
    "draflow_bus_published_total", "Messages accepted by NATS, outbox deliveries included.", ["name"]
)
OUTBOXED = Counter(
    "draflow_bus_outboxed_total", "Messages queued in the outbox for delivery (every publish).", ["name"]
)
DROPPED = Counter(
    "draflow_bus_dropped_total", "Messages lost: evicted from a full outbox or rejected.", ["name", "reason"]
)
DELIVERED = Counter(
    "draflow_bus_delivered_from_outbox_total", "Messages delivered from the outbox.", ["name"]
)
OUTBOX_DEPTH = Gauge("draflow_bus_outbox_depth", "Messages waiting in the outbox.", ["name"])


@dataclass(frozen=True)
class OutboxMessage:
    """A message waiting for NATS. ``headers`` already carry trace context and ``Nats-Msg-Id``."""

    subject: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    jetstream: bool = True


T = TypeVar("T")


class Outbox(Generic[T]):
    """Bounded FIFO: :meth:`push` on a full outbox evicts and returns the oldest item.

    Items are matched by identity (:meth:`pop_if`, :meth:`discard`), so an item evicted while it was
    being delivered is never confused with an equal newer one.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("outbox size must be at least 1")
        self.maxsize = maxsize
        self._items: deque[T] = deque()

    def push(self, item: T) -> T | None:
        """Append ``item``; return the evicted oldest item if the outbox was full, else None."""
        evicted = self._items.popleft() if len(self._items) >= self.maxsize else None
        self._items.append(item)
        return evicted

    def peek(self) -> T | None:
        """The oldest item, left in place; None when empty."""
        return self._items[0] if self._items else None

    def head(self, n: int) -> list[T]:
        """Up to ``n`` oldest items, oldest first, left in place."""
        return [self._items[i] for i in range(min(n, len(self._items)))]

    def pop_if(self, item: T) -> bool:
        """Remove the oldest item if it is ``item`` (it may have been evicted meanwhile)."""
        if self._items and self._items[0] is item:
            self._items.popleft()
            return True
        return False

    def discard(self, item: T) -> bool:
        """Remove ``item`` wherever it is (usually the head); False if it is no longer there."""
        if self.pop_if(item):
            return True
        for i, other in enumerate(self._items):
            if other is item:
                del self._items[i]
                return True
        return False

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))


class OutboxDelivery:
    """The outbox of bus ``name`` and the task that delivers it in order with ``send`` once ``ready`` is
    set (connected, streams applied). ``send`` raises a transient NATS error to have the message retried,
    a 4xx JetStream ``APIError`` to have it dropped. ``linger`` (seconds, default 0): how long a batch
    waits after its first message for more (not when ``max_in_flight`` are already waiting)."""

    def __init__(
        self,
        name: str,
        size: int,
        send: Callable[[OutboxMessage], Awaitable[None]],
        ready: asyncio.Event,
        *,
        max_in_flight: int,
        max_backoff: float,
        linger: float = 0.0,
    ) -> None:
        self.name = name
        self.outbox: Outbox[OutboxMessage] = Outbox(size)
        self._send = send
        self._ready = ready
        self._max_in_flight = max(1, max_in_flight)
        self._max_backoff = max_backoff
        self._linger = max(0.0, linger)
        self._wake = asyncio.Event()  # outbox has work
        self._empty = asyncio.Event()  # outbox is empty
        self._empty.set()
        OUTBOX_DEPTH.labels(name).set(0)

    def keep(self, msg: OutboxMessage) -> None:
        """Append ``msg`` (a full outbox drops its oldest message, counted and logged) and wake the task."""
        evicted = self.outbox.push(msg)
        OUTBOXED.labels(self.name).inc()
        if evicted is not None:
            DROPPED.labels(self.name, "outbox_full").inc()
            log.warning(
                "outbox full, dropped oldest message",
                bus=self.name,
                subject=evicted.subject,
                msg_id=evicted.headers.get(MSG_ID_HEADER),
                size=self.outbox.maxsize,
            )
        OUTBOX_DEPTH.labels(self.name).set(len(self.outbox))
        self._empty.clear()
        self._wake.set()

    def wake(self) -> None:
        """Let the task look at the outbox again (after a (re)connection)."""
        self._wake.set()

    async def wait_empty(self, timeout: float | None) -> bool:  # noqa: ASYNC109
        """Wait (at most ``timeout`` seconds) until the outbox is empty; return whether it is."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._empty.wait(), timeout)
        return not len(self.outbox)

    async def run_forever(self) -> None:
        """Deliver the outbox from its head, in order: up to ``max_in_flight`` messages are written in
        order and their acks awaited together; each acked (or refused) one leaves the outbox, the others
        are retried with backoff."""
        backoff = 0.1
        while True:
            await self._wake.wait()
            if self._linger and 0 < len(self.outbox) < self._max_in_flight:
                await asyncio.sleep(self._linger)
            batch = self.outbox.head(self._max_in_flight)
            if not batch:
                self._wake.clear()
                self._empty.set()
                continue
            await self._ready.wait()
            # Tasks start in creation order and each writes its message before its first suspension,
            # so the messages reach the server in outbox order.
            results = await asyncio.gather(*(self._send(m) for m in batch), return_exceptions=True)
            failed: BaseException | None = None
            for msg, result in zip(batch, results, strict=True):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                if result is None:
                    self._delivered(msg)
                elif isinstance(result, nats.js.errors.APIError) and _is_rejection(result):
                    self._drop_rejected(msg, result)
                elif isinstance(result, _TRANSIENT):
                    failed = failed or result
                else:
                    raise result
            OUTBOX_DEPTH.labels(self.name).set(len(self.outbox))
            if failed is None:
                backoff = 0.1
                continue
            log.debug("outbox delivery failed, retrying", bus=self.name, error=repr(failed))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    def _delivered(self, msg: OutboxMessage) -> None:
        if self.outbox.discard(msg):  # not there: evicted while in flight (already counted as dropped)
            PUBLISHED.labels(self.name).inc()
            DELIVERED.labels(self.name).inc()

    def _drop_rejected(self, msg: OutboxMessage, exc: nats.js.errors.APIError) -> None:
        self.outbox.discard(msg)
        DROPPED.labels(self.name, "rejected").inc()
        err = _rejected(exc, msg.subject)
        log.error(
            "jetstream rejected outbox message, dropped",
            bus=self.name, subject=msg.subject, code=err.code, err_code=err.err_code, error=str(err),
        )
