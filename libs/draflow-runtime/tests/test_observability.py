"""The metrics and health server, over real HTTP on a free loopback port."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from draflow_runtime.observability import ObservabilityServer


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_metrics_health_and_extra_route() -> None:
    registry = CollectorRegistry()
    Counter("demo_things_total", "Things.", registry=registry).inc(3)
    server = ObservabilityServer(0, registry=registry)

    async def explain(request: web.Request) -> web.Response:
        return web.json_response({"claim": request.match_info["name"], "why": "no device fits"})

    server.add_route("GET", "/explain/{name}", explain)
    await server.start()
    try:
        assert server.port != 0
        status, body = await get(f"{server.url}/metrics")
        assert status == 200 and "demo_things_total 3.0" in body
        assert await get(f"{server.url}/healthz") == (200, "ok\n")
        assert await get(f"{server.url}/readyz") == (200, "ok\n")
        status, body = await get(f"{server.url}/explain/c1")
        assert status == 200 and '"claim": "c1"' in body
    finally:
        await server.stop()


async def test_readyz_follows_the_ready_callable() -> None:
    state = {"ready": False}

    async def ready() -> bool:
        return state["ready"]

    server = ObservabilityServer(0, ready=ready)
    await server.start()
    try:
        assert (await get(f"{server.url}/readyz"))[0] == 503
        state["ready"] = True
        assert (await get(f"{server.url}/readyz"))[0] == 200
    finally:
        await server.stop()


async def test_readyz_is_not_ready_when_the_check_raises() -> None:
    def ready() -> bool:
        raise RuntimeError("informer not synced")

    server = ObservabilityServer(0, ready=ready)
    await server.start()
    try:
        status, body = await get(f"{server.url}/readyz")
        assert status == 503 and "informer not synced" in body
    finally:
        await server.stop()
