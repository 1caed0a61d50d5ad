"""Entry point ``kubelet-dra-shim``: the service context (tracing, KubeClient, NATS, metrics;
:mod:`draflow_runtime.servicecontext`), then the fleet."""

from __future__ import annotations

from aiohttp import web

from draflow_runtime.events import EventRecorder
from draflow_runtime.log import get_logger
from draflow_runtime.service import run_service
from draflow_runtime.servicecontext import ServiceContext

from .fleet import Fleet
from .settings import ShimSettings

SERVICE = "kubelet-dra-shim"
log = get_logger(__name__)


async def serve(settings: ShimSettings) -> None:
    async with ServiceContext(SERVICE, settings) as svc:
        # The one shared stream (DRAFLOW_EVENTS on draflow.events.>, lifecycle's limits); never a stream
        # of our own or with other settings: services would keep rewriting each other's configuration.
        bus = await svc.connect_bus()
        nats = bus if bus.enabled else None
        recorder = EventRecorder(svc.kube, SERVICE)
        svc.on_close(recorder.aclose, "event recorder")  # after the fleet stopped: its last Events
        fleet = Fleet(settings, svc.kube, recorder, nats, bus=nats)
        await svc.serve_http(ready=lambda: fleet.ready, routes=[
            ("GET", "/debug/claims", _claims_handler(fleet)),
            ("GET", "/debug/plugins", _plugins_handler(fleet)),
        ])
        svc.on_close(fleet.stop, "fleet")
        await fleet.start()
        await svc.wait_forever()


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


def main() -> None:
    run_service(SERVICE, ShimSettings, serve)


if __name__ == "__main__":
    main()
