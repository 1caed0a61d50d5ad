"""The web view's HTTP routes, served by the allocator's observability server (same port, same
delegated auth as ``/explain``; RBAC: ``nonResourceURLs`` ``/ui``, ``/ui/*``).

* ``GET /ui``: the page (:mod:`.page`, server-side HTML with a few lines of vanilla JavaScript);
* ``GET /ui/state.json``: :func:`.view.grid` of the current leadership term's caches, rebuilt only
  after a change, at most once per ``interval`` seconds and at most ``duty`` of the time whatever the
  number of viewers, in a worker thread (:class:`WebView`), so watching does not hold up decisions;
  the page polls it;
* ``GET /ui/device?driver=&pool=&device=``: :func:`.view.device_detail` plus each claim's timeline
  read back from JetStream (:func:`draflow_runtime.lifecycle.claim_timeline`, the last
  :data:`TIMELINE_EVENTS`, given up after :data:`TIMELINE_TIMEOUT` seconds).

A replica that does not lead has no caches: ``state.json`` says ``leader: false`` and the page says so.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from draflow_runtime.bus import EventBus
from draflow_runtime.lifecycle import ClaimEvent, claim_timeline, kind_name
from draflow_runtime.log import get_logger

from ..explain_http import ExplanationStore
from ..state import ClusterState
from . import page
from .prepared import SliceCache
from .view import Claims, Limits, device_detail, grid

__all__ = ["TIMELINE_EVENTS", "TIMELINE_TIMEOUT", "Snapshot", "WebView", "build_document"]

log = get_logger(__name__)

TIMELINE_EVENTS = 50
TIMELINE_TIMEOUT = 3.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_view(event: ClaimEvent) -> dict[str, Any]:
    """One timeline entry as the page shows it."""
    out: dict[str, Any] = {"kind": kind_name(event.kind) if event.kind else "unknown",
                           "service": event.service}
    if event.HasField("time"):
        out["time"] = datetime.fromtimestamp(event.time.ToNanoseconds() / 1e9, tz=UTC).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
    if event.pod.name:
        out["pod"] = f"{event.pod.namespace}/{event.pod.name}"
    for name in ("node", "driver", "reason", "message"):
        if getattr(event, name):
            out[name] = getattr(event, name)
    if event.devices:
        out["devices"] = [f"{d.pool}/{d.device}" for d in event.devices]
    return out


@dataclass(frozen=True)
class Snapshot:
    """References to what the caches hold at one moment, taken on the event loop (cheap list copies;
    informers replace cached objects, never change them, so a build may read them from a thread)."""

    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    in_flight: list[tuple[str, Mapping[str, Any]]]
    nodes: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    explained: list[tuple[dict[str, Any], Mapping[str, Any] | None]]  # (explanation, its claim now)


def build_document(snap: Snapshot, limits: Limits, cache: SliceCache) -> bytes:
    """The page's JSON document from a snapshot (pure; runs in a worker thread)."""
    claims = Claims.build(snap.claims, snap.in_flight)
    held = {key for holders in claims.by_device.values() for key in holders}
    pending = [item for item, claim in snap.explained  # still there, not allocated, not being written
               if claim is not None and not (claim.get("status") or {}).get("allocation")
               and item["claim"] not in held]
    doc = grid(snap.slices, claims, snap.nodes, snap.rules, pending, limits, cache)
    return json.dumps({"leader": True, "synced": True, "generated": _now(), **doc},
                      separators=(",", ":")).encode()


class WebView:
    """Routes of the web view over the caches of the current leadership term (:meth:`attach`).

    ``state.json`` is rebuilt only when an informer the view reads has changed (or the document is
    ``max_age`` seconds old: explanations and in-flight allocations have no events), at most once per
    ``interval``, and never more often than ``duty`` of the time (a build of ``t`` seconds waits
    ``t / duty`` before the next). The build runs in a worker thread on a snapshot, so the event loop
    (the decisions) gets the GIL back every few milliseconds instead of waiting for a whole build.
    """

    def __init__(self, explanations: ExplanationStore, *, jaeger_url: str = "", interval: float = 1.0,
                 max_age: float = 5.0, duty: float = 0.1, limits: Limits = Limits()) -> None:
        self.explanations = explanations
        self.jaeger_url = jaeger_url
        self.interval = interval
        self.max_age = max_age
        self.duty = duty
        self.limits = limits
        self.builds = 0
        self._state: ClusterState | None = None
        self._bus: EventBus | None = None
        self._cache = SliceCache()
        self._lock = asyncio.Lock()
        self._dirty = True
        self._built_at = -1e9  # monotonic time of the last build
        self._next_at = 0.0  # no build before this (interval, duty)
        self._body: bytes | None = None

    def attach(self, state: ClusterState, bus: EventBus | None) -> None:
        """Show this term's caches (``bus``: where the timelines are read; None without NATS)."""
        self._state, self._bus, self._body, self._dirty = state, bus, None, True
        self._cache = SliceCache()
        for informer in [state.claims, state.slice_informer, state.nodes,
                         *([state.rules] if state.rules is not None else [])]:
            informer.add_handler(self._changed)

    def detach(self) -> None:
        self._state, self._bus, self._body, self._dirty = None, None, None, True

    def _changed(self, event: str, old: Any, new: Any) -> None:
        self._dirty = True

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("GET", "/ui", self.handle_page), ("GET", "/ui/state.json", self.handle_state),
                ("GET", "/ui/device", self.handle_device)]

    # -- documents -------------------------------------------------------------------------------------

    def _claims(self, state: ClusterState) -> Claims:
        in_flight = ((a.claim_key, a.allocation) for a in state.assume.in_flight())
        return Claims.build(state.claims.list(), in_flight)

    def _rules(self, state: ClusterState) -> list[dict[str, Any]]:
        return state.rules.list() if state.rules is not None else []

    def snapshot(self, state: ClusterState) -> Snapshot:
        return Snapshot(
            slices=state.slice_informer.list(), claims=state.claims.list(),
            in_flight=[(a.claim_key, a.allocation) for a in state.assume.in_flight()],
            nodes=state.nodes.list(), rules=self._rules(state),
            explained=[(item, state.claims.get(item["claim"])) for item in self.explanations.latest()],
        )

    async def state_body(self) -> bytes:
        """The page's JSON document, rebuilt as the class docstring says."""
        state = self._state
        if state is None or not state.synced:
            return json.dumps({"leader": state is not None, "synced": False, "generated": _now(),
                               "nodes": [], "nodesTotal": 0, "counts": {}, "pending": [],
                               "pendingTotal": 0}).encode()
        async with self._lock:
            now = time.monotonic()
            stale = self._dirty or now - self._built_at >= self.max_age
            if self._body is None or (stale and now >= self._next_at):
                self._dirty = False
                t0 = time.perf_counter()
                body = await asyncio.to_thread(build_document, self.snapshot(state), self.limits, self._cache)
                took = time.perf_counter() - t0
                self._body, self._built_at, self.builds = body, now, self.builds + 1
                self._next_at = now + max(self.interval, took / self.duty)
                log.debug("web view built", seconds=round(took, 4), bytes=len(body))
            return self._body

    async def timeline(self, claim_key: str, uid: str) -> dict[str, Any]:
        """``{"events": [...]}`` of the claim from JetStream, or ``{"error": ...}``."""
        if self._bus is None:
            return {"error": "no NATS: the allocator runs without a bus"}
        namespace, _, name = claim_key.partition("/")
        try:
            read = claim_timeline(self._bus.jetstream(), namespace, name, claim_uid=uid or None)
            events = await asyncio.wait_for(read, TIMELINE_TIMEOUT)
        except Exception as exc:  # BusUnavailable, timeouts, permissions: the rest of the view still works
            log.info("timeline unavailable", claim=claim_key, error=repr(exc))
            return {"error": f"timeline unavailable: {exc!r}"[:300]}
        return {"events": [event_view(e) for e in events[-TIMELINE_EVENTS:]], "total": len(events)}

    # -- handlers --------------------------------------------------------------------------------------

    async def handle_page(self, request: web.Request) -> web.Response:
        return web.Response(text=page.HTML, content_type="text/html", headers={"Cache-Control": "no-store"})

    async def handle_state(self, request: web.Request) -> web.Response:
        return web.Response(body=await self.state_body(), content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    async def handle_device(self, request: web.Request) -> web.Response:
        q = request.query
        key = (q.get("driver", ""), q.get("pool", ""), q.get("device", ""))
        if not all(key):
            return web.json_response({"message": "driver, pool and device are required"}, status=400)
        state = self._state
        if state is None or not state.synced:
            return web.json_response({"message": "not leading: no caches on this replica"}, status=503)
        claims = self._claims(state)
        objects = {k: c for k in claims.by_device.get(key, []) if (c := state.claims.get(k)) is not None}
        detail = device_detail(key, state.slice_informer.list(), claims, objects, self._rules(state),
                               self.jaeger_url)
        if detail is None:
            return web.json_response({"message": f"no device {'/'.join(key)} in the current slices"},
                                     status=404)
        for view in detail["claims"]:
            view["timeline"] = await self.timeline(view["claim"], view.get("uid", ""))
        return web.json_response(detail, headers={"Cache-Control": "no-store"})
