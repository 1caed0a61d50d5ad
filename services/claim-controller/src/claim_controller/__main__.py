"""Entry point ``claim-controller``: settings, logging, tracing, NATS, /metrics + health, leader election.

Only the leader runs informers and workers; a replica that loses the lease stops them and campaigns again
(every reconcile is idempotent, so the next leader simply starts from its fresh caches).
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

from .controller import COMPONENT, Controller
from .settings import Settings

log = get_logger(__name__)


async def serve(settings: Settings) -> None:
    """Run the service until cancelled."""
    setup_tracing(COMPONENT)
    kube = await KubeClient.from_kubeconfig(settings.kubeconfig)
    bus = EventBus(settings.nats_url, name=COMPONENT)
    await lifecycle.ensure_events_stream(bus)
    await bus.start()
    current: list[Controller] = []
    elector: LeaderElector | None = None

    def ready() -> bool:
        if settings.leader_elect and (elector is None or not elector.is_leader):
            return True  # a standby replica is ready: it serves /metrics and waits for the lease
        return bool(current) and current[-1].synced

    server = ObservabilityServer(settings.http_port, settings.http_host, ready=ready)
    try:
        if settings.http_port:
            await server.start()

        async def lead() -> None:
            controller = Controller(settings, kube, bus=bus if bus.enabled else None,
                                    requester=bus if bus.enabled else None,
                                    namespace=settings.namespace or None)
            current.append(controller)
            try:
                await controller.run()
            finally:
                current.remove(controller)

        if not settings.leader_elect:
            await lead()
            return
        elector = LeaderElector.from_settings(kube, settings)
        await elector.run_forever(lead)
    finally:
        if elector is not None:
            with contextlib.suppress(Exception):
                await elector.stop()
        await server.stop()
        await bus.stop()
        await kube.close()
        shutdown_tracing()


def main() -> None:
    settings = load_settings(Settings, prog=COMPONENT)
    configure_logging(COMPONENT, settings.log_level, settings.log_format)
    run(lambda: serve(settings))


if __name__ == "__main__":
    main()

