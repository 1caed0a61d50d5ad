"""The allocator's search budget (issue 12, defect 6): steps, deadline and cancellation bound one
``allocate`` call; without a budget the search is unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import DRIVER, NODE, claim, dclass, dev, req, rslice

from structured_allocator.core import (
    AllocatedState,
    AllocationError,
    Allocator,
    SearchBudget,
    SearchBudgetExhausted,
)

GPU_CLASS = dclass("gpu", f'device.driver == "{DRIVER}"')
N_DEVICES = 12


def _hard_search() -> tuple[Allocator, list[dict[str, Any]]]:
    """Twelve devices with five distinct "numa" values; the claim wants six with pairwise distinct
    values, which no set has: the search tries every distinct combination (thousands of device tries)
    before it fails."""
    devices = [dev(f"gpu-{i}", {"numa": i % 5}) for i in range(N_DEVICES)]
    claims = [claim("c", req("gpu", count=6), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])]
    return Allocator({"gpu": GPU_CLASS}, [rslice("s", devices)], AllocatedState()), claims


def _steps_without_budget() -> int:
    allocator, claims = _hard_search()
    counter = {"polls": 0}

    def never() -> bool:
        counter["polls"] += 1
        return False

    allocator.allocate(NODE, claims, budget=SearchBudget(cancelled=never))
    return (counter["polls"] - 1) * SearchBudget.CHECK_EVERY


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += 1.0  # every read: one second later
        return self.now


def test_without_budget_the_search_runs_to_its_answer() -> None:
    allocator, claims = _hard_search()
    outcome = allocator.allocate(NODE, claims, budget=None)
    assert not outcome.fits
    run_steps = _steps_without_budget()
    assert run_steps > 500  # the search really is long: every bound below stops it earlier
    allocator2, claims2 = _hard_search()
    assert not allocator2.allocate(NODE, claims2, budget=SearchBudget()).fits


def test_a_budget_large_enough_does_not_change_the_answer() -> None:
    allocator = Allocator(
        {"gpu": GPU_CLASS}, [rslice("s", [dev("gpu-0"), dev("gpu-1")])], AllocatedState()
    )
    outcome = allocator.allocate(NODE, [claim("c", req("gpu", count=2))], budget=SearchBudget(max_steps=2))
    assert outcome.fits
    assert [r["device"] for r in outcome.results[0]["devices"]["results"]] == ["gpu-0", "gpu-1"]


def test_a_search_needing_more_steps_than_the_budget_raises() -> None:
    allocator, claims = _hard_search()
    with pytest.raises(SearchBudgetExhausted) as info:
        allocator.allocate(NODE, claims, budget=SearchBudget(max_steps=100))
    assert info.value.reason == "steps"
    assert info.value.steps == 100
    assert "search budget exhausted after 100 steps" in str(info.value)
    assert not isinstance(info.value, AllocationError)


def test_the_cancelled_hook_stops_the_search() -> None:
    allocator, claims = _hard_search()
    polls = 0

    def cancelled() -> bool:
        nonlocal polls
        polls += 1
        return polls >= 3

    with pytest.raises(SearchBudgetExhausted) as info:
        allocator.allocate(NODE, claims, budget=SearchBudget(cancelled=cancelled))
    assert info.value.reason == "cancelled"
    # polled before the search and then every 64 steps: stopped at the third poll
    assert info.value.steps == 2 * SearchBudget.CHECK_EVERY


def test_a_deadline_on_a_fake_clock_stops_the_search() -> None:
    allocator, claims = _hard_search()
    clock = FakeClock()
    with pytest.raises(SearchBudgetExhausted) as info:
        allocator.allocate(NODE, claims, budget=SearchBudget(deadline=105.0, clock=clock))
    assert info.value.reason == "deadline"
    assert clock.reads == 5
    assert info.value.steps == 4 * SearchBudget.CHECK_EVERY


def test_an_already_passed_deadline_stops_before_any_step() -> None:
    allocator, claims = _hard_search()
    with pytest.raises(SearchBudgetExhausted) as info:
        allocator.allocate(NODE, claims, budget=SearchBudget(deadline=0.0, clock=lambda: 1.0))
    assert (info.value.reason, info.value.steps) == ("deadline", 0)


def test_the_allocator_is_reusable_after_an_exhausted_search() -> None:
    """Running out of budget undoes the partial search: the next call sees no leftovers."""
    allocator = Allocator(
        {"gpu": GPU_CLASS},
        [rslice("s", [dev(f"gpu-{i}", {"numa": i % 5}) for i in range(N_DEVICES)])],
        AllocatedState(),
    )
    hard = claim("c", req("gpu", count=6), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    with pytest.raises(SearchBudgetExhausted):
        allocator.allocate(NODE, [hard], budget=SearchBudget(max_steps=50))
    outcome = allocator.allocate(NODE, [claim("d", req("gpu", count=N_DEVICES))])
    assert outcome.fits
    assert len(outcome.results[0]["devices"]["results"]) == N_DEVICES
