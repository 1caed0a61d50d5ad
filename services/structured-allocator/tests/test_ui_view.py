"""The web view's documents (pure): the state of each device, the rows, the bounds, a device's detail."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_protos.events.v1.events_pb2 import ClaimEvent, PodRef
from structured_allocator.ui.server import event_view
from structured_allocator.ui.view import Claims, Limits, device_detail, grid

DRIVER = "gpu.example.com"
TRACE = "0af7651916cd43dd8448eb211c80319c"


def device(name: str, *, counter_set: str = "", taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {"model": {"string": "fake"}},
                         "capacity": {"memory": {"value": "80Gi"}}}
    if counter_set:
        d["consumesCounters"] = [{"counterSet": counter_set, "counters": {"memory": {"value": "1Gi"}}}]
    if taints:
        d["taints"] = taints
    return d


def slice_(node: str | None, devices: list[dict[str, Any]], *, pool: str = "", generation: int = 1,
           name: str = "") -> dict[str, Any]:
    pool_ = {"name": pool or node or "shared", "generation": generation, "resourceSliceCount": 1}
    spec: dict[str, Any] = {"driver": DRIVER, "pool": pool_, "devices": devices}
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    return {"metadata": {"name": name or f"{node}-{generation}"}, "spec": spec}


def node(name: str, ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def claim(name: str, pool: str, *devices: str, pods: tuple[str, ...] = (), trace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if trace:
        meta["annotations"] = {"draflow.dev/traceparent": f"00-{trace}-b7ad6b7169203331-01"}
    results = [{"request": "r", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    status: dict[str, Any] = {"allocation": {"devices": {"results": results}}}
    if pods:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods]
    return {"metadata": meta, "status": status}


def states(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {row["name"]: {d["device"]: d["state"] for d in row["devices"]} for row in doc["nodes"]}


def test_each_state_and_which_wins() -> None:
    slices = [slice_("n1", [
        device("gpu-0", counter_set="gpu-0-counters"),
        device("gpu-0-part-0", counter_set="gpu-0-counters"),
        device("gpu-0-part-1", counter_set="gpu-0-counters"),
        device("gpu-1", counter_set="gpu-1-counters"),
        device("gpu-2", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
        device("gpu-3", taints=[{"key": "draflow.dev/unhealthy", "effect": "NoSchedule"}]),
        device("gpu-4", taints=[{"key": f"{DRIVER}/unhealthy", "effect": "NoSchedule"}]),
        device("gpu-5"),
    ])]
    rule = {"metadata": {"name": "r"}, "spec": {"deviceSelector": {"device": "gpu-5"},
                                                "taint": {"key": "drain", "effect": "NoExecute"}}}
    claims = Claims.build([claim("c1", "n1", "gpu-0-part-0"), claim("c2", "n1", "gpu-4")])
    doc = grid(slices, claims, [node("n1")], [rule], [])
    assert states(doc)["n1"] == {
        "gpu-0": "partition",  # the whole GPU: one of its partitions is in use
        "gpu-0-part-0": "allocated",
        "gpu-0-part-1": "partition",  # draws on the same counter set
        "gpu-1": "free",
        "gpu-2": "tainted",
        "gpu-3": "unhealthy",
        "gpu-4": "unhealthy",  # allocated, but what a person must see is that it is unhealthy
        "gpu-5": "tainted",  # by the DeviceTaintRule
    }
    assert doc["counts"] == {"free": 1, "allocated": 1, "partition": 2, "tainted": 2, "unhealthy": 2}
    cell = next(d for d in doc["nodes"][0]["devices"] if d["device"] == "gpu-4")
    assert cell["claims"] == ["ns/c2"]
    groups = {d["device"]: d["group"] for d in doc["nodes"][0]["devices"]}
    assert (groups["gpu-0"], groups["gpu-0-part-1"], groups["gpu-1"], groups["gpu-2"]) == (
        "gpu-0-counters", "gpu-0-counters", "gpu-1-counters", "")


def test_an_allocation_being_written_counts_and_old_generations_do_not() -> None:
    slices = [slice_("n1", [device("gpu-0"), device("gpu-1")], generation=2),
              slice_("n1", [device("gpu-old")], generation=1)]
    claims = Claims.build([], [("ns/new", {"devices": {"results": [
        {"driver": DRIVER, "pool": "n1", "device": "gpu-1"}]}})])
    doc = grid(slices, claims, [node("n1")], [], [])
    assert states(doc) == {"n1": {"gpu-0": "free", "gpu-1": "allocated"}}
    assert claims.writing == {"ns/new"}


def test_rows_sorted_with_empty_and_not_ready_nodes_and_shared_pools_last() -> None:
    slices = [slice_("b", [device("gpu-10"), device("gpu-2"), device("gpu-1-part-0"), device("gpu-1")]),
              slice_(None, [device("nic-0")], pool="fabric")]
    doc = grid(slices, Claims(), [node("b"), node("a", ready=False)], [], [])
    assert [(r["name"], r["ready"]) for r in doc["nodes"]] == [("a", False), ("b", True), ("*", True)]
    assert [d["device"] for d in doc["nodes"][1]["devices"]] == ["gpu-1", "gpu-1-part-0", "gpu-2", "gpu-10"]
    assert doc["nodes"][2]["devices"][0]["pool"] == "fabric"
    assert {d["group"] for d in doc["nodes"][1]["devices"]} == {""}


def test_bounded_rows_devices_and_pending() -> None:
    slices = [slice_(f"n{i}", [device(f"gpu-{j}") for j in range(10)]) for i in range(5)]
    pending = [{"claim": f"ns/p{i}", "pod": f"ns/p{i}", "time": "", "message": "no"} for i in range(7)]
    doc = grid(slices, Claims(), [], [], pending, Limits(max_nodes=2, max_devices=3, max_pending=4))
    assert [r["name"] for r in doc["nodes"]] == ["n0", "n1"]
    assert doc["nodesTotal"] == 5
    assert [len(r["devices"]) for r in doc["nodes"]] == [3, 3]
    assert [r["devicesTotal"] for r in doc["nodes"]] == [10, 10]
    assert sum(doc["counts"].values()) == 50  # the counts cover every device, shown or not
    assert (len(doc["pending"]), doc["pendingTotal"]) == (4, 7)


@pytest.mark.parametrize(("jaeger", "link"), [
    ("http://127.0.0.1:16686/", f"http://127.0.0.1:16686/trace/{TRACE}"),
    ("", None),
])
def test_device_detail_names_claim_pods_and_trace(jaeger: str, link: str | None) -> None:
    shared = claim("shared", "n1", "gpu-0", pods=("p0", "p1"), trace=TRACE)
    slices = [slice_("n1", [device("gpu-0", counter_set="cs"), device("gpu-1", counter_set="cs")])]
    claims = Claims.build([shared])
    detail = device_detail((DRIVER, "n1", "gpu-0"), slices, claims, {"ns/shared": shared}, [], jaeger)
    assert detail is not None
    assert (detail["node"], detail["state"], detail["counterSets"]) == ("n1", "allocated", ["cs"])
    assert detail["attributes"] == {"model": "fake"} and detail["capacity"] == {"memory": "80Gi"}
    (view,) = detail["claims"]
    assert view["claim"] == "ns/shared" and view["pods"] == ["ns/p0", "ns/p1"]
    assert view["devices"] == [f"{DRIVER}/n1/gpu-0"] and view["traceID"] == TRACE
    assert view.get("traceURL") == link
    other = device_detail((DRIVER, "n1", "gpu-1"), slices, claims, {"ns/shared": shared}, [], jaeger)
    assert other is not None and (other["state"], other["claims"]) == ("partition", [])
    assert device_detail((DRIVER, "n1", "gpu-9"), slices, claims, {}, [], jaeger) is None


def test_a_timeline_event_as_the_page_shows_it() -> None:
    event = ClaimEvent(kind=2, namespace="ns", name="c", service="structured-allocator", node="n1",
                       pod=PodRef(namespace="ns", name="p"))
    event.time.FromSeconds(1_700_000_000)
    view = event_view(event)
    assert view == {"kind": "allocated", "service": "structured-allocator",
                    "time": "2023-11-14T22:13:20.000Z", "pod": "ns/p", "node": "n1"}
