"""Entry point ``structured-allocator``: settings, logging, tracing, /metrics + /explain, leader election.

Only the leader runs informers, decisions and writes, and only the leader is connected to NATS for the
``draflow.allocator.allocate`` responder and the pool nudges (a bus per leadership term, so a standby
replica never answers). A new leader rebuilds the in-use devices from the claims' ``status.allocation``
(every allocated claim counts, bound or not), so a failover loses no device and gives none twice.
"""

from __future__ import annotations

import contextlib

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.kube import KubeClient
from draflow_runtime.leader import LeaderElector
from draflow_runtime.log import configure_logging, get_logger
from draflow_runtime.observability import ObservabilityServer
from draflow_runtime.service import run
from draflow_runtime.settings import load_settings
from draflow_runtime.tracing import setup_tracing, shutdown_tracing

from .explain_http import ExplanationStore
from .poolstatus_controller import pool_status_answers
from .responder import AllocateResponder
from .scheduler import COMPONENT, Scheduler
from .settings import Settings

log = get_logger(__name__)


async def lead(settings: Settings, kube: KubeClient, explanations: ExplanationStore,
               current: list[Scheduler]) -> None:
    """One leadership term: NATS, informers, the loop. Returns only by cancellation or error."""
    bus = EventBus(settings.nats_url, name=COMPONENT)
    await lifecycle.ensure_events_stream(bus)
    await bus.start()
    scheduler = Scheduler(settings, kube, bus=bus if bus.enabled else None,
                          explanations=explanations)
    current.append(scheduler)
    try:
        if bus.enabled:
            await bus.serve(settings.allocate_subject, AllocateResponder(scheduler).handle,
                            queue=COMPONENT)
            if settings.pool_events_subject:
                await bus.subscribe(settings.pool_events_subject, scheduler.nudge)
        async with pool_status_answers(kube, scheduler.state, settings.field_manager,
                                       enabled=settings.gates["DRAResourcePoolStatus"]):
            await scheduler.run()
    finally:
        current.remove(scheduler)
        await bus.stop()


async def serve(settings: Settings) -> None:
    """Run the service until cancelled."""
    setup_tracing(COMPONENT)
    kube = await KubeClient.from_kubeconfig(settings.kubeconfig)
    explanations = ExplanationStore(settings.explanations_kept)
    current: list[Scheduler] = []
    elector: LeaderElector | None = None

    def ready() -> bool:
        if settings.leader_elect and (elector is None or not elector.is_leader):
            return True  # a standby is ready: it serves /metrics and waits for the lease
        return bool(current) and current[-1].synced

    server = ObservabilityServer(settings.http_port, settings.http_host, ready=ready)
    explanations.add_routes(server)
    try:
        if settings.http_port:
            await server.start()
        if not settings.leader_elect:
            await lead(settings, kube, explanations, current)
            return
        elector = LeaderElector.from_settings(kube, settings)
        await elector.run_forever(lambda: lead(settings, kube, explanations, current))
    finally:
        if elector is not None:
            with contextlib.suppress(Exception):
                await elector.stop()
        await server.stop()
        await kube.close()
        shutdown_tracing()


def main() -> None:
    settings = load_settings(Settings, prog=COMPONENT)
    configure_logging(COMPONENT, settings.log_level, settings.log_format)
    run(lambda: serve(settings))


if __name__ == "__main__":
    main()
