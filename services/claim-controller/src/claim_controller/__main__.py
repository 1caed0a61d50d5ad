"""Entry point ``claim-controller``: the service context (tracing, KubeClient, NATS, /metrics + health,
leader election; :mod:`draflow_runtime.servicecontext`), then the controller.

One replica at a time (``--shards 1``, the default): only the leader runs informers and workers; a replica
that loses the lease stops them and campaigns again (every reconcile is idempotent, so the next leader
simply starts from its fresh caches). Several replicas sharing the work (``--shards N``, N > 1): every
replica runs its informers, and a :class:`~draflow_runtime.shards.ShardCoordinator` wins and gives up
shards once the caches have synced; the controller reconciles only the keys of the shards held.

An optional API the API server does not serve (PodGroups, ``scheduling.k8s.io/v1beta1``: beta, off unless
kube-apiserver's ``--runtime-config`` turns it on; DeviceTaintRules) turns its feature off for the run, with
one warning (:func:`served_settings`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from draflow_runtime import gcpolicy
from draflow_runtime.kube import DEVICE_TAINT_RULES, POD_GROUPS, KubeClient
from draflow_runtime.served import api_served
from draflow_runtime.service import run_service
from draflow_runtime.servicecontext import ServiceContext
from draflow_runtime.shards import ShardCoordinator

from .controller import COMPONENT, Controller
from .events_bus import LINGER
from .leasecheck import check_lease_access
from .settings import Settings


async def serve(settings: Settings) -> None:
    """Run the service until cancelled."""
    gcpolicy.tune()
    async with ServiceContext(COMPONENT, settings) as svc:
        current: list[Controller] = []
        sharded = settings.shards > 1
        await svc.serve_http(ready=lambda: (not sharded and svc.standby)
                             or (bool(current) and current[-1].synced))
        # after /healthz is up: this waits for the API server, which may not answer yet
        settings = await served_settings(svc.kube, settings)
        await check_lease_access(svc.kube, settings)  # a Lease its RBAC does not name: stop here, say which
        bus = await svc.connect_bus(linger=LINGER)

        def make() -> Controller:
            return Controller(settings, svc.kube, bus=bus if bus.enabled else None,
                              requester=bus if bus.enabled else None, namespace=settings.namespace or None)

        if sharded:
            controller = make()
            current.append(controller)
            freeze = asyncio.create_task(gcpolicy.freeze_when_synced(controller.wait_synced))
            try:
                await run_sharded(controller, coordinator(svc, settings, controller))
            finally:
                freeze.cancel()
            return

        async def term() -> None:
            controller = make()
            current.append(controller)
            freeze = asyncio.create_task(gcpolicy.freeze_when_synced(controller.wait_synced))
            try:
                await controller.run()
            finally:
                freeze.cancel()
                current.remove(controller)

        await svc.lead(term)


async def served_settings(kube: KubeClient, settings: Settings) -> Settings:
    """``settings`` with each feature whose API ``kube`` does not serve turned off (a warning each):
    DRAWorkloadResourceClaims and GenericWorkload without PodGroups, DeviceTaintRule eviction without
    DeviceTaintRules."""
    gate = "DRAWorkloadResourceClaims" if settings.pod_groups else "GenericWorkload"
    if settings.generic_workload and not await api_served(kube, POD_GROUPS, gate):
        if settings.pod_groups:
            settings = settings.with_gate_off("DRAWorkloadResourceClaims")
        settings = settings.with_gate_off("GenericWorkload")
    if settings.device_taint_eviction and settings.device_taint_rules and \
            not await api_served(kube, DEVICE_TAINT_RULES, "DRADeviceTaintRules"):
        settings = settings.model_copy(update={"device_taint_rules": False})
    return settings


def coordinator(svc: ServiceContext, settings: Settings, controller: Controller) -> ShardCoordinator:
    return ShardCoordinator(
        svc.kube, settings.leader_election_namespace, settings.leader_election_id, settings.shards,
        settings.identity, on_acquired=controller.shard_acquired, on_lost=controller.shard_lost,
        lease_duration=settings.lease_duration, renew_deadline=settings.renew_deadline,
        retry_period=settings.retry_period,
    )


async def run_sharded(controller: Controller, shards: ShardCoordinator) -> None:
    """The controller's informers and workers, and, once its caches have synced, the shard Leases.
    Cancelling gives every shard up (its reconciles stop, its Lease is released) before the controller
    stops."""
    run = asyncio.create_task(controller.run(), name="claim-controller")
    leases: asyncio.Task[Any] | None = None
    try:
        synced = asyncio.create_task(controller.wait_synced())
        await asyncio.wait({run, synced}, return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        if run.done():
            await run  # failed before its caches synced: raise
            return
        leases = asyncio.create_task(shards.run(), name="shard-coordinator")
        await asyncio.wait({run, leases}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if leases is not None:
            leases.cancel()
            await asyncio.wait({leases})
        run.cancel()
        await asyncio.wait({run})
    for task in (run, leases):
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


def main() -> None:
    run_service(COMPONENT, Settings, serve)


if __name__ == "__main__":
    main()
