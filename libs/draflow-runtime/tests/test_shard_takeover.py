"""Shard takeover after a replica dies, on the pure ShardView with a fake clock.

A simulated API server (a dict of Lease specs) and two replicas: ``a`` renews its member slot and its
shard every retry period until it is killed; ``b`` does what its ShardCoordinator does every retry period
(read the Leases its view follows, work out the shards it wants, let the elector of each try: read the
shard's Lease, take it when the view says it may). Times are fake-clock seconds, not wall clock.
"""

from __future__ import annotations

import pytest

from draflow_runtime.leaserecord import ObservedLease
from draflow_runtime.shards import ShardView, assignment, member_lease_name, shard_lease_name

DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0
SHARDS = 2
OWNERS = assignment(["a", "b"], SHARDS)
A_SHARD = next(s for s, owner in OWNERS.items() if owner == "a")
B_SHARD = next(s for s, owner in OWNERS.items() if owner == "b")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(holder: str, now: float) -> dict[str, object]:
    return {"holderIdentity": holder, "leaseDurationSeconds": int(DURATION), "acquireTime": "t0",
            "renewTime": f"{now:.3f}", "leaseTransitions": 0}


class Simulation:
    """``a`` holds member slot 0 and its shard, ``b`` slot 1 and its own; ``a`` renews at 0, RETRY, ...
    while alive, ``b`` acts at ``phase``, ``phase`` + RETRY, ..."""

    def __init__(self, phase: float, always_want: set[int] | None = None) -> None:
        self.clock = FakeClock()
        self.view = ShardView("ctl", SHARDS, "b", DURATION, self.clock)
        self.phase = phase
        self.always_want = always_want or set()
        self.api: dict[str, dict[str, object]] = {}
        self.a_last_renew = -1.0
        self.campaigning = {B_SHARD}

    def a_renews(self, now: float) -> None:
        self.api[member_lease_name("ctl", 0)] = record("a", now)
        self.api[shard_lease_name("ctl", A_SHARD)] = record("a", now)
        self.a_last_renew = now

    def b_acts(self, now: float) -> int | None:
        """One retry period of ``b``; the shard it took from ``a``, if any."""
        self.api[member_lease_name("ctl", 1)] = record("b", now)
        self.api[shard_lease_name("ctl", B_SHARD)] = record("b", now)
        for name, seen in self.view.observed(self.campaigning):
            seen.observe(self.api.get(name))
        self.campaigning = self.view.wanted(member=True) | self.always_want
        for shard in sorted(self.campaigning):
            lease = self.api[shard_lease_name("ctl", shard)]
            if lease["holderIdentity"] == "b":
                continue
            self.view.leases[shard].observe(lease)  # the elector's own read before it decides
            if self.view.may_take(shard):
                self.api[shard_lease_name("ctl", shard)] = record("b", now)
                return shard
        return None

    def run(self, a_killed_at: float, until: float = 200.0) -> float | None:
        """Step both replicas in time order; the time ``b`` took ``a``'s shard (None: never)."""
        events = sorted([(t * RETRY, 0) for t in range(int(until / RETRY) + 1)] +
                        [(self.phase + t * RETRY, 1) for t in range(int(until / RETRY) + 1)])
        for now, who in events:
            self.clock.now = now
            if who == 0 and now < a_killed_at:
                self.a_renews(now)
            elif who == 1 and self.b_acts(now) is not None:
                return now
        return None


@pytest.mark.parametrize("phase", [0.1, 0.9, 1.5, 1.99])
@pytest.mark.parametrize("killed_at", [31.0, 40.5, 57.3])
def test_a_dead_replicas_shard_is_taken_one_lease_duration_after_its_last_renewal(
    phase: float, killed_at: float,
) -> None:
    sim = Simulation(phase)
    taken = sim.run(killed_at)
    assert taken is not None, "the survivor never took the dead replica's shard"
    waited = taken - sim.a_last_renew
    # client-go: a candidate that reads the Lease every retry period takes it lease_duration after the
    # last record it saw change, plus at most a retry period or two of polling. Waiting for the member
    # slot to expire first and only then starting to watch the shard's Lease takes two lease durations.
    assert DURATION <= waited <= DURATION + 2 * RETRY, f"taken {waited:.1f}s after the last renewal"


@pytest.mark.parametrize("phase", [0.1, 1.0, 1.99])
def test_a_live_holders_shard_is_never_taken_even_when_wanted(phase: float) -> None:
    """Views can differ for a moment: ``b`` campaigns for ``a``'s shard although ``a`` is alive. While
    ``a`` renews, ``b`` never takes it; after ``a`` stops, not before ``a`` itself has stopped acting
    (its renew deadline) and not before a whole lease duration of ``b``'s clock."""
    sim = Simulation(phase, always_want={A_SHARD})
    assert sim.run(a_killed_at=1_000.0, until=120.0) is None

    sim = Simulation(phase, always_want={A_SHARD})
    taken = sim.run(a_killed_at=50.0)
    assert taken is not None
    assert taken - sim.a_last_renew >= DURATION > DEADLINE


def test_a_released_shard_is_taken_at_the_next_attempt() -> None:
    clock = FakeClock()
    view = ShardView("ctl", SHARDS, "b", DURATION, clock)
    view.leases[A_SHARD].observe(record("a", 0.0))
    clock.now = 1.0
    assert not view.may_take(A_SHARD)
    view.leases[A_SHARD].observe({**record("", 1.0), "leaseDurationSeconds": 1})
    assert view.may_take(A_SHARD)


def test_a_lease_first_seen_counts_from_when_it_was_seen_not_from_its_renew_time() -> None:
    """Clocks of two machines are never compared: a record first read at t is valid until t + duration
    of this replica's clock, whatever its renewTime says."""
    clock = FakeClock()
    seen = ObservedLease(DURATION, clock)
    clock.now = 100.0
    seen.observe(record("a", -1_000.0))
    clock.now = 100.0 + DURATION - 0.01
    seen.observe(record("a", -1_000.0))  # unchanged: still counting from 100
    assert seen.held_by_other("b")
    clock.now = 100.0 + DURATION
    assert not seen.held_by_other("b")
    assert not seen.held_by_other("a")
    seen.observe(None)
    assert seen.holder == "" and not seen.valid()
