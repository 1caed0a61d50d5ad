"""Device-taint eviction: pods using devices with untolerated NoExecute taints are deleted, and
DeviceTaintRules report in their status how that goes. The draflow counterpart of
kube-controller-manager's ``device-taint-eviction-controller`` (``pkg/controller/devicetainteviction``).

It shares the claim-controller's pod and claim informers, adds one on ResourceSlices (index ``byPool``)
and one on DeviceTaintRules, and has its own queue and runner (``device-taint-eviction``) with two kinds
of keys:

- ``evict:<ns>/<pod>``: :func:`~.taints.pod_eviction` from the caches. Not due yet → requeue at the
  time. Due → live GET (same UID, not already being deleted), Normal Event ``DeviceTaintManagerEviction``
  "Marking for deletion", the pod condition ``DisruptionTarget`` (reason ``DeletionByDeviceTaintManager``)
  on ``pods/status``, DELETE with a UID precondition. An eviction that is no longer needed before it
  happened gets the Event "Cancelling deletion". The kubelet then stops the pod; once it is gone the
  claim-controller's clean-up drops the reservation and deallocates the claim.
- ``rule:<name>``: the ``EvictionInProgress`` condition (:mod:`.rulestatus`), server-side applied to
  ``devicetaintrules/status``, at once when a rule appears or its spec changes, then at most once per
  ``--rule-status-period`` while pods are being evicted because of it.

Handlers only enqueue: pod events the pod; claim events the pods in ``reservedFor``; slice events with
NoExecute taints the pods of the claims allocated from that pool (claim index ``byPool``); rule spec
changes the rule and the pods of every claim whose devices it selects. While no slice has a NoExecute
taint, no DeviceTaintRule has that effect and no eviction is scheduled (the usual state), pod and claim
events enqueue nothing: no pod can be due, and the slice or rule that brings the first such taint
enqueues the pods it concerns itself (the two handlers above). Those reconciles were about two per placed
pod, each finding nothing to do (about 9 % of the claim-controller's samples in the side-by-side template
run).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from draflow_runtime.devicetaints import NO_EXECUTE, rule_selects
from draflow_runtime.dra import claim_results
from draflow_runtime.errors import NotFound
from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import EventType, Informer, key_of
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_SLICES, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.reconcile import Done, RequeueAfter, Runner
from draflow_runtime.workqueue import WorkQueue

from .claimcache import Claims
from .context import DeletedPods
from .metrics import ERRORS, EVICTION_LATENCY, PODS_EVICTED, RULE_STATUS_WRITES
from .rulestatus import Counts, needs_write, rule_condition, wait_before_update
from .settings import Settings
from .taints import Eviction, TaintView, pod_eviction

__all__ = ["BY_POOL", "EVICTION_REASON", "NAME", "TaintEviction", "allocated_pools"]

log = get_logger(__name__)

NAME = "device-taint-eviction"
EVICT_PREFIX = "evict:"
RULE_PREFIX = "rule:"
#: Claim and slice index: ``<driver>/<pool>`` of the devices allocated (claims) or published (slices).
BY_POOL = "byPool"
EVICTION_REASON = "DeviceTaintManagerEviction"
DISRUPTION_REASON = "DeletionByDeviceTaintManager"
DISRUPTION_MESSAGE = "Device Taint manager: deleting due to NoExecute taint"

Obj = dict[str, Any]


def allocated_pools(claim: Obj) -> list[str]:
    """Claim index function: ``<driver>/<pool>`` of every allocated device."""
    return sorted({f"{r.get('driver', '')}/{r.get('pool', '')}" for r in claim_results(claim)})


def _slice_pool(s: Obj) -> list[str]:
    spec = s.get("spec") or {}
    return [f"{spec.get('driver', '')}/{(spec.get('pool') or {}).get('name', '')}"]


def _has_no_execute(s: Obj | None) -> bool:
    return s is not None and any(t.get("effect") == NO_EXECUTE
                                 for d in (s.get("spec") or {}).get("devices") or ()
                                 for t in d.get("taints") or ())


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TaintEviction:
    """See the module docstring. ``pods`` and ``claims`` are the claim-controller's informers (the claim
    informer must have the :data:`BY_POOL` index); ``clock`` returns POSIX seconds (a test seam)."""

    def __init__(self, settings: Settings, kube: KubeClient, pods: Informer, claims: Claims,
                 recorder: EventRecorder, *, clock: Any = time.time) -> None:
        self.settings = settings
        self.kube = kube
        self.pods = pods
        self.claims = claims
        self.recorder = recorder
        self.clock = clock
        self.slices = Informer(kube, RESOURCE_SLICES, name="resourceslices", indexers={BY_POOL: _slice_pool})
        self.rules = Informer(kube, DEVICE_TAINT_RULES, name="devicetaintrules") \
            if settings.device_taint_rules else None
        self.queue = WorkQueue(name=NAME)
        self.runner = Runner(NAME, self.queue, self.reconcile, workers=settings.workers,
                             timeout=settings.reconcile_timeout)
        # In memory, as upstream: evictions waiting for their time (pod key -> (uid, eviction)), pods
        # already deleted (UIDs), and pods evicted per rule UID since the start (the status message).
        self.scheduled: dict[str, tuple[str, Eviction]] = {}
        # Keys of the slices with a NoExecute device taint and names of the NoExecute rules: while both are
        # empty and nothing is scheduled, pod and claim events need no reconcile (module docstring).
        self.tainted_slices: set[str] = set()
        self.no_execute_rules: set[str] = set()
        self.evicted = DeletedPods(500)
        self.evicted_by_rule: dict[str, int] = {}
        pods.add_handler(self._on_pod)
        claims.add_handler(self._on_claim)
        self.slices.add_handler(self._on_slice)
        if self.rules is not None:
            self.rules.add_handler(self._on_rule)

    @property
    def informers(self) -> list[Informer]:
        """The informers this adds (the pod and claim informers belong to the claim-controller)."""
        return [self.slices] if self.rules is None else [self.slices, self.rules]

    # -- reconcile -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Done | RequeueAfter:
        if key.startswith(EVICT_PREFIX):
            return await self.sync_pod(key.removeprefix(EVICT_PREFIX))
        if key.startswith(RULE_PREFIX):
            return await self.sync_rule(key.removeprefix(RULE_PREFIX))
        log.error("unknown key dropped", key=key)
        return Done()

    def view(self, rules: Iterable[Obj] | None = None) -> TaintView:
        """Device taints from the caches (with ``rules`` instead of the cached rules, if given)."""
        if rules is None:
            rules = self.rules.list() if self.rules is not None else []
        return TaintView(lambda driver, pool: self.slices.by_index(BY_POOL, f"{driver}/{pool}"), rules)

    def eviction_of(self, pod: Obj, view: TaintView) -> Eviction | None:
        namespace = pod["metadata"].get("namespace", "")
        return pod_eviction(pod, lambda name: self.claims.get(f"{namespace}/{name}"), view)

    async def sync_pod(self, key: str) -> Done | RequeueAfter:
        """Evict the pod when it is due (see the module docstring). Idempotent."""
        pod = self.pods.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            self.scheduled.pop(key, None)
            return Done()
        uid = pod["metadata"].get("uid", "")
        previous = self.scheduled.get(key)
        if previous is not None and previous[0] != uid:
            previous = None
        eviction = self.eviction_of(pod, self.view())
        if eviction is None:
            if previous is not None:
                del self.scheduled[key]
                log.info("pod eviction cancelled", pod=key)
                await self.recorder.event(pod, "Normal", EVICTION_REASON, "Cancelling deletion",
                                          action="Evicting")
            self.scheduled.pop(key, None)
            return Done()
        if previous is None or previous[1] != eviction:
            self.scheduled[key] = (uid, eviction)
            log.info("pod eviction scheduled", pod=key, at=_rfc3339(eviction.when),
                     reason=eviction.describe())
            for rule in eviction.rule_names():
                self.queue.add_after(RULE_PREFIX + rule, self.settings.rule_status_period)
        if uid in self.evicted:
            return Done()
        delay = eviction.when - self.clock()
        if delay > 0:
            return RequeueAfter(delay)
        await self._evict(key, pod, eviction)
        return Done()

    async def _evict(self, key: str, pod: Obj, eviction: Eviction) -> None:
        meta = pod["metadata"]
        namespace, name, uid = meta.get("namespace", ""), meta["name"], meta["uid"]
        try:
            live = await self.kube.get(PODS, name, namespace)
        except NotFound:
            return
        if live["metadata"].get("uid") != uid or live["metadata"].get("deletionTimestamp"):
            return  # replaced by a pod of the same name, or already being deleted
        await self.recorder.event(live, "Normal", EVICTION_REASON, "Marking for deletion",
                                  action="Evicting")
        try:
            await self._mark_disruption(live)
            await self.kube.delete(PODS, name, namespace, preconditions={"uid": uid})
        except NotFound:
            return
        except Exception:
            ERRORS.labels(operation="evict").inc()
            raise
        self.evicted.add(uid)
        self.scheduled.pop(key, None)
        latency = max(self.clock() - eviction.when, 0.0)
        PODS_EVICTED.inc()
        EVICTION_LATENCY.observe(latency)
        log.info("pod evicted", pod=key, latency=round(latency, 3), reason=eviction.describe())
        for reason in eviction.reasons:
            if reason.rule:
                self.evicted_by_rule[reason.rule_uid] = self.evicted_by_rule.get(reason.rule_uid, 0) + 1
                self.queue.add_after(RULE_PREFIX + reason.rule, self.settings.rule_status_period)

    async def _mark_disruption(self, pod: Obj) -> None:
        """The ``DisruptionTarget`` pod condition, unless it is already there (UID in the patch: a
        replaced pod of the same name is not written)."""
        for condition in (pod.get("status") or {}).get("conditions") or ():
            seen = tuple(condition.get(k) for k in ("type", "status", "reason", "message"))
            if seen == ("DisruptionTarget", "True", DISRUPTION_REASON, DISRUPTION_MESSAGE):
                return
        patch = {"metadata": {"uid": pod["metadata"]["uid"]}, "status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": DISRUPTION_REASON,
            "message": DISRUPTION_MESSAGE, "lastTransitionTime": _rfc3339(self.clock()),
        }]}}
        await self.kube.patch(PODS, pod["metadata"]["name"], patch, pod["metadata"].get("namespace"),
                              patch_type="strategic", subresource="status",
                              field_manager=self.settings.field_manager)

    async def sync_rule(self, name: str) -> Done | RequeueAfter:
        """Write the rule's ``EvictionInProgress`` condition if it changed and is due. Idempotent."""
        rule = self.rules.get(name) if self.rules is not None else None
        if rule is None:
            return Done()
        wait = wait_before_update(rule, self.clock(), self.settings.rule_status_period)
        if wait > 0:
            return RequeueAfter(wait)
        condition = rule_condition(rule, self.counts(rule))
        if not needs_write(rule, condition):
            return Done()
        condition["lastTransitionTime"] = _rfc3339(self.clock())
        body = {"apiVersion": DEVICE_TAINT_RULES.api_version, "kind": DEVICE_TAINT_RULES.kind,
                "metadata": {"name": name, "uid": rule["metadata"].get("uid")},
                "status": {"conditions": [condition]}}
        try:
            await self.kube.patch(DEVICE_TAINT_RULES, name, body, patch_type="apply", subresource="status",
                                  field_manager=self.settings.field_manager, force=True)
        except NotFound:
            return Done()
        except Exception:
            ERRORS.labels(operation="rule-status").inc()
            raise
        RULE_STATUS_WRITES.inc()
        log.info("device taint rule status written", rule=name, reason=condition["reason"],
                 condition_message=condition["message"])
        return Done()

    def counts(self, rule: Obj) -> Counts:
        """The numbers of the rule's condition, from the caches."""
        uid = rule["metadata"].get("uid", "")
        taint = (rule.get("spec") or {}).get("taint") or {}
        evicted = self.evicted_by_rule.get(uid, 0)
        if taint.get("effect") == NO_EXECUTE:
            view = self.view()
        elif taint.get("effect") == "None":  # what NoExecute would do: this rule alone, as upstream
            view = self.view([{**rule, "spec": {**rule["spec"], "taint": {**taint, "effect": NO_EXECUTE}}}])
        else:
            return Counts(evicted=evicted)
        pending, namespaces = 0, set()
        for pod in self.pods.list():
            if pod["metadata"].get("deletionTimestamp"):
                continue
            eviction = self.eviction_of(pod, view)
            if eviction is not None and any(r.rule_uid == uid for r in eviction.reasons):
                pending += 1
                namespaces.add(pod["metadata"].get("namespace", ""))
        counts = Counts(pending_pods=pending, pending_namespaces=len(namespaces), evicted=evicted)
        if taint.get("effect") == NO_EXECUTE:
            return counts
        return Counts(pending_pods=pending, pending_namespaces=len(namespaces), evicted=evicted,
                      slice_devices=self._published_selected(rule),
                      allocated_devices=sum(1 for c in self.claims.list() for r in claim_results(c)
                                            if rule_selects(rule, r.get("driver", ""), r.get("pool", ""),
                                                            r.get("device", ""))))

    def _published_selected(self, rule: Obj) -> int:
        newest: dict[str, int] = {}
        for s in self.slices.list():
            pool = _slice_pool(s)[0]
            generation = (s["spec"].get("pool") or {}).get("generation", 0)
            newest[pool] = max(newest.get(pool, generation), generation)
        count = 0
        for s in self.slices.list():
            spec = s.get("spec") or {}
            if (spec.get("pool") or {}).get("generation", 0) != newest[_slice_pool(s)[0]]:
                continue
            count += sum(1 for d in spec.get("devices") or ()
                         if rule_selects(rule, spec.get("driver", ""), spec["pool"].get("name", ""),
                                         d.get("name", "")))
        return count

    def resync(self) -> None:
        """Queue every bound pod with claims and every rule (the eviction's work just moved here)."""
        for pod in self.pods.list():
            spec = pod.get("spec") or {}
            if spec.get("resourceClaims") and spec.get("nodeName"):
                self.queue.add(EVICT_PREFIX + key_of(pod))
        for rule in self.rules.list() if self.rules is not None else ():
            self.queue.add(RULE_PREFIX + rule["metadata"]["name"])

    # -- event handlers: enqueue only ------------------------------------------------------------

    def _quiet(self) -> bool:
        """No NoExecute taint anywhere and no eviction pending: a pod or claim change evicts nothing."""
        return not (self.tainted_slices or self.no_execute_rules or self.scheduled)

    def _enqueue_reserved(self, claim: Obj | None) -> None:
        if claim is None:
            return
        namespace = claim["metadata"].get("namespace", "")
        for consumer in (claim.get("status") or {}).get("reservedFor") or ():
            if consumer.get("resource") == "pods" and not consumer.get("apiGroup"):
                self.queue.add(f"{EVICT_PREFIX}{namespace}/{consumer.get('name', '')}")

    def _on_pod(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        if self._quiet():
            return
        pod = new if new is not None else old
        spec = (pod or {}).get("spec") or {}
        if pod is not None and spec.get("resourceClaims") and (event == "delete" or spec.get("nodeName")):
            self.queue.add(EVICT_PREFIX + key_of(pod))

    def _on_claim(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        if self._quiet():
            return
        for claim in (old, new):
            if claim is not None and (claim.get("status") or {}).get("allocation"):
                self._enqueue_reserved(claim)

    def _on_slice(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        s = new if new is not None else old
        if s is None:
            return
        if _has_no_execute(new):
            self.tainted_slices.add(key_of(s))
        else:
            self.tainted_slices.discard(key_of(s))
        pool = _slice_pool(s)[0]
        if not (_has_no_execute(old) or _has_no_execute(new)
                or any(_has_no_execute(other) for other in self.slices.by_index(BY_POOL, pool))):
            return
        for claim in self.claims.by_index(BY_POOL, pool):
            self._enqueue_reserved(claim)

    def _on_rule(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        rule = new if new is not None else old
        if rule is not None:
            taint = (rule.get("spec") or {}).get("taint") or {}
            if new is not None and taint.get("effect") == NO_EXECUTE:
                self.no_execute_rules.add(key_of(rule))
            else:
                self.no_execute_rules.discard(key_of(rule))
        if event == "delete" and old is not None:
            self.evicted_by_rule.pop(old["metadata"].get("uid", ""), None)
        elif new is not None and (old is None or old.get("spec") != new.get("spec")
                                  or old["metadata"].get("uid") != new["metadata"].get("uid")):
            self.queue.add(RULE_PREFIX + new["metadata"]["name"])
        else:
            return  # a status-only update (often our own write)
        rules = [r for r in (old, new) if r is not None]
        for claim in self.claims.list():
            if any(rule_selects(r, d.get("driver", ""), d.get("pool", ""), d.get("device", ""))
                   for r in rules for d in claim_results(claim)):
                self._enqueue_reserved(claim)
