"""``draflow ui``: the structured-allocator's web view (``/ui``) in a browser, behind its auth.

A browser sends no bearer token, and the API server's pod proxy does not pass the user's on, so an
allocator whose endpoints need one (``draflow_runtime.httpauth``: any non-loopback address) refuses a
browser. This command serves on a loopback port of this machine and forwards every ``GET`` of ``/ui``,
``/ui/...`` and ``/explain/...`` to the allocator, adding ``Authorization: Bearer <token>`` (``--token``,
else the kubeconfig's): with ``--allocator-url`` (e.g. ``kubectl port-forward``) directly, else to the
allocator pod through the API server's proxy (:mod:`.allocatorproxy`; there the token is not passed on,
so that only works with an allocator that needs none). Nothing but those paths is forwarded; the user
needs ClusterRole ``draflow-debug-reader``.
"""

from __future__ import annotations

import asyncio
import contextlib
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from draflow_runtime.errors import ApiError, TransportError
from draflow_runtime.kube import PODS, KubeClient

from . import allocatorproxy

__all__ = ["FORWARDED", "forwarding", "run"]

FORWARDED = ("/ui", "/ui/", "/explain/")
#: (path with query) -> (status, content type, body)
Fetch = Callable[[str], Awaitable[tuple[int, str, bytes]]]


def forwarded(path: str) -> bool:
    return path == "/ui" or path.startswith(FORWARDED[1:])


def direct(session: aiohttp.ClientSession, allocator_url: str, token: str | None) -> Fetch:
    """GET ``<allocator_url><path>`` with the bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def fetch(path: str) -> tuple[int, str, bytes]:
        async with session.get(allocator_url.rstrip("/") + path, headers=headers) as resp:
            return resp.status, resp.content_type, await resp.read()

    return fetch


async def through_apiserver(kube: KubeClient) -> Fetch:
    """GET through the API server's proxy of the first running allocator pod whose view leads."""
    pods = (await kube.list(PODS, label_selector=allocatorproxy.SELECTOR)).get("items") or []
    found = allocatorproxy.candidates(pods)
    if not found:
        raise LookupError(f"no running pod labelled {allocatorproxy.SELECTOR}; pass --allocator-url")
    bases = [f"/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy" for ns, pod, port in found]
    chosen = bases[0]
    for base in bases:  # only the leader has a view: prefer it
        with contextlib.suppress(ApiError, TransportError, ValueError):
            if '"leader":true' in await kube.get_text(base + "/ui/state.json"):
                chosen = base
                break

    async def fetch(path: str) -> tuple[int, str, bytes]:
        try:
            text = await kube.get_text(chosen + path)
        except ApiError as exc:
            return exc.status or 502, "text/plain", f"{exc}\n".encode()
        kind = "text/html" if path.split("?")[0] == "/ui" else "application/json"
        return 200, kind, text.encode()

    return fetch


def _announce(url: str) -> None:
    print(f"draflow ui: the allocator's web view at {url} (Ctrl-C stops)", flush=True)


def app(fetch: Fetch) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        if not forwarded(request.path):
            raise web.HTTPNotFound(text="draflow ui forwards /ui, /ui/... and /explain/... only\n")
        try:
            status, kind, body = await fetch(request.path_qs)
        except (aiohttp.ClientError, TransportError, OSError) as exc:
            return web.Response(status=502, text=f"allocator unreachable: {exc!r}\n")
        if status in (401, 403):
            body += b"\n(draflow ui sends --token or the kubeconfig's token; the user needs ClusterRole " \
                    b"draflow-debug-reader)\n"
        return web.Response(status=status, body=body, content_type=kind or "application/octet-stream",
                            headers={"Cache-Control": "no-store"})

    async def home(_request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/ui")

    application = web.Application()
    application.router.add_get("/", home)
    application.router.add_get("/{tail:.*}", handle)
    return application


@contextlib.asynccontextmanager
async def forwarding(fetch: Fetch, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve the forwarding app; yields the page's URL (``http://host:port/ui``)."""
    runner = web.AppRunner(app(fetch), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        bound = runner.addresses[0]
        yield f"http://{host}:{bound[1]}/ui"
    finally:
        await runner.cleanup()


async def run(kube: KubeClient, allocator_url: str, token: str | None, *, port: int = 0,
              open_browser: bool = False, ready: Callable[[str], None] | None = None) -> None:
    """Forward until cancelled (Ctrl-C); ``ready`` gets the page's URL once it is served."""
    async with aiohttp.ClientSession() as session:
        if allocator_url:
            fetch = direct(session, allocator_url, token if token is not None else await kube.bearer_token())
        else:
            fetch = await through_apiserver(kube)
        async with forwarding(fetch, port=port) as url:
            (ready or _announce)(url)
            if open_browser:
                webbrowser.open(url)
            await asyncio.Event().wait()
