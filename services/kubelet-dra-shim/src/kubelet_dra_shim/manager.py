"""The DRA manager of one node: prepare a pod's claims, unprepare them when no pod needs them any more.

Contract (same as kubelet's ``pkg/kubelet/cm/dra``):

- :meth:`NodeManager.prepare_pod` is idempotent. It reads every claim of the pod **live** from the API
  server, requires an allocation, the pod in ``reservedFor`` and every driver of the claim registered
  (a claim that fails these is not recorded: nothing to unprepare when its pod goes), records the pod
  in the checkpoint *before* calling drivers, sends one ``NodePrepareResources`` per driver carrying
  all of the pod's claims for that driver, records the CDI device IDs and checkpoints again. A
  per-claim error fails only that claim; the pod's other claims are still prepared.
- :meth:`NodeManager.unprepare_pod` / :meth:`NodeManager.release_inactive` never read the API server:
  everything needed to unprepare is in the checkpoint, so force-deleted pods and deleted claims are
  still cleaned up. A claim is unprepared only when no pod on the node still references it. As in
  kubelet's ``unprepareResources``: the last pods' references stay (in the cache and the checkpoint)
  until every driver of the claim unprepared it; when one driver fails, the claim stays whole (every
  driver with its devices) and the retry calls every driver again (unprepare is idempotent); while a
  claim is being unprepared (``ClaimInfo.unpreparing``) a new pod cannot use it (a per-claim failure,
  retried), and once it is unprepared it is prepared afresh through all of its drivers.
- Optional node operations (DRAOptionalNodeOperations, :mod:`.nodeops`): a driver whose every device
  result in the claim skips ``NodePrepareResources`` / ``NodeUnprepareResources`` (``*``: both) is not
  called for it, and needs not be registered; the claim is still recorded (pods, the driver with no
  devices, its ``skipNodeOperations``) and checkpointed, and counts as prepared. With the gate off such
  a claim fails (as on a kubelet with the gate off).
- After a restart every claim in the checkpoint is considered unprepared and prepared again once (the
  driver must be idempotent). With ``reprepare_after_restart=False`` this happens only after a reboot
  (the checkpoint's boot ID differs), the case where CDI specs on tmpfs and device state were lost.

Locking is per claim (``draflow_runtime.keyedlocks``, by claim UID), as in kubelet v1.37.1, whose
claim-info cache lock is never held across a driver call: a pod's prepare holds the locks of its claims,
an unprepare those of the claims it releases, so two pods sharing a claim, or an unprepare and a new pod
of the same claim, never race, while a driver hanging on one claim delays no other claim of the node.
Changes to the claim cache happen between awaits (atomic on the event loop) and every checkpoint write
stores the cache as it is when the write starts (:class:`~kubelet_dra_shim.checkpoint.NodeCheckpoint`).
The driver calls themselves (one per driver and step, devices recorded, claim events, per-claim failures) are
:class:`kubelet_dra_shim.driverrpc.DriverCalls`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Status, StatusCode

from draflow_runtime import tracing
from draflow_runtime.errors import NotFound
from draflow_runtime.keyedlocks import KeyedLocks
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger

from . import checkpoint
from .checkpoint import ClaimInfo
from .claimevents import ClaimEvents
from .driverrpc import ClaimFailure, DriverCalls, claim_key
from .nodeops import GATE as OPTIONAL_NODE_OPERATIONS
from .nodeops import PREPARE, UNPREPARE, driver_skips, skips
from .plugins import PluginStore
from .podclaims import check_claim_for_pod, claim_drivers, pod_claims

log = get_logger(__name__)
TRACER_NAME = "kubelet_dra_shim"

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
    skip_ops: dict[str, list[str]]  # driver -> node operations its results all skip (nodeops)


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
        optional_node_operations: bool = True,
        workload_claims: bool = False,
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
        self.optional_node_operations = optional_node_operations  # DRAOptionalNodeOperations gate
        self.workload_claims = workload_claims  # DRAWorkloadResourceClaims gate: PodGroup claims
        self.tracer = tracer or trace.get_tracer(TRACER_NAME)
        self.claims: dict[str, ClaimInfo] = {}
        self.rebooted = False
        self._claim_locks = KeyedLocks()  # by claim UID
        self.calls = DriverCalls(node, store, events, self.tracer, rpc_timeout)

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

    async def _save(self, changed: Iterable[str] | None = None) -> None:
        """Checkpoint the claims; ``changed``: UIDs of the claims whose content (pods, drivers, devices)
        changed since they were last saved (added and removed claims need no mention), ``None``: any."""
        await self.checkpoint.save(self.claims, changed)

    # --- queries ----------------------------------------------------------------------------------------

    def pod_uids(self) -> set[str]:
        """Every pod UID that holds a claim on this node."""
        return {uid for info in self.claims.values() for uid in info.pod_uids}

    def _same_name(self, namespace: str, name: str) -> ClaimInfo | None:
        """The recorded claim of that namespace and name, whatever its UID."""
        return next((i for i in self.claims.values() if i.namespace == namespace and i.claim_name == name),
                    None)

    def claims_of_pod(self, pod_uid: str) -> list[ClaimInfo]:
        return [info for info in self.claims.values() if pod_uid in info.pod_uids]

    def pods_of_claim(self, claim: str) -> set[str]:
        """UIDs of the pods recorded for ``claim`` ("<namespace>/<name>"); a claim whose unprepare failed
        keeps its last pods until every driver unprepared it."""
        return {uid for info in self.claims.values() if claim_key(info) == claim for uid in info.pod_uids}

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
            async with self._claim_locks.hold_all(c.claim["metadata"]["uid"] for c in candidates):
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
            if info is None or not info.prepared or info.unpreparing:
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
            reason = check_claim_for_pod(pod, claim, ref.generated, self.workload_claims)
            if reason:
                outcome.waiting[ref.name] = f"ResourceClaim {ref.claim_name}: {reason}"
                continue
            skip_ops = driver_skips(claim)
            if skip_ops and not self.optional_node_operations:
                outcome.failures.append(ClaimFailure(
                    f"{namespace}/{ref.claim_name}", ",".join(sorted(skip_ops)),
                    f"the allocation skips node operations ({OPTIONAL_NODE_OPERATIONS}), but the "
                    "feature gate is disabled on kubelet-dra-shim",
                ))
                continue
            drivers = claim_drivers(claim)
            # kubelet's validation pass: a driver that is not registered fails the claim before the claim
            # or the pod is recorded, so the pod can go without an unprepare through a driver not there.
            missing = [f for d in drivers if not skips(skip_ops.get(d, ()), PREPARE)
                       and (f := self.calls.unregistered(d, f"{namespace}/{ref.claim_name}")) is not None]
            if missing:
                outcome.failures.append(missing[0])
                continue
            candidates.append(_Candidate(ref.name, claim, drivers, skip_ops))
        return candidates

    async def _prepare_locked(
        self, pod: Mapping[str, Any], pod_key: str, candidates: list[_Candidate], outcome: PrepareOutcome
    ) -> None:
        pod_uid = pod["metadata"]["uid"]
        changed: set[str] = set()
        todo: dict[str, tuple[str, ClaimInfo]] = {}  # claim uid -> (pod claim name, info)
        for cand in candidates:
            meta = cand.claim["metadata"]
            info = self.claims.get(meta["uid"])
            if info is None and (stale := self._same_name(meta["namespace"], meta["name"])) is not None:
                # kubelet keys its claims by namespace and name: a claim made again under the same name
                # waits until the old one is unprepared (its pod force-deleted, its unprepare failing).
                outcome.failures.append(ClaimFailure(
                    f"{meta['namespace']}/{meta['name']}", "",
                    f"old ResourceClaim with same name {meta['name']} and different UID {stale.claim_uid} "
                    "still exists (previous pod force-deleted?)"))
                continue
            if info is None:
                info = ClaimInfo(
                    meta["uid"], meta["name"], meta["namespace"], drivers={d: [] for d in cand.drivers},
                    skip_node_operations=cand.skip_ops,
                )
                self.claims[info.claim_uid] = info
                changed.add(info.claim_uid)
            elif (info.claim_name, info.namespace) != (meta["name"], meta["namespace"]):
                outcome.failures.append(
                    ClaimFailure(
                        f"{meta['namespace']}/{meta['name']}",
                        "",
                        f"claim UID {meta['uid']} already used by {claim_key(info)}",
                    )
                )
                continue
            elif info.unpreparing:  # kubelet: a claim being unprepared takes no new pod
                outcome.failures.append(ClaimFailure(
                    f"{meta['namespace']}/{meta['name']}", "",
                    f"ResourceClaim {meta['name']} is being unprepared"))
                continue
            if pod_uid not in info.pod_uids:
                info.pod_uids.add(pod_uid)
                changed.add(info.claim_uid)
            if info.prepared:
                outcome.claims[cand.pod_claim_name] = info
            else:
                todo[info.claim_uid] = (cand.pod_claim_name, info)
        if changed:
            await self._save(changed)  # the pod is recorded before any driver sees the claim
        if not todo:
            return
        by_driver: dict[str, list[ClaimInfo]] = defaultdict(list)
        for _, info in todo.values():
            for driver in info.drivers:
                if skips(info.skip_node_operations.get(driver, ()), PREPARE):
                    log.info("node operation skipped", node=self.node, claim=claim_key(info),
                             driver=driver, operation=PREPARE)
                    continue
                by_driver[driver].append(info)
        read = {c.claim["metadata"]["uid"]: c.claim for c in candidates}  # live, moments ago
        results = await asyncio.gather(
            *(self.calls.prepare(driver, infos, pod_key, read) for driver, infos in by_driver.items())
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
        await self._save(todo)  # the devices the drivers answered with

    # --- unprepare --------------------------------------------------------------------------------------

    async def unprepare_pod(self, pod_uid: str) -> list[ClaimFailure]:
        """Drop ``pod_uid`` from its claims and unprepare those no other pod uses. Idempotent.

        Returns the failures of this pod's own claims only: claims left over from other pods are retried
        here too, but one whose unprepare keeps failing (its driver is gone) must not hold up every pod
        deleted after it (the kubelet unprepares per pod; the node's reconcile retries and reports them)."""
        mine = {claim_key(info) for info in self.claims.values() if pod_uid in info.pod_uids}
        failures = await self.release_pods(lambda uid: uid == pod_uid)
        return [f for f in failures if f.claim in mine]

    async def release_inactive(self, active_pod_uids: set[str]) -> list[ClaimFailure]:
        """Drop every pod not in ``active_pod_uids`` and unprepare claims left without pods."""
        return await self.release_pods(lambda uid: uid not in active_pod_uids)

    async def release_pods(self, gone: Any) -> list[ClaimFailure]:
        """Drop the pods ``gone(uid)`` says are gone from their claims; a claim whose pods are all gone
        keeps them and is unprepared (with every claim still being unprepared from an earlier call)."""
        changed: list[str] = []
        for info in self.claims.values():
            dropped = {uid for uid in info.pod_uids if gone(uid)}
            if not dropped:
                continue
            if dropped == info.pod_uids:
                info.unpreparing = True  # the last references stay until the drivers are done
            else:
                info.pod_uids -= dropped
                changed.append(info.claim_uid)
        if changed:
            await self._save(changed)
        orphans = [uid for uid, info in self.claims.items() if info.unpreparing or not info.pod_uids]
        if not orphans:
            return []
        async with self._claim_locks.hold_all(orphans):
            return await self._unprepare_unreferenced(orphans)

    async def _unprepare_unreferenced(self, uids: list[str]) -> list[ClaimFailure]:
        """Unprepare the claims of ``uids`` (their locks held) through every driver; forget those that
        every driver unprepared, keep the others whole (retried on the next call)."""
        orphans = [self.claims[uid] for uid in uids
                   if uid in self.claims and (self.claims[uid].unpreparing or not self.claims[uid].pod_uids)]
        if not orphans:
            return []
        by_driver: dict[str, list[ClaimInfo]] = defaultdict(list)
        for info in orphans:
            info.unpreparing = True
            for driver in info.drivers:
                if skips(info.skip_node_operations.get(driver, ()), UNPREPARE):
                    log.info("node operation skipped", node=self.node, claim=claim_key(info),
                             driver=driver, operation=UNPREPARE)
                    continue
                by_driver[driver].append(info)
        results = await asyncio.gather(*(self.calls.unprepare(d, infos) for d, infos in by_driver.items()))
        failures = [f for r in results for f in r.values()]
        failed = {uid for r in results for uid in r}
        for info in orphans:
            if info.claim_uid not in failed:
                info.prepared = False
                del self.claims[info.claim_uid]
        await self._save(())  # claims removed; those kept are unchanged on disk
        return failures

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
