"""The DRA manager of one node: prepare a pod's claims, unprepare them when no pod needs them any more.

Contract (same as kubelet's ``pkg/kubelet/cm/dra``):

- :meth:`NodeManager.prepare_pod` is idempotent. It reads every claim of the pod **live** from the API
  server, requires an allocation and the pod in ``reservedFor``, records the pod in the checkpoint
  *before* calling drivers, sends one ``NodePrepareResources`` per driver carrying all of the pod's
  claims for that driver, records the CDI device IDs and checkpoints again. A per-claim error fails
  only that claim; the pod's other claims are still prepared.
- :meth:`NodeManager.unprepare_pod` / :meth:`NodeManager.release_inactive` never read the API server:
  everything needed to unprepare is in the checkpoint, so force-deleted pods and deleted claims are
  still cleaned up. A claim is unprepared only when no pod on the node still references it.
- After a restart every claim in the checkpoint is considered unprepared and prepared again once (the
  driver must be idempotent). With ``reprepare_after_restart=False`` this happens only after a reboot
  (the checkpoint's boot ID differs), the case where CDI specs on tmpfs and device state were lost.

One asyncio lock per node serialises prepare and unprepare, so two pods sharing a claim never race.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from prometheus_client import Histogram

from draflow_runtime import tracing
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.metrics import registered_collector

from . import checkpoint
from .checkpoint import ClaimInfo, PreparedDevice
from .claimevents import ClaimEvents
from .plugins import Plugin, PluginStore
from .podclaims import check_claim_for_pod, claim_drivers, pod_claims

log = get_logger(__name__)
TRACER_NAME = "kubelet_dra_shim"

OPERATION_DURATION = registered_collector(
    Histogram,
    "draflow_shim_dra_operation_duration_seconds",
    "NodePrepareResources/NodeUnprepareResources round trips by driver and outcome (ok|error).",
    ["operation", "driver", "outcome"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 45.0),
)


@dataclass(frozen=True)
class ClaimFailure:
    """A claim that could not be prepared or unprepared, with the driver's (or our) message."""

    claim: str  # "<namespace>/<name>"
    driver: str
    message: str


@dataclass
class PrepareOutcome:
    """Result of one :meth:`NodeManager.prepare_pod`.

    ``claims``: prepared claims by pod claim name. ``waiting``: claims that are not ready for this node
    yet (not generated, not allocated, pod not reserved) — not errors, just retry later. ``failures``:
    driver errors and missing drivers — the pod gets a Warning Event, and the claim is retried.
    """

    claims: dict[str, ClaimInfo] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    failures: list[ClaimFailure] = field(default_factory=list)
    driver_calls: int = 0

    @property
    def ready(self) -> bool:
        return not self.waiting and not self.failures


@dataclass
class _Candidate:
    pod_claim_name: str
    claim: dict[str, Any]
    drivers: list[str]


def _claim_key(info: ClaimInfo) -> str:
    return f"{info.namespace}/{info.claim_name}"


class NodeManager:
    """Prepared claims of one node, persisted in ``<state_dir>/dra_manager_state``."""

    def __init__(
        self,
        node: str,
        state_dir: Path,
        store: PluginStore,
        kube: KubeClient,
        events: ClaimEvents,
        *,
        boot_id: str,
        rpc_timeout: float = 45.0,
        reprepare_after_restart: bool = True,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.node = node
        self.path = state_dir / checkpoint.FILE_NAME
        self.checkpoint = checkpoint.NodeCheckpoint(self.path, boot_id)
        self.store = store
        self.kube = kube
        self.events = events
        self.boot_id = boot_id
        self.rpc_timeout = rpc_timeout
        self.reprepare_after_restart = reprepare_after_restart
        self.tracer = tracer or trace.get_tracer(TRACER_NAME)
        self.claims: dict[str, ClaimInfo] = {}
        self.rebooted = False
        self._lock = asyncio.Lock()

    # --- checkpoint -----------------------------------------------------------------------------------

    async def load(self) -> None:
        """Restore the claims from the checkpoint. A corrupt checkpoint is an error (never ignored)."""
        state = await self.checkpoint.load()
        if state is None:
            return
        self.rebooted = bool(state.boot_id) and state.boot_id != self.boot_id
        trust = not self.reprepare_after_restart and not self.rebooted
        for info in state.claims.values():
            info.prepared = trust
        self.claims = state.claims
        log.info(
            "checkpoint loaded",
            node=self.node,
            claims=len(self.claims),
            rebooted=self.rebooted,
            reprepare=not trust,
        )

    async def _save(self) -> None:
        await self.checkpoint.save(self.claims)

    # --- queries ----------------------------------------------------------------------------------------

    def pod_uids(self) -> set[str]:
        """Every pod UID that holds a claim on this node."""
        return {uid for info in self.claims.values() for uid in info.pod_uids}

    def claims_of_pod(self, pod_uid: str) -> list[ClaimInfo]:
        return [info for info in self.claims.values() if pod_uid in info.pod_uids]

    # --- prepare ----------------------------------------------------------------------------------------

    async def prepare_pod(self, pod: Mapping[str, Any]) -> PrepareOutcome:
        """Prepare every claim of ``pod`` that is ready; idempotent (see the module docstring)."""
        cached = self._already_prepared(pod)
        if cached is not None:
            return cached
        outcome = PrepareOutcome()
        candidates = await self._candidates(pod, outcome)
        if not candidates:
            return outcome
        parent, links = _trace_parent(c.claim for c in candidates)
        pod_key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        with self.tracer.start_as_current_span(
            "prepare pod",
            context=parent,
            links=links,
            attributes={
                "k8s.pod.name": pod_key,
                "k8s.node.name": self.node,
                "draflow.claims": len(candidates),
            },
        ) as span:
            async with self._lock:
                await self._prepare_locked(pod, pod_key, candidates, outcome)
            if outcome.failures:
                span.set_status(Status(StatusCode.ERROR, "; ".join(f.message for f in outcome.failures)))
        return outcome

    def _already_prepared(self, pod: Mapping[str, Any]) -> PrepareOutcome | None:
        """The outcome without any API call when every claim of the pod is prepared for it already.

        Pod status writes wake the reconcile again; they must not cost a claim GET each. A claim that
        was replaced (same name, new UID) is not in the cache for this pod, so the slow path runs.
        """
        uid = pod["metadata"]["uid"]
        namespace = pod["metadata"]["namespace"]
        mine = {(i.namespace, i.claim_name): i for i in self.claims.values() if uid in i.pod_uids}
        outcome = PrepareOutcome()
        for ref in pod_claims(pod):
            info = mine.get((namespace, ref.claim_name or ""))
            if info is None or not info.prepared:
                return None
            outcome.claims[ref.name] = info
        return outcome

    async def _candidates(self, pod: Mapping[str, Any], outcome: PrepareOutcome) -> list[_Candidate]:
        """GET every claim live and keep those that can be prepared; the rest go to ``waiting``."""
        namespace = pod["metadata"]["namespace"]
        candidates: list[_Candidate] = []
        for ref in pod_claims(pod):
            if ref.claim_name is None:
                outcome.waiting[ref.name] = ref.waiting
                continue
            try:
                claim = await self.kube.get(RESOURCE_CLAIMS, ref.claim_name, namespace=namespace)
            except NotFound:
                outcome.waiting[ref.name] = f"ResourceClaim {ref.claim_name} not found"
                continue
            reason = check_claim_for_pod(pod, claim, ref.generated)
            if reason:
                outcome.waiting[ref.name] = f"ResourceClaim {ref.claim_name}: {reason}"
                continue
            candidates.append(_Candidate(ref.name, claim, claim_drivers(claim)))
        return candidates

    async def _prepare_locked(
        self, pod: Mapping[str, Any], pod_key: str, candidates: list[_Candidate], outcome: PrepareOutcome
    ) -> None:
        pod_uid = pod["metadata"]["uid"]
        changed = False
        todo: dict[str, tuple[str, ClaimInfo]] = {}  # claim uid -> (pod claim name, info)
        for cand in candidates:
            meta = cand.claim["metadata"]
            info = self.claims.get(meta["uid"])
            if info is None:
                info = ClaimInfo(
                    meta["uid"], meta["name"], meta["namespace"], drivers={d: [] for d in cand.drivers}
                )
                self.claims[info.claim_uid] = info
                changed = True
            elif (info.claim_name, info.namespace) != (meta["name"], meta["namespace"]):
                outcome.failures.append(
                    ClaimFailure(
                        f"{meta['namespace']}/{meta['name']}",
                        "",
                        f"claim UID {meta['uid']} already used by {_claim_key(info)}",
                    )
                )
                continue
            if pod_uid not in info.pod_uids:
                info.pod_uids.add(pod_uid)
                changed = True
            if info.prepared:
                outcome.claims[cand.pod_claim_name] = info
            else:
                todo[info.claim_uid] = (cand.pod_claim_name, info)
        if changed:
            await self._save()  # the pod is recorded before any driver sees the claim
        if not todo:
            return
        by_driver: dict[str, list[ClaimInfo]] = defaultdict(list)
        for _, info in todo.values():
            for driver in info.drivers:
                by_driver[driver].append(info)
        results = await asyncio.gather(
            *(self._prepare_driver(driver, infos, pod_key) for driver, infos in by_driver.items())
        )
        outcome.driver_calls += len(by_driver)
        failed_claims: set[str] = set()
        for failures in results:
            for uid, failure in failures.items():
                failed_claims.add(uid)
                outcome.failures.append(failure)
        for uid, (pod_claim_name, info) in todo.items():
            if uid not in failed_claims:
                info.prepared = True
                outcome.claims[pod_claim_name] = info
        await self._save()

    async def _prepare_driver(
        self, driver: str, infos: list[ClaimInfo], pod_key: str
    ) -> dict[str, ClaimFailure]:
        """One NodePrepareResources for ``infos``; record devices; return failures by claim UID."""
        plugin = self.store.get(driver)
        if plugin is None:
            msg = f"DRA driver {driver} is not registered on node {self.node}"
            return {i.claim_uid: ClaimFailure(_claim_key(i), driver, msg) for i in infos}
        m = plugin.messages
        request = m.NodePrepareResourcesRequest(
            claims=[m.Claim(namespace=i.namespace, uid=i.claim_uid, name=i.claim_name) for i in infos]
        )
        try:
            response = await self._call(plugin, "NodePrepareResources", request)
        except grpc.aio.AioRpcError as exc:
            msg = f"NodePrepareResources failed: {exc.code().name}: {exc.details()}"
            for info in infos:
                await self.events.prepare_failed(info, self.node, driver, pod_key, msg)
            return {i.claim_uid: ClaimFailure(_claim_key(i), driver, msg) for i in infos}
        failures: dict[str, ClaimFailure] = {}
        for info in infos:
            result = response.claims.get(info.claim_uid)
            if result is None:
                msg = "driver returned no result for the claim"
            elif result.error:
                msg = result.error
            else:
                info.drivers[driver] = [_device(d) for d in result.devices]
                await self.events.prepared(info, self.node, driver, pod_key)
                continue
            failures[info.claim_uid] = ClaimFailure(_claim_key(info), driver, msg)
            await self.events.prepare_failed(info, self.node, driver, pod_key, msg)
        return failures

    async def _call(self, plugin: Plugin, method: str, request: Any) -> Any:
        """A unary call with a CLIENT span and the trace context in the gRPC metadata."""
        service = plugin.messages.DESCRIPTOR.package + ".DRAPlugin"
        started = time.perf_counter()
        outcome = "error"
        with self.tracer.start_as_current_span(
            f"{service}/{method}",
            kind=SpanKind.CLIENT,
            attributes={
                "rpc.system": "grpc",
                "rpc.service": service,
                "rpc.method": method,
                "draflow.driver": plugin.driver,
                "k8s.node.name": self.node,
                "server.address": plugin.endpoint,
            },
        ) as span:
            try:
                response = await getattr(plugin.stub(), method)(
                    request, timeout=self.rpc_timeout, metadata=tracing.inject_into_metadata()
                )
                outcome = "ok"
                return response
            except grpc.aio.AioRpcError as exc:
                span.set_attribute("rpc.grpc.status_code", exc.code().value[0])
                span.set_status(Status(StatusCode.ERROR, exc.details() or exc.code().name))
                raise
            finally:
                OPERATION_DURATION.labels(method, plugin.driver, outcome).observe(
                    time.perf_counter() - started
                )

    # --- unprepare --------------------------------------------------------------------------------------

    async def unprepare_pod(self, pod_uid: str) -> list[ClaimFailure]:
        """Drop ``pod_uid`` from its claims and unprepare those no other pod uses. Idempotent."""
        return await self.release_pods(lambda uid: uid == pod_uid)

    async def release_inactive(self, active_pod_uids: set[str]) -> list[ClaimFailure]:
        """Drop every pod not in ``active_pod_uids`` and unprepare claims left without pods."""
        return await self.release_pods(lambda uid: uid not in active_pod_uids)

    async def release_pods(self, gone: Any) -> list[ClaimFailure]:
        async with self._lock:
            changed = False
            for info in self.claims.values():
                dropped = {uid for uid in info.pod_uids if gone(uid)}
                if dropped:
                    info.pod_uids -= dropped
                    changed = True
            if changed:
                await self._save()
            return await self._unprepare_unreferenced()

    async def _unprepare_unreferenced(self) -> list[ClaimFailure]:
        orphans = [info for info in self.claims.values() if not info.pod_uids]
        if not orphans:
            return []
        by_driver: dict[str, list[ClaimInfo]] = defaultdict(list)
        for info in orphans:
            for driver in info.drivers:
                by_driver[driver].append(info)
        results = await asyncio.gather(*(self._unprepare_driver(d, infos) for d, infos in by_driver.items()))
        failures = [f for r in results for f in r]
        for info in orphans:
            if not info.drivers:
                del self.claims[info.claim_uid]
        await self._save()
        return failures

    async def _unprepare_driver(self, driver: str, infos: list[ClaimInfo]) -> list[ClaimFailure]:
        """One NodeUnprepareResources; a claim whose driver succeeded forgets that driver."""
        plugin = self.store.get(driver)
        if plugin is None:
            msg = f"DRA driver {driver} is not registered on node {self.node}"
            return [ClaimFailure(_claim_key(i), driver, msg) for i in infos]
        m = plugin.messages
        request = m.NodeUnprepareResourcesRequest(
            claims=[m.Claim(namespace=i.namespace, uid=i.claim_uid, name=i.claim_name) for i in infos]
        )
        with self.tracer.start_as_current_span(
            "unprepare claims",
            attributes={"k8s.node.name": self.node, "draflow.driver": driver, "draflow.claims": len(infos)},
        ):
            try:
                response = await self._call(plugin, "NodeUnprepareResources", request)
            except grpc.aio.AioRpcError as exc:
                msg = f"NodeUnprepareResources failed: {exc.code().name}: {exc.details()}"
                return [ClaimFailure(_claim_key(i), driver, msg) for i in infos]
        failures: list[ClaimFailure] = []
        for info in infos:
            result = response.claims.get(info.claim_uid)
            if result is None or result.error:
                msg = result.error if result is not None else "driver returned no result for the claim"
                failures.append(ClaimFailure(_claim_key(info), driver, msg))
                continue
            await self.events.unprepared(info, self.node, driver)
            del info.drivers[driver]
            info.prepared = False
            log.info("claim unprepared", node=self.node, claim=_claim_key(info), driver=driver)
        return failures


def _device(d: Any) -> PreparedDevice:
    share_id = d.share_id if "share_id" in d.DESCRIPTOR.fields_by_name and d.HasField("share_id") else None
    return PreparedDevice(
        pool_name=d.pool_name,
        device_name=d.device_name,
        request_names=list(d.request_names),
        cdi_device_ids=list(d.cdi_device_ids),
        share_id=share_id,
    )


def _trace_parent(claims: Iterable[Mapping[str, Any]]) -> tuple[Any, list[Link]]:
    """Parent context from the first claim's traceparent annotation; the other claims' traces are links."""
    parent = None
    links: list[Link] = []
    for claim in claims:
        ctx = tracing.context_from_annotations(claim.get("metadata", {}).get("annotations"))
        if ctx is None:
            continue
        if parent is None:
            parent = ctx
        else:
            links.append(Link(trace.get_current_span(ctx).get_span_context()))
    return parent, links
