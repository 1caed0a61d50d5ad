"""core.device_errors_possible: whether a search on one node could fail on that node's devices (the
ranked node search leaves a node unsearched only when not)."""

from typing import Any

import pytest
from sa_builders import DRIVER, NODE, claim, dclass, dev, req, rslice

from structured_allocator.core import (
    AllocatedState,
    Allocator,
    Features,
    SliceIndex,
    UnknownDeviceClassError,
    device_errors_possible,
)

HEALTHY = f'device.attributes["{DRIVER}"].healthy'


def possible(slices: list[dict[str, Any]], *requests: dict[str, Any]) -> bool:
    allocator = Allocator({"gpu": dclass("gpu", f'device.driver == "{DRIVER}"')}, SliceIndex(slices),
                          AllocatedState(), Features.all())
    return device_errors_possible(allocator, NODE, [claim("c", *requests)])


def test_selectors_that_evaluate_on_every_device_cannot_fail() -> None:
    assert not possible([rslice("a", [dev("d0", {"healthy": True}), dev("d1", {"healthy": False})])],
                        req("r", selectors=(HEALTHY,)))


def test_a_device_without_the_attribute_a_selector_reads_can_fail() -> None:
    # d1 would be tried only if d0 were in use: a superset of what one search tries counts
    assert possible([rslice("a", [dev("d0", {"healthy": True}), dev("d1")])], req("r", selectors=(HEALTHY,)))


def test_slices_that_select_nodes_and_capacity_requests_count_as_possible() -> None:
    shared = rslice("net", [dev("n0")], node=None, pool="net", allNodes=True)
    assert possible([rslice("a", [dev("d0")]), shared], req("r"))
    assert possible([rslice("a", [dev("d0", cap={"memory": "1Gi"})])], req("r", capacity={"memory": "1Mi"}))
    assert not possible([rslice("a", [dev("d0", cap={"memory": "1Gi"})])], req("r"))


def test_broken_input_that_does_not_depend_on_the_node_is_raised() -> None:
    with pytest.raises(UnknownDeviceClassError):
        possible([rslice("a", [dev("d0")])], req("r", "missing"))


def test_the_answer_is_remembered_with_the_nodes_pools() -> None:
    index = SliceIndex([rslice("a", [dev("d0", {"healthy": True})], rv="1")])
    allocator = Allocator({"gpu": dclass("gpu")}, index, AllocatedState(), Features.all())
    claims = [claim("c", req("r", selectors=(HEALTHY,)))]
    assert not device_errors_possible(allocator, NODE, claims)
    assert list(index.node_pools(NODE, Features.all()).checked.values()) == [False]
    index.upsert(rslice("a", [dev("d0")], rv="2"))  # the slice changed: asked again
    assert device_errors_possible(allocator, NODE, claims)
