"""The waiting helpers: each passes when the world behaves and, when it does not, fails saying what it saw."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from draflow_testenv.wait import consistently, eventually, quiesce, resource_versions


class Later:
    """A value that a background task changes at given delays (a stand-in for a controller's writes)."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.tasks: list[asyncio.Task[None]] = []

    def set_after(self, delay: float, value: Any) -> None:
        async def _set() -> None:
            await asyncio.sleep(delay)  # the simulated controller's own delay, what the helpers wait on
            self.value = value

        self.tasks.append(asyncio.create_task(_set()))

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
async def later():
    made: list[Later] = []

    def _make(value: Any) -> Later:
        made.append(Later(value))
        return made[-1]

    yield _make
    for item in made:
        await item.close()


async def test_eventually_returns_the_first_truthy_value_of_a_sync_or_async_check(later: Any) -> None:
    box = later(0)
    box.set_after(0.1, 7)
    assert await eventually(lambda: box.value, 5) == 7

    async def async_check() -> int:
        return box.value * 2

    assert await eventually(async_check, 5) == 14


async def test_eventually_fails_naming_what_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0.2s waiting for the answer: last=0"):
        await eventually(lambda: 0, 0.2, "the answer")


async def test_eventually_retries_a_check_that_asserts_and_reports_its_last_failure(later: Any) -> None:
    box = later(1)

    def two() -> int:
        assert box.value == 2, f"value is {box.value}"
        return box.value

    box.set_after(0.1, 2)
    assert await eventually(two, 5) == 2
    box.value = 3
    with pytest.raises(AssertionError, match=r"waiting for two: last check failed: value is 3"):
        await eventually(two, 0.2)


async def test_eventually_fails_at_once_when_the_abort_check_fails() -> None:
    polls: list[int] = []
    alive = iter([True, False])

    def processes_alive() -> None:
        assert next(alive), "exited: ['kubelet-dra-shim']"

    def never() -> bool:
        polls.append(1)
        return False

    with pytest.raises(AssertionError, match=r"exited: \['kubelet-dra-shim'\]"):
        await eventually(never, 30, "a pod Running", abort=processes_alive)
    assert len(polls) == 1  # the second round's abort ended the wait; the 30 s were not waited out


async def test_consistently_passes_when_the_check_holds_for_the_whole_window() -> None:
    calls = 0

    def check() -> bool:
        nonlocal calls
        calls += 1
        return True

    await consistently(check, 0.3, interval=0.05)
    assert calls >= 3  # polled through the window, not once


async def test_consistently_fails_when_the_wrong_write_lands_inside_the_window(later: Any) -> None:
    claims = later(1)
    claims.set_after(0.2, 2)  # the wrong second create
    with pytest.raises(AssertionError) as failed:
        await consistently(lambda: claims.value == 1, 5.0, "exactly one claim")
    message = str(failed.value)
    assert message.startswith("exactly one claim stopped holding"), message
    seen_at = float(re.search(r"holding (\d+\.\d+)s into 5.0s", message).group(1))  # type: ignore[union-attr]
    assert 0.1 <= seen_at < 5.0, message


async def test_consistently_reports_a_failed_assertion_of_the_check(later: Any) -> None:
    box = later({"a"})
    box.set_after(0.1, {"a", "b"})

    def no_extra() -> bool:
        assert box.value == {"a"}, f"extra objects: {sorted(box.value - {'a'})}"
        return True

    with pytest.raises(AssertionError, match=r"no_extra stopped holding .*extra objects: \['b'\]"):
        await consistently(no_extra, 5.0)


async def test_consistently_checks_once_more_at_the_end_of_the_window(later: Any) -> None:
    box = later(True)
    box.set_after(0.25, False)
    with pytest.raises(AssertionError, match="got False"):
        await consistently(lambda: box.value, 0.3, interval=10.0)  # polls at 0 and at the window's end


async def test_consistently_fails_at_once_when_the_check_does_not_hold_at_the_start() -> None:
    calls: list[int] = []

    def empty() -> list[int]:
        calls.append(1)
        return []

    with pytest.raises(AssertionError, match=r"empty stopped holding 0.00s into 1.0s: got \[\]"):
        await consistently(empty, 1.0)
    assert len(calls) == 1


async def test_quiesce_returns_the_snapshot_once_writes_stop(later: Any) -> None:
    versions = later({"a": "1"})
    for i, delay in enumerate((0.05, 0.1, 0.15, 0.2)):
        versions.set_after(delay, {"a": str(i + 2)})
    assert await quiesce(lambda: dict(versions.value), quiet=0.3, timeout=5) == {"a": "5"}


async def test_quiesce_fails_when_writes_never_stop() -> None:
    counter = 0

    async def writes() -> int:
        nonlocal counter
        counter += 1  # a controller that rewrites the object on every look (a hot loop)
        return counter

    with pytest.raises(AssertionError, match=r"slices did not stay unchanged for 0.3s within 0.5s: \d+ chan"):
        await quiesce(writes, quiet=0.3, timeout=0.5, what="the slices")


class FakeList:
    """Just ``list``: the probe's contract with ``KubeClient`` (integration tests use the real one)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.asked: list[tuple[Any, dict[str, Any]]] = []

    async def list(self, resource: Any, **kwargs: Any) -> dict[str, Any]:
        self.asked.append((resource, kwargs))
        return {"items": self.items}


async def test_resource_versions_maps_names_to_resource_versions() -> None:
    kube = FakeList([{"metadata": {"name": "a", "resourceVersion": "5"}},
                     {"metadata": {"name": "b", "resourceVersion": "9"}}])
    probe = resource_versions(kube, "slices", namespace="ns", label_selector="x=y")
    assert await probe() == {"a": "5", "b": "9"}
    assert kube.asked == [("slices", {"namespace": "ns", "label_selector": "x=y"})]
