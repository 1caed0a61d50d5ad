"""The web view's HTTP routes, served by the allocator's observability server (same port, same
delegated auth as ``/explain``; RBAC: ``nonResourceURLs`` ``/ui``, ``/ui/*``).

* ``GET /ui``: the page (:mod:`.page`, server-side HTML with a few lines of vanilla JavaScript);
* ``GET /ui/state.json``: :func:`.view.grid` of the current leadership term's caches, built at most
  once per ``interval`` seconds whatever the number of viewers, so watching never slows decisions;
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
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from draflow_runtime.bus import EventBus
from draflow_runtime.lifecycle import ClaimEvent, claim_timeline, kind_name
from draflow_runtime.log import get_logger

from ..explain_http import ExplanationStore
from ..state import ClusterState
from . import page
from .view import Claims, Limits, device_detail, grid

__all__ = ["TIMELINE_EVENTS", "TIMELINE_TIMEOUT", "WebView"]

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


class WebView:
    """Routes of the web view over the caches of the current leadership term (:meth:`attach`)."""

    def __init__(self, explanations: ExplanationStore, *, jaeger_url: str = "", interval: float = 1.0,
                 limits: Limits = Limits()) -> None:
        self.explanations = explanations
        self.jaeger_url = jaeger_url
        self.interval = interval
        self.limits = limits
        self._state: ClusterState | None = None
        self._bus: EventBus | None = None
        self._cached: tuple[float, bytes] | None = None

    def attach(self, state: ClusterState, bus: EventBus | None) -> None:
        """Show this term's caches (``bus``: where the timelines are read; None without NATS)."""
        self._state, self._bus, self._cached = state, bus, None

    def detach(self) -> None:
        self._state, self._bus, self._cached = None, None, None

    def routes(self) -> list[tuple[str, str, Any]]:
        return [("GET", "/ui", self.handle_page), ("GET", "/ui/state.json", self.handle_state),
                ("GET", "/ui/device", self.handle_device)]

    # -- documents -------------------------------------------------------------------------------------

    def _claims(self, state: ClusterState) -> Claims:
        in_flight = ((a.claim_key, a.allocation) for a in state.assume.in_flight())
        return Claims.build(state.claims.list(), in_flight)

    def _rules(self, state: ClusterState) -> list[dict[str, Any]]:
        return state.rules.list() if state.rules is not None else []

    def _pending(self, state: ClusterState, claims: Claims) -> list[dict[str, Any]]:
        """The explanations of claims that still exist and are not allocated (nor being written)."""
        held = {key for holders in claims.by_device.values() for key in holders}
        out = []
        for item in self.explanations.latest():
            claim = state.claims.get(item["claim"])
            if claim is None or (claim.get("status") or {}).get("allocation") or item["claim"] in held:
                continue
            out.append(item)
        return out

    def state_document(self) -> dict[str, Any]:
        """The page's document now (uncached)."""
        state = self._state
        if state is None or not state.synced:
            return {"leader": state is not None, "synced": False, "generated": _now(), "nodes": [],
                    "nodesTotal": 0, "counts": {}, "pending": [], "pendingTotal": 0}
        claims = self._claims(state)
        doc = grid(state.slice_informer.list(), claims, state.nodes.list(), self._rules(state),
                   self._pending(state, claims), self.limits)
        return {"leader": True, "synced": True, "generated": _now(), **doc}

    def state_bytes(self) -> bytes:
        """:meth:`state_document` as JSON, rebuilt at most once per ``interval``."""
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] >= self.interval:
            t0 = time.perf_counter()
            body = json.dumps(self.state_document(), separators=(",", ":")).encode()
            self._cached = (now, body)
            log.debug("web view built", seconds=round(time.perf_counter() - t0, 4), bytes=len(body))
        return self._cached[1]

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
        return web.Response(body=self.state_bytes(), content_type="application/json",
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
