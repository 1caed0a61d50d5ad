"""Entry point ``slice-publisher``: settings, logging, tracing, NATS, metrics server, then the publisher."""

from __future__ import annotations

import contextlib

from draflow_runtime.bus import EventBus
from draflow_runtime.kube import KubeClient
from draflow_runtime.log import configure_logging, get_logger
from draflow_runtime.observability import ObservabilityServer
from draflow_runtime.service import run
from draflow_runtime.settings import load_settings
from draflow_runtime.tracing import setup_tracing, shutdown_tracing
from slice_publisher.fleet import Publisher
from slice_publisher.settings import PublisherSettings

SERVICE = "slice-publisher"
log = get_logger(__name__)


async def serve(settings: PublisherSettings) -> None:
    """Run the publisher until cancelled; every resource it opens is closed on the way out."""
    setup_tracing(SERVICE)
    kube = await KubeClient.from_kubeconfig(settings.kubeconfig)
    bus = EventBus(settings.nats_url, name=SERVICE)
    await bus.start()
    publisher = Publisher(kube, settings, bus=bus if bus.enabled else None)
    server = None
    if settings.http_port:
        server = ObservabilityServer(
            settings.http_port,
            settings.http_host,
            ready=lambda: publisher.slices.synced and publisher.watcher.scanned.is_set(),
        )
        await server.start()
    log.info(
        "slice-publisher starting",
        mode="fleet" if settings.fleet_mode else "node",
        node=None if settings.fleet_mode else settings.node_name,
        fleet_root=settings.fleet_root or None,
    )
    try:
        await publisher.run()
    finally:
        if server is not None:
            await server.stop()
        with contextlib.suppress(Exception):
            await bus.stop()
        await kube.close()
        shutdown_tracing()


def main() -> None:
    settings = load_settings(PublisherSettings, prog=SERVICE)
    configure_logging(SERVICE, settings.log_level, settings.log_format)
    run(lambda: serve(settings))


if __name__ == "__main__":
    main()
