"""PoolTraces: which slice-publisher sync span each pool's slices carry, and the links of an allocation."""

from __future__ import annotations

from typing import Any

from draflow_runtime.tracing import TRACEPARENT_ANNOTATION
from structured_allocator.claimspan import PoolTraces

DRIVER = "gpu.example.com"


def slice_(name: str, pool: str, span: str | None, trace_id: str = "ab" * 16) -> dict[str, Any]:
    annotations = {TRACEPARENT_ANNOTATION: f"00-{trace_id}-{span}-01"} if span else {}
    return {"metadata": {"name": name, "annotations": annotations},
            "spec": {"driver": DRIVER, "pool": {"name": pool}}}


def allocation(*pools: str) -> dict[str, Any]:
    return {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": p, "device": f"d{i}"} for i, p in enumerate(pools)]}}


def linked(traces: PoolTraces, alloc: dict[str, Any] | None) -> list[tuple[str, str]]:
    return sorted((format(link.context.span_id, "016x"), (link.attributes or {})["draflow.pool"])
                  for link in traces.links(alloc))


def test_one_link_per_sync_span_of_the_pools_used() -> None:
    traces = PoolTraces()
    traces.on_slice("add", None, slice_("a-0", "a", "11" * 8))
    traces.on_slice("add", None, slice_("a-1", "a", "11" * 8))  # same sync wrote both slices
    traces.on_slice("add", None, slice_("b-0", "b", "22" * 8))
    traces.on_slice("add", None, slice_("c-0", "c", "33" * 8))

    assert linked(traces, allocation("a", "a", "b")) == [("11" * 8, f"{DRIVER}/a"), ("22" * 8, f"{DRIVER}/b")]
    assert linked(traces, None) == []


def test_a_rewrite_replaces_the_span_and_a_delete_or_unannotated_slice_drops_it() -> None:
    traces = PoolTraces()
    traces.on_slice("add", None, slice_("a-0", "a", "11" * 8))
    traces.on_slice("update", slice_("a-0", "a", "11" * 8), slice_("a-0", "a", "44" * 8))
    assert linked(traces, allocation("a")) == [("44" * 8, f"{DRIVER}/a")]

    traces.on_slice("update", slice_("a-0", "a", "44" * 8), slice_("a-0", "a", None))  # another writer
    assert linked(traces, allocation("a")) == []

    traces.on_slice("add", None, slice_("b-0", "b", "22" * 8))
    traces.on_slice("delete", slice_("b-0", "b", "22" * 8), None)
    assert linked(traces, allocation("b")) == []


def test_a_malformed_traceparent_links_nothing() -> None:
    traces = PoolTraces()
    traces.on_slice("add", None, slice_("a-0", "a", "zz", trace_id="0" * 32))
    assert linked(traces, allocation("a")) == []
