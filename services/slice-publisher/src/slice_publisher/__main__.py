"""Entry point ``slice-publisher``: the service context (tracing, KubeClient, NATS, metrics server;
:mod:`draflow_runtime.servicecontext`), then the publisher."""

from __future__ import annotations

from draflow_runtime.log import get_logger
from draflow_runtime.service import run_service
from draflow_runtime.servicecontext import ServiceContext
from slice_publisher.fleet import Publisher
from slice_publisher.settings import PublisherSettings

SERVICE = "slice-publisher"
log = get_logger(__name__)


async def serve(settings: PublisherSettings) -> None:
    """Run the publisher until cancelled; every resource it opens is closed on the way out."""
    async with ServiceContext(SERVICE, settings) as svc:
        bus = await svc.connect_bus(events_stream=False)
        publisher = Publisher(svc.kube, settings, bus=bus if bus.enabled else None)
        await svc.serve_http(ready=lambda: publisher.slices.synced and publisher.watcher.scanned.is_set())
        log.info(
            "slice-publisher starting",
            mode="fleet" if settings.fleet_mode else "node",
            node=None if settings.fleet_mode else settings.node_name,
            fleet_root=settings.fleet_root or None,
        )
        await publisher.run()


def main() -> None:
    run_service(SERVICE, PublisherSettings, serve)


if __name__ == "__main__":
    main()
