"""A trace for a claim draflow did not create: a user's ResourceClaim shared by two pods, the five services
as processes against the real apiserver, NATS and Jaeger.

The claim gets its root when draflow first sees it (claim-controller's ``claim.seen``, or the allocator's
if it is faster; :mod:`draflow_runtime.claimtrace`), and everything after continues that one trace: the
allocator's writes for both pods, the shim's prepare, the driver's RPC. Jaeger holds exactly one root for
the claim (no second ``claim.seen`` anywhere), the allocation's write links the slice-publisher sync that
published the pool it used, every linked span is in Jaeger, and ``draflow trace`` prints the tree.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from draflow_cli.trace import fetch_trace, trace_id_of
from draflow_runtime.claimtrace import ROOT_SPAN
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_testenv.fleetflow import POLL, ServiceFlow
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

# claim-controller or the allocator holds the root; these four services must all be in the trace
TRACED_SERVICES = {"structured-allocator", "kubelet-dra-shim", "reference-driver"}
ROOT_SERVICES = {"claim-controller", "structured-allocator"}


def _tag(span: dict[str, Any], key: str) -> Any:
    return next((t.get("value") for t in span.get("tags") or () if t.get("key") == key), None)


def _parent(span: dict[str, Any]) -> str | None:
    return next((r["spanID"] for r in span.get("references") or ()
                 if r.get("refType") == "CHILD_OF" and r.get("traceID") == span["traceID"]), None)


def check_shared_claim_trace(doc: dict[str, Any], pods: set[str]) -> list[str]:
    """What is wrong with the shared claim's trace (empty: all of it holds)."""
    spans = {s["spanID"]: s for s in doc["spans"]}
    service = {sid: doc["processes"][s["processID"]]["serviceName"] for sid, s in spans.items()}
    problems: list[str] = []
    roots = [sid for sid, s in spans.items() if _parent(s) is None]
    if len(roots) != 1 or spans[roots[0]]["operationName"] != ROOT_SPAN or \
            service[roots[0]] not in ROOT_SERVICES:
        problems.append(f"roots: {[(service[r], spans[r]['operationName']) for r in roots]}")
    missing = (TRACED_SERVICES | {service[roots[0]]} if roots else TRACED_SERVICES) - set(service.values())
    if missing:
        problems.append(f"no spans of {sorted(missing)}")
    orphans = [(service[sid], s["operationName"]) for sid, s in spans.items()
               if _parent(s) is not None and _parent(s) not in spans]
    if orphans:
        problems.append(f"spans whose parent is not in the trace: {orphans}")
    written_for = {_tag(s, "draflow.pod") for s in spans.values() if s["operationName"] == "write claim"}
    if not pods <= written_for:
        problems.append(f"the allocator's claim writes in the trace are for {written_for}, not {pods}")
    if not any(service[sid] == "reference-driver" and "NodePrepareResources" in s["operationName"]
               for sid, s in spans.items()):
        problems.append("no NodePrepareResources span of the driver")
    return problems


def links_of(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(operation of the linking span, traceID, spanID) of every span link in the trace."""
    return [(s["operationName"], r["traceID"], r["spanID"]) for s in doc["spans"]
            for r in s.get("references") or () if r.get("refType") == "FOLLOWS_FROM"]


async def linked_spans(jaeger_url: str, links: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """(traceID, spanID) -> "service operation" of every linked span; AssertionError naming the ones
    Jaeger does not have."""
    found: dict[tuple[str, str], str] = {}
    for trace_id in sorted({t for _, t, _ in links}):
        other = await fetch_trace(jaeger_url, trace_id) or {"spans": [], "processes": {}}
        for s in other["spans"]:
            found[(trace_id, s["spanID"])] = \
                f"{other['processes'][s['processID']]['serviceName']} {s['operationName']}"
    missing = [(op, t, sid) for op, t, sid in links if (t, sid) not in found]
    assert not missing, f"linked spans not in Jaeger: {missing}"
    return found


async def roots_in_jaeger(jaeger_url: str, ns: str, claim: str) -> list[str]:
    """Trace IDs of every ``claim.seen`` span any service exported for the claim."""
    found: list[str] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for service in sorted(ROOT_SERVICES):
            params = {"service": service, "operation": ROOT_SPAN, "limit": "50", "lookback": "1h",
                      "tags": json.dumps({"k8s.namespace.name": ns, "k8s.resourceclaim.name": claim})}
            async with session.get(f"{jaeger_url.rstrip('/')}/api/traces", params=params) as resp:
                if resp.status == 404:  # the service has exported nothing yet
                    continue
                assert resp.status == 200, await resp.text()
                found += [d["traceID"] for d in (await resp.json()).get("data") or ()]
    return found


async def cli_trace(testenv: Any, ns: str, claim: str) -> str:
    """``draflow trace ns/claim`` as a user runs it (subprocess, kubeconfig and Jaeger from flags)."""
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "draflow"), "--kubeconfig", str(testenv.kubeconfig),
        "--jaeger-url", testenv.jaeger_query_url, "trace", f"{ns}/{claim}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.timeout(600)
async def test_a_user_made_claim_shared_by_two_pods_has_one_trace_across_the_services(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("uct")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2])
    fleet = Path(tempfile.mkdtemp(prefix="duct-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects()
        created = await flow.create_claim("shared")
        assert not trace_id_of(created)  # a user's claim: no trace until draflow sees it
        for pod in ("user-a", "user-b"):
            await flow.create_pod(pod, claim="shared")
        for pod in ("user-a", "user-b"):
            await flow.wait_running(pod)
        claim = await kube.get(RESOURCE_CLAIMS, "shared", namespace=ns)
        assert len(claim["status"]["reservedFor"]) == 2
        trace_id = trace_id_of(claim)
        assert trace_id, claim["metadata"].get("annotations")

        problems: list[str] = []
        doc: dict[str, Any] = {}

        async def complete_trace() -> bool:
            nonlocal problems, doc
            doc = await fetch_trace(testenv.jaeger_query_url, trace_id) or {}
            problems = check_shared_claim_trace(doc, {f"{ns}/user-a", f"{ns}/user-b"}) if doc else \
                ["trace not in Jaeger"]
            assert not problems, problems
            return True

        await eventually(complete_trace, 60, "the shared claim's trace in Jaeger", interval=POLL)

        # One root, ever: no other service exported a second claim.seen for this claim.
        assert await roots_in_jaeger(testenv.jaeger_query_url, ns, "shared") == [trace_id]

        # Every link in the claim's trace names a span Jaeger has (children may reach Jaeger before
        # a linked span: ask until all are there), and the write of the allocation links the
        # slice-publisher sync that published the pool it used, whoever rooted the claim.
        links = links_of(doc)
        assert links, "no span links in the claim's trace"
        found = await eventually(lambda: linked_spans(testenv.jaeger_query_url, links), 60,
                                 "every linked span in Jaeger", interval=POLL)
        assert "slice-publisher slice-publisher.sync_pool" in \
            {found[(t, sid)] for op, t, sid in links if op == "write claim"}, (links, found)

        printed = await cli_trace(testenv, ns, "shared")
        assert printed.startswith(f"trace {trace_id}: "), printed
        for svc in ("structured-allocator", "kubelet-dra-shim", "reference-driver"):
            assert svc in printed.splitlines()[0], printed
        # the pool sync is not a span of the claim's trace: named where the write links it
        assert printed.splitlines()[0].endswith(", links to slice-publisher"), printed
        assert "slice-publisher.sync_pool [slice-publisher]" in printed, printed
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
