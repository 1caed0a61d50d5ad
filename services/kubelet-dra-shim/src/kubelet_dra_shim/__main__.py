"""Entry point ``kubelet-dra-shim``: settings, logging, tracing, NATS, metrics, then the fleet."""

from __future__ import annotations

from aiohttp import web

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import KubeClient
from draflow_runtime.log import configure_logging, get_logger
from draflow_runtime.observability import ObservabilityServer
from draflow_runtime.service import run
from draflow_runtime.settings import load_settings
from draflow_runtime.tracing import setup_tracing, shutdown_tracing

from .fleet import Fleet
from .settings import ShimSettings

SERVICE = "kubelet-dra-shim"
log = get_logger(__name__)


async def serve(settings: ShimSettings) -> None:
    setup_tracing(SERVICE)
    kube = await KubeClient.from_kubeconfig(settings.kubeconfig)
    bus = EventBus(settings.nats_url, name=SERVICE)
    fleet: Fleet | None = None
    obs: ObservabilityServer | None = None
    try:
        # The one shared stream (DRAFLOW_EVENTS on draflow.events.>, lifecycle's limits); never a stream
        # of our own or with other settings: services would keep rewriting each other's configuration.
        await lifecycle.ensure_events_stream(bus)
        await bus.start()

        fleet = Fleet(
            settings,
            kube,
            EventRecorder(kube, SERVICE),
            bus if bus.enabled else None,
            bus=bus if bus.enabled else None,
        )
        if settings.http_port:
            obs = ObservabilityServer(
                settings.http_port, settings.http_host, ready=lambda: fleet is not None and fleet.ready
            )
            obs.add_route("GET", "/debug/claims", _claims_handler(fleet))
            obs.add_route("GET", "/debug/plugins", _plugins_handler(fleet))
            await obs.start()
        await fleet.start()
        await _forever()
    finally:
        if fleet is not None:
            await fleet.stop()
        if obs is not None:
            await obs.stop()
        await bus.stop()
        await kube.close()
        shutdown_tracing()


def _claims_handler(fleet: Fleet):  # type: ignore[no-untyped-def]
    """``GET /debug/claims[?node=<n>]``: the prepared-claims cache as JSON (what the checkpoint holds)."""

    async def handler(request: web.Request) -> web.Response:
        wanted = request.query.get("node")
        out = {
            name: [
                {
                    "uid": c.claim_uid,
                    "claim": f"{c.namespace}/{c.claim_name}",
                    "pods": sorted(c.pod_uids),
                    "prepared": c.prepared,
                    "devices": {d: [dev.cdi_device_ids for dev in devs] for d, devs in c.drivers.items()},
                }
                for c in node.manager.claims.values()
            ]
            for name, node in fleet.nodes.items()
            if wanted in (None, name)
        }
        return web.json_response(out)

    return handler


def _plugins_handler(fleet: Fleet):  # type: ignore[no-untyped-def]
    """``GET /debug/plugins``: registered endpoints per node (newest first) with the negotiated version."""

    async def handler(request: web.Request) -> web.Response:
        out = {
            name: {
                p.driver: {"endpoint": p.endpoint, "version": p.version, "health": p.health_service}
                for p in sorted(node.store.all(), key=lambda p: p.seq)
            }
            for name, node in fleet.nodes.items()
        }
        return web.json_response(out)

    return handler


async def _forever() -> None:
    import asyncio

    await asyncio.Event().wait()


def main() -> None:
    settings = load_settings(ShimSettings, prog=SERVICE)
    configure_logging(SERVICE, settings.log_level, settings.log_format)
    run(lambda: serve(settings))


if __name__ == "__main__":
    main()
