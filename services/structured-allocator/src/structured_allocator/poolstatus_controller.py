"""Answering ResourcePoolStatusRequests (``resource.k8s.io/v1alpha3``, DRAResourcePoolStatus) from the
allocator's own view.

Upstream kube-controller-manager's ``resourcepoolstatusrequest`` controller answers them from the API
server's claims; draflow's structured-allocator answers them itself, from the caches it decides with:
the slices and DeviceTaintRules of its informers and every claim's *effective* allocation in its assume
cache, i.e. including allocations it has decided and is still writing. The numbers are the ones the next
decision will see.

* One informer on the requests; a request whose ``status`` is unset is queued (one worker).
* ``reconcile(name)``: read the request from the cache; already answered (``status`` set: the object is
  immutable from then on) or gone → done. Else compute (:func:`.poolstatus.compute_status`) and write
  ``status`` with a compare-and-swap PUT of the ``status`` subresource (field manager). Conflict → retried
  from the cache. A pool still being published (``PoolIncomplete``) → no write, retried with backoff
  (up to ``RETRY_MAX_DELAY`` apart) and at once when a slice of the request's driver changes (upstream
  retries 5 times, then waits for the informer resync). Input the computation cannot use (e.g. a
  quantity that does not parse) → ``Failed`` answer naming the problem; an answer the API server rejects
  → one ``Failed`` answer with its message.
* Every ``CLEANUP_INTERVAL`` the requests past their time are deleted (UID precondition): answered ones
  ``COMPLETED_TTL`` after the Complete/Failed condition, unanswered ones ``PENDING_TTL`` after creation.
* An API server that does not serve the resource (:func:`draflow_runtime.served.api_served`, asked at the
  start of each leadership term) switches the answers off, with a warning; nothing else of the allocator
  depends on it.

Idempotent: a request is answered at most once (the API server refuses a second status write), and a
restarted or new leader answers whatever is still unanswered.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import Counter

from draflow_runtime.errors import Conflict, Invalid, NotFound
from draflow_runtime.informer import Informer
from draflow_runtime.kube import RESOURCE_POOL_STATUS_REQUESTS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.metrics import registered_collector
from draflow_runtime.reconcile import Done, ReconcileResult, RequeueWithBackoff, Runner
from draflow_runtime.served import api_served
from draflow_runtime.workqueue import WorkQueue

from .poolstatus import COMPLETE, FAILED, compute_status, failed_status
from .state import ClusterState

__all__ = ["CLEANUP_INTERVAL", "COMPLETED_TTL", "PENDING_TTL", "PoolStatusController", "pool_status_answers",
           "should_delete"]

log = get_logger(__name__)

CLEANUP_INTERVAL = 600.0
COMPLETED_TTL = timedelta(hours=1)
PENDING_TTL = timedelta(hours=24)
RETRY_MAX_DELAY = 30.0

ANSWERS = registered_collector(
    Counter, "draflow_allocator_pool_status_requests_total",
    "ResourcePoolStatusRequests answered, by condition: Complete, Failed.", ["condition"],
)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def should_delete(request: Mapping[str, Any], now: datetime) -> bool:
    """Upstream's TTLs: an answered request an hour after its Complete/Failed condition (its creation
    when it has none), an unanswered one a day after its creation. An unknown time never expires."""
    status = request.get("status")
    created = _parse_time((request.get("metadata") or {}).get("creationTimestamp"))
    if status is not None:
        for condition in status.get("conditions") or ():
            if condition.get("type") in (COMPLETE, FAILED):
                since = _parse_time(condition.get("lastTransitionTime"))
                return since is not None and now - since > COMPLETED_TTL
        return created is not None and now - created > COMPLETED_TTL
    return created is not None and now - created > PENDING_TTL


class PoolStatusController:
    """One leadership term's answers to ResourcePoolStatusRequests, read from ``state``."""

    def __init__(self, kube: KubeClient, state: ClusterState, field_manager: str, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 cleanup_interval: float = CLEANUP_INTERVAL) -> None:
        self.kube = kube
        self.state = state
        self.field_manager = field_manager
        self.clock = clock
        self.cleanup_interval = cleanup_interval
        self.requests = Informer(kube, RESOURCE_POOL_STATUS_REQUESTS, name="resourcepoolstatusrequests")
        self.queue = WorkQueue(name="poolstatusrequests", base_delay=0.05, max_delay=RETRY_MAX_DELAY)
        self.runner = Runner("poolstatus", self.queue, self.reconcile, workers=1)
        self.requests.add_handler(self._on_request)
        self._waiting: dict[str, str] = {}  # request name -> driver, while a pool of it is incomplete
        state.slice_informer.add_handler(self._on_slice)

    # -- handlers (only enqueue) -------------------------------------------------------------------

    def _on_request(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            assert old is not None
            self._waiting.pop(old["metadata"]["name"], None)
            return
        if new.get("status") is None:
            self.queue.add(new["metadata"]["name"])

    def _on_slice(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        driver = ((new or old or {}).get("spec") or {}).get("driver")
        for name, waiting_for in list(self._waiting.items()):
            if waiting_for == driver:
                self.queue.add(name)

    # -- running -------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Answer requests until cancelled (after the allocator's informers have synced)."""
        if not await api_served(self.kube, RESOURCE_POOL_STATUS_REQUESTS, "DRAResourcePoolStatus"):
            return
        for informer in self.state.informers:
            await informer.wait_synced()
        await self.requests.start()
        try:
            await self.requests.wait_synced()
            async with asyncio.TaskGroup() as group:
                group.create_task(self.runner.run(), name="poolstatus-runner")
                group.create_task(self._cleanup_forever(), name="poolstatus-cleanup")
        finally:
            self.queue.shutdown()
            await self.requests.stop()

    async def _cleanup_forever(self) -> None:
        while True:
            await self.cleanup()
            await asyncio.sleep(self.cleanup_interval)

    async def cleanup(self) -> int:
        """Delete the requests past their time; returns how many were deleted."""
        now = self.clock()
        deleted = 0
        for request in self.requests.list():
            if not should_delete(request, now):
                continue
            meta = request["metadata"]
            try:
                await self.kube.delete(RESOURCE_POOL_STATUS_REQUESTS, meta["name"],
                                       preconditions={"uid": meta["uid"]})
                deleted += 1
                log.info("expired resourcepoolstatusrequest deleted", request=meta["name"])
            except (NotFound, Conflict):
                continue  # gone already, or a new object of that name
            except Exception as err:  # the next round tries again
                log.warning("deleting an expired resourcepoolstatusrequest failed", request=meta["name"],
                            error=str(err))
        return deleted

    # -- reconcile -----------------------------------------------------------------------------------

    async def reconcile(self, name: str) -> ReconcileResult:
        request = self.requests.get(name)
        if request is None or request.get("status") is not None:
            self._waiting.pop(name, None)
            return Done()
        spec = request.get("spec") or {}
        now = rfc3339(self.clock())
        try:
            rules = self.state.rules.list() if self.state.rules is not None else []
            answer = compute_status(request, self.state.slice_informer.list(),
                                    self.state.assume.allocations(), rules, now)
            status, incomplete = answer.status, answer.incomplete
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            log.warning("resourcepoolstatusrequest input unusable", request=name, driver=spec.get("driver"),
                        error=str(err))
            status, incomplete = failed_status(f"cannot compute the pool status: {err}", now), False
        if incomplete:
            self._waiting[name] = str(spec.get("driver", ""))
            log.debug("resourcepoolstatusrequest waits for incomplete pools", request=name)
            return RequeueWithBackoff()
        self._waiting.pop(name, None)
        try:
            await self._write(request, status)
        except Invalid as err:
            log.warning("resourcepoolstatusrequest answer rejected", request=name, error=err.message)
            with contextlib.suppress(Conflict, NotFound, Invalid):
                await self._write(request, failed_status(f"the API server rejected the answer: {err.message}",
                                                         now))
        except NotFound:
            pass
        return Done()

    async def _write(self, request: Mapping[str, Any], status: dict[str, Any]) -> None:
        body = copy.deepcopy(dict(request))
        body["status"] = status
        await self.kube.replace(RESOURCE_POOL_STATUS_REQUESTS, body, subresource="status",
                                field_manager=self.field_manager)
        condition = status["conditions"][0]
        ANSWERS.labels(condition=condition["type"]).inc()
        log.info("resourcepoolstatusrequest answered", request=request["metadata"]["name"],
                 driver=(request.get("spec") or {}).get("driver"), pools=status.get("poolCount"),
                 condition=condition["type"])


@contextlib.asynccontextmanager
async def pool_status_answers(kube: KubeClient, state: ClusterState, field_manager: str, *,
                              enabled: bool) -> AsyncIterator[PoolStatusController | None]:
    """Answer ResourcePoolStatusRequests from ``state`` while the block runs (``enabled``: the
    DRAResourcePoolStatus gate)."""
    if not enabled:
        yield None
        return
    controller = PoolStatusController(kube, state, field_manager)
    task = asyncio.create_task(controller.run(), name="pool-status-answers")
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
