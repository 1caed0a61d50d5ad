"""Why a claim cannot be allocated: aggregated over nodes, kept per claim, served over HTTP.

One scheduling attempt that finds no node produces a :class:`PodExplanation`:

* node filter reasons counted (``2 node(s) were not ready``), like kube-scheduler's FitError; node fit
  reasons (``Too many pods``, ``Insufficient cpu``) are kube-scheduler's own and rendered as it does
  (``3 Too many pods``), see :func:`reason_text`;
* how many nodes were tried for devices and did not fit, and the **best** of them (the node whose
  requests came closest: most usable devices towards what is needed) with the core's per-request
  funnel (devices of the class → matching selectors → free → blocked by taints / counters / capacity /
  constraints → usable);
* or, for broken input (unknown DeviceClass, invalid CEL), the error naming class and expression.

:meth:`PodExplanation.message` is the one-paragraph text for the pod's ``PodScheduled`` condition and
the Warning Event. :class:`ExplanationStore` keeps the latest explanation of every unallocated claim;
``GET /explain`` lists them and ``GET /explain/<namespace>/<claim>`` returns one as JSON (404 if the
claim has none, e.g. because it was allocated since).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from .core import Explanation

__all__ = ["ExplanationStore", "PodExplanation", "closeness", "reason_text"]

MAX_MESSAGE = 1024


def reason_text(count: int, reason: str) -> str:
    """``2 node(s) were not ready``; kube-scheduler's resource reasons, which start with a capital
    (``Too many pods``, ``Insufficient cpu``), as upstream prints them: ``2 Insufficient cpu``."""
    return f"{count} {reason}" if reason[:1].isupper() else f"{count} node(s) {reason}"


def closeness(ex: Explanation) -> tuple[int, int]:
    """How close a node came: (requests satisfiable on their own, usable devices towards the need)."""
    alone = sum(1 for r in ex.requests if r.satisfiable_alone)
    usable = sum(r.usable if r.needed == "all" else min(r.usable, int(r.needed)) for r in ex.requests)
    return alone, usable


@dataclass
class PodExplanation:
    pod: str
    claims: list[str]  # namespace/name of the claims that needed an allocation
    nodes_total: int = 0
    node_reasons: Counter[str] = field(default_factory=Counter)
    no_fit: int = 0  # nodes where the devices did not fit
    best: Explanation | None = None
    error: str = ""  # broken input (class, CEL); the claim cannot be allocated as written
    waiting: str = ""  # e.g. a claim does not exist yet
    budget_exhausted: bool = False  # a device search ran out of its SearchBudget
    time: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def consider(self, ex: Explanation) -> None:
        self.no_fit += 1
        if self.best is None or closeness(ex) > closeness(self.best):
            self.best = ex

    def message(self) -> str:
        if self.error:
            text = f"cannot allocate claims: {self.error}"
        elif self.waiting:
            text = self.waiting
        else:
            parts = [reason_text(count, reason) for reason, count in sorted(self.node_reasons.items())]
            if self.no_fit:
                parts.append(f"{self.no_fit} node(s) cannot allocate the pod's claims")
            text = f"0/{self.nodes_total} nodes are available"
            text += ": " + ", ".join(parts) if parts else " (no nodes)"
            if self.best is not None:
                text += f". Best node {self.best.node}: {self.best.summary}"
        return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."

    def for_claim(self, claim_key: str) -> dict[str, Any]:
        name = claim_key.split("/", 1)[-1]
        out: dict[str, Any] = {
            "claim": claim_key,
            "pod": self.pod,
            "time": self.time,
            "message": self.message(),
            "nodes": {
                "total": self.nodes_total,
                "filtered": dict(self.node_reasons),
                "devicesDidNotFit": self.no_fit,
            },
        }
        if self.error:
            out["error"] = self.error
        if self.waiting:
            out["waiting"] = self.waiting
        if self.best is not None:
            best = self.best.to_dict()
            best["requests"] = [r for r in best["requests"] if r["claim"] == name]
            out["bestNode"] = best
        return out


class ExplanationStore:
    """Latest explanation per claim (bounded, oldest dropped first) and its HTTP routes.

    An entry lives while its claim is unplaced: the scheduler forgets it when the pod is placed,
    deleted or no longer ours, and when the claim is deleted or allocated (:meth:`forget`,
    :meth:`forget_pod`), so ``/explain`` answers only for claims still waiting."""

    def __init__(self, capacity: int = 2048) -> None:
        self._capacity = capacity
        self._by_claim: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._by_pod: dict[str, set[str]] = {}  # pod key -> the claim keys it explains

    def record(self, explanation: PodExplanation) -> None:
        for claim_key in explanation.claims:
            self._drop(claim_key)
            self._by_claim[claim_key] = explanation.for_claim(claim_key)
            self._by_pod.setdefault(explanation.pod, set()).add(claim_key)
        while len(self._by_claim) > self._capacity:
            self._drop(next(iter(self._by_claim)))

    def forget(self, claim_keys: Sequence[str]) -> None:
        """Drop the explanations of these claims (allocated, deleted, or their pod placed)."""
        for key in claim_keys:
            self._drop(key)

    def forget_pod(self, pod_key: str) -> None:
        """Drop every explanation recorded for ``pod_key`` (deleted, no longer ours, placed)."""
        for key in self._by_pod.pop(pod_key, ()):
            self._drop(key)

    def _drop(self, claim_key: str) -> None:
        entry = self._by_claim.pop(claim_key, None)
        if entry is None:
            return
        keys = self._by_pod.get(entry["pod"])
        if keys is not None:
            keys.discard(claim_key)
            if not keys:
                del self._by_pod[entry["pod"]]

    def get(self, claim_key: str) -> dict[str, Any] | None:
        return self._by_claim.get(claim_key)

    def __len__(self) -> int:
        return len(self._by_claim)

    def latest(self) -> list[dict[str, Any]]:
        """``claim``, ``pod``, ``time`` and ``message`` of every explanation kept, newest first."""
        return [
            {"claim": key, "pod": ex["pod"], "time": ex["time"], "message": ex["message"]}
            for key, ex in reversed(self._by_claim.items())
        ]

    # -- HTTP ----------------------------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Any]]:
        """``GET /explain`` and ``GET /explain/{namespace}/{claim}`` as (method, path, handler)."""
        return [("GET", "/explain", self.handle_list),
                ("GET", "/explain/{namespace}/{claim}", self.handle_one)]

    def add_routes(self, server: Any) -> None:
        """Register :meth:`routes` on an ObservabilityServer."""
        for method, path, handler in self.routes():
            server.add_route(method, path, handler)

    async def handle_list(self, request: web.Request) -> web.Response:
        return web.json_response({"items": self.latest()})

    async def handle_one(self, request: web.Request) -> web.Response:
        key = f"{request.match_info['namespace']}/{request.match_info['claim']}"
        found = self._by_claim.get(key)
        if found is None:
            return web.json_response(
                {"claim": key,
                 "message": "no explanation: the claim is unknown, allocated, or not tried yet"},
                status=404,
            )
        return web.json_response(found)
