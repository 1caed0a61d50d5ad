"""Pool gathering and the incremental SliceIndex (including the selector memo's lifetime)."""

from sa_builders import NODE, dev, rslice

from structured_allocator.core import Features, SliceIndex, gather_pools
from structured_allocator.core.cel_env import compile_selector
from structured_allocator.core.selection import evaluate


def ids(pools):  # type: ignore[no-untyped-def]
    return [(p.id, p.incomplete, p.invalid) for p in pools]


def test_index_groups_node_local_and_shared() -> None:
    index = SliceIndex(
        [
            rslice("a", [dev("x")]),
            rslice("b", [dev("y")], node="node-2"),
            rslice("c", [dev("z")], node=None, pool="net", allNodes=True),
        ]
    )
    assert sorted(s.name for s in index.slices_for_node("node-1")) == ["a", "c"]
    assert sorted(s.name for s in index.slices_for_node("node-9")) == ["c"]
    index.remove("a")
    assert [s.name for s in index.slices_for_node("node-1")] == ["c"]
    assert len(index) == 2


def test_upsert_keeps_memo_for_same_resource_version_and_drops_it_on_change() -> None:
    index = SliceIndex()
    prepared = index.upsert(rslice("a", [dev("x", {"m": 1})], rv="1"))
    sel = compile_selector('device.attributes["gpu.example.com"].m == 1')
    assert evaluate(sel, prepared.devices[0]) is True
    assert index.upsert(rslice("a", [dev("x", {"m": 1})], rv="1")) is prepared
    changed = index.upsert(rslice("a", [dev("x", {"m": 2})], rv="2"))
    assert changed is not prepared and changed.devices[0].matches == {}
    assert evaluate(sel, changed.devices[0]) is False


def test_index_counts_slices_that_map_node_resources_through_updates_and_removal() -> None:
    mapping = {"cpu": {"mapping": {"deviceMultiplier": "1"}}}
    index = SliceIndex([rslice("a", [dev("x")], rv="1")])
    assert index.maps_node_resources is False
    index.upsert(rslice("b", [dev("y"), dev("z", nodeAllocatableResources=mapping)], node="node-2", rv="1"))
    index.upsert(rslice("a", [dev("x", nodeAllocatableResources=mapping)], rv="2"))
    assert index.maps_node_resources is True
    index.upsert(rslice("a", [dev("x")], rv="3"))  # a no longer maps; b still does
    assert index.maps_node_resources is True
    index.remove("b")
    assert index.maps_node_resources is False
    index.remove("b")  # removing twice changes nothing
    assert index.maps_node_resources is False


def test_pool_order_binding_conditions_last() -> None:
    index = SliceIndex(
        [
            rslice("s1", [dev("d", bindingConditions=["c"])], node=None, pool="a", allNodes=True),
            rslice("s2", [dev("d")], node=None, pool="c", allNodes=True),
            rslice("s3", [dev("d")], pool="b"),
        ]
    )
    assert ids(gather_pools(index, NODE, Features.all())) == [
        ("gpu.example.com/b", False, False),
        ("gpu.example.com/c", False, False),
        ("gpu.example.com/a", False, False),
    ]


def test_newest_generation_incomplete_and_invalid() -> None:
    index = SliceIndex(
        [
            rslice("g1", [dev("old")], pool="p", gen=1),
            rslice("g2", [dev("new")], pool="p", gen=2),
            rslice("half", [dev("x")], pool="q", count=2),
            rslice("dup1", [dev("x")], pool="r", count=2),
            rslice("dup2", [dev("x")], pool="r", count=2),
        ]
    )
    pools = gather_pools(index, NODE, Features.all())
    assert ids(pools) == [
        ("gpu.example.com/p", False, False),
        ("gpu.example.com/q", True, False),
        ("gpu.example.com/r", False, True),
    ]
    assert [d.name for d in pools[0].slices[0].devices] == ["new"]
    assert pools[2].invalid_reason == "duplicate device name x"


def test_partitionable_slices_skipped_when_feature_off() -> None:
    index = SliceIndex([rslice("c", [], sharedCounters=[{"name": "s", "counters": {"m": {"value": "1"}}}])])
    assert gather_pools(index, NODE, Features(partitionable_devices=False)) == []
    assert len(gather_pools(index, NODE, Features.all())) == 1


def test_gt_lt_node_selectors_parse_label_values_as_go_parse_int_does() -> None:
    from structured_allocator.core.pools import node_selector_matches

    def gt(value: str, bound: str = "5") -> bool:
        node = {"metadata": {"name": NODE, "labels": {"gen": value}}}
        term = {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": [bound]}]}
        return node_selector_matches(node, {"nodeSelectorTerms": [term]})

    assert gt("10") and gt("+10") and not gt("-10") and not gt("5")
    # Python's int() takes these; Go's strconv.ParseInt(s, 10, 64) does not, so the node does not match.
    for value in ("1_0", " 10", "10 ", "\u0661\u0660", "0x10", "9223372036854775808"):
        assert not gt(value), value
    assert not gt("10", bound="1_0")
