"""Serving one node or a fleet of simulated nodes from one process.

Fleet mode (``--nodes node-0..node-199`` or ``--node-name-prefix sim- --node-count 200``) gives every node
its own directories under ``--fleet-root``::

    <root>/<node>/plugins_registry/<driver>-reg.sock
    <root>/<node>/plugins/<driver>/dra.sock
    <root>/<node>/cdi/            CDI spec files
    <root>/<node>/state/          checkpoint.json, checkpoint.journal.0/1, health.json

its own checkpoint, CDI root and device UUIDs (derived from the node name), and its own grpc.aio server.
All nodes share the inventory configuration, the ``KubeClient`` and one poller task that checks the
inventory file and every node's health file each ``--poll-interval``.
"""

from __future__ import annotations

import asyncio
import contextlib

from draflow_runtime.kube import KubeClient
from draflow_runtime.log import get_logger
from reference_driver.driver import NodeServer
from reference_driver.inventory import InventoryConfig, InventorySource
from reference_driver.node import NodeDriver, NodePaths
from reference_driver.settings import DriverSettings
from reference_driver.state import DriverIdentity

log = get_logger(__name__)

def inventory_base(settings: DriverSettings) -> InventoryConfig:
    return InventoryConfig.model_validate({
        "profile": settings.profile,
        "gpu_count": settings.gpu_count,
        "gpu_model": settings.gpu_model,
        "gpu_memory": settings.gpu_memory,
        "gpu_compute": settings.gpu_compute,
        "partitions_per_gpu": settings.partitions_per_gpu,
        "driver_version": settings.driver_version,
    })


def node_paths(settings: DriverSettings, node: str) -> NodePaths:
    if settings.fleet_mode:
        return NodePaths.fleet_layout(settings.driver_name, settings.fleet_root, node)
    return NodePaths.kubelet_layout(
        settings.driver_name,
        registry_dir=settings.registry_dir,
        plugins_dir=settings.plugins_dir,
        cdi_root=settings.cdi_root,
        state_dir=settings.state_dir,
    )


class Fleet:
    """The nodes of this process, their servers and the shared poller."""

    def __init__(self, settings: DriverSettings, kube: KubeClient | None) -> None:
        self.settings = settings
        self.inventory = InventorySource(inventory_base(settings), settings.inventory_file)
        identity = DriverIdentity(settings.driver_name, settings.cdi_class)
        self.nodes: dict[str, NodeDriver] = {}
        self.servers: list[NodeServer] = []
        for name in settings.node_names():
            node = NodeDriver(
                node_name=name,
                identity=identity,
                paths=node_paths(settings, name),
                inventory=self.inventory,
                kube=kube,
                health_check_timeout_seconds=settings.health_check_timeout_seconds,
                taint_unhealthy_devices=settings.taint_unhealthy_devices,
                use_passed_claims=settings.use_passed_claims,
            )
            self.nodes[name] = node
            self.servers.append(NodeServer(node, health_resend_interval=settings.health_resend_interval))
        self._poller: asyncio.Task[None] | None = None
        self.serving = False

    async def start(self) -> None:
        """Start every node's server, then the poller."""
        for server in self.servers:
            await server.start()
        self.serving = True
        self._poller = asyncio.create_task(self._poll_forever(), name="reference-driver-poller")
        log.info("serving", driver=self.settings.driver_name, nodes=len(self.nodes),
                 fleet=self.settings.fleet_mode)

    def poll_once(self) -> None:
        inventory_changed = self.inventory.poll()
        for node in self.nodes.values():
            node.poll(inventory_changed)

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.poll_interval)
            try:
                self.poll_once()
            except Exception:
                log.exception("poll failed")

    async def stop(self, grace: float | None = 1.0) -> None:
        self.serving = False
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        await asyncio.gather(*(server.stop(grace) for server in self.servers))
        await asyncio.gather(*(node.state.close() for node in self.nodes.values()))  # snapshots under way
