"""Entry point ``structured-allocator``: the service context (tracing, KubeClient, /metrics + /explain +
the /ui web view, leader election; :mod:`draflow_runtime.servicecontext`), then one scheduler per
leadership term.

Only the leader runs informers, decisions and writes, and only the leader is connected to NATS for the
``draflow.allocator.allocate`` responder and the pool nudges (a bus per leadership term, so a standby
replica never answers). The per-pool and waiting-claim gauges (:mod:`.poolmetrics`) read the current
leader's state at scrape time. A new leader rebuilds the in-use devices from the claims' ``status.allocation``
(every allocated claim counts, bound or not), so a failover loses no device and gives none twice.

An optional API the API server does not serve (PodGroups, ``scheduling.k8s.io/v1beta1``: beta, off unless
kube-apiserver's ``--runtime-config`` turns it on; DeviceTaintRules; ResourcePoolStatusRequests, asked by
:mod:`.poolstatus_controller`) turns its feature off for the run, with one warning (:func:`served_settings`).
"""

from __future__ import annotations

import asyncio

from draflow_runtime import gcpolicy
from draflow_runtime.kube import DEVICE_TAINT_RULES, POD_GROUPS, KubeClient
from draflow_runtime.served import api_served
from draflow_runtime.service import run_service
from draflow_runtime.servicecontext import ServiceContext

from .explain_http import ExplanationStore
from .poolmetrics import POOL_METRICS, AllocationLatency
from .poolstatus_controller import pool_status_answers
from .responder import AllocateResponder
from .scheduler import COMPONENT, Scheduler
from .settings import Settings
from .ui import WebView


async def lead(svc: ServiceContext, settings: Settings, explanations: ExplanationStore,
               current: list[Scheduler], web: WebView) -> None:
    """One leadership term: NATS, informers, the loop. Returns only by cancellation or error."""
    async with svc.open_bus() as bus:
        scheduler = Scheduler(settings, svc.kube, bus=bus if bus.enabled else None,
                              explanations=explanations)
        current.append(scheduler)
        web.attach(scheduler.state, bus if bus.enabled else None)
        AllocationLatency(scheduler.state)
        freeze = asyncio.create_task(gcpolicy.freeze_when_synced(scheduler.wait_synced))
        try:
            if bus.enabled:
                await bus.serve(settings.allocate_subject, AllocateResponder(scheduler).handle,
                                queue=COMPONENT)
                if settings.pool_events_subject:
                    await bus.subscribe(settings.pool_events_subject, scheduler.nudge)
            async with pool_status_answers(svc.kube, scheduler.state, settings.field_manager,
                                           enabled=settings.gates["DRAResourcePoolStatus"]):
                await scheduler.run()
        finally:
            freeze.cancel()
            web.detach()
            current.remove(scheduler)


async def served_settings(kube: KubeClient, settings: Settings) -> Settings:
    """``settings`` with each feature whose API ``kube`` does not serve turned off (a warning each):
    DRAWorkloadResourceClaims and GenericWorkload (pod-group cycles) without PodGroups,
    DeviceTaintRules' taints without DeviceTaintRules."""
    claims_gate = settings.gates["DRAWorkloadResourceClaims"]
    if settings.gates["GenericWorkload"] and not await api_served(
            kube, POD_GROUPS, "DRAWorkloadResourceClaims" if claims_gate else "GenericWorkload"):
        if claims_gate:
            settings = settings.with_gate_off("DRAWorkloadResourceClaims")
        settings = settings.with_gate_off("GenericWorkload")  # no pod-group cycles without PodGroups
    if settings.watch_device_taint_rules and \
            not await api_served(kube, DEVICE_TAINT_RULES, "DRADeviceTaintRules"):
        settings = settings.model_copy(update={"device_taint_rules": False})
    return settings


async def serve(settings: Settings) -> None:
    """Run the service until cancelled."""
    gcpolicy.tune()
    async with ServiceContext(COMPONENT, settings) as svc:
        explanations = ExplanationStore(settings.explanations_kept)
        web = WebView(explanations, jaeger_url=settings.ui_jaeger_url)
        current: list[Scheduler] = []
        POOL_METRICS.source = lambda: current[-1].state if current else None
        await svc.serve_http(ready=lambda: svc.standby or (bool(current) and current[-1].synced),
                             routes=[*explanations.routes(), *web.routes()])
        # after /healthz is up: this waits for the API server, which may not answer yet
        settings = await served_settings(svc.kube, settings)
        await svc.lead(lambda: lead(svc, settings, explanations, current, web))


def main() -> None:
    run_service(COMPONENT, Settings, serve)


if __name__ == "__main__":
    main()
