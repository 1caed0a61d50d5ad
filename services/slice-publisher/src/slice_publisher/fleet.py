"""The publisher: one work-queue key per pool and the pool reconcile.

Data flow::

    RegistryWatcher ─► DriverConnection ─► DriverBook.on_inventory / on_unavailable / on_health
                                                        │ (state per (node, driver), enqueue)
    ResourceSlice informer (managed slices) ──────────► WorkQueue[(node, driver, pool)] ─► reconcile
    Node informer (owner references) ─────────────────┘                                    │
                                              plan_pool (pure) ─► apply_plan ─► NATS pool event

``reconcile(key)`` decides from the current state only: the driver's last inventory for the pool (None if
the driver or the pool is gone; :mod:`slice_publisher.driverbook`), the publisher's taints, and the pool's
slices from the informer cache merged with this process's own recent writes
(:class:`draflow_runtime.mutationcache.MutationCache`, so a second sync right after a write does not act
on a stale cache). It is idempotent: a pool that already looks right is not written. Outcomes: ``Done``;
a Conflict/NotFound from a stale cache is raised (retried with backoff); an invalid pool from the driver
(refused by our checks or by the API server) is logged and ``Done`` (not published).

Start-up (:mod:`slice_publisher.startup`): managed slices of drivers that did not register within
``startup_grace`` are deleted once, through their pools' reconciles; other slices of the node only with
``wipe_foreign_slices`` (directly, with preconditions). Until then a pool without driver state is not
touched, so restarting the publisher never churns slices.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from opentelemetry import trace

from draflow_runtime.bus import EventBus
from draflow_runtime.errors import Conflict, Invalid, NotFound
from draflow_runtime.informer import Informer
from draflow_runtime.kube import DEVICE_TAINT_RULES, NODES, RESOURCE_SLICES, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.mutationcache import MutationCache
from draflow_runtime.pluginwatcher import fleet_dirs, single_node_dirs
from draflow_runtime.reconcile import Done, Runner
from draflow_runtime.served import api_served
from draflow_runtime.tracing import inject_into_annotations
from draflow_runtime.workqueue import WorkQueue
from slice_publisher import events
from slice_publisher.driverbook import DriverBook, PoolKey
from slice_publisher.driverrules import DriverGoneRules
from slice_publisher.drivers import RegistryWatcher, accepts_connections
from slice_publisher.metrics import SLICES_CREATED, SLICES_DELETED, SLICES_UPDATED, SYNC_SECONDS
from slice_publisher.naming import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    PUBLISHER_NODE_LABEL,
    node_label_value,
    node_owner_reference,
    pool_hash,
    pool_hash_of,
)
from slice_publisher.pool_sync import ApplyResult, Plan, apply_plan, plan_pool
from slice_publisher.settings import PublisherSettings
from slice_publisher.splitter import InvalidPool, partition_type_dropped
from slice_publisher.startup import startup_cleanup, wipe_self_published

log = get_logger(__name__)
TRACER_NAME = "slice_publisher"

WRITE_MEMORY_SECONDS = 60.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Stats:
    """Per-process counters (the Prometheus ones are global); what tests and the benchmark read."""

    created: int = 0
    updated: int = 0
    deleted: int = 0
    syncs: int = 0
    writing_syncs: int = 0
    events: int = 0

    @property
    def writes(self) -> int:
        return self.created + self.updated + self.deleted


class Publisher:
    """slice-publisher for one node or a fleet of nodes. :meth:`run` until cancelled."""

    def __init__(
        self,
        kube: KubeClient,
        settings: PublisherSettings,
        *,
        bus: EventBus | None = None,
        tracer_provider: Any = None,
    ) -> None:
        """``bus``: where pool-change events go (None: not published); ``tracer_provider``: the
        OpenTelemetry provider of the sync spans (None: the global one)."""
        self.kube = kube
        self.settings = settings
        self.stats = Stats()
        self._bus = bus
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._writes = MutationCache(WRITE_MEMORY_SECONDS, index=_pool_hash_of)
        # Slice name -> resourceVersion of this process's last write of it, until the informer shows it.
        self._echoes: dict[str, str] = {}
        self.startup_cleaned = asyncio.Event()
        self.queue = WorkQueue(name="slice-publisher")
        self.drivers = DriverBook(settings, self.queue.add, self._published_pools)
        self._wipes: set[asyncio.Task[None]] = set()  # slices of self-publishing drivers that left
        self.drivers.wipe_foreign = self._wipe_foreign
        if settings.fleet_mode:
            dirs = fleet_dirs(settings.fleet_root)
            slice_selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
            node_selector = None
        else:
            dirs = single_node_dirs(settings.node_name, settings.registry_dir)
            slice_selector = (
                f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},"
                f"{PUBLISHER_NODE_LABEL}={node_label_value(settings.node_name)}"
            )
            node_selector = f"metadata.name={settings.node_name}"
        self.slices = Informer(
            kube,
            RESOURCE_SLICES,
            label_selector=slice_selector,
            name="resourceslices",
            indexers={
                "byPoolHash": _pool_hash_of,
                "byPublisherNode": lambda o: [o["metadata"]["labels"][PUBLISHER_NODE_LABEL]],
            },
        )
        self.nodes = Informer(kube, NODES, field_selector=node_selector, name="nodes")
        self.watcher = RegistryWatcher(
            dirs,
            self.drivers,
            interval=settings.registry_poll_interval,
            timeout=settings.grpc_timeout,
            max_backoff=settings.reconnect_max_backoff,
            want_health=settings.taint_unhealthy,
        )
        self.runner = Runner(
            "slice-publisher", self.queue, self.reconcile, workers=settings.workers, timeout=60.0
        )
        self.rules = DriverGoneRules(
            kube, self.drivers, self.slices, field_manager=settings.field_manager,
            min_pools=settings.driver_gone_rule_min_pools if settings.fleet_mode else 0,
            sockets=self._sockets_of, listening=accepts_connections,
        )
        self.rule_queue = WorkQueue(name="slice-publisher-rules")
        self.rule_runner = Runner("slice-publisher-rules", self.rule_queue, self.rules.reconcile, workers=1)
        if self.rules.enabled and settings.taint_unavailable:
            self.drivers.rules_on = lambda: self.rules.enabled
            self.drivers.covered = self.rules.covers
            self.drivers.driver_changed = self.rule_queue.add
            self.drivers.enqueue_after = self.queue.add_after

    # ------------------------------------------------------------------------------------ life cycle

    async def run(self) -> None:
        """Start informers, the registry watcher and the workers; return only when cancelled."""
        await events.declare_stream(self._bus)
        self.slices.add_handler(self._on_slice)
        self.nodes.add_handler(self._on_node)
        if self.rules.enabled and not await api_served(self.kube, DEVICE_TAINT_RULES, "DRADeviceTaintRules"):
            self.rules.disable("DeviceTaintRules are not served")
        await self.slices.start()
        await self.nodes.start()
        try:
            await self.slices.wait_synced()
            await self.nodes.wait_synced()
            async with asyncio.TaskGroup() as group:
                group.create_task(self.runner.run(), name="slice-publisher-runner")
                group.create_task(self.rule_runner.run(), name="slice-publisher-rules")
                group.create_task(self.watcher.run(), name="slice-publisher-registry")
                group.create_task(self._startup(), name="slice-publisher-startup")
        finally:
            self.queue.shutdown()
            self.rule_queue.shutdown()
            self.drivers.cancel_wipes()
            for task in self._wipes:
                task.cancel()
            await self.slices.stop()
            await self.nodes.stop()

    async def _startup(self) -> None:
        """The start-up clean-up, then the driver-gone rules a previous run left and those now due."""
        await startup_cleanup(self)
        drivers = await self.rules.adopt()
        drivers |= {d for (_, d), s in self.drivers.states.items() if s.unavailable}
        for driver in drivers:
            self.rule_queue.add(driver)

    def _wipe_foreign(self, node: str, driver: str) -> None:
        task = asyncio.create_task(wipe_self_published(self, node, driver), name=f"wipe-{node}-{driver}")
        self._wipes.add(task)
        task.add_done_callback(self._wipes.discard)

    def _sockets_of(self, driver: str) -> dict[str, list[str]]:
        """node -> the registration sockets where ``driver`` was found."""
        found: dict[str, list[str]] = {}
        for conn in self.watcher.connections():
            if conn.driver == driver:
                found.setdefault(conn.node, []).append(conn.reg_socket)
        return found

    # --------------------------------------------------------------------------- informer events

    def _published_pools(self, node: str, driver: str) -> set[str]:
        """The pools of (node, driver) that have slices in the informer cache."""
        return {
            sl["spec"]["pool"]["name"]
            for sl in self.slices.by_index("byPublisherNode", node_label_value(node))
            if sl["spec"]["driver"] == driver
        }

    def _on_slice(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new or old
        if obj is None:
            return
        if new is None and self.rules.covers(obj["spec"]["driver"]):
            self.rule_queue.add(obj["spec"]["driver"])  # its rule may go once these slices are gone
        name = obj["metadata"]["name"]
        if new is not None and self._echoes.get(name) == new["metadata"]["resourceVersion"]:
            # The echo of this process's own write: the pool is as its last sync left it, and anything
            # that changed the desired state since enqueued the pool itself. Syncing it again would
            # plan the pool once more per write, for nothing.
            del self._echoes[name]
            return
        node = self.drivers.node_by_label.get(obj["metadata"].get("labels", {}).get(PUBLISHER_NODE_LABEL, ""))
        if node is not None:
            self.queue.add((node, obj["spec"]["driver"], obj["spec"]["pool"]["name"]))

    def _on_node(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if event == "update":
            return  # the uid cannot change; status heartbeats must not cost a sync
        node = (new or old or {}).get("metadata", {}).get("name")
        for (n, driver), state in list(self.drivers.states.items()):
            if n == node:
                for pool in state.pools:
                    self.queue.add((n, driver, pool))

    # ------------------------------------------------------------------------------------ reconcile

    def existing(self, phash: str) -> list[dict[str, Any]]:
        """The pool's slices: the informer cache, corrected by this process's writes it has not seen."""
        cached = self.slices.by_index("byPoolHash", phash)
        return self._writes.by_index(phash, cached, seen_rv=self.slices.resource_version)  # type: ignore[return-value]

    def _remember(self, plan: Plan, result: ApplyResult) -> None:
        deleted = {o["metadata"]["name"]: o for o in plan.deletes}
        for name, obj in result.written.items():
            if obj is None:
                self._writes.deleted(deleted[name])
                self._echoes.pop(name, None)
            else:
                self._writes.mutated(obj)
                self._echoes[name] = obj["metadata"]["resourceVersion"]

    async def reconcile(self, key: Hashable) -> Done:
        node, driver, pool = cast(PoolKey, key)
        desired, touch = self.drivers.desired(node, driver, pool)
        if not touch:
            return Done()
        phash = pool_hash(driver, pool, node)
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            "slice-publisher.sync_pool", attributes={"node": node, "driver": driver, "pool": pool}
        ) as span:
            existing = self.existing(phash)
            owner = None
            if desired is not None and desired.node_name == node:
                owner = node_owner_reference(self.nodes.get(node))
            try:
                plan = plan_pool(
                    driver,
                    pool,
                    node,
                    desired,
                    existing,
                    now=_now(),
                    owner_ref=owner,
                    reserve_for_taints=self.settings.reserve_taint_room,
                )
            except InvalidPool as exc:
                log.error(
                    "driver sent an invalid pool, not publishing it",
                    node=node,
                    driver=driver,
                    pool=pool,
                    problems=exc.problems,
                )
                span.set_attribute("invalid", True)
                return Done()
            self.stats.syncs += 1
            span.set_attribute("generation", plan.generation)
            if plan.empty:
                return Done()
            stamp_sync_span(plan)
            result = ApplyResult()
            try:
                await apply_plan(self.kube, plan, field_manager=self.settings.field_manager, result=result)
            except (Conflict, NotFound) as exc:
                log.info("stale cache, will retry", node=node, driver=driver, pool=pool, error=str(exc))
                raise
            except Invalid as exc:
                # The driver's pool passed our checks but not the API server's (device names, attribute
                # counts...): its broken input, like InvalidPool. Retrying cannot help; its next
                # inventory reconciles the pool again.
                log.error("API server refused the driver's pool, not publishing it", node=node,
                          driver=driver, pool=pool, error=str(exc), causes=exc.causes or None)
                span.set_attribute("invalid", True)
                return Done()
            finally:
                self._remember(plan, result)
                self._count(driver, result)
            if not self.drivers.partition_type_dropped and partition_type_dropped(
                    [*plan.creates, *plan.updates], result.written):
                self.drivers.partition_type_dropped = True  # else every sync would rewrite the pool
                log.warning("partitionTypeAttribute dropped by the API server, publishing without it",
                            driver=driver, pool=pool, gate="DRAPartitionableDevicesType")
            span.set_attributes(
                {"created": result.created, "updated": result.updated, "deleted": result.deleted}
            )
            SYNC_SECONDS.labels(driver).observe(time.perf_counter() - started)
            # Inside the span: the event carries this sync's trace context in its headers.
            self.stats.events += 1
            await events.pool_changed(
                self._bus,
                plan,
                result,
                desired.devices if desired else (),
                node=node if desired is None or desired.node_name else "",
            )
        log.info(
            "pool synced",
            node=node,
            driver=driver,
            pool=pool,
            generation=plan.generation,
            slices=plan.slice_count,
            devices=plan.device_count,
            created=result.created,
            updated=result.updated,
            deleted=result.deleted,
        )
        return Done()

    def _count(self, driver: str, result: ApplyResult) -> None:
        self.stats.created += result.created
        self.stats.updated += result.updated
        self.stats.deleted += result.deleted
        if result.created or result.updated or result.deleted:
            self.stats.writing_syncs += 1
        SLICES_CREATED.labels(driver).inc(result.created)
        SLICES_UPDATED.labels(driver).inc(result.updated)
        SLICES_DELETED.labels(driver).inc(result.deleted)


def _pool_hash_of(obj: Mapping[str, Any]) -> list[str]:
    return [pool_hash_of(obj)]


def stamp_sync_span(plan: Plan) -> None:
    """Every slice this sync writes carries the sync's span (``draflow.dev/traceparent``): the allocator
    links a claim's allocation to the sync that published the pool it used. Not compared
    (:func:`~slice_publisher.compare.slice_differs` ignores annotations): a new span alone never
    rewrites a slice."""
    for obj in (*plan.creates, *plan.updates):
        meta = obj["metadata"]
        meta["annotations"] = inject_into_annotations(meta.get("annotations"))
