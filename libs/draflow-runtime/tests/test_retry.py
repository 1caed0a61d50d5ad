"""Backoff for compare-and-swap conflicts and waits for throttled (429) requests.

Waits are recorded at the ``sleep`` seam, jitter fixed with a seeded ``rng``: nothing sleeps. The 429
cases run the real ``KubeClient`` over real HTTP against a small local server that throttles first
(the real API server sends 429 only under load).
"""

from __future__ import annotations

import email.utils
import random
from typing import Any

import pytest
from aiohttp import web
from kubernetes.aio.client import ApiClient, Configuration

from draflow_runtime.errors import TooManyRequests
from draflow_runtime.kube import PODS, KubeClient
from draflow_runtime.retry import (
    THROTTLE_MAX_WAIT,
    THROTTLE_RETRIES,
    conflict_attempts,
    conflict_delay,
    throttle_delay,
    throttle_retry_wait,
)


class Waits(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.mark.parametrize(
    ("header", "details", "expected"),
    [
        ("3", None, 3.0),
        (" 1.5 ", None, 1.5),
        ("0", None, 0.0),
        ("-4", None, 0.0),
        ("3600", None, THROTTLE_MAX_WAIT),
        (None, {"retryAfterSeconds": 2}, 2.0),
        ("garbage", {"retryAfterSeconds": 2}, 2.0),
        ("2", {"retryAfterSeconds": 7}, 2.0),
        (None, None, None),
        ("", {}, None),
        ("nan", None, None),
        (None, {"retryAfterSeconds": "soon"}, None),
    ],
    ids=["seconds", "fraction", "zero", "negative", "capped", "status-details", "bad-header-details",
         "header-wins", "none", "empty", "nan", "bad-details"],
)
def test_throttle_delay(header: str | None, details: dict[str, Any] | None, expected: float | None) -> None:
    assert throttle_delay(header, details) == expected


def test_throttle_delay_reads_an_http_date() -> None:
    now = 1_800_000_000.0
    header = email.utils.formatdate(now + 4, usegmt=True)
    assert throttle_delay(header, now=now) == 4.0
    assert throttle_delay(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0


def test_conflict_delay_is_jittered_under_an_exponential_cap() -> None:
    rng = random.Random(7)
    for retry, ceiling in [(1, 0.01), (2, 0.02), (3, 0.04), (4, 0.08), (12, 1.0)]:
        delays = [conflict_delay(retry, rng=rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # spread over the range, not a constant
        assert len(set(delays)) > 150


async def test_conflict_attempts_sleep_between_attempts_only() -> None:
    waits = Waits()
    seen = [a async for a in conflict_attempts(4, sleep=waits, rng=random.Random(1))]
    assert seen == [0, 1, 2, 3]
    assert len(waits) == 3
    expected_rng = random.Random(1)
    assert waits == [conflict_delay(n, rng=expected_rng) for n in (1, 2, 3)]

    waits.clear()
    async for _ in conflict_attempts(4, sleep=waits):
        break  # success on the first attempt: no wait at all
    assert waits == []


class ThrottlingServer:
    """Answers the first ``throttle`` requests with 429 (``headers``/``status_body``), then a Pod."""

    def __init__(self, throttle: int, headers: dict[str, str], status_body: dict[str, Any]) -> None:
        self.throttle = throttle
        self.headers = headers
        self.status_body = status_body
        self.requests: list[tuple[str, bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, await request.read()))
        if len(self.requests) <= self.throttle:
            return web.json_response(self.status_body, status=429, headers=self.headers)
        return web.json_response({"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})


async def _client_for(server: ThrottlingServer, waits: Waits) -> tuple[KubeClient, web.AppRunner]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    return KubeClient(ApiClient(configuration), sleep=waits), runner


_TOO_MANY = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests",
             "message": "too many requests, please try again later", "code": 429}


async def test_a_throttled_write_waits_retry_after_then_succeeds() -> None:
    server = ThrottlingServer(2, {"Retry-After": "2"}, _TOO_MANY)
    waits = Waits()
    kube, runner = await _client_for(server, waits)
    try:
        created = await kube.create(PODS, {"metadata": {"name": "p", "namespace": "ns"}})
    finally:
        await kube.close()
        await runner.cleanup()
    assert created["metadata"]["name"] == "p"
    assert waits == [2.0, 2.0]
    assert [m for m, _ in server.requests] == ["POST"] * 3
    assert len({body for _, body in server.requests}) == 1  # the same body each time


async def test_a_throttled_request_gives_up_after_the_bounded_retries() -> None:
    server = ThrottlingServer(100, {"Retry-After": "600"}, _TOO_MANY)
    waits = Waits()
    kube, runner = await _client_for(server, waits)
    try:
        with pytest.raises(TooManyRequests):
            await kube.get(PODS, "p", "ns")
    finally:
        await kube.close()
        await runner.cleanup()
    assert waits == [THROTTLE_MAX_WAIT] * THROTTLE_RETRIES
    assert len(server.requests) == THROTTLE_RETRIES + 1


async def test_a_429_that_names_no_wait_is_raised_at_once() -> None:
    server = ThrottlingServer(1, {}, _TOO_MANY)
    waits = Waits()
    kube, runner = await _client_for(server, waits)
    try:
        with pytest.raises(TooManyRequests):
            await kube.get(PODS, "p", "ns")
    finally:
        await kube.close()
        await runner.cleanup()
    assert waits == []
    assert len(server.requests) == 1



def test_only_a_429_is_retried_and_only_throttle_retries_times() -> None:
    assert throttle_retry_wait(429, "2", None, 0) == 2.0
    assert throttle_retry_wait(429, None, {"retryAfterSeconds": 1}, THROTTLE_RETRIES - 1) == 1.0
    assert throttle_retry_wait(429, "2", None, THROTTLE_RETRIES) is None
    assert throttle_retry_wait(429, None, None, 0) is None
    assert throttle_retry_wait(503, "2", {"retryAfterSeconds": 1}, 0) is None
