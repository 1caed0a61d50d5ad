"""``draflow trace <namespace>/<claim>``: the claim's span tree, read back from Jaeger
(``draflow trace pod/<pod>``: the tree of each claim of the pod, its extended-resource claim last).

The trace ID is the one in the claim's ``draflow.dev/traceparent`` annotation (claim-controller starts
the trace when it creates the claim, a claim made by a user gets it when draflow first sees it; every
other service continues it). Spans come from Jaeger's query
API, ``GET <jaeger>/api/traces/<traceID>`` (served by Jaeger v2's query extension, the same API its UI
uses). The tree is built from ``CHILD_OF`` references; a span whose parent is not in the trace (not
exported yet, or sampled out) is shown as a root. Links (``FOLLOWS_FROM``) are counted on the span and
named (operation and service, read from the linked traces: the first :data:`LINKED_TRACES_MAX`); the
first line names the services the trace links to but has no span of (the slice-publisher, whose pool
syncs an allocation's write links).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from draflow_runtime.dra import pod_claims
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION

#: Linked traces read to name links: a claim shared by hundreds of pods links as many scheduling attempts.
LINKED_TRACES_MAX = 20

SpanRef = tuple[str, str]  # (trace ID, span ID)


@dataclass
class SpanNode:
    span_id: str
    name: str
    service: str
    start_us: int
    duration_us: int
    links: int = 0
    error: bool = False
    children: list[SpanNode] = field(default_factory=list)
    link_refs: list[SpanRef] = field(default_factory=list)


def trace_id_of(claim: Mapping[str, Any]) -> str:
    """The trace ID (32 hex digits) in the claim's traceparent annotation, or ""."""
    value = ((claim.get("metadata") or {}).get("annotations") or {}).get(TRACEPARENT_ANNOTATION, "")
    parts = value.split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
        return parts[1].lower()
    return ""


def build_tree(trace: Mapping[str, Any]) -> list[SpanNode]:
    """Roots of one Jaeger trace document (``data[i]``), children sorted by start time."""
    processes = trace.get("processes") or {}
    nodes: dict[str, SpanNode] = {}
    parents: dict[str, str] = {}
    for span in trace.get("spans") or ():
        service = (processes.get(span.get("processID", "")) or {}).get("serviceName", "?")
        tags = {t.get("key"): t.get("value") for t in span.get("tags") or ()}
        node = SpanNode(
            span_id=span.get("spanID", ""),
            name=span.get("operationName", ""),
            service=service,
            start_us=int(span.get("startTime", 0)),
            duration_us=int(span.get("duration", 0)),
            error=tags.get("error") in (True, "true") or tags.get("otel.status_code") == "ERROR",
        )
        for ref in span.get("references") or ():
            if ref.get("refType") == "CHILD_OF" and node.span_id not in parents:
                parents[node.span_id] = ref.get("spanID", "")
            else:
                node.links += 1
                node.link_refs.append((ref.get("traceID", ""), ref.get("spanID", "")))
        nodes[node.span_id] = node
    roots: list[SpanNode] = []
    for span_id, node in nodes.items():
        parent = nodes.get(parents.get(span_id, ""))
        (parent.children if parent is not None else roots).append(node)
    for node in nodes.values():
        node.children.sort(key=lambda n: n.start_us)
    return sorted(roots, key=lambda n: n.start_us)


def _ms(us: int) -> str:
    return f"{us / 1000:.1f}ms" if us < 1_000_000 else f"{us / 1_000_000:.2f}s"


def _nodes(roots: list[SpanNode]) -> Iterator[SpanNode]:
    """Every node of the trees, depth first, in start order."""
    stack = list(reversed(roots))
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def format_tree(trace_id: str, roots: list[SpanNode], jaeger_url: str,
                linked: Mapping[SpanRef, tuple[str, str]] | None = None) -> str:
    """The tree as text; ``linked``: (operation, service) of linked spans (:func:`linked_spans`)."""
    linked = linked or {}
    all_nodes = list(_nodes(roots))
    if not all_nodes:
        return f"trace {trace_id}: no spans in Jaeger (yet)\n{jaeger_link(jaeger_url, trace_id)}"
    start = min(n.start_us for n in all_nodes)
    end = max(n.start_us + n.duration_us for n in all_nodes)
    services = sorted({n.service for n in all_nodes})
    outside = sorted({linked[r][1] for n in all_nodes for r in n.link_refs if r in linked} - set(services))
    lines = [f"trace {trace_id}: {len(all_nodes)} spans, {len(services)} services "
             f"({', '.join(services)}), {_ms(end - start)}"
             + (f", links to {', '.join(outside)}" if outside else "")]

    def walk(node: SpanNode, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        extra = f"  links={node.links}" if node.links else ""
        named = [f"{linked[r][0]} [{linked[r][1]}]" for r in node.link_refs if r in linked]
        extra += f" → {', '.join(named)}" if named else ""
        extra += "  ERROR" if node.error else ""
        lines.append(f"{prefix}{branch}{node.name} [{node.service}] {_ms(node.duration_us)} "
                     f"(+{_ms(node.start_us - start)}){extra}")
        child_prefix = prefix if top else prefix + ("   " if last else "│  ")
        for i, child in enumerate(node.children):
            walk(child, child_prefix, i == len(node.children) - 1, False)

    for root in roots:
        walk(root, "", True, True)
    lines.append(jaeger_link(jaeger_url, trace_id))
    return "\n".join(lines)


def jaeger_link(jaeger_url: str, trace_id: str) -> str:
    return f"{jaeger_url.rstrip('/')}/trace/{trace_id}"


async def fetch_trace(jaeger_url: str, trace_id: str, *, wait: float = 0.0, min_spans: int = 1) -> Any:
    """Jaeger's trace document (``data[0]``), polling up to ``wait`` seconds until it has ``min_spans``
    spans; None when Jaeger has nothing."""
    url = f"{jaeger_url.rstrip('/')}/api/traces/{trace_id}"
    deadline = time.monotonic() + wait
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        while True:
            doc = None
            async with session.get(url) as resp:
                if resp.status == 200:
                    body = await resp.json()
                    data = body.get("data") or []
                    doc = data[0] if data else None
            if doc is not None and len(doc.get("spans") or ()) >= min_spans:
                return doc
            if time.monotonic() >= deadline:
                return doc
            await asyncio.sleep(0.5)


async def run(kube: KubeClient, jaeger_url: str, namespace: str, name: str, *, wait: float = 0.0) -> str:
    """The claim's span tree; ``LookupError`` (the CLI exits 1, as kubectl does) when the claim is not there
    or has no trace yet."""
    try:
        claim = await kube.get(RESOURCE_CLAIMS, name, namespace=namespace)
    except NotFound:
        raise LookupError(f"claim {namespace}/{name} not found") from None
    trace_id = trace_id_of(claim)
    if not trace_id:
        raise LookupError(f"claim {namespace}/{name} has no {TRACEPARENT_ANNOTATION} annotation (no trace)")
    doc = await fetch_trace(jaeger_url, trace_id, wait=wait)
    roots = build_tree(doc or {})
    return format_tree(trace_id, roots, jaeger_url, await linked_spans(jaeger_url, trace_id, roots))


async def run_target(kube: KubeClient, jaeger_url: str, kind: str, namespace: str, name: str, *,
                     wait: float = 0.0) -> str:
    """:func:`run` for a claim (``kind`` ``claim``), or for each claim of a pod (``pod``), in the pod's
    order (:func:`draflow_runtime.dra.pod_claims`), each after a ``--- <pod claim> (claim <name>)`` line;
    a claim not made yet or without a trace is said so in its place. ``LookupError`` when the claim or
    pod asked for does not exist (as kubectl: exit 1)."""
    if kind == "claim":
        return await run(kube, jaeger_url, namespace, name, wait=wait)
    try:
        pod = await kube.get(PODS, name, namespace=namespace)
    except NotFound:
        raise LookupError(f"pod {namespace}/{name} not found") from None
    entries = pod_claims(pod, extended=True)
    if not entries:
        return f"pod {namespace}/{name} has no resource claims"
    parts = [f"pod {namespace}/{name}: {len(entries)} claim(s)"]
    for pc in entries:
        label = pc.name or "<extended resources>"
        if not pc.claim_name:
            parts.append(f"--- {label}\nno ResourceClaim: {pc.waiting or 'not needed'}")
            continue
        try:
            body = await run(kube, jaeger_url, namespace, pc.claim_name, wait=wait)
        except LookupError as exc:
            body = str(exc)
        parts.append(f"--- {label} (claim {pc.claim_name})\n{body}")
    return "\n\n".join(parts)


async def linked_spans(jaeger_url: str, trace_id: str, roots: list[SpanNode], *,
                       limit: int = LINKED_TRACES_MAX) -> dict[SpanRef, tuple[str, str]]:
    """(operation, service) of the spans the tree links to, read from Jaeger: links within the trace
    from the tree itself, other traces (the first ``limit`` in start order) with one query each. A
    linked span Jaeger does not have (or a query that fails) is left out: the link is only counted."""
    nodes = list(_nodes(roots))
    found: dict[SpanRef, tuple[str, str]] = {(trace_id, n.span_id): (n.name, n.service) for n in nodes}
    others = list(dict.fromkeys(t for n in nodes for t, _ in n.link_refs if t and t != trace_id))[:limit]

    async def read(other: str) -> None:
        try:
            doc = await fetch_trace(jaeger_url, other)
        except (aiohttp.ClientError, TimeoutError):
            return
        processes = (doc or {}).get("processes") or {}
        for span in (doc or {}).get("spans") or ():
            service = (processes.get(span.get("processID", "")) or {}).get("serviceName", "?")
            found[(other, span.get("spanID", ""))] = (span.get("operationName", ""), service)

    await asyncio.gather(*(read(t) for t in others))
    return found
