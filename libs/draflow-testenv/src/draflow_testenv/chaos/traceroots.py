"""One trace root per claim, as Jaeger has it (checked once, after settling).

A claim draflow did not create gets its root span ``claim.seen`` from the claim-controller or the
allocator, whichever sees it first (``draflow_runtime.claimtrace``): only the writer whose compare-and-swap
won ends (exports) its span. So Jaeger may hold at most one successful ``claim.seen`` per claim UID, and
for a claim that still exists it is the trace its ``draflow.dev/traceparent`` names. A root whose write
failed ambiguously is exported with an error status by design (its trace may be the claim's): not counted.
A SIGKILLed service may lose spans it had not exported yet, so a missing root is not a violation here
(``claimkinds.trace_roots`` checks that every claim names one).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from draflow_runtime.claimtrace import ROOT_SPAN

from .claimkinds import TRACEPARENT

ROOT_SERVICES = ("claim-controller", "structured-allocator")


@dataclass(frozen=True)
class RootSpan:
    """A ``claim.seen`` span Jaeger has."""

    service: str
    trace_id: str
    claim: str  # <namespace>/<name>
    claim_uid: str
    error: bool = False


def _tags(span: Mapping[str, Any]) -> dict[str, Any]:
    return {t.get("key"): t.get("value") for t in span.get("tags") or ()}


def root_spans(service: str, traces: list[Mapping[str, Any]]) -> list[RootSpan]:
    """The ``claim.seen`` spans ``service`` made in Jaeger's search answer (``data``)."""
    out = []
    for trace in traces:
        processes = trace.get("processes") or {}
        for span in trace.get("spans") or ():
            made_by = (processes.get(span.get("processID", "")) or {}).get("serviceName")
            if span.get("operationName") != ROOT_SPAN or made_by != service:
                continue
            tags = _tags(span)
            out.append(RootSpan(
                service, str(span.get("traceID", "")).lower(),
                f"{tags.get('k8s.namespace.name')}/{tags.get('k8s.resourceclaim.name')}",
                str(tags.get("k8s.resourceclaim.uid", "")),
                tags.get("error") in (True, "true") or tags.get("otel.status_code") == "ERROR"))
    return out


def trace_root_violations(claims: list[Mapping[str, Any]], roots: list[RootSpan]) -> list[str]:
    """At most one successful ``claim.seen`` per claim UID; an existing claim's annotation names it."""
    by_uid: dict[str, set[tuple[str, str]]] = defaultdict(set)
    names: dict[str, str] = {}
    for root in roots:
        names[root.claim_uid] = root.claim
        if not root.error:
            by_uid[root.claim_uid].add((root.trace_id, root.service))
    out = []
    for uid, found in sorted(by_uid.items()):
        if len({t for t, _ in found}) > 1:
            out.append(f"claim {names[uid]} (uid {uid}): {len(found)} trace roots {sorted(found)}")
    for claim in claims:
        meta = claim["metadata"]
        annotation = (meta.get("annotations") or {}).get(TRACEPARENT) or ""
        parts = annotation.split("-")
        trace_id = parts[1].lower() if len(parts) == 4 else ""
        seen = {t for t, _ in by_uid.get(meta["uid"], ())}
        if seen and trace_id not in seen:
            out.append(f"claim {meta['namespace']}/{meta['name']}: annotation names trace {trace_id or '-'}, "
                       f"its claim.seen root is in {sorted(seen)}")
    return out


async def fetch_roots(jaeger_url: str, namespace: str, limit: int = 20000) -> list[RootSpan]:
    """Every ``claim.seen`` span of ``namespace``'s claims the root services exported to Jaeger."""
    found: list[RootSpan] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for service in ROOT_SERVICES:
            params = {"service": service, "operation": ROOT_SPAN, "limit": str(limit), "lookback": "6h",
                      "tags": json.dumps({"k8s.namespace.name": namespace})}
            async with session.get(f"{jaeger_url.rstrip('/')}/api/traces", params=params) as resp:
                if resp.status == 404:  # the service exported nothing yet
                    continue
                resp.raise_for_status()
                found += root_spans(service, (await resp.json()).get("data") or [])
    return found
