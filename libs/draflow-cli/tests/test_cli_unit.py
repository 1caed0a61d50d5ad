"""The CLI's pure parts: counting devices, the span tree, explanations, argument parsing."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_cli.__main__ import PodRef, parser
from draflow_cli.events import describe
from draflow_cli.explain import format_conditions, format_explanation, pods_of
from draflow_cli.status import format_status, summarize
from draflow_cli.table import render
from draflow_cli.trace import build_tree, format_tree, trace_id_of
from draflow_runtime.lifecycle import build_claim_event

DRIVER = "gpu.draflow.example"


def slice_(
    node: str, generation: int, devices: list[dict[str, Any]], pool: str | None = None
) -> dict[str, Any]:
    return {"spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": 1}}}


def allocated(*devices: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": pool, "device": dev} for pool, dev in devices
    ]}}}}


def test_status_counts_allocated_tainted_unhealthy_and_free_per_pool() -> None:
    slices = [
        slice_("n1", 2, [
            {"name": "gpu-0"},
            {"name": "gpu-1", "taints": [{"key": "draflow.dev/unhealthy", "effect": "NoSchedule"}]},
            {"name": "gpu-2", "taints": [{"key": f"{DRIVER}/unhealthy", "effect": "NoSchedule"}]},
            {"name": "gpu-3", "taints": [{"key": "draflow.dev/driver-unavailable", "effect": "NoSchedule"}]},
        ]),
        slice_("n1", 1, [{"name": "old-0"}]),  # obsolete generation: ignored
        slice_("n2", 1, [{"name": "gpu-0"}, {"name": "gpu-1"}]),
    ]
    claims = [allocated(("n1", "gpu-0"), ("n2", "gpu-1")), {"status": {}}]
    pools = summarize(slices, claims)
    assert [p.row() for p in pools] == [
        ["n1", DRIVER, "n1", 4, 1, 3, 2, 0],
        ["n2", DRIVER, "n2", 2, 1, 0, 0, 1],
    ]
    text = format_status(pools, claims)
    assert "TOTAL" in text and "2 node(s); claims: 2 total, 1 allocated, 1 pending" in text


def test_network_attached_pools_are_shown_by_placement() -> None:
    s = {"spec": {"driver": DRIVER, "allNodes": True, "pool": {"name": "shared", "generation": 1},
                  "devices": [{"name": "a"}]}}
    (pool,) = summarize([s], [])
    assert (pool.node, pool.pool) == ("<all nodes>", "shared")


def test_table_right_aligns_numbers() -> None:
    assert render(["A", "N"], [["x", 5], ["yy", 10]]).splitlines() == ["A    N", "--  --", "x    5", "yy  10"]


JAEGER_TRACE = {
    "traceID": "ab" * 16,
    "processes": {"p1": {"serviceName": "claim-controller"}, "p2": {"serviceName": "structured-allocator"}},
    "spans": [
        {"spanID": "c", "operationName": "write claim", "startTime": 1_300, "duration": 100,
         "processID": "p2",
         "references": [{"refType": "CHILD_OF", "spanID": "b"}]},
        {"spanID": "a", "operationName": "claim.create", "startTime": 1_000, "duration": 2_000,
         "processID": "p1", "references": []},
        {"spanID": "b", "operationName": "allocate claim", "startTime": 1_200, "duration": 500,
         "processID": "p2", "references": [{"refType": "CHILD_OF", "spanID": "a"},
                                           {"refType": "FOLLOWS_FROM", "spanID": "zz"}]},
        {"spanID": "d", "operationName": "prepare pod", "startTime": 2_000, "duration": 300,
         "processID": "p1",
         "references": [{"refType": "CHILD_OF", "spanID": "a"}],
         "tags": [{"key": "otel.status_code", "value": "ERROR"}]},
        {"spanID": "e", "operationName": "orphan", "startTime": 5_000, "duration": 1, "processID": "p1",
         "references": [{"refType": "CHILD_OF", "spanID": "missing"}]},
    ],
}


def test_span_tree_follows_child_of_and_orders_by_start() -> None:
    roots = build_tree(JAEGER_TRACE)
    assert [r.name for r in roots] == ["claim.create", "orphan"]
    assert [c.name for c in roots[0].children] == ["allocate claim", "prepare pod"]
    assert roots[0].children[0].children[0].name == "write claim"
    assert roots[0].children[0].links == 1
    text = format_tree("ab" * 16, roots, "http://jaeger:16686/")
    lines = text.splitlines()
    assert lines[0].startswith(f"trace {'ab' * 16}: 5 spans, 2 services")
    assert lines[1] == "claim.create [claim-controller] 2.0ms (+0.0ms)"
    assert lines[2] == "├─ allocate claim [structured-allocator] 0.5ms (+0.2ms)  links=1"
    assert lines[3] == "│  └─ write claim [structured-allocator] 0.1ms (+0.3ms)"
    assert lines[4].startswith("└─ prepare pod [claim-controller]") and lines[4].endswith("ERROR")
    assert lines[-1] == f"http://jaeger:16686/trace/{'ab' * 16}"


def test_links_are_named_and_the_services_linked_but_not_in_the_trace_are_on_the_first_line() -> None:
    roots = build_tree(JAEGER_TRACE)
    assert roots[0].children[0].link_refs == [("", "zz")]
    linked = {("", "zz"): ("slice-publisher.sync_pool", "slice-publisher"),
              ("ab" * 16, "a"): ("claim.create", "claim-controller")}
    lines = format_tree("ab" * 16, roots, "http://jaeger:16686/", linked).splitlines()
    assert lines[0].endswith(", links to slice-publisher")
    assert lines[2] == ("├─ allocate claim [structured-allocator] 0.5ms (+0.2ms)  links=1 → "
                        "slice-publisher.sync_pool [slice-publisher]")
    # a link within the trace, or to a service the trace has spans of, is named but not on line one
    linked = {("", "zz"): ("schedule pod", "structured-allocator")}
    lines = format_tree("ab" * 16, roots, "http://jaeger:16686/", linked).splitlines()
    assert "links to" not in lines[0]
    assert lines[2].endswith("links=1 → schedule pod [structured-allocator]")


def test_trace_id_comes_from_the_traceparent_annotation() -> None:
    tid = "4bf92f3577b34da6a3ce929d0e0e4736"
    claim = {"metadata": {"annotations": {"draflow.dev/traceparent": f"00-{tid}-00f067aa0ba902b7-01"}}}
    assert trace_id_of(claim) == tid
    assert trace_id_of({"metadata": {"annotations": {"draflow.dev/traceparent": "garbage"}}}) == ""
    assert trace_id_of({}) == ""


def test_explanation_shows_message_filters_and_the_funnel() -> None:
    doc = {
        "claim": "team-a/big", "pod": "team-a/trainer", "time": "2026-01-01T00:00:00Z",
        "message": "0/3 nodes are available: 3 node(s) cannot allocate the pod's claims.",
        "nodes": {"total": 3, "filtered": {"were not ready": 1}, "devicesDidNotFit": 2},
        "bestNode": {"node": "n-1", "summary": "needs 16, 8 usable", "requests": [
            {"request": "gpu", "device_class": "gpu.draflow.example", "needed": 16, "class_devices": 8,
             "matching": 8, "free": 8, "blocked_by_taints": 0, "blocked_by_counters": 0,
             "blocked_by_capacity": 0, "blocked_by_constraints": 0, "usable": 8}]},
    }
    text = format_explanation(doc)
    assert "claim team-a/big (pod team-a/trainer)" in text
    assert "0/3 nodes are available" in text and "1 node(s) were not ready" in text
    assert "best node n-1: needs 16, 8 usable" in text
    assert "MATCH SELECTORS" in text and "gpu.draflow.example" in text


def test_fallback_reads_the_pod_scheduled_condition_of_the_claims_pods() -> None:
    claim = {"metadata": {"name": "c", "uid": "cu"}, "status": {}}
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "pu"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
           "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": "0/4 nodes are available"}]}}
    other = {"metadata": {"namespace": "ns", "name": "q", "uid": "qu"}, "spec": {}}
    assert pods_of(claim, [pod, other]) == [pod]
    assert format_conditions([pod]) == (
        "pod ns/p: (not bound), PodScheduled=False Unschedulable: 0/4 nodes are available"
    )


def test_claim_arguments_are_namespace_slash_name_or_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    args = parser().parse_args(["--nats-url", "nats://x:1", "events", "--claim", "ns/c"])
    assert args.claim == ("ns", "c") and args.nats_url == "nats://x:1"
    assert parser().parse_args(["trace", "no-namespace"]).claim == (None, "no-namespace")  # -n / context
    for bad in ("/c", "ns/", "a/b/c"):
        with pytest.raises(SystemExit):
            parser().parse_args(["trace", bad])
        assert "expected [<namespace>/]<name>" in capsys.readouterr().err


def test_trace_takes_a_claim_or_a_pod(capsys: pytest.CaptureFixture[str]) -> None:
    claim = parser().parse_args(["trace", "ns/c"]).claim
    assert claim == ("ns", "c") and not isinstance(claim, PodRef)
    for argv in (["pod/p"], ["pods/p"], ["po/p"]):
        pod = parser().parse_args(["trace", *argv]).claim
        assert isinstance(pod, PodRef) and pod == (None, "p")
    assert parser().parse_args(["trace", "pod/team/p"]).claim == PodRef(("team", "p"))
    with pytest.raises(SystemExit):
        parser().parse_args(["trace", "pod/"])
    assert "expected [<namespace>/]<name>" in capsys.readouterr().err


def test_flags_have_environment_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", "nats://env:4222")
    monkeypatch.setenv("JAEGER_URL", "http://env:16686")
    monkeypatch.setenv("KUBECONFIG", "/env/kubeconfig")
    monkeypatch.setenv("DRAFLOW_ALLOCATOR_URL", "http://env:8080")
    args = parser().parse_args(["status"])
    assert (args.nats_url, args.jaeger_url, args.kubeconfig, args.allocator_url) == (
        "nats://env:4222", "http://env:16686", "/env/kubeconfig", "http://env:8080"
    )


def test_describe_is_one_readable_line() -> None:
    claim = {
        "metadata": {"namespace": "team-a", "name": "trainer-gpu-x7k2p", "uid": "uid-1"},
        "status": {"allocation": {
            "devices": {"results": [
                {"request": "gpu", "driver": "gpu.draflow.example", "pool": "node-1", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
        }},
    }
    line = describe(build_claim_event("allocated", claim, service="structured-allocator"))
    assert line.startswith("allocated")
    assert "team-a/trainer-gpu-x7k2p" in line and "node=node-1" in line and "node-1/gpu-0" in line
    assert "\n" not in line


def test_asyncio_tls_close_note_is_dropped_other_asyncio_warnings_kept() -> None:
    import logging

    from draflow_cli.__main__ import QuietTlsClose

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.WARNING, __file__, 1, msg, None, None)

    quiet = QuietTlsClose()
    assert not quiet.filter(record("returning true from eof_received() has no effect when using ssl"))
    assert quiet.filter(record("Executing <Task> took 0.2 seconds"))


def test_a_reader_that_leaves_early_ends_the_cli_quietly(monkeypatch, capsys) -> None:
    # `kubectl draflow describe node sim-0 | head`: the pipe closes before the output is written; the CLI
    # exits as a tool killed by SIGPIPE would (141) instead of printing a BrokenPipeError traceback.
    import os
    import sys

    import draflow_cli.__main__ as cli

    async def answer(args):
        return "line\n" * 100_000

    monkeypatch.setattr(cli, "run", answer)
    read_end, write_end = os.pipe()
    os.close(read_end)
    saved = os.dup(1)
    with capsys.disabled():
        os.dup2(write_end, 1)
        os.close(write_end)
        try:
            monkeypatch.setattr(sys, "stdout", os.fdopen(1, "w", closefd=False))
            code = cli.main(["status"])
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    assert code == 141
