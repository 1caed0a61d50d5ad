"""SliceIndex.node_pools: each node's gathered pools are remembered between decisions and dropped
exactly when a slice they may have read, the node's labels or the features change; what is in use is
never part of them."""

from typing import Any

from sa_builders import NODE, NODE_NAME, claim, dclass, dev, req, rslice

from structured_allocator.core import AllocatedState, Allocator, DeviceID, Features, SliceIndex

ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}


def names(index: SliceIndex, node: dict[str, Any] = NODE, features: Features | None = None) -> list[str]:
    got = index.node_pools(node, features or Features.all())
    return [f"{p.pool}:{'/'.join(d.name for s in p.slices for d in s.devices)}" for p in got.pools
            if not (p.incomplete or p.invalid)]


def test_the_pools_of_a_node_are_built_once_until_something_they_read_changes() -> None:
    index = SliceIndex([rslice("a", [dev("x")], rv="1"), rslice("b", [dev("y")], node="node-2", rv="1")])
    first = index.node_pools(NODE, Features.all())
    assert index.node_pools(NODE, Features.all()) is first
    assert [d.name for _, _, d in first.candidates] == ["x"]
    # a slice of another node, in another pool, leaves node-1's pools alone
    index.upsert(rslice("b", [dev("y"), dev("y2")], node="node-2", rv="2"))
    index.upsert(rslice("c", [dev("z")], node="node-3", rv="1"))
    index.remove("c")
    assert index.node_pools(NODE, Features.all()) is first


def test_a_change_of_the_nodes_own_slice_is_seen() -> None:
    index = SliceIndex([rslice("a", [dev("x")], rv="1")])
    assert names(index) == ["node-1:x"]
    index.upsert(rslice("a", [dev("x"), dev("x2")], rv="2"))
    assert names(index) == ["node-1:x/x2"]
    index.upsert(rslice("a2", [dev("w")], pool="other", rv="1"))
    assert names(index) == ["node-1:x/x2", "other:w"]
    index.remove("a")
    assert names(index) == ["other:w"]


def test_a_shared_slice_added_or_removed_is_seen_by_every_node() -> None:
    index = SliceIndex([rslice("a", [dev("x")], rv="1"), rslice("b", [dev("y")], node="node-2", rv="1")])
    node2 = {"metadata": {"name": "node-2", "labels": {}}}
    assert names(index) == ["node-1:x"] and names(index, node2) == ["node-2:y"]
    index.upsert(rslice("net", [dev("n")], node=None, pool="net", allNodes=True, rv="1"))
    assert names(index) == ["net:n", "node-1:x"] and names(index, node2) == ["net:n", "node-2:y"]
    index.remove("net")
    assert names(index) == ["node-1:x"] and names(index, node2) == ["node-2:y"]


def test_a_newer_generation_of_the_pool_on_another_node_makes_the_pool_obsolete() -> None:
    # pool "p" spans node-1 and node-2 (two slices); node-1 sees only its own slice, so gathering
    # it reads the pool's other slices: a change on node-2 must reach node-1's remembered pools
    index = SliceIndex([rslice("p1", [dev("x")], pool="p", count=2, rv="1"),
                        rslice("p2", [dev("y")], node="node-2", pool="p", count=2, rv="1")])
    assert names(index) == ["p:x"]
    index.upsert(rslice("p2", [dev("y")], node="node-2", pool="p", gen=2, count=2, rv="2"))
    assert names(index) == []  # obsolete: the driver is replacing this generation
    index.remove("p2")
    assert [(p.pool, p.incomplete) for p in index.node_pools(NODE, Features.all()).pools] == [("p", True)]


def test_a_change_on_another_node_reaches_nodes_that_see_the_pool_through_a_shared_slice() -> None:
    # pool "p": a slice for every node plus one of node-2; node-1 sees only the shared one, so its pool
    # reads node-2's slice (complete, then obsolete once node-2's slice has a newer generation)
    index = SliceIndex([rslice("p-net", [dev("n")], node=None, pool="p", allNodes=True, count=2, rv="1"),
                        rslice("p2", [dev("y")], node="node-2", pool="p", count=2, rv="1")])
    assert names(index) == ["p:n"]
    index.upsert(rslice("p2", [dev("y")], node="node-2", pool="p", gen=2, count=2, rv="2"))
    assert names(index) == []


def test_the_node_labels_and_the_features_are_part_of_the_entry() -> None:
    index = SliceIndex([rslice("net", [dev("n")], node=None, pool="net", nodeSelector=ZONE_A, rv="1"),
                        rslice("c", [], sharedCounters=[{"name": "s", "counters": {"m": {"value": "1"}}}],
                               pool="parts", rv="1")])
    assert names(index) == ["net:n", "parts:"]
    moved = {"metadata": {"name": NODE_NAME, "labels": {"zone": "b"}}}
    assert names(index, moved) == ["parts:"]
    assert names(index) == ["net:n", "parts:"]
    assert names(index, features=Features(partitionable_devices=False)) == ["net:n"]
    node = {"metadata": {"name": NODE_NAME, "labels": {"zone": "a"}}}
    assert names(index, node) == ["net:n", "parts:"]
    node["metadata"]["labels"]["zone"] = "b"  # the same object changed in place: still seen
    assert names(index, node) == ["parts:"]


def test_remembered_pools_never_hide_a_device_allocated_meanwhile() -> None:
    index = SliceIndex([rslice("a", [dev("x"), dev("y")], rv="1")])
    allocated = AllocatedState()
    classes = {"gpu": dclass("gpu")}

    def devices() -> list[str]:
        outcome = Allocator(classes, index, allocated).allocate(NODE, [claim("c", req("r"))])
        return [r["device"] for r in outcome.results[0]["devices"]["results"]] if outcome.fits else []

    assert devices() == ["x"]
    allocated.devices.add(DeviceID("gpu.example.com", NODE_NAME, "x"))
    assert devices() == ["y"]
    allocated.devices.add(DeviceID("gpu.example.com", NODE_NAME, "y"))
    assert devices() == []
