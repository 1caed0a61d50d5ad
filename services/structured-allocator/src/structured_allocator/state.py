"""Informers and indexes: everything a scheduling decision reads, kept current by watches.

* pods not bound yet (``spec.nodeName=``; one scheduler name also filters ``spec.schedulerName``),
  indexed by the claims they reference (``byClaim``: ``namespace/claim``);
* every non-terminal pod bound to a node, whoever scheduled it, in all namespaces, cut down to its
  node, requests and host ports (:func:`slim_bound_pod`, about 1 KB a pod by tracemalloc, against
  2.5 KB for even a minimal full pod object) and summed per node in
  :class:`~.nodefit.NodeUsage` (node fit: pod count, resource requests, ports);
* ResourceClaims, fed into the :class:`~.assume.AssumeCache`;
* ResourceSlices, fed into the core's :class:`~.core.SliceIndex` (per node + shared, incremental) with
  the taints of matching DeviceTaintRules patched in (:mod:`.core.taint_rules`; a rule change re-indexes
  the slices of the pools it can touch, before and after the change);
* free devices per node (:mod:`.device_counts`), updated by the slice index and the assume cache's
  set of devices in use as they change;
* DeviceClasses and Nodes (node names kept sorted for a stable, rotating search order);
* PodGroups (``scheduling.k8s.io/v1beta1``, only with GenericWorkload: the pod-group cycles of
  :mod:`.gang_attempts`, and with DRAWorkloadResourceClaims which of a member pod's claims bind to its
  group, :func:`draflow_runtime.podgroups.bind_to`); pending and bound pods are indexed by their
  PodGroup (``byPodGroup``: ``namespace/podgroup``).

Handlers only update indexes and tell the :class:`Listener` what changed; the listener enqueues keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from draflow_runtime.dra import claim_names, pod_group_name
from draflow_runtime.informer import Informer, key_of
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    NODES,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)

from .assume import AssumeCache
from .core.taint_rules import apply_taint_rules, rule_touches_pool
from .device_counts import counting_slices
from .extres import EXTENDED_BY_POD, extended_claim_owner
from .nodefit import NodeUsage, PodUsage, pod_demand

__all__ = ["BOUND_PODS_SELECTOR", "ClusterState", "Listener", "slim_bound_pod"]

# kube-scheduler's own pod informer leaves terminal pods out the same way.
BOUND_PODS_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class Listener(Protocol):
    def pod_changed(self, key: str, pod: Mapping[str, Any] | None) -> None: ...
    def claim_changed(self, key: str, freed: bool) -> None: ...
    def cluster_changed(self, what: str) -> None: ...


def _claims_of_pod(pod: dict[str, Any]) -> list[str]:
    ns = pod["metadata"].get("namespace", "")
    return [f"{ns}/{claim}" for claim in claim_names(pod)]


def _pod_group_of_pod(pod: dict[str, Any]) -> list[str]:
    group = pod_group_name(pod)
    return [f"{pod['metadata'].get('namespace', '')}/{group}"] if group else []


def _scheduling_view(pod: Mapping[str, Any] | None) -> Any:
    """What a pod update must change to be worth a new attempt (not our own condition writes)."""
    if pod is None:
        return None
    meta = pod.get("metadata") or {}
    return (
        pod.get("spec"),
        (pod.get("status") or {}).get("resourceClaimStatuses"),
        meta.get("deletionTimestamp"),
        meta.get("labels"),
    )


def slim_bound_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """Informer transform: what node fit needs of a bound pod (its demand is computed once here)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    slim_spec = {"nodeName": spec.get("nodeName")}
    if spec.get("schedulingGroup"):  # a member of a PodGroup: counts as scheduled for its group
        slim_spec["schedulingGroup"] = spec["schedulingGroup"]
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")},
        "spec": slim_spec,
        "usage": PodUsage((pod.get("spec") or {}).get("nodeName") or "", pod_demand(pod, use_status=True)),
    }


class ClusterState:
    """The informers of one leadership term and the indexes built from them."""

    def __init__(
        self,
        kube: KubeClient,
        scheduler_names: frozenset[str],
        listener: Listener,
        *,
        namespace: str | None = None,
        taint_rules: bool = True,
        pod_groups: bool = False,
    ) -> None:
        self.scheduler_names = scheduler_names
        self.namespace = namespace  # pods and claims of this namespace only; None: all
        self.listener = listener
        self.assume = AssumeCache()
        # Free devices per node, kept current by the slice index and the assume cache's device set.
        self.slices = counting_slices(self.assume.state)
        self.device_counts = self.slices.counts
        selector = "spec.nodeName="
        if len(scheduler_names) == 1:
            selector += ",spec.schedulerName=" + next(iter(scheduler_names))
        self.pods = Informer(kube, PODS, namespace, field_selector=selector,
                             indexers={"byClaim": _claims_of_pod, "byPodGroup": _pod_group_of_pod},
                             name="pending-pods")
        # Node fit counts every pod on a node, in every namespace, whoever scheduled it.
        self.usage = NodeUsage()
        self.bound_pods = Informer(kube, PODS, None, field_selector=BOUND_PODS_SELECTOR,
                                   transform=slim_bound_pod, indexers={"byPodGroup": _pod_group_of_pod},
                                   name="bound-pods")
        self.claims = Informer(kube, RESOURCE_CLAIMS, namespace, name="claims",
                               indexers={EXTENDED_BY_POD: extended_claim_owner})
        self.slice_informer = Informer(kube, RESOURCE_SLICES, name="slices")
        self.classes = Informer(kube, DEVICE_CLASSES, name="deviceclasses")
        self.nodes = Informer(kube, NODES, name="nodes")
        self.rules = Informer(kube, DEVICE_TAINT_RULES, name="devicetaintrules") if taint_rules else None
        self.pod_groups = Informer(kube, POD_GROUPS, namespace, name="podgroups") if pod_groups else None
        self._node_order: list[str] | None = None
        self._classes_by_name: dict[str, dict[str, Any]] | None = None  # until a class changes
        self.pods.add_handler(self._on_pod)
        self.bound_pods.add_handler(self._on_bound_pod)
        self.claims.add_handler(self._on_claim)
        self.slice_informer.add_handler(self._on_slice)
        self.classes.add_handler(self._on_class)
        self.nodes.add_handler(self._on_node)
        if self.rules is not None:
            self.rules.add_handler(self._on_rule)
        if self.pod_groups is not None:
            self.pod_groups.add_handler(self._on_pod_group)

    @property
    def informers(self) -> list[Informer]:
        rules = [self.rules] if self.rules is not None else []
        groups = [self.pod_groups] if self.pod_groups is not None else []
        return [self.classes, self.nodes, *rules, *groups, self.slice_informer, self.claims, self.bound_pods,
                self.pods]

    async def start(self) -> None:
        """Start every informer and wait until all are synced (claims before pods: the assume cache
        is complete before the first decision)."""
        for inf in self.informers:
            await inf.start()
        for inf in self.informers:
            await inf.wait_synced()

    async def stop(self) -> None:
        for inf in self.informers:
            await inf.stop()

    @property
    def synced(self) -> bool:
        return all(inf.synced for inf in self.informers)

    # -- reads -------------------------------------------------------------------------------------

    def node_names(self) -> list[str]:
        if self._node_order is None:
            self._node_order = sorted(self.nodes.keys())
        return self._node_order

    def classes_by_name(self) -> dict[str, dict[str, Any]]:
        """The cached DeviceClasses by name (one dict until a class changes; never edit it)."""
        if self._classes_by_name is None:
            self._classes_by_name = {c["metadata"]["name"]: c for c in self.classes.list()}
        return self._classes_by_name

    def pod_group(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The cached PodGroup (None: unknown, or PodGroups are not watched)."""
        return self.pod_groups.get(f"{namespace}/{name}") if self.pod_groups is not None else None

    def pod_group_members(self, namespace: str,
                          name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(pending, bound) pods of PodGroup ``namespace/name`` (bound: slimmed, non-terminal)."""
        key = f"{namespace}/{name}"
        return self.pods.by_index("byPodGroup", key), self.bound_pods.by_index("byPodGroup", key)

    def pods_using_claim(self, claim_key: str) -> list[dict[str, Any]]:
        return self.pods.by_index("byClaim", claim_key)

    def ours(self, pod: Mapping[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return spec.get("schedulerName", "default-scheduler") in self.scheduler_names and not spec.get(
            "nodeName"
        )

    # -- handlers ------------------------------------------------------------------------------------

    def _on_pod(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        if event == "update" and _scheduling_view(old) == _scheduling_view(new):
            return
        if new is not None and not self.ours(new):
            return
        self.listener.pod_changed(key_of(pod), new)

    def _on_bound_pod(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if old is not None and (new is None or old["metadata"]["uid"] != new["metadata"]["uid"]):
            self.usage.observe(str(old["metadata"]["uid"]), None)
        if new is not None:
            self.usage.observe(str(new["metadata"]["uid"]), new["usage"])
        if new is None or (old is not None and old["usage"] != new["usage"]):
            self.listener.cluster_changed("pod")  # room may have been freed on a node

    def _on_claim(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        claim = new if new is not None else old
        assert claim is not None
        freed = self.assume.observe_claim(new, uid=claim["metadata"].get("uid", ""))
        self.listener.claim_changed(key_of(claim), freed)

    def _on_slice(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            assert old is not None
            self.slices.remove(old["metadata"]["name"])
        else:
            self.slices.upsert(apply_taint_rules(new, self._rule_list()))
        self.listener.cluster_changed("slice")

    def _rule_list(self) -> list[dict[str, Any]]:
        return self.rules.list() if self.rules is not None else []

    def _on_rule(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Re-index every slice of a pool the rule could select, before or after the change. A status-only
        update (the claim-controller's eviction reports progress there) changes no taint: nothing to do."""
        if old is not None and new is not None and old.get("spec") == new.get("spec"):
            return
        changed = [r for r in (old, new) if r is not None]
        rules = self._rule_list()
        for raw in self.slice_informer.list():
            spec = raw.get("spec") or {}
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            if any(rule_touches_pool(r, driver, pool) for r in changed):
                self.slices.upsert(apply_taint_rules(raw, rules))
        self.listener.cluster_changed("devicetaintrule")

    def _on_pod_group(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if event == "update" and old is not None and new is not None and old.get("spec") == new.get("spec"):
            return  # a status write (the claim-controller's resourceClaimStatuses) binds no claim
        self.listener.cluster_changed("podgroup")

    def _on_class(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self._classes_by_name = None
        self.listener.cluster_changed("class")

    def _on_node(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if event != "update":
            self._node_order = None
        if new is None and old is not None:
            self.usage.forget_node(old["metadata"]["name"])
        self.listener.cluster_changed("node")
