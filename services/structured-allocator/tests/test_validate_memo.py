"""What an Allocator (one per decision) remembers across the nodes it tries (issue #15 item 2): each
request's validation (it does not depend on the node, except ``All`` mode's device list) and the
allocation timestamp's text for the current second."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sa_builders import DRIVER, NODE, claim, dclass, dev, req, rslice

from structured_allocator.core import AllocatedState, Allocator, UnknownDeviceClassError

GPU_CLASS = dclass("gpu", f'device.driver == "{DRIVER}"')
NODE2 = {"metadata": {"name": "node-2"}}


def _devices(outcome: Any) -> list[str]:
    return [r["device"] for r in outcome.results[0]["devices"]["results"]]


def test_one_allocator_gives_each_node_its_own_all_mode_devices() -> None:
    allocator = Allocator(
        {"gpu": GPU_CLASS},
        [rslice("s1", [dev("a"), dev("b")]), rslice("s2", [dev("c")], node="node-2")],
        AllocatedState(),
    )
    claims = [claim("c", req("gpu", mode="All"))]
    assert _devices(allocator.allocate(NODE, claims)) == ["a", "b"]
    assert _devices(allocator.allocate(NODE2, claims)) == ["c"]
    assert _devices(allocator.allocate(NODE, claims)) == ["a", "b"]
    assert len(allocator.validated_requests) == 1


def test_an_invalid_request_fails_the_same_way_on_every_node() -> None:
    allocator = Allocator({"gpu": GPU_CLASS}, [rslice("s1", [dev("a")])], AllocatedState())
    claims = [claim("c", req("ok"), req("bad", "missing"))]
    messages = []
    for node in (NODE, NODE2, NODE):
        with pytest.raises(UnknownDeviceClassError) as err:
            allocator.allocate(node, claims)
        messages.append(str(err.value))
    assert messages == ['claim "default/c", request "bad": device class missing does not exist'] * 3


def test_allocation_timestamps_follow_the_clock_to_the_second() -> None:
    t0 = datetime(2026, 11, 24, 20, 59, 59, 100, tzinfo=UTC)
    times = iter([t0, t0 + timedelta(microseconds=999_000),
                  (t0 + timedelta(seconds=1)).astimezone(timezone(timedelta(hours=2))),
                  datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
                  datetime(1970, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC)])
    allocator = Allocator({"gpu": GPU_CLASS}, [rslice("s1", [dev("a")])], AllocatedState(),
                          clock=lambda: next(times))
    claims = [claim("c", req("gpu"))]
    stamps = [allocator.allocate(NODE, claims).results[0]["allocationTimestamp"] for _ in range(5)]
    assert stamps == ["2026-11-24T20:59:59Z", "2026-11-24T20:59:59Z", "2026-11-24T21:00:00Z",
                      "1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z"]
