"""``draflow ui`` in front of the allocator's web view behind delegated auth (the allocator's real /ui
routes on an ObservabilityServer with DelegatedAuth; the real kube-apiserver answers the TokenReviews and
SubjectAccessReviews): a browser without a token is refused, the forwarder adds the user's token, and
ClusterRole draflow-debug-reader (deploy/kustomize/base/common/http-readers.yaml) grants the page."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from draflow_cli import ui
from draflow_cli.__main__ import parser
from draflow_runtime.httpauth import DelegatedAuth
from draflow_runtime.kube import KubeClient
from draflow_runtime.observability import ObservabilityServer
from draflow_testenv.wait import eventually
from structured_allocator.explain_http import ExplanationStore
from structured_allocator.ui import WebView

pytestmark = pytest.mark.integration

@pytest.fixture
async def allocator(kube: KubeClient) -> AsyncIterator[str]:
    """The allocator's /ui routes (a replica without a leadership term) behind delegated auth."""
    server = ObservabilityServer(0, auth=DelegatedAuth(kube, cache_seconds=0))
    for method, path, handler in WebView(ExplanationStore()).routes():
        server.add_route(method, path, handler)
    await server.start()
    yield server.url
    await server.stop()


@contextlib.asynccontextmanager
async def draflow_ui(kube: KubeClient, allocator: str, token: str) -> AsyncIterator[str]:
    """``draflow ui --allocator-url <allocator> --token <token>`` until the block ends; yields its URL."""
    url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(ui.run(kube, allocator, token, ready=url.set_result))
    try:
        yield await asyncio.wait_for(url, 30)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.text()


async def test_draflow_ui_forwards_the_page_with_the_users_token(
        kube: KubeClient, make_namespace: Any, http_user: Any, allocator: str) -> None:
    args = parser().parse_args(["ui", "--port", "0", "--allocator-url", allocator])
    assert (args.command, args.port, args.open, args.allocator_url) == ("ui", 0, False, allocator)

    assert (await get(f"{allocator}/ui"))[0] == 401  # a browser sends no token
    ns = await make_namespace("cli-ui")
    user = await http_user(ns, "ui-user")
    token = user.token
    assert token
    async with draflow_ui(kube, allocator, token) as page:
        assert page.startswith("http://127.0.0.1:") and page.endswith("/ui")
        status, text = await get(page)
        assert status == 403 and "draflow-debug-reader" in text, text  # not granted yet
        assert (await get(page.removesuffix("/ui") + "/metrics"))[0] == 404  # only /ui and /explain

        await user.grant("draflow-debug-reader")

        async def served() -> bool:
            return (await get(page))[0] == 200

        await eventually(served, 20, "the bound reader role lets draflow ui show the page", interval=0.3)
        status, text = await get(page)
        assert "<title>draflow devices</title>" in text
        status, text = await get(page + "/state.json")
        assert status == 200 and '"leader": false' in text  # this replica leads no term
