"""ServiceContext against the real kube-apiserver and NATS: ordered close (the reverse of start), also when
start-up fails half way, a failing close step that does not skip the others, and leader election."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from draflow_runtime.kube import LEASES, KubeClient
from draflow_runtime.servicecontext import ServiceContext
from draflow_runtime.settings import ServiceSettings
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


def _settings(testenv: Any, **overrides: Any) -> ServiceSettings:
    return ServiceSettings(kubeconfig=str(testenv.kubeconfig), **{"http_port": 0, **overrides})


async def test_a_start_up_that_fails_after_the_bus_connects_closes_the_bus(
        testenv: Any, nats_url: str) -> None:
    started: list[Any] = []
    with pytest.raises(RuntimeError, match="informers failed"):
        async with ServiceContext("ctx-fail", _settings(testenv, nats_url=nats_url), tracing=False) as svc:
            bus = await svc.connect_bus(events_stream=False)
            assert await bus.wait_connected(10)
            started.append(bus)
            raise RuntimeError("informers failed")
    assert started and not started[0].connected


async def test_close_is_the_reverse_of_start_and_a_failing_step_skips_nothing(
        testenv: Any, nats_url: str) -> None:
    seen: list[str] = []
    svc = ServiceContext("ctx-order", _settings(testenv, nats_url=nats_url), tracing=False)
    async with svc:
        bus = await svc.connect_bus(events_stream=False)
        assert await bus.wait_connected(10)

        def first() -> None:
            seen.append(f"first bus_connected={bus.connected}")

        async def broken() -> None:
            seen.append("broken")
            raise OSError("close failed")

        async def last() -> None:
            seen.append(f"last bus_connected={bus.connected}")

        svc.on_close(first)
        svc.on_close(broken)
        svc.on_close(last)
    # newest first; the service's pieces close while NATS still runs; the failing step stops nothing
    assert seen == ["last bus_connected=True", "broken", "first bus_connected=True"]
    assert not bus.connected


async def test_a_cancelled_service_stops_leading_and_closes_its_http_server(
        testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]) -> None:
    namespace = await make_namespace("ctx")
    lease = f"ctx-{uuid.uuid4().hex[:6]}"
    settings = _settings(testenv, leader_elect=True, leader_election_namespace=namespace,
                         leader_election_id=lease, identity="ctx-a", lease_duration=4.0,
                         renew_deadline=3.0, retry_period=0.5, http_port=_free_port())
    leading = asyncio.Event()
    ready_seen: list[int] = []
    svc = ServiceContext("ctx-lead", settings, tracing=False)

    async def serve() -> None:
        async with svc:
            await svc.serve_http(ready=lambda: svc.standby or leading.is_set())

            async def term() -> None:
                leading.set()
                await asyncio.Event().wait()

            await svc.lead(term)

    task = asyncio.create_task(serve())
    try:
        async with asyncio.timeout(30):
            await leading.wait()
        async with aiohttp.ClientSession() as http, \
                http.get(f"http://127.0.0.1:{settings.http_port}/readyz") as resp:
            ready_seen.append(resp.status)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert ready_seen == [200]
    assert (await kube.get(LEASES, lease, namespace))["spec"]["holderIdentity"] == "ctx-a"
    assert svc.elector is not None and not svc.elector.is_leader

    async def refused() -> bool | None:
        try:
            async with aiohttp.ClientSession() as http:
                await http.get(f"http://127.0.0.1:{settings.http_port}/healthz")
        except aiohttp.ClientConnectionError:
            return True
        return None

    await eventually(refused, what="the HTTP server closed")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
