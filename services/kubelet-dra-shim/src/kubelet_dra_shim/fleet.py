"""The served nodes, one process: per-node state small, everything else shared.

Each :class:`Node` owns only what is really per node: its plugin store (the gRPC channels to its
drivers), its checkpoint and claim cache, and its health cache. Shared across the fleet: one API client,
one pods informer (``spec.nodeName=<node>`` for one node, every bound pod indexed by node for a fleet),
one work queue and runner, one registry watcher (:mod:`kubelet_dra_shim.registration`: one poll loop and
one queue of ``(node, socket)`` keys for every node's registry directory), one NATS connection
(claim events out, ``allocated`` nudges in). A single-node shim is simply a fleet of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from draflow_runtime.bus import EventBus
from draflow_runtime.informer import Informer
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.reconcile import Runner
from draflow_runtime.workqueue import WorkQueue

from .checkpoint import read_boot_id
from .claimevents import Allocated, ClaimEvents, subscribe_allocated
from .health import NodeHealth
from .manager import TRACER_NAME, NodeManager
from .nodeops import GATE as OPTIONAL_NODE_OPERATIONS
from .nodeops import declared_features
from .plugins import Plugin, PluginStore
from .pods import NodeKey, PodController
from .registration import registration_watcher
from .settings import ShimSettings
from .simkubelet import SimKubelet

log = get_logger(__name__)


@dataclass(eq=False)
class Node:
    name: str
    store: PluginStore
    manager: NodeManager
    health: NodeHealth | None


def _by_node(pod: dict[str, Any]) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


class Fleet:
    """Everything one shim process runs. ``async with Fleet(...)`` starts it; leaving the block stops it."""

    def __init__(
        self,
        settings: ShimSettings,
        kube: KubeClient,
        recorder: Any,
        events: EventBus | None = None,
        *,
        tracer_provider: Any = None,
        bus: EventBus | None = None,
    ) -> None:
        """``events``: where claim lifecycle events go (None: not published); ``bus``: where ``allocated``
        nudges come from (None or ``allocated_nudges`` off: none). The service passes its one bus as both."""
        self.settings = settings
        self.bus = bus
        self.kube = kube
        self.events = ClaimEvents(events)
        self.boot_id = read_boot_id(settings.boot_id_file)
        names = settings.node_names()
        gates = settings.gates
        tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self.nodes: dict[str, Node] = {}
        for name in names:
            paths = settings.node_paths(name)
            store = PluginStore()
            manager = NodeManager(
                name,
                paths.state_dir,
                store,
                kube,
                self.events,
                boot_id=self.boot_id,
                rpc_timeout=settings.rpc_timeout,
                reprepare_after_restart=settings.reprepare_after_restart,
                optional_node_operations=gates[OPTIONAL_NODE_OPERATIONS],
                workload_claims=gates["DRAWorkloadResourceClaims"],
                tracer=tracer,
            )
            store.add_listener(functools.partial(self._plugin_changed, name))
            health = NodeHealth(name, store, self._health_changed) if settings.health else None
            self.nodes[name] = Node(name, store, manager, health)
        self.registry = registration_watcher(
            {n: (settings.node_paths(n).registry_dir, node.store) for n, node in self.nodes.items()},
            interval=settings.registry_poll_interval,
        )
        field_selector = f"spec.nodeName={names[0]}" if len(names) == 1 else "spec.nodeName!="
        self.pods = Informer(
            kube, PODS, field_selector=field_selector, indexers={"byNode": _by_node}, name="pods"
        )
        self.queue = WorkQueue(name="kubelet-dra-shim", max_delay=30.0)
        self.sim = (
            SimKubelet(
                kube,
                names,
                cpu=settings.node_cpu,
                memory=settings.node_memory,
                pods=settings.node_pods,
                lease_renew_interval=settings.lease_renew_interval,
                node_status_interval=settings.node_status_interval,
                concurrency=settings.heartbeat_concurrency,
                declared_features=declared_features(gates),
            )
            if settings.simulate_kubelet
            else None
        )
        self.controller = PodController(
            self.pods,
            self.queue,
            {n: node.manager for n, node in self.nodes.items()},
            recorder,
            self.sim,
            health_view=self._health_view if settings.health else None,
            kube=kube,
        )
        self.claims: Informer | None = None
        if settings.watch_claims:
            self.claims = Informer(kube, RESOURCE_CLAIMS, name="resourceclaims")
            self.claims.add_handler(self.controller.on_claim_event)
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = False

    def _health_view(self, node: str) -> dict[tuple[str, str, str], tuple[str, str]]:
        health = self.nodes[node].health
        return health.view() if health is not None else {}

    def _allocated(self, target: Allocated) -> None:
        self.controller.nudge(target.namespace, target.pod, target.node)

    def _health_changed(self, node: str, driver: str) -> None:
        self.controller.enqueue_node_pods(node)

    def _plugin_changed(self, node: str, change: str, plugin: Plugin) -> None:
        """A driver (re)registered: what waits for it (a prepare, an unprepare, also of a pod already gone)
        is retried now rather than after the queue's backoff (up to 30 s)."""
        if change == "added":
            self.controller.enqueue_node(node)

    async def start(self) -> None:
        """Load checkpoints, register nodes, discover plugins, sync pods, then start reconciling."""
        await asyncio.gather(*(n.manager.load() for n in self.nodes.values()))
        rebooted = sum(n.manager.rebooted for n in self.nodes.values())
        if rebooted:
            log.warning("boot ID changed since the checkpoint was written: re-preparing", nodes=rebooted)
        if self.sim is not None:
            await self.sim.register_nodes()
            self._spawn(self.sim.heartbeat(), "heartbeat")
        # A first registry scan before pods are reconciled, so restarted drivers are known (no spurious
        # "driver not registered" events right after a restart).
        await self.registry.sync()
        self._spawn(self.registry.run(), "registry-watcher")
        await self.pods.start()
        await self.pods.wait_synced()
        if self.claims is not None:
            await self.claims.start()
            await self.claims.wait_synced()
        runner = Runner(
            "kubelet-dra-shim",
            self.queue,
            self.controller.reconcile,
            workers=self.settings.workers,
            timeout=self.settings.rpc_timeout * 2 + 30,
        )
        self._spawn(runner.run(), "runner")
        self.controller.enqueue_all()
        self._spawn(self._resync(), "resync")
        if self.bus is not None and self.bus.enabled and self.settings.allocated_nudges:
            await subscribe_allocated(self.bus, self._allocated)
        self.ready = True
        log.info(
            "shim started",
            nodes=len(self.nodes),
            boot_id=self.boot_id,
            simulated_kubelet=self.sim is not None,
        )

    def _spawn(self, coro: Any, name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    async def _resync(self) -> None:
        """Every ``resync_interval``: look at every node again (catches anything a missed event left)."""
        while True:
            await asyncio.sleep(self.settings.resync_interval)
            for node in self.nodes:
                self.queue.add(NodeKey(node))

    async def stop(self) -> None:
        self.ready = False
        self.queue.shutdown()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        await self.pods.stop()
        if self.claims is not None:
            await self.claims.stop()
        for node in self.nodes.values():
            if node.health is not None:
                await node.health.close()
        await self.registry.close()

    async def __aenter__(self) -> Fleet:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
