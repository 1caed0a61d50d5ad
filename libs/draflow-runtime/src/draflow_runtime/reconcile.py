"""The reconcile contract and the runner that owns it.

``async def reconcile(key) -> Done | RequeueAfter | RequeueWithBackoff`` reads everything it needs from
informer caches and decides from the current state. Its outcome, handled here and nowhere else:

================================  ==============================================================
``Done()`` (or ``None``)          ``forget(key)``: the key's backoff is reset
``RequeueAfter(seconds)``         ``forget(key)`` + ``add_after(key, seconds)``
``RequeueWithBackoff()``          ``add_rate_limited(key)``: not an error, but "try again later,
                                  later each time" (waiting for something no event announces); the
                                  key's backoff grows until a later ``Done``/``RequeueAfter``
                                  resets it (controller-runtime's ``Result{Requeue: true}``)
raise ``TerminalError``           logged, ``on_terminal(key, err)`` (an Event/condition), ``forget``;
                                  not retried
timeout (``timeout=``)            ``add_rate_limited(key)`` (retryable)
raise anything else               ``add_rate_limited(key)`` (retryable, exponential backoff)
raise ``CancelledError`` while    retryable, like any error: a library cancelled something the
nobody cancels the worker         reconcile awaited (grpc.aio fails the calls of a channel it closes
                                  that way); a cancellation of the worker itself propagates
================================  ==============================================================

``RequeueWithBackoff(base_delay=, max_delay=)`` may scale the backoff of that outcome (default: the
queue's); the failure count it grows is the key's one count, shared with retried errors.

A key is never reconciled by two workers at once (the work queue guarantees it). Nothing a reconcile
or callback raises stops a worker.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import Counter, Histogram

from .errors import TerminalError
from .log import get_logger
from .metrics import registered_collector
from .workqueue import QueueShutDown, WorkQueue

__all__ = [
    "Done", "ReconcileResult", "RequeueAfter", "RequeueWithBackoff", "Runner", "TerminalError",
    "cancelled_by_caller",
]

log = get_logger(__name__)

RECONCILE_DURATION = registered_collector(
    Histogram,
    "draflow_reconcile_duration_seconds",
    "Duration of one reconcile call, whatever its outcome.",
    ["name"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
RECONCILE_ERRORS = registered_collector(
    Counter,
    "draflow_reconcile_errors_total",
    "Failed reconciles by kind: terminal (not retried), retryable, timeout.",
    ["name", "kind"],
)


@dataclass(frozen=True, slots=True)
class Done:
    """The key is reconciled; nothing to do until the next event."""


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    """Reconcile the key again after ``seconds`` (e.g. to wait for a deadline), without backoff."""

    seconds: float


@dataclass(frozen=True, slots=True)
class RequeueWithBackoff:
    """Reconcile the key again after its exponential backoff (the queue's rate limiter), which grows
    with each such outcome until a ``Done``/``RequeueAfter`` resets it. ``base_delay``/``max_delay``
    scale it (``None``: the queue's)."""

    base_delay: float | None = None
    max_delay: float | None = None


ReconcileResult = Done | RequeueAfter | RequeueWithBackoff | None


def cancelled_by_caller() -> bool:
    """The current task itself is being cancelled (shut-down, a timeout), as opposed to a
    ``CancelledError`` a library raised into it for something it awaited (grpc.aio fails the calls of a
    channel it closes that way): only the first must propagate as a cancellation."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0
ReconcileFn = Callable[[Any], Awaitable[ReconcileResult]]
TerminalCallback = Callable[[Any, TerminalError], Awaitable[None] | None]


class Runner:
    """Runs ``workers`` tasks that take keys from ``queue`` and call ``reconcile`` (see module docstring).

    ``timeout`` bounds one reconcile (``None``: unbounded). ``on_terminal(key, err)`` may be a plain
    function or a coroutine function; its own failures are logged and swallowed.
    """

    def __init__(
        self,
        name: str,
        queue: WorkQueue,
        reconcile: ReconcileFn,
        workers: int = 4,
        timeout: float | None = 30.0,
        on_terminal: TerminalCallback | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.queue = queue
        self._reconcile = reconcile
        self._workers = workers
        self._timeout = timeout
        self._on_terminal = on_terminal
        self._duration = RECONCILE_DURATION.labels(name=name)
        self._errors = {kind: RECONCILE_ERRORS.labels(name=name, kind=kind)
                        for kind in ("terminal", "retryable", "timeout")}

    async def run(self) -> None:
        """Process keys until the queue shuts down. Cancelling ``run`` cancels the workers (a reconcile
        in flight is cancelled and its key is released)."""
        async with asyncio.TaskGroup() as group:
            for index in range(self._workers):
                group.create_task(self._worker(index), name=f"{self.name}-worker-{index}")

    async def _worker(self, index: int) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            try:
                await self.process(key)
            except Exception:  # the runner's own bug: never let it kill the worker
                log.exception("reconcile worker error", controller=self.name, key=str(key), worker=index)
            finally:
                self.queue.done(key)

    async def process(self, key: Hashable) -> None:
        """Reconcile one key already taken from the queue and apply the outcome to the queue.

        Does not call ``queue.done`` (the worker does). Raises only ``CancelledError``.
        """
        started = time.perf_counter()
        with structlog.contextvars.bound_contextvars(controller=self.name, key=str(key)):
            try:
                async with asyncio.timeout(self._timeout) as deadline:
                    result = await self._reconcile(key)
            except TerminalError as err:
                self._errors["terminal"].inc()
                log.error("reconcile failed terminally", error=str(err))
                await self._call_on_terminal(key, err)
                self.queue.forget(key)
            except TimeoutError as err:
                kind = "timeout" if deadline.expired() else "retryable"
                self._errors[kind].inc()
                delay = self.queue.add_rate_limited(key)
                log.warning("reconcile failed, retrying", kind=kind, error=repr(err), retry_in=delay)
            except Exception as err:
                self._retry(key, err)
            except asyncio.CancelledError as err:
                if cancelled_by_caller():
                    raise  # the worker itself is cancelled (shut-down, a shard given up)
                self._retry(key, err)  # before: the key was lost, and the worker ended silently
            else:
                if isinstance(result, RequeueWithBackoff):
                    delay = self.queue.add_rate_limited(key, base_delay=result.base_delay,
                                                        max_delay=result.max_delay)
                    log.debug("reconcile requeued with backoff", retry_in=delay)
                    return
                self.queue.forget(key)
                if isinstance(result, RequeueAfter):
                    self.queue.add_after(key, result.seconds)
                elif result is not None and not isinstance(result, Done):
                    log.warning("reconcile returned an unknown result, treated as done",
                                result=repr(result))
            finally:
                self._duration.observe(time.perf_counter() - started)

    def _retry(self, key: Hashable, err: BaseException) -> None:
        self._errors["retryable"].inc()
        delay = self.queue.add_rate_limited(key)
        log.warning("reconcile failed, retrying", kind="retryable", error=repr(err), retry_in=delay,
                    exc_info=True)

    async def _call_on_terminal(self, key: Hashable, err: TerminalError) -> None:
        if self._on_terminal is None:
            return
        try:
            outcome = self._on_terminal(key, err)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("on_terminal callback failed")
