"""Leader election on a real Lease: hand-over on stop, take-over after a crash, never two leaders."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from draflow_runtime.kube import LEASES, KubeClient
from draflow_runtime.leader import LeaderElector
from draflow_testenv.wait import consistently

pytestmark = pytest.mark.integration

LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 0.5


class Candidate:
    """One elector plus a record of when it led."""

    def __init__(self, kube: KubeClient, namespace: str, identity: str, leaders: set[str]) -> None:
        self.identity = identity
        self.elector = LeaderElector(
            kube, namespace=namespace, name="lock", identity=identity,
            lease_duration=LEASE_DURATION, renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD,
        )
        self.leading = asyncio.Event()
        self.stopped_leading = asyncio.Event()
        self._leaders = leaders
        self.overlap = False
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        if self._leaders:
            self.overlap = True
        self._leaders.add(self.identity)
        self.leading.set()
        try:
            await asyncio.Event().wait()
        finally:
            self._leaders.discard(self.identity)

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self._lead, self.stopped_leading.set))


async def lease_spec(kube: KubeClient, namespace: str) -> dict[str, Any]:
    return (await kube.get(LEASES, "lock", namespace))["spec"]


async def elapsed_until(event: asyncio.Event, limit: float) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with asyncio.timeout(limit):
        await event.wait()
    return loop.time() - start


@pytest.fixture
async def candidates(kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]):
    namespace = await make_namespace("leader")
    leaders: set[str] = set()
    first = Candidate(kube, namespace, "first", leaders)
    second = Candidate(kube, namespace, "second", leaders)
    yield namespace, first, second
    for candidate in (first, second):
        await candidate.elector.stop()
        if candidate.task is not None:
            candidate.task.cancel()
            await asyncio.wait({candidate.task})


async def test_second_candidate_takes_over_within_a_lease_duration_after_the_first_stops(
    kube: KubeClient, candidates: tuple[str, Candidate, Candidate]
) -> None:
    namespace, first, second = candidates
    first.start()
    async with asyncio.timeout(10):
        await first.leading.wait()
    second.start()
    await consistently(lambda: first.elector.is_leader and not second.elector.is_leader, 3 * RETRY_PERIOD,
                       "first leads while the second campaigns")
    assert first.elector.is_leader and not second.elector.is_leader
    assert (await lease_spec(kube, namespace))["holderIdentity"] == "first"

    stopping = asyncio.create_task(first.elector.stop())
    elapsed = await elapsed_until(second.leading, limit=LEASE_DURATION)
    await stopping
    assert elapsed <= LEASE_DURATION
    assert first.stopped_leading.is_set() and not first.elector.is_leader
    assert first.task is not None and first.task.done()
    spec = await lease_spec(kube, namespace)
    assert spec["holderIdentity"] == "second"
    assert spec["leaseTransitions"] == 1
    assert not (first.overlap or second.overlap)


async def test_second_candidate_takes_over_after_the_first_is_killed_without_releasing(
    kube: KubeClient, candidates: tuple[str, Candidate, Candidate]
) -> None:
    namespace, first, second = candidates
    first.start()
    async with asyncio.timeout(10):
        await first.leading.wait()
    second.start()
    await consistently(lambda: not second.elector.is_leader, 3 * RETRY_PERIOD, "the second only campaigns")
    assert not second.elector.is_leader

    assert first.task is not None
    first.task.cancel()  # a crash: nothing is released
    await asyncio.wait({first.task})
    assert (await lease_spec(kube, namespace))["holderIdentity"] == "first"

    # Up to one lease duration after the second candidate last saw the lease change, plus one retry
    # period until its next attempt; generous slack for a loaded machine.
    elapsed = await elapsed_until(second.leading, limit=LEASE_DURATION + 2 * RETRY_PERIOD + 2.0)
    # Safety: it must not take a lease that was renewed less than a lease duration ago.
    assert elapsed >= LEASE_DURATION - 2 * RETRY_PERIOD
    spec = await lease_spec(kube, namespace)
    assert spec["holderIdentity"] == "second"
    assert spec["leaseTransitions"] == 1
    assert not (first.overlap or second.overlap)


async def test_run_forever_campaigns_again_after_leading_ends_and_returns_after_stop(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("leader-forever")
    elector = LeaderElector(
        kube, namespace=namespace, name="lock", identity="solo",
        lease_duration=LEASE_DURATION, renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD,
    )
    terms = 0
    third_term = asyncio.Event()

    async def lead() -> None:
        nonlocal terms
        terms += 1  # returning ends this term; run_forever must campaign and lead again
        if terms == 3:
            third_term.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(elector.run_forever(lead))
    async with asyncio.timeout(LEASE_DURATION * 6):
        await third_term.wait()
    assert elector.is_leader
    await elector.stop()
    async with asyncio.timeout(LEASE_DURATION):
        await task  # returns after stop() instead of campaigning again
    assert terms == 3
    assert not (await lease_spec(kube, namespace)).get("holderIdentity")


async def test_leader_election_master_status_is_one_only_while_leading(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("leader")

    def status() -> float | None:
        return REGISTRY.get_sample_value("leader_election_master_status", {"name": "gauge-lock"})

    elector = LeaderElector(kube, namespace=namespace, name="gauge-lock", identity="only",
                            lease_duration=LEASE_DURATION, renew_deadline=RENEW_DEADLINE,
                            retry_period=RETRY_PERIOD)
    assert status() == 0
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    async with asyncio.timeout(10):
        await leading.wait()
    assert status() == 1
    await elector.stop()
    await task
    assert status() == 0
