"""The bad-input corpus's shared harness: the five services as processes (``ServiceFlow``, two simulated
nodes) started once for the whole package, and the checks every case ends with.

``Stack.still_serving()`` is the control-pod check: every service process is alive (no crash, so no
crash loop), every service's ``/healthz`` answered all through the case (a background poller: a frozen
event loop cannot answer), and an ordinary pod with a template claim still gets its claim created,
allocated, prepared and is Running. ``Stack.log_since()`` reads what a service logged during the case
(JSON lines), for the "error names the object" checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIM_TEMPLATES, KubeClient
from draflow_testenv.fleetflow import DRIVER, ServiceFlow

__all__ = ["DRIVER", "Stack"]

FROZEN = 10.0
"""A /healthz that has not answered after this many seconds counts as a frozen service (generous: the
machine is shared; a blocked event loop does not answer at all while it is blocked)."""


class Stack:
    """The running services plus the corpus's helpers. One per package; cases use unique object names."""

    def __init__(self, flow: ServiceFlow) -> None:
        self.flow = flow
        self.kube: KubeClient = flow.kube
        self.ns = flow.ns
        self._names = itertools.count()
        self._health_failures: list[str] = []
        self._poller: asyncio.Task[None] | None = None
        self._log_marks: dict[str, int] = {}

    # -- per case --------------------------------------------------------------------------------------

    def begin(self) -> None:
        """Start watching /healthz and mark the logs: what a case sees starts here."""
        self._health_failures = []
        self._log_marks = {p.name: _size(p.log_path) for p in self.flow.procs}
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_health())

    async def end(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None

    async def _poll_health(self) -> None:
        timeout = aiohttp.ClientTimeout(total=FROZEN)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                await asyncio.gather(*(self._probe(session, svc, port)
                                       for svc, port in self.flow.http_ports.items()))
                await asyncio.sleep(0.5)

    async def _probe(self, session: aiohttp.ClientSession, service: str, port: int) -> None:
        try:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                if resp.status != 200:
                    self._health_failures.append(f"{service}: /healthz {resp.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._health_failures.append(f"{service}: /healthz {type(exc).__name__} at {time.strftime('%X')}")

    def alive(self) -> None:
        self.flow.alive()

    async def until(self, probe: Callable[[], Any], what: str, within: float = 120.0) -> Any:
        """Poll ``probe`` until truthy (returned); fail after ``within`` s or at once if a service exited."""
        return await self.flow.until(probe, what, within=within)

    async def still_serving(self) -> dict[str, Any]:
        """The control-pod check (see the module docstring); returns the control pod, Running."""
        self.alive()
        name = self.name("control")
        await self.flow.create_pod(name)
        pod = await self.flow.wait_running(name)
        claim = await self.flow.claim_of(pod)
        assert claim["status"]["allocation"], claim
        self.alive()
        assert not self._health_failures, self._health_failures
        # Give the devices back (not waited for: the corpus's cases are independent of it).
        await self.kube.delete(PODS, name, namespace=self.ns)
        return pod

    # -- objects ---------------------------------------------------------------------------------------

    def name(self, prefix: str) -> str:
        return f"{prefix}-{next(self._names)}"

    async def template(self, name: str, device_class: str | None = None, *, requests: int = 1,
                       config: Sequence[dict[str, Any]] = ()) -> None:
        """A ResourceClaimTemplate with ``requests`` requests ``r0..`` of one device each."""
        devices: dict[str, Any] = {"requests": [
            {"name": f"r{i}", "exactly": {"deviceClassName": device_class or self.flow.device_class}}
            for i in range(requests)]}
        if config:
            devices["config"] = list(config)
        await self.kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": {"devices": devices}},
        }, namespace=self.ns)

    async def pod(self, name: str, claims: dict[str, dict[str, str]], *, group: str = "") -> None:
        """A pod of the flow's scheduler on the flow's nodes with these ``spec.resourceClaims`` (claim
        name -> ``{"resourceClaimTemplateName": ...}`` or ``{"resourceClaimName": ...}``), a member of
        PodGroup ``group`` if given."""
        await self.kube.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {
                "schedulerName": self.flow.scheduler,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": self.flow.nodes}]}]}}},
                "resourceClaims": [{"name": c, **source} for c, source in claims.items()],
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"claims": [{"name": c} for c in claims]}}],
                **({"schedulingGroup": {"podGroupName": group}} if group else {}),
            },
        }, namespace=self.ns)

    async def events_of(self, name: str, reason: str | None = None) -> list[dict[str, Any]]:
        """The core/v1 Events of the object ``name`` in the corpus's namespace (optionally one reason)."""
        events = (await self.kube.list(EVENTS, namespace=self.ns)).get("items") or []
        return [e for e in events if e["involvedObject"].get("name") == name
                and (reason is None or e.get("reason") == reason)]

    async def wait_event(self, name: str, reason: str, *words: str) -> dict[str, Any]:
        """The first Event of ``name`` with this reason whose message has every word."""
        async def found() -> dict[str, Any] | None:
            return next((e for e in await self.events_of(name, reason)
                         if all(w in e.get("message", "") for w in words)), None)

        event: dict[str, Any] = await self.until(found, f"Event {reason} of {name} naming {words}")
        return event

    async def wait_condition(self, pod: str, *words: str) -> str:
        """The message of the pod's PodScheduled=False condition once it has every word."""
        async def found() -> str | None:
            obj = await self.kube.get(PODS, pod, namespace=self.ns)
            for c in (obj.get("status") or {}).get("conditions") or ():
                if c.get("type") == "PodScheduled" and c.get("status") == "False" and \
                        all(w in c.get("message", "") for w in words):
                    return str(c["message"])
            return None

        message: str = await self.until(found, f"PodScheduled=False of {pod} naming {words}")
        return message

    # -- logs ------------------------------------------------------------------------------------------

    def log_since(self, service: str) -> list[dict[str, Any]]:
        """The JSON log records ``service`` wrote since :meth:`begin` (other lines skipped)."""
        proc = next(p for p in self.flow.procs if p.name.startswith(service))
        with open(proc.log_path, "rb") as f:
            f.seek(self._log_marks.get(proc.name, 0))
            data = f.read()
        records = []
        for line in data.decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    records.append(obj)
        return records

    async def wait_log(self, service: str, match: Callable[[dict[str, Any]], bool],
                       what: str) -> dict[str, Any]:
        async def found() -> dict[str, Any] | None:
            return next((r for r in self.log_since(service) if match(r)), None)

        record: dict[str, Any] = await self.until(found, f"{service} logs {what}")
        return record


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


async def start_stack(testenv: Any, kube: KubeClient, ns: str, fleet: Path,
                      run_service: Callable[..., Awaitable[Any]]) -> Stack:
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=2, gpus=16)
    await flow.start(run_service, fleet, http=True)
    await flow.wait_nodes_ready()
    await flow.create_objects()

    async def every_healthz() -> bool:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FROZEN)) as session:
            for port in flow.http_ports.values():
                try:
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        if resp.status != 200:
                            return False
                except (aiohttp.ClientError, TimeoutError):
                    return False
        return True

    await flow.until(every_healthz, "every service's /healthz")
    return Stack(flow)
