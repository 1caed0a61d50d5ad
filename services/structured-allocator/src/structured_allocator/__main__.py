"""Entry point ``structured-allocator``: the service context (tracing, KubeClient, /metrics + /explain +
the /ui web view, leader election; :mod:`draflow_runtime.servicecontext`), then one scheduler per
leadership term.

Only the leader runs informers, decisions and writes, and only the leader is connected to NATS for the
``draflow.allocator.allocate`` responder and the pool nudges (a bus per leadership term, so a standby
replica never answers). The per-pool and waiting-claim gauges (:mod:`.poolmetrics`) read the current
leader's state at scrape time. A new leader rebuilds the in-use devices from the claims' ``status.allocation``
(every allocated claim counts, bound or not), so a failover loses no device and gives none twice.
"""

from __future__ import annotations

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
            web.detach()
            current.remove(scheduler)


async def serve(settings: Settings) -> None:
    """Run the service until cancelled."""
    async with ServiceContext(COMPONENT, settings) as svc:
        explanations = ExplanationStore(settings.explanations_kept)
        web = WebView(explanations, jaeger_url=settings.ui_jaeger_url)
        current: list[Scheduler] = []
        POOL_METRICS.source = lambda: current[-1].state if current else None
        await svc.serve_http(ready=lambda: svc.standby or (bool(current) and current[-1].synced),
                             routes=[*explanations.routes(), *web.routes()])
        await svc.lead(lambda: lead(svc, settings, explanations, current, web))


def main() -> None:
    run_service(COMPONENT, Settings, serve)


if __name__ == "__main__":
    main()
