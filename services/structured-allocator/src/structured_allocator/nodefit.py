"""Node fit: kube-scheduler's NodeResourcesFit and NodePorts checks as pure arithmetic (no I/O).

* :func:`pod_demand` — what a pod asks of its node: the resource requests upstream's
  ``resource.PodRequests`` computes (``k8s.io/component-helpers/resource``) and its host ports:

  - containers summed; init containers one at a time, each on top of the sidecars (init containers
    with ``restartPolicy: Always``) started before it; sidecars also count towards the running pod:
    ``max(sum(containers) + sum(sidecars), max over init containers(init + sidecars before it))``;
  - pod-level ``spec.resources.requests`` (cpu, memory, ``hugepages-*``) replace the container sum for
    those names (PodLevelResources);
  - ``spec.overhead`` added;
  - for pods already on a node (``use_status``, in-place resize): the largest of three such totals,
    from the spec, from the containers' ``allocatedResources`` and from their actuated
    ``status.resources.requests`` (not the spec one while the resize is ``Infeasible``), plus what
    their ``status.nodeAllocatableResourceClaimStatuses`` say the pod's devices take
    (DRANodeAllocatableResources, :mod:`.nodealloc`);
  - cpu in millicores rounded up, everything else in units rounded up (``MilliValue``/``Value``);
    only cpu, memory, ephemeral-storage and scalar resources (extended ``vendor/name``, ``hugepages-*``,
    ``*kubernetes.io/*``, ``attachable-volumes-*``) count.
* :class:`NodeUsage` — what the pods on each node use, updated incrementally from the informer of bound
  pods (``observe``) plus the pods this allocator has decided but the informer does not show yet
  (``assume``/``forget``: in-flight bindings count, as kube-scheduler's assumed pods do).
* :func:`fit_reasons` — why a pod does not fit a node, with kube-scheduler's reasons: ``Too many pods``
  (``status.allocatable.pods``), ``Insufficient cpu`` / ``memory`` / ``ephemeral-storage`` /
  ``<extended resource>`` (rendered as upstream: ``3 Too many pods``), and ``didn't have free ports for
  the requested pod ports`` (rendered ``1 node(s) didn't have ...``, like the other node filters).

Terminal pods (Succeeded/Failed) hold nothing: the informer does not list them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .core.quantity import QuantityError, parse_quantity
from .extres import delegated_to_dra
from .nodealloc import STATUS_FIELD, dra_requests

__all__ = [
    "PORTS_IN_USE",
    "TOO_MANY_PODS",
    "Allocatable",
    "HostPort",
    "NodeTotals",
    "NodeUsage",
    "PodDemand",
    "PodUsage",
    "fit_reasons",
    "host_ports",
    "is_scalar_resource",
    "node_allocatable",
    "pod_demand",
    "pod_requests",
    "units",
]

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
TOO_MANY_PODS = "Too many pods"
PORTS_IN_USE = "didn't have free ports for the requested pod ports"  # rendered "<n> node(s) didn't ..."
_POD_LEVEL = (CPU, MEMORY)
_HUGEPAGES = "hugepages-"
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_QUALIFIED = re.compile(
    rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")

ResourceList = dict[str, Fraction]
HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort) with upstream's defaults filled in


# -- resource names (k8s.io/kubernetes pkg/apis/core/v1/helper) ---------------------------------------


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    if _is_native(name) or name.startswith("requests."):
        return False
    quota_name = "requests." + name
    prefix, _, last = quota_name.rpartition("/")
    return len(last) <= 63 and len(prefix) <= 253 and _QUALIFIED.match(quota_name) is not None


def is_scalar_resource(name: str) -> bool:
    """Upstream ``IsScalarResourceName``: extended, hugepages, ``*kubernetes.io/*`` or attachable volumes."""
    return (_is_extended(name) or name.startswith(_HUGEPAGES) or "kubernetes.io/" in name
            or name.startswith("attachable-volumes-"))


def _counted(name: str) -> bool:
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name)


def units(name: str, value: Fraction) -> int:
    """``MilliValue()`` for cpu, ``Value()`` for everything else (both round up)."""
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


_units = units


# -- resource lists ----------------------------------------------------------------------------------


def _parse_list(raw: Mapping[str, Any] | None) -> ResourceList:
    out: ResourceList = {}
    for name, text in (raw or {}).items():
        try:
            out[str(name)] = parse_quantity(str(text)).value
        except QuantityError:
            continue  # the API server validates quantities; never fail a decision on a stored oddity
    return out


def _add(into: ResourceList, other: ResourceList) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max(into: ResourceList, other: ResourceList) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


Pick = Callable[[Mapping[str, Any], "Mapping[str, Any] | None"], ResourceList]


def _spec_requests(container: Mapping[str, Any], status: Mapping[str, Any] | None) -> ResourceList:
    return _parse_list((container.get("resources") or {}).get("requests"))


def _status_picks(infeasible: bool) -> tuple[Pick, Pick]:
    """Upstream ``containerAllocatedRequests`` and ``containerActuatedRequests``."""

    def fallback(container: Mapping[str, Any]) -> ResourceList:
        return {} if infeasible else _spec_requests(container, None)

    def allocated(container: Mapping[str, Any], status: Mapping[str, Any] | None) -> ResourceList:
        if status is not None and status.get("allocatedResources") is not None:
            return _parse_list(status["allocatedResources"])
        return fallback(container)

    def actuated(container: Mapping[str, Any], status: Mapping[str, Any] | None) -> ResourceList:
        if status is not None and ((status.get("resources") or {}).get("requests")) is not None:
            return _parse_list(status["resources"]["requests"])
        return allocated(container, status)

    return allocated, actuated


def _resize_infeasible(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodResizePending":
            return bool(cond.get("reason") == "Infeasible")
    return False


def _aggregate(spec: Mapping[str, Any], statuses: Mapping[str, Mapping[str, Any]],
               pick: Pick) -> ResourceList:
    """Containers summed; init containers one at a time on top of the sidecars started before them."""

    def requests_of(c: Mapping[str, Any]) -> ResourceList:
        return pick(c, statuses.get(c.get("name", "")))

    total: ResourceList = {}
    for container in spec.get("containers") or []:
        _add(total, requests_of(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in spec.get("initContainers") or []:
        reqs = requests_of(container)
        if container.get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            _max(init_peak, sidecars)
        else:
            running = dict(reqs)
            _add(running, sidecars)
            _max(init_peak, running)
    _max(total, init_peak)
    return total


def pod_requests(pod: Mapping[str, Any], *, use_status: bool = False) -> ResourceList:
    """Upstream ``resource.PodRequests`` (exact values; see the module docstring)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if not use_status:
        total = _aggregate(spec, {}, _spec_requests)
    else:
        statuses: dict[str, Mapping[str, Any]] = {}
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            statuses.setdefault(cs.get("name", ""), cs)
        infeasible = _resize_infeasible(pod)
        allocated, actuated = _status_picks(infeasible)
        total = {} if infeasible else _aggregate(spec, statuses, _spec_requests)
        _max(total, _aggregate(spec, statuses, actuated))
        _max(total, _aggregate(spec, statuses, allocated))
    if use_status:  # DRANodeAllocatableResources: what the pod's claims' devices take (nodealloc)
        _add(total, dra_requests(status.get(STATUS_FIELD)))
    pod_level = _parse_list((spec.get("resources") or {}).get("requests"))
    for name, value in pod_level.items():  # pod-level requests hold the containers' and the DRA share
        if name in _POD_LEVEL or name.startswith(_HUGEPAGES):
            total[name] = value
    _add(total, _parse_list(spec.get("overhead")))
    return total


def host_ports(pod: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Upstream ``GetHostPorts``: host ports of sidecar init containers and containers."""
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    containers += list(spec.get("containers") or [])
    out: list[HostPort] = []
    for c in containers:
        for p in c.get("ports") or []:
            port = int(p.get("hostPort") or 0)
            if port > 0:
                out.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", port))
    return tuple(out)


@dataclass(frozen=True)
class PodDemand:
    """What one pod takes from its node besides the pod slot: integer requests and host ports."""

    requests: Mapping[str, int] = field(default_factory=dict)
    ports: tuple[HostPort, ...] = ()


def pod_demand(pod: Mapping[str, Any], *, use_status: bool = False) -> PodDemand:
    reqs = {name: _units(name, value) for name, value in pod_requests(pod, use_status=use_status).items()
            if _counted(name)}
    return PodDemand({k: v for k, v in reqs.items() if v}, host_ports(pod))


# -- nodes ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Allocatable:
    pods: int
    resources: Mapping[str, int]


def node_allocatable(node: Mapping[str, Any]) -> Allocatable:
    """``status.allocatable`` in scheduler units; a missing resource is 0 (a node without ``pods``
    takes no pod, as upstream)."""
    parsed = _parse_list((node.get("status") or {}).get("allocatable"))
    pods = math.ceil(parsed.pop(PODS, Fraction(0)))
    return Allocatable(pods, {name: _units(name, v) for name, v in parsed.items() if _counted(name)})


@dataclass
class NodeTotals:
    """Sum over the pods of one node."""

    pods: int = 0
    requested: Counter[str] = field(default_factory=Counter)
    ports: Counter[HostPort] = field(default_factory=Counter)

    def add(self, demand: PodDemand, sign: int) -> None:
        self.pods += sign
        for name, value in demand.requests.items():
            self.requested[name] += sign * value
        for port in demand.ports:
            self.ports[port] += sign
            if self.ports[port] <= 0:
                del self.ports[port]


_NO_PODS = NodeTotals()  # what NodeUsage.totals answers for a node without pods; never mutated


def _port_conflict(want: Iterable[HostPort], used: Counter[HostPort]) -> bool:
    """Upstream ``HostPortInfo.CheckConflict``: 0.0.0.0 conflicts with every IP of the same
    (protocol, port), a specific IP with itself and 0.0.0.0."""
    for ip, proto, port in want:
        for uip, uproto, uport in used:
            if uproto == proto and uport == port and (ip == "0.0.0.0" or uip in (ip, "0.0.0.0")):
                return True
    return False


def _reason_order(name: str) -> tuple[bool, str]:
    """cpu, memory, ephemeral-storage first (as upstream reports them), then by name."""
    return name not in (CPU, MEMORY, EPHEMERAL_STORAGE), name


def fit_reasons(allocatable: Allocatable, used: NodeTotals, demand: PodDemand,
                dra_names: Container[str] = ()) -> list[str]:
    """Every reason ``demand`` does not fit a node with ``allocatable`` of which ``used`` is taken
    (empty: it fits). Upstream ``fitsRequest`` + NodePorts. ``dra_names``: extended resources a
    DeviceClass maps; the node serves them through DRA unless it advertises them (upstream
    ``shouldDelegateResourceToDRA``), then they are the allocator's to count, not node fit's."""
    reasons: list[str] = []
    if used.pods + 1 > allocatable.pods:
        reasons.append(TOO_MANY_PODS)
    requests = demand.requests
    for name in sorted(requests, key=_reason_order) if requests else ():
        want = requests[name]
        if name in dra_names and delegated_to_dra(name, allocatable.resources):
            continue
        if want > 0 and want > allocatable.resources.get(name, 0) - used.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    if demand.ports and _port_conflict(demand.ports, used.ports):
        reasons.append(PORTS_IN_USE)
    return reasons


@dataclass(frozen=True)
class PodUsage:
    node: str
    demand: PodDemand


class NodeUsage:
    """Per node totals of the bound pods (from the informer) and of the pods assumed on a node (decided
    by this allocator, binding in flight). A pod counts once: the informer's view replaces an
    assumption as soon as it shows the pod. Not thread-safe: event loop only."""

    def __init__(self) -> None:
        self._bound: dict[str, PodUsage] = {}  # pod uid -> usage (informer)
        self._assumed: dict[str, PodUsage] = {}  # pod uid -> usage (in flight)
        self._nodes: dict[str, NodeTotals] = {}
        self._allocatable: dict[str, tuple[Any, Allocatable]] = {}  # node -> (resourceVersion, parsed)

    def _apply(self, usage: PodUsage | None, sign: int) -> None:
        if usage is None:
            return
        totals = self._nodes.setdefault(usage.node, NodeTotals())
        totals.add(usage.demand, sign)
        if totals.pods <= 0 and not totals.ports:
            del self._nodes[usage.node]

    def observe(self, uid: str, usage: PodUsage | None) -> None:
        """The informer shows pod ``uid`` bound (``usage``) or gone/terminal (None)."""
        self._apply(self._assumed.pop(uid, None), -1)
        self._apply(self._bound.pop(uid, None), -1)
        if usage is not None:
            self._bound[uid] = usage
            self._apply(usage, +1)

    def assume(self, uid: str, usage: PodUsage) -> None:
        """Pod ``uid`` is being bound to ``usage.node`` by this allocator."""
        if uid in self._bound:
            return
        self._apply(self._assumed.pop(uid, None), -1)
        self._assumed[uid] = usage
        self._apply(usage, +1)

    def forget(self, uid: str) -> None:
        """The binding of an assumed pod failed."""
        self._apply(self._assumed.pop(uid, None), -1)

    @property
    def assumed(self) -> int:
        return len(self._assumed)

    def totals(self, node: str) -> NodeTotals:
        """The node's totals (read only: a node without pods shares one empty instance)."""
        return self._nodes.get(node) or _NO_PODS

    def allocatable(self, node: Mapping[str, Any]) -> Allocatable:
        meta = node.get("metadata") or {}
        name, rv = meta.get("name", ""), meta.get("resourceVersion")
        cached = self._allocatable.get(name)
        if cached is not None and cached[0] == rv and rv is not None:
            return cached[1]
        parsed = node_allocatable(node)
        self._allocatable[name] = (rv, parsed)
        return parsed

    def forget_node(self, name: str) -> None:
        self._allocatable.pop(name, None)

    def fit_reasons(self, node: Mapping[str, Any], demand: PodDemand,
                    dra_names: Container[str] = ()) -> list[str]:
        name = (node.get("metadata") or {}).get("name", "")
        return fit_reasons(self.allocatable(node), self.totals(name), demand, dra_names)
