"""KubeClient honours HTTPS_PROXY / NO_PROXY as they are when the client is made, and reads them only then.

aiohttp with ``trust_env=True`` (the official client's session) looked up ``.netrc`` and the proxy
variables for every request through the default thread pool. The client now reads the environment once;
these tests pin that the semantics stayed (a proxy is used, NO_PROXY exempts the API server) and that a
change of the environment after start-up no longer reaches the requests. The proxy is a real HTTP
CONNECT proxy on a loopback port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from draflow_runtime.kube import NAMESPACES, KubeClient

pytestmark = pytest.mark.integration

_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
               "ALL_PROXY", "all_proxy")


class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT), counting the tunnels it opened."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = (await reader.readline()).decode()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            method, target, _ = request.split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                return
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    server = ConnectProxy()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _client(testenv: Any) -> KubeClient:
    return await KubeClient.from_kubeconfig(str(testenv.kubeconfig))


async def test_https_proxy_from_the_environment_carries_the_requests(
    testenv: Any, no_proxy_env: pytest.MonkeyPatch, proxy: ConnectProxy,
) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", proxy.url)
    async with await _client(testenv) as kube:
        await kube.get(NAMESPACES, "default")
        await kube.list(NAMESPACES)
    assert proxy.tunnels, "the API server was reached without the proxy"


async def test_no_proxy_exempts_the_api_server(
    testenv: Any, no_proxy_env: pytest.MonkeyPatch, proxy: ConnectProxy,
) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", proxy.url)
    no_proxy_env.setenv("NO_PROXY", "127.0.0.1,localhost")
    async with await _client(testenv) as kube:
        assert (await kube.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
    assert proxy.tunnels == []


async def test_the_proxy_environment_is_read_once_when_the_client_is_made(
    testenv: Any, no_proxy_env: pytest.MonkeyPatch,
) -> None:
    """A proxy variable set after start-up (here: a port nobody listens on) does not reach the requests:
    the environment is not looked up again per request (it was, through a thread pool, every time)."""
    async with await _client(testenv) as kube:
        await kube.get(NAMESPACES, "default")
        no_proxy_env.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        assert (await kube.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
