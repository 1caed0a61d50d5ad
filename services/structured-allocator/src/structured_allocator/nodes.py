"""Node filters: can this pod run on this node at all, before devices are looked at?

Mirrors the kube-scheduler filter plugins a secondary scheduler needs: NodeUnschedulable, node readiness
(draflow's own: kube-scheduler leaves that to the ``not-ready`` taint), TaintToleration
(NoSchedule/NoExecute; the alpha ``Lt``/``Gt`` toleration operators are off, as in v1.37), NodeAffinity
(``nodeSelector`` and required ``nodeAffinity``), plus the node selectors of claims that are already
allocated; NodeResourcesFit and NodePorts are in :mod:`.nodefit`. Each filter returns ``None`` (passes)
or a short reason that is counted per reason in explanations, e.g.
``3 node(s) had untolerated taint {gpu: NoSchedule}``.

:func:`unsupported_reason` names what a pod needs that draflow does not implement (inter-pod
(anti-)affinity, hard topology spread, volumes): such a pod is reported unschedulable with that reason
instead of being bound without the check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .core.pools import node_selector_matches
from .core.run_state import OPTIONAL_NODE_OPERATIONS
from .core.selection import tolerates
from .extres import fractional_device_count

__all__ = ["claim_selector_reason", "node_filter_reason", "node_name", "tolerates", "unsupported_reason"]

_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE = {"key": _UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}  # the taint spec.unschedulable means


def node_name(node: Mapping[str, Any]) -> str:
    return (node.get("metadata") or {}).get("name", "")


def _ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _untolerated(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> str | None:
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return f"had untolerated taint {{{taint.get('key')}: {taint.get('effect')}}}"
    return None


# node name -> (the node object, its resourceVersion, the reason for a pod without tolerations, node
# selector or affinity): such a pod's filters depend on the node alone. Informer objects are replaced,
# never changed, on update (a new object, a new resourceVersion); nodes without one are not memoised.
_PLAIN: dict[str, tuple[Mapping[str, Any], str, str | None]] = {}
_PLAIN_MAX = 65536  # names of deleted nodes are dropped all at once past this


def node_filter_reason(node: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
    """Why ``pod`` cannot run on ``node`` regardless of devices, or None.

    Runs for every node a decision visits (up to all of them when devices are scarce): it only reads,
    and skips the label and affinity look-ups a pod without them does not need; for a pod with none of
    tolerations, ``nodeSelector`` and ``affinity`` the answer is the node's own, memoised per node
    object (``_PLAIN``)."""
    spec = pod.get("spec") or {}
    if spec.get("tolerations") or spec.get("nodeSelector") or spec.get("affinity"):
        return _filter_reason(node, spec)
    meta = node.get("metadata") or {}
    name, version = meta.get("name", ""), meta.get("resourceVersion")
    memo = _PLAIN.get(name)
    if memo is not None and memo[0] is node and memo[1] == version:
        return memo[2]
    reason = _filter_reason(node, spec)
    if version:
        if len(_PLAIN) >= _PLAIN_MAX:
            _PLAIN.clear()
        _PLAIN[name] = (node, version, reason)
    return reason


def _filter_reason(node: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    tolerations = spec.get("tolerations") or ()
    node_spec = node.get("spec") or {}
    if node_spec.get("unschedulable") and not any(tolerates(t, _UNSCHEDULABLE) for t in tolerations):
        return "were unschedulable"
    if not _ready(node):
        return "were not ready"
    taints = node_spec.get("taints")
    if taints:
        reason = _untolerated(taints, tolerations)
        if reason:
            return reason
    selector = spec.get("nodeSelector")
    if selector:
        labels = (node.get("metadata") or {}).get("labels") or {}
        for key, value in selector.items():
            if labels.get(key) != value:
                return "didn't match Pod's node selector"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        try:
            if not node_selector_matches(node, required):
                return "didn't match Pod's node affinity"
        except ValueError:
            return "didn't match Pod's node affinity (unsupported selector)"
    return None


def claim_selector_reason(node: Mapping[str, Any], allocations: Iterable[Mapping[str, Any]]) -> str | None:
    """Why already-allocated claims rule ``node`` out, or None: their ``nodeSelector``, or (as
    kube-scheduler's DynamicResources Filter, whatever the DRAOptionalNodeOperations gate says) a result
    with ``skipNodeOperations`` on a node that does not declare DRAOptionalNodeOperations."""
    for allocation in allocations:
        selector = allocation.get("nodeSelector")
        if selector is not None:
            try:
                ok = node_selector_matches(node, selector)
            except ValueError:
                ok = False
            if not ok:
                return "cannot use the node of an already allocated claim"
        if _skips_node_operations(allocation) and OPTIONAL_NODE_OPERATIONS not in _declared(node):
            return ("an already allocated claim skips node operations, and the node does not declare "
                    "DRAOptionalNodeOperations")
    return None


def _skips_node_operations(allocation: Mapping[str, Any]) -> bool:
    results = (allocation.get("devices") or {}).get("results") or ()
    return any(r.get("skipNodeOperations") for r in results)


def _declared(node: Mapping[str, Any]) -> list[str]:
    return (node.get("status") or {}).get("declaredFeatures") or []


def unsupported_reason(pod: Mapping[str, Any]) -> str | None:
    """Why draflow cannot schedule ``pod`` correctly, or None: it would need a kube-scheduler filter that
    draflow does not implement (InterPodAffinity, PodTopologySpread with DoNotSchedule, the volume
    plugins). Preferred affinity and ``ScheduleAnyway`` spread only score in kube-scheduler and are
    ignored here. Extended resources backed by DRA are served (:mod:`.extres`), but not a device count
    that is not a whole number (:func:`.extres.fractional_device_count`)."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    for kind, what in (("podAffinity", "inter-pod affinity"), ("podAntiAffinity", "inter-pod anti-affinity")):
        if (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
            return (f"draflow does not support required {what} "
                    f"(spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution); "
                    "schedule this pod with kube-scheduler")
    for constraint in spec.get("topologySpreadConstraints") or []:
        if constraint.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            return ("draflow does not support topologySpreadConstraints with whenUnsatisfiable: "
                    "DoNotSchedule; schedule this pod with kube-scheduler")
    for volume in spec.get("volumes") or []:
        if volume.get("persistentVolumeClaim") is not None or volume.get("ephemeral") is not None:
            return (f'draflow does not bind volumes (volume "{volume.get("name", "")}" uses a '
                    "PersistentVolumeClaim); schedule this pod with kube-scheduler")
    return fractional_device_count(pod)
