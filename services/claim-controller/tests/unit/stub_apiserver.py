"""The API server as a local HTTP server, for unit tests whose seam is the transport: it answers every
request with the Status a test sets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from kubernetes.aio.client import ApiClient, Configuration

from draflow_runtime.kube import KubeClient


@contextlib.asynccontextmanager
async def answering(reply: dict[str, Any]) -> AsyncIterator[KubeClient]:
    """A KubeClient on a local HTTP server that answers every request with ``reply["body"]`` as JSON and
    the HTTP status ``reply["status"]``, read at each request (a test may change them in between)."""
    async def handle(request: web.Request) -> web.Response:
        return web.json_response(reply["body"], status=reply["status"])

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    kube = KubeClient(ApiClient(Configuration(host=f"http://127.0.0.1:{runner.addresses[0][1]}")))
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()
