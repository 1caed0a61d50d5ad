"""An Allocator (one per decision) validates each request once for all the nodes it tries
(issue #15 item 2b): the validation does not depend on the node, except ``All`` mode's device list."""

from __future__ import annotations

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
