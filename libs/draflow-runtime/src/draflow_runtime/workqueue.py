"""A work queue of keys with client-go semantics, for asyncio.

* Repeated ``add`` of a key that is waiting merges into one entry (the *dirty* set).
* A key handed out by ``get`` is *processing* until ``done``: it is never handed to a second worker;
  ``add`` of it meanwhile is held and the key is queued again exactly once at ``done``.
* ``add_rate_limited`` delays by the larger of the per-key exponential backoff
  (``base_delay * 2**failures`` capped at ``max_delay``; a caller may scale one call with its own
  ``base_delay``/``max_delay``) and the global token bucket (``qps``/``burst``); ``forget`` resets the
  key's failures.
* ``add_after`` keeps a heap of delayed keys; a key delayed twice keeps the earlier time.
* ``shutdown`` makes every waiting and later ``get`` raise ``QueueShutDown`` (queued keys are dropped:
  every controller is level-triggered and relists when it starts again).

The clock is injectable (``clock=`` a function returning monotonic seconds) so unit tests can drive
backoff and delays without sleeping. Delayed keys become ready when ``get`` or ``len`` looks at the clock.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from collections.abc import Callable, Hashable

from prometheus_client import Counter, Gauge, Histogram

from .errors import DraflowError
from .metrics import registered_collector

__all__ = ["QueueShutDown", "WorkQueue"]

DEPTH = registered_collector(Gauge, "draflow_workqueue_depth", "Keys ready in the work queue.", ["name"])
ADDS = registered_collector(
    Counter, "draflow_workqueue_adds_total", "Keys added to the work queue.", ["name"]
)
QUEUE_DURATION = registered_collector(
    Histogram,
    "draflow_workqueue_queue_duration_seconds",
    "Time a key waits in the work queue before a worker takes it.",
    ["name"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0),
)
RETRIES = registered_collector(
    Counter, "draflow_workqueue_retries_total", "Rate-limited re-adds (retries) of keys.", ["name"]
)


class QueueShutDown(DraflowError):
    """Raised by ``WorkQueue.get`` once the queue is shut down."""


class WorkQueue:
    """Deduplicating, rate-limited, delayed work queue of hashable keys (see the module docstring).

    Not thread-safe; use it from one event loop.
    """

    def __init__(
        self,
        name: str = "default",
        base_delay: float = 0.005,
        max_delay: float = 300.0,
        qps: float = 50.0,
        burst: int = 100,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._added_at: dict[Hashable, float] = {}
        self._failures: dict[Hashable, int] = {}
        self._waiting: dict[Hashable, float] = {}  # key -> ready time; the heap may hold stale entries
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._tokens = float(burst)
        self._tokens_at = clock()
        self._shutting_down = False
        self._wakeup = asyncio.Event()
        self._depth = DEPTH.labels(name=name)
        self._adds = ADDS.labels(name=name)
        self._queue_duration = QUEUE_DURATION.labels(name=name)
        self._retries = RETRIES.labels(name=name)

    # -- adding ----------------------------------------------------------------------------------

    def add(self, key: Hashable) -> None:
        """Queue ``key`` now. Idempotent while it waits; held until ``done`` while it is processing.

        Ignored after ``shutdown``.
        """
        if self._shutting_down or key in self._dirty:
            return
        self._adds.inc()
        self._dirty.add(key)
        self._added_at[key] = self._clock()
        if key in self._processing:
            return
        self._queue.append(key)
        self._depth.set(len(self._queue))
        self._wakeup.set()

    def add_after(self, key: Hashable, seconds: float) -> None:
        """Queue ``key`` after ``seconds`` (at once when ``<= 0``). If the key is already waiting for
        a delay, the earlier ready time wins."""
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key)
            return
        ready = self._clock() + seconds
        current = self._waiting.get(key)
        if current is not None and current <= ready:
            return
        self._waiting[key] = ready
        self._seq += 1
        heapq.heappush(self._heap, (ready, self._seq, key))
        self._wakeup.set()

    def add_rate_limited(self, key: Hashable, *, base_delay: float | None = None,
                         max_delay: float | None = None) -> float:
        """Queue ``key`` after its backoff: max(per-key exponential backoff, global token bucket delay).

        Each call counts one failure for the key (see ``num_requeues``). ``base_delay``/``max_delay``
        scale this one backoff (default: the queue's); the failure count is the key's either way.
        Returns the delay used.
        """
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        base = self._base_delay if base_delay is None else base_delay
        cap = self._max_delay if max_delay is None else max_delay
        backoff = min(base * (2.0**failures), cap)
        delay = max(backoff, self._bucket_delay())
        self._retries.inc()
        self.add_after(key, delay)
        return delay

    def _bucket_delay(self) -> float:
        """Reserve one token of the global bucket; return how long until it is available."""
        if self._qps <= 0:
            return 0.0
        now = self._clock()
        self._tokens = min(float(self._burst), self._tokens + (now - self._tokens_at) * self._qps)
        self._tokens_at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, key: Hashable) -> None:
        """Reset the failure count of ``key`` (its next backoff starts at ``base_delay``). Idempotent."""
        self._failures.pop(key, None)

    def waiting_until(self, key: Hashable) -> float | None:
        """The clock time at which ``key``, queued with a delay (``add_after``), becomes ready; None
        when it is not waiting for one."""
        return self._waiting.get(key)

    def num_requeues(self, key: Hashable) -> int:
        """How many times ``key`` was rate-limited since the last ``forget``."""
        return self._failures.get(key, 0)

    # -- taking ----------------------------------------------------------------------------------

    def _promote_due(self) -> float | None:
        """Move delayed keys whose time has come into the queue; return the next ready time, if any."""
        now = self._clock()
        while self._heap:
            ready, _, key = self._heap[0]
            if self._waiting.get(key) != ready:
                heapq.heappop(self._heap)  # superseded by an earlier time
                continue
            if ready > now:
                return ready
            heapq.heappop(self._heap)
            del self._waiting[key]
            self.add(key)
        return None

    async def get(self) -> Hashable:
        """Wait for a ready key and mark it processing; the caller must call ``done(key)``.

        Raises ``QueueShutDown`` once the queue is shut down (also while waiting).
        """
        while True:
            if self._shutting_down:
                raise QueueShutDown(self.name)
            next_ready = self._promote_due()
            if self._queue:
                key = self._queue.popleft()
                self._depth.set(len(self._queue))
                self._processing.add(key)
                self._dirty.discard(key)
                added = self._added_at.pop(key, None)
                if added is not None:
                    self._queue_duration.observe(max(0.0, self._clock() - added))
                if self._queue:
                    self._wakeup.set()  # let the next getter look too
                return key
            self._wakeup.clear()
            timeout = None if next_ready is None else max(0.0, next_ready - self._clock())
            try:
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    def done(self, key: Hashable) -> None:
        """Finish processing ``key``; if it was added meanwhile, queue it again (once)."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._depth.set(len(self._queue))
            self._wakeup.set()

    def shutdown(self) -> None:
        """Stop the queue: every waiting and later ``get`` raises ``QueueShutDown``. Idempotent."""
        self._shutting_down = True
        self._wakeup.set()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys ready now (delayed keys whose time has come included; processing keys excluded)."""
        self._promote_due()
        return len(self._queue)

    def processing(self) -> frozenset[Hashable]:
        """Keys handed out and not yet ``done``."""
        return frozenset(self._processing)
