"""The whole flow, end to end: the five services as processes against the real apiserver, NATS JetStream
and Jaeger, a fleet of two simulated nodes, and what a user sees of it.

1. One trace per claim: the claim's trace in Jaeger (trace ID from its ``draflow.dev/traceparent``
   annotation) has spans of claim-controller, structured-allocator, kubelet-dra-shim and reference-driver;
   claim-controller's ``claim.create`` is the one root, every other span has its parent in the trace, the
   allocator's and the shim's first spans are children of that root (the annotation), and the driver's
   server span is a child of the shim's gRPC client span of the same RPC.
2. ``draflow events --claim ns/name`` (the real CLI, a subprocess) shows created → allocated → prepared →
   unprepared → deallocated for a pod that ran and was deleted.
3. Kubernetes is the truth, NATS the nervous system: with nats-server stopped, new pods still reach Running
   (watches carry it); after NATS returns, every event of that period is in JetStream (the outboxes), in
   the order they happened by their publishers' time (not necessarily in stream order: each service
   flushes its outbox on its own reconnect).

Scoped so that it cannot touch other tests on the shared environment: claim-controller watches one
namespace, the allocator serves one scheduler name, the fleet serves two nodes with unique names and the
pods ask for those nodes by affinity. The events stream is the shared one (every test's claims live in
their own namespace's subjects).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest

from draflow_cli.trace import fetch_trace, trace_id_of
from draflow_runtime import lifecycle
from draflow_runtime.kube import PODS, KubeClient
from draflow_testenv.fleetflow import POLL, ServiceFlow
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

LIFECYCLE = ["created", "allocated", "prepared", "unprepared", "deallocated"]
TRACED_SERVICES = {"claim-controller", "structured-allocator", "kubelet-dra-shim", "reference-driver"}


def _tag(span: dict[str, Any], key: str) -> Any:
    return next((t.get("value") for t in span.get("tags") or () if t.get("key") == key), None)


def _parent(span: dict[str, Any]) -> str | None:
    """The span ID of the CHILD_OF reference in the same trace (links are other references)."""
    return next((r["spanID"] for r in span.get("references") or ()
                 if r.get("refType") == "CHILD_OF" and r.get("traceID") == span["traceID"]), None)


def check_claim_trace(doc: dict[str, Any]) -> list[str]:
    """What is wrong with one claim's Jaeger trace (empty: all of it holds)."""
    spans = {s["spanID"]: s for s in doc["spans"]}
    service = {sid: doc["processes"][s["processID"]]["serviceName"] for sid, s in spans.items()}
    problems: list[str] = []
    missing = TRACED_SERVICES - set(service.values())
    if missing:
        problems.append(f"no spans of {sorted(missing)}")
    roots = [sid for sid, s in spans.items() if _parent(s) is None]
    if len(roots) != 1 or service[roots[0]] != "claim-controller" or \
            spans[roots[0]]["operationName"] != "claim.create":
        problems.append(f"roots: {[(service[r], spans[r]['operationName']) for r in roots]}")
    orphans = [(service[sid], s["operationName"]) for sid, s in spans.items()
               if _parent(s) is not None and _parent(s) not in spans]
    if orphans:
        problems.append(f"spans whose parent is not in the trace: {orphans}")
    if problems:
        return problems
    root = roots[0]
    # The allocator and the shim continue the trace from the claim annotation: their outermost spans are
    # children of claim-controller's root span.
    for svc in ("structured-allocator", "kubelet-dra-shim"):
        entry = [sid for sid in spans if service[sid] == svc and service[_parent(spans[sid]) or ""] != svc]
        if not entry or any(_parent(spans[sid]) != root for sid in entry):
            problems.append(f"{svc} enters the trace at {[_parent(spans[s]) for s in entry]}, not the root")
    # The driver continues it from the gRPC metadata: its server span is the child of the shim's client
    # span of the same RPC.
    prepares = [sid for sid, s in spans.items()
                if service[sid] == "reference-driver" and _tag(s, "span.kind") == "server"
                and "NodePrepareResources" in s["operationName"]]
    if not prepares:
        problems.append("no NodePrepareResources server span of the driver")
    for sid in prepares:
        parent = spans[_parent(spans[sid]) or ""]
        if service[parent["spanID"]] != "kubelet-dra-shim" or _tag(parent, "span.kind") != "client" or \
                not parent["operationName"].endswith("/NodePrepareResources"):
            problems.append(f"driver span's parent is {service[parent['spanID']]} "
                            f"{parent['operationName']} ({_tag(parent, 'span.kind')})")
    return problems


async def cli_events(testenv: Any, ns: str, claim: str) -> list[str]:
    """``draflow events --claim ns/claim`` as a user runs it; the kinds, in the order printed."""
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "draflow"), "--nats-url", testenv.nats_url,
        "events", "--claim", f"{ns}/{claim}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines and lines[0].startswith(f"claim {ns}/{claim}:"), out.decode()
    # "<date> <time>  <kind> <ns>/<name> ..."
    return [line.split()[2] for line in lines[1:] if len(line.split()) > 3]


async def timeline(nats_url: str, ns: str, claim: str) -> list[lifecycle.ClaimEvent]:
    nc = await nats.connect(nats_url, connect_timeout=3, allow_reconnect=False)
    try:
        return [e for e in await lifecycle.claim_timeline(nc.jetstream(), ns, claim) if e.kind]
    finally:
        await nc.close()


def in_order(kinds: list[str], wanted: list[str]) -> bool:
    """Every wanted kind is there, and their first occurrences come in the wanted order."""
    if not set(wanted) <= set(kinds):
        return False
    firsts = [kinds.index(k) for k in wanted]
    return firsts == sorted(firsts)


@pytest.mark.timeout(900)
async def test_whole_flow_traces_history_and_a_nats_outage(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("wf")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2])
    fleet = Path(tempfile.mkdtemp(prefix="dwf-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects()

        # --- 1. one trace per claim, across four services -----------------------------------------------
        await flow.create_pod("traced")
        pod = await flow.wait_running("traced")
        claim = await flow.claim_of(pod)
        claim_name = claim["metadata"]["name"]
        trace_id = trace_id_of(claim)
        assert trace_id, claim["metadata"].get("annotations")

        problems: list[str] = []

        async def complete_trace() -> bool:
            nonlocal problems
            doc = await fetch_trace(testenv.jaeger_query_url, trace_id)  # GET /api/traces/<id>
            problems = check_claim_trace(doc) if doc else ["trace not in Jaeger"]
            assert not problems, problems  # on time-out, the wait's failure names the last problems
            return True

        await eventually(complete_trace, 60, "the claim's trace in Jaeger", interval=POLL)
        assert not problems, problems

        # --- 2. the claim's history, as `draflow events --claim` prints it ------------------------------
        await kube.delete(PODS, "traced", namespace=ns)  # graceful: the shim unprepares, then it is gone

        await flow.wait_claim_gone(claim_name, "the generated claim deleted")
        kinds: list[str] = []

        async def full_history() -> bool:
            nonlocal kinds
            kinds = await cli_events(testenv, ns, claim_name)
            return in_order(kinds, [*LIFECYCLE, "deleted"])

        # "deleted" is waited for (up to 60 s) but, as before, not required: the assertions below are.
        with contextlib.suppress(AssertionError):
            await eventually(full_history, 60, "the whole lifecycle in JetStream", interval=POLL)
        assert in_order(kinds, LIFECYCLE), kinds
        assert [k for k in dict.fromkeys(kinds) if k in LIFECYCLE] == LIFECYCLE, kinds
        # The events of the claim's creation, allocation and preparation belong to the claim's trace.
        history = await timeline(testenv.nats_url, ns, claim_name)
        traced = {lifecycle.kind_name(e.kind): e.trace_id for e in history}
        assert {k: traced[k] for k in ("created", "allocated", "prepared")} == dict.fromkeys(
            ("created", "allocated", "prepared"), trace_id)

        # --- 3. NATS down: pods still run; afterwards every event of the outage is in JetStream ---------
        await testenv.stop_nats()
        try:
            outage = ["outage-0", "outage-1"]
            for name in outage:
                await flow.create_pod(name)
            claims = []
            for name in outage:
                claims.append((await flow.claim_of(await flow.wait_running(name)))["metadata"]["name"])
        finally:
            await testenv.start_nats()

        # Each service's outbox flushes on its own reconnect, so JetStream may store the outage's events
        # of one claim in another order than they happened (stream order = delivery order); each event
        # keeps the time its publisher saw it, and in that order the lifecycle is intact.
        for name in claims:
            seen: list[lifecycle.ClaimEvent] = []

            async def delivered(claim: str = name) -> bool:
                nonlocal seen
                with contextlib.suppress(Exception):
                    seen = await timeline(testenv.nats_url, ns, claim)
                return {"created", "allocated", "prepared"} <= {lifecycle.kind_name(e.kind) for e in seen}

            await flow.until(delivered, f"the outage events of {name} in JetStream")
            # claim_timeline orders by publish time: the outage must not scramble the history it shows
            kinds = [lifecycle.kind_name(e.kind) for e in seen]
            assert in_order(kinds, ["created", "allocated", "prepared"]), (name, kinds)
            assert all(e.claim_uid == seen[0].claim_uid for e in seen), (name, seen)
    finally:
        await flow.stop()
        await testenv.start_nats()  # idempotent: never leave the session without NATS
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
