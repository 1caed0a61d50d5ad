"""``draflow explain [<namespace>/]<claim>`` (or ``pod/<pod>``: each claim of the pod): why a claim is
(not) allocated, in words.

1. The claim itself: allocated → where and which devices; nothing more to explain.
2. The structured-allocator's explanation, ``GET <allocator-url>/explain/<ns>/<claim>`` (JSON: the
   message, node filter counts and the best node's per-request funnel), with a bearer token (``--token``,
   else the kubeconfig's) when the allocator's endpoints are protected (``draflow_runtime.httpauth``).
   Without ``--allocator-url``: each structured-allocator pod through the API server's proxy
   subresource (:mod:`.allocatorproxy`), so nothing but a kubeconfig is needed. The API server does not
   pass the user's token on, so an allocator whose ``/explain`` needs one refuses proxied requests (401).
3. If the allocator cannot be reached or has none: the ``PodScheduled`` condition message of the pods
   that use the claim (the allocator writes the same message there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from draflow_runtime.dra import allocation_node, claim_names, claim_results, pod_claims
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient

from . import allocatorproxy
from .kubeopts import dump, structured
from .table import render

FUNNEL = [
    ("device_class", "class"),
    ("needed", "needed"),
    ("class_devices", "in class"),
    ("matching", "match selectors"),
    ("free", "free"),
    ("blocked_by_taints", "tainted"),
    ("blocked_by_counters", "counters"),
    ("blocked_by_capacity", "capacity"),
    ("blocked_by_constraints", "constraints"),
    ("usable", "usable"),
]


def pods_of(claim: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods that use the claim (:func:`draflow_runtime.dra.claim_names`: by name, through the pod status
    of a template claim, or as the extended-resource claim), reserve it or own it."""
    meta = claim.get("metadata") or {}
    name = meta.get("name")
    reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or ()}
    owners = {r.get("uid") for r in meta.get("ownerReferences") or () if r.get("kind") == "Pod"}
    related = reserved | owners
    return [pod for pod in pods
            if name in claim_names(pod, extended=True) or (pod.get("metadata") or {}).get("uid") in related]


def describe_allocation(claim: Mapping[str, Any]) -> str:
    node = allocation_node(claim)
    reserved = [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or ()]
    lines = [f"allocated{' on node ' + node if node else ''}; reserved for: "
             f"{', '.join(str(r) for r in reserved) or '(nobody)'}"]
    rows = [[r.get(k, "") for k in ("request", "driver", "pool", "device")] for r in claim_results(claim)]
    if rows:
        lines.append(render(["REQUEST", "DRIVER", "POOL", "DEVICE"], rows))
    return "\n".join(lines)


def format_explanation(doc: Mapping[str, Any]) -> str:
    """The allocator's JSON explanation as text: message, node filters, best node's funnel."""
    lines = [f"claim {doc.get('claim', '')}" + (f" (pod {doc['pod']})" if doc.get("pod") else "")]
    if doc.get("time"):
        lines.append(f"as of {doc['time']}")
    lines.append("")
    lines.append(str(doc.get("message", "")))
    nodes = doc.get("nodes") or {}
    if nodes:
        lines.append("")
        lines.append(f"nodes: {nodes.get('total', 0)} total, "
                     f"{nodes.get('devicesDidNotFit', 0)} where the devices did not fit")
        for reason, count in sorted((nodes.get("filtered") or {}).items()):
            # kube-scheduler's resource reasons ("Too many pods", "Insufficient cpu") read without "node(s)"
            lines.append(f"  {count} {reason}" if reason[:1].isupper() else f"  {count} node(s) {reason}")
    best = doc.get("bestNode") or {}
    if best:
        lines.append("")
        lines.append(f"best node {best.get('node', '?')}: {best.get('summary', '')}")
        requests = best.get("requests") or []
        if requests:
            rows = [[r.get("request", ""), *(r.get(key, "") for key, _ in FUNNEL)] for r in requests]
            lines.append(render(["REQUEST", *(label.upper() for _, label in FUNNEL)], rows))
        for pool in best.get("incomplete_pools") or ():
            lines.append(f"  incomplete pool: {pool}")
        for pool, why in (best.get("invalid_pools") or {}).items():
            lines.append(f"  invalid pool {pool}: {why}")
    if doc.get("error"):
        lines.append(f"\nerror: {doc['error']}")
    return "\n".join(lines)


def format_conditions(pods: list[Mapping[str, Any]]) -> str:
    if not pods:
        return "no pod uses the claim yet"
    lines = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        cond = next(
            (c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"),
            None,
        )
        where = (pod.get("spec") or {}).get("nodeName") or "(not bound)"
        if cond is None:
            lines.append(f"pod {meta.get('namespace')}/{meta.get('name')}: {where}, not tried yet")
        else:
            text = (f"pod {meta.get('namespace')}/{meta.get('name')}: {where}, PodScheduled="
                    f"{cond.get('status')} {cond.get('reason', '')}: {cond.get('message', '')}")
            lines.append(text.rstrip(": "))
    return "\n".join(lines)


async def fetch_explanation(allocator_url: str, namespace: str, name: str, *, token: str | None = None,
                            seconds: float = 5.0) -> tuple[Any, str]:
    """The allocator's JSON and "", or None and why there is none (no URL, unreachable, 404, or refused:
    401/403 when its endpoints need a token the user's identity is not authorized with). ``token`` goes
    out as ``Authorization: Bearer``; the allocator checks it with the API server (TokenReview and a
    SubjectAccessReview for ``get`` on the path; ClusterRole ``draflow-debug-reader`` grants it)."""
    if not allocator_url:
        return None, "no allocator URL"
    url = f"{allocator_url.rstrip('/')}/explain/{namespace}/{name}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session,
            session.get(url, headers=headers) as resp,
        ):
            if resp.status == 200:
                return await resp.json(), ""
            if resp.status in (401, 403):
                text = (await resp.text()).strip()
                hint = "" if token else " (no token: pass --token or use a kubeconfig with one)"
                return None, f"HTTP {resp.status} {text}{hint}"
            return None, f"HTTP {resp.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return None, f"unreachable: {type(exc).__name__}"


async def explanation(
    kube: KubeClient, allocator_url: str, namespace: str, name: str, token: str | None
) -> tuple[Any, str, str]:
    """(the allocator's JSON or None, where it was asked, why there is none): at ``allocator_url`` when
    set (with ``token``; None: the kubeconfig's), else each allocator pod through the API server's proxy
    (:mod:`.allocatorproxy`)."""
    if allocator_url:
        if token is None:
            token = await kube.bearer_token()
        doc, why = await fetch_explanation(allocator_url, namespace, name, token=token)
        return doc, allocator_url, why
    doc, where = await allocatorproxy.explanation(kube, namespace, name)
    return doc, where, "" if doc is not None else "no answer"


async def claim_doc(
    kube: KubeClient, allocator_url: str, namespace: str, name: str, token: str | None = None
) -> dict[str, Any]:
    """Everything ``explain`` knows about one claim (the ``-o json|yaml`` document)."""
    doc: dict[str, Any] = {"claim": f"{namespace}/{name}"}
    try:
        claim = await kube.get(RESOURCE_CLAIMS, name, namespace=namespace)
    except NotFound:
        return {**doc, "found": False}
    doc["found"] = True
    if (claim.get("status") or {}).get("allocation"):
        return {**doc, "allocated": True, "node": allocation_node(claim),
                "results": [dict(r) for r in claim_results(claim)],
                "reservedFor": [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or ()],
                "_claim": claim}
    found, source, why = await explanation(kube, allocator_url, namespace, name, token)
    doc.update(allocated=False, allocator=source, explanation=found)
    if found is None:
        doc["why"] = why
    if found is None:
        pods = (await kube.list(PODS, namespace=namespace)).get("items") or []
        doc["_pods"] = pods_of(claim, pods)
        doc["pods"] = [{"pod": f"{namespace}/{(p.get('metadata') or {}).get('name')}",
                        "node": (p.get("spec") or {}).get("nodeName") or "",
                        "conditions": (p.get("status") or {}).get("conditions") or []} for p in doc["_pods"]]
    return doc


def format_claim(doc: Mapping[str, Any]) -> str:
    ref = doc["claim"]
    if not doc["found"]:
        return f"claim {ref} not found"
    if doc["allocated"]:
        return f"claim {ref}: " + describe_allocation(doc["_claim"])
    if doc["explanation"] is not None:
        return format_explanation(doc["explanation"])
    source = (f"(no explanation from the allocator at {doc['allocator'] or '<unset>'}: {doc['why']}; "
              "pod conditions)")
    return f"claim {ref}: not allocated {source}\n" + format_conditions(doc["_pods"])


def public(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


async def run(kube: KubeClient, allocator_url: str, namespace: str, name: str, *,
              token: str | None = None) -> str:
    """``token`` None: the kubeconfig's own bearer token, if it has one."""
    return format_claim(await claim_doc(kube, allocator_url, namespace, name, token))


async def run_target(
    kube: KubeClient, allocator_url: str, kind: str, namespace: str, name: str, *, output: str = "table",
    token: str | None = None,
) -> str:
    """``explain`` of a claim, or of each claim of a pod (:func:`draflow_runtime.dra.pod_claims`).
    Raises ``LookupError`` when the claim or pod asked for does not exist (as kubectl: exit 1, the
    reason on stderr)."""
    if kind == "claim":
        doc = await claim_doc(kube, allocator_url, namespace, name, token)
        if not doc["found"]:
            raise LookupError(format_claim(doc))
        return dump(public(doc), output) if structured(output) else format_claim(doc)
    try:
        pod = await kube.get(PODS, name, namespace=namespace)
    except NotFound:
        raise LookupError(f"pod {namespace}/{name} not found") from None
    entries: list[dict[str, Any]] = []
    for pc in pod_claims(pod, extended=True):
        entry: dict[str, Any] = {"podClaim": pc.name or "<extended resources>"}
        if pc.claim_name:
            entry["doc"] = await claim_doc(kube, allocator_url, namespace, pc.claim_name, token)
        else:
            entry["waiting"] = pc.waiting or "not needed"
        entries.append(entry)
    if structured(output):
        return dump({"pod": f"{namespace}/{name}", "claims": [
            {"podClaim": e["podClaim"], **(public(e["doc"]) if "doc" in e else {"waiting": e["waiting"]})}
            for e in entries]}, output)
    if not entries:
        return f"pod {namespace}/{name} has no resource claims"
    parts = [f"pod {namespace}/{name}: {len(entries)} claim(s)"]
    for e in entries:
        body = format_claim(e["doc"]) if "doc" in e else f"no ResourceClaim: {e['waiting']}"
        parts.append(f"--- {e['podClaim']}\n{body}")
    return "\n\n".join(parts)
