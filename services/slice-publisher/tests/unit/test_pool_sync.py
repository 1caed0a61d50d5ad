"""Table tests of pool planning: naming, generation, what gets written."""

from __future__ import annotations

import itertools

import pytest

from slice_publisher.compare import canonical_spec
from slice_publisher.naming import MANAGED_BY_LABEL, node_label_value, parse_slice_index, slice_name
from slice_publisher.pool_sync import Plan, plan_pool
from slice_publisher.splitter import DesiredPool
from slice_publisher.taints import Overlay, apply_overlay

DRIVER, NODE = "gpu.example.com", "node-a"
NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
_uids = itertools.count()


def gpus(n: int) -> tuple[dict, ...]:
    return tuple(
        {
            "name": f"gpu-{i}",
            "attributes": {"index": {"int": i}, "ok": {"bool": False}},
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(n)
    )


def desired(n: int, hint: int = 0) -> DesiredPool:
    return DesiredPool(DRIVER, NODE, NODE, {"nodeName": NODE}, gpus(n), (), hint)


def server_apply(existing: list[dict], plan: Plan) -> list[dict]:
    """What the API holds after the plan (uids and resourceVersions assigned like a server)."""
    by_name = {s["metadata"]["name"]: s for s in existing}
    for obj in plan.deletes:
        del by_name[obj["metadata"]["name"]]
    for obj in plan.updates:
        assert obj["metadata"]["uid"] == by_name[obj["metadata"]["name"]]["metadata"]["uid"]
        by_name[obj["metadata"]["name"]] = {
            **obj,
            "metadata": {**obj["metadata"], "resourceVersion": str(next(_uids))},
        }
    for obj in plan.creates:
        assert obj["metadata"]["name"] not in by_name
        meta = {**obj["metadata"], "uid": f"uid-{next(_uids)}", "resourceVersion": str(next(_uids))}
        by_name[meta["name"]] = {**obj, "metadata": meta}
    return list(by_name.values())


def sync(existing, pool, now=NOW):
    plan = plan_pool(DRIVER, NODE, NODE, pool, existing, now=now)
    return plan, server_apply(existing, plan)


def counts(plan: Plan) -> tuple[int, int, int]:
    return len(plan.deletes), len(plan.updates), len(plan.creates)


def pool_view(slices: list[dict]) -> tuple[set[int], set[int], list[str]]:
    gens = {s["spec"]["pool"]["generation"] for s in slices}
    cnts = {s["spec"]["pool"]["resourceSliceCount"] for s in slices}
    names = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
    return gens, cnts, names


def test_names_are_deterministic_parseable_and_bounded():
    name = slice_name(DRIVER, NODE, NODE, 10)
    assert name == slice_name(DRIVER, NODE, NODE, 10)
    assert name.startswith("node-a-gpu.example.com-") and name.endswith("-a")
    assert parse_slice_index(name, DRIVER, NODE, NODE) == 10
    assert parse_slice_index(name, DRIVER, "other-pool", NODE) is None
    assert parse_slice_index(name + "x", DRIVER, NODE, NODE) is None
    long_node = "n" * 250
    assert len(slice_name(DRIVER, "p", long_node, 4095)) <= 253
    assert node_label_value("node-a") == "node-a"
    assert node_label_value(long_node).startswith("h-")


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        # (device count, expected (deletes, updates, creates), expected generation, expected slice count)
        ("first publish", [(8, (0, 0, 1), 1, 1)]),
        ("same inventory writes nothing", [(8, (0, 0, 1), 1, 1), (8, (0, 0, 0), 1, 1)]),
        ("grow adds slices and bumps", [(8, (0, 0, 1), 1, 1), (200, (0, 1, 3), 2, 4)]),
        (
            "shrink deletes extras first, one change keeps generation",
            [(8, (0, 0, 1), 1, 1), (200, (0, 1, 3), 2, 4), (8, (3, 1, 0), 2, 1)],
        ),
        ("a change in one slice of many keeps generation", [(200, (0, 0, 4), 1, 4), (199, (0, 1, 0), 1, 4)]),
        ("empty pool is one empty slice", [(0, (0, 0, 1), 1, 1), (2, (0, 1, 0), 1, 1)]),
    ],
)
def test_generation_and_writes(name, steps):
    existing: list[dict] = []
    for n, want_counts, want_gen, want_slices in steps:
        plan, existing = sync(existing, desired(n))
        assert counts(plan) == want_counts, name
        gens, cnts, devices = pool_view(existing)
        assert (plan.generation, gens, cnts) == (want_gen, {want_gen}, {want_slices}), name
        assert len(existing) == want_slices
        assert devices == sorted(f"gpu-{i}" for i in range(n))


def test_change_in_two_slices_bumps_and_rewrites_all():
    _, existing = sync([], desired(200))
    pool = desired(200)
    devices = list(pool.devices)
    devices[0] = {**devices[0], "attributes": {"index": {"int": 1000}}}
    devices[100] = {**devices[100], "attributes": {"index": {"int": 1001}}}
    plan, existing = sync(existing, DesiredPool(DRIVER, NODE, NODE, pool.placement, tuple(devices)))
    assert counts(plan) == (0, 4, 0)
    assert plan.generation == 2


def test_driver_generation_hint_wins_when_higher():
    _, existing = sync([], desired(8))
    plan, existing = sync(existing, desired(8, hint=7))
    assert counts(plan) == (0, 1, 0) and plan.generation == 7
    plan, _ = sync(existing, desired(8, hint=7))
    assert plan.empty


def test_obsolete_lower_generation_and_foreign_names_are_deleted_first():
    _, existing = sync([], desired(8))
    stale = {
        **existing[0],
        "metadata": {**existing[0]["metadata"], "name": "junk", "uid": "u-junk"},
        "spec": {**existing[0]["spec"], "pool": {**existing[0]["spec"]["pool"], "generation": 0}},
    }
    plan = plan_pool(DRIVER, NODE, NODE, desired(8), [*existing, stale], now=NOW)
    assert counts(plan) == (1, 0, 0)
    assert plan.deletes[0]["metadata"]["uid"] == "u-junk"


def test_deleted_pool_removes_every_slice():
    _, existing = sync([], desired(200))
    plan = plan_pool(DRIVER, NODE, NODE, None, existing, now=NOW)
    assert counts(plan) == (4, 0, 0)


def test_quantities_compare_by_value_and_server_defaults_do_not_cause_writes():
    _, existing = sync([], desired(1))
    served = dict(existing[0])
    spec = {
        **served["spec"],
        "devices": [
            {**served["spec"]["devices"][0], "capacity": {"memory": {"value": "80Gi"}}, "allNodes": False}
        ],
        "perDeviceNodeSelection": None,
    }
    served = {
        **served,
        "spec": spec,
        "metadata": {**served["metadata"], "labels": {**served["metadata"]["labels"], "someone-else": "x"}},
    }
    assert plan_pool(DRIVER, NODE, NODE, desired(1), [served], now=NOW).empty
    assert canonical_spec(
        {"devices": [{"name": "a", "capacity": {"m": {"value": "1024Mi"}}}]}
    ) == canonical_spec({"devices": [{"name": "a", "capacity": {"m": {"value": "1Gi"}}}]})
    assert canonical_spec(
        {"devices": [{"name": "a", "attributes": {"x": {"bool": False}}}]}
    ) != canonical_spec({"devices": [{"name": "a", "attributes": {"x": {"bool": True}}}]})


def test_taint_and_untaint_update_in_place_and_keep_time_added():
    _, existing = sync([], desired(200))
    uids = {s["metadata"]["name"]: s["metadata"]["uid"] for s in existing}
    tainted = apply_overlay(desired(200), Overlay(driver_unavailable=True))
    plan, existing = sync(existing, tainted, now=NOW)
    assert counts(plan) == (0, 4, 0)
    taints = [t for s in existing for d in s["spec"]["devices"] for t in d["taints"]]
    assert len(taints) == 200 and {t["timeAdded"] for t in taints} == {NOW}
    # Re-syncing later keeps the original time: nothing to write.
    assert plan_pool(DRIVER, NODE, NODE, tainted, existing, now=LATER).empty
    plan, existing = sync(existing, desired(200), now=LATER)
    assert counts(plan) == (0, 4, 0)
    assert {s["metadata"]["name"]: s["metadata"]["uid"] for s in existing} == uids
    assert not any(d.get("taints") for s in existing for d in s["spec"]["devices"])


def test_owner_reference_and_labels():
    node = {"metadata": {"name": NODE, "uid": "node-uid"}}
    from slice_publisher.naming import node_owner_reference

    plan = plan_pool(DRIVER, NODE, NODE, desired(1), [], now=NOW, owner_ref=node_owner_reference(node))
    meta = plan.creates[0]["metadata"]
    assert meta["ownerReferences"][0]["uid"] == "node-uid"
    assert meta["labels"][MANAGED_BY_LABEL] == "draflow-slice-publisher"
    # The node appearing later is one in-place update, the node vanishing another.
    _, existing = sync([], desired(1))
    plan = plan_pool(DRIVER, NODE, NODE, desired(1), existing, now=NOW, owner_ref=node_owner_reference(node))
    assert counts(plan) == (0, 1, 0)


def test_network_pool_has_no_node_name():
    pool = DesiredPool(DRIVER, "fabric", NODE, {"allNodes": True}, gpus(2))
    plan = plan_pool(DRIVER, "fabric", NODE, pool, [], now=NOW)
    spec = plan.creates[0]["spec"]
    assert spec["allNodes"] is True and "nodeName" not in spec
