"""Node fit arithmetic: pod requests as upstream's resource.PodRequests, NodeResourcesFit and NodePorts
reasons, and the per-node totals of bound + assumed pods."""

from __future__ import annotations

from typing import Any

import pytest

from structured_allocator.nodefit import (
    PORTS_IN_USE,
    TOO_MANY_PODS,
    NodeTotals,
    NodeUsage,
    PodDemand,
    PodUsage,
    fit_reasons,
    is_scalar_resource,
    node_allocatable,
    pod_demand,
)
from structured_allocator.nodes import unsupported_reason


def ctr(name: str = "c", restart: str | None = None, ports: list[dict[str, Any]] | None = None,
        **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": {
        k.replace("_", "-") if "/" not in k else k: v for k, v in requests.items()}}}
    if restart:
        c["restartPolicy"] = restart
    if ports:
        c["ports"] = ports
    return c


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
        **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": containers, "initContainers": init or [], **spec}}


def node(name: str = "n", rv: str = "1", **allocatable: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv},
            "status": {"allocatable": {k.replace("_", "-") if "/" not in k else k: v
                                       for k, v in allocatable.items()}}}


@pytest.mark.parametrize(("p", "expected"), [
    pytest.param(pod([ctr(cpu="100m", memory="1Gi"), ctr("d", cpu="250m")]),
                 {"cpu": 350, "memory": 2**30}, id="containers-summed"),
    pytest.param(pod([ctr(cpu="100m")], [ctr("i1", cpu="2"), ctr("i2", cpu="500m")]),
                 {"cpu": 2000}, id="init-containers-max-not-sum"),
    pytest.param(pod([ctr(cpu="1")], [ctr("i", cpu="500m")]), {"cpu": 1000}, id="containers-above-init"),
    # sidecar 1 cpu runs with the containers (1 + 1) and under the later init container (1 + 3 = 4)
    pytest.param(pod([ctr(cpu="1")], [ctr("s", restart="Always", cpu="1"), ctr("i", cpu="3")]),
                 {"cpu": 4000}, id="sidecar-under-later-init-container"),
    pytest.param(pod([ctr(cpu="1")], [ctr("i", cpu="3"), ctr("s", restart="Always", cpu="1")]),
                 {"cpu": 3000}, id="init-container-before-sidecar"),
    pytest.param(pod([ctr(cpu="1")], [ctr("s", restart="Always", cpu="2")]), {"cpu": 3000},
                 id="sidecar-counts-with-containers"),
    pytest.param(pod([ctr(cpu="100m", memory="1Gi")], overhead={"cpu": "250m", "memory": "10Mi"}),
                 {"cpu": 350, "memory": 2**30 + 10 * 2**20}, id="overhead-added"),
    pytest.param(pod([ctr(cpu="100m", memory="1Gi", **{"example.com/gpu": "1"})],
                     resources={"requests": {"cpu": "2"}}),
                 {"cpu": 2000, "memory": 2**30, "example.com/gpu": 1},
                 id="pod-level-cpu-replaces-container-sum"),
    pytest.param(pod([ctr(cpu="0.0001")]), {"cpu": 1}, id="cpu-millis-round-up"),
    pytest.param(pod([ctr(memory="1.5")]), {"memory": 2}, id="memory-rounds-up"),
    pytest.param(pod([ctr(cpu="0")]), {}, id="zero-request-is-no-request"),
    pytest.param(pod([{"name": "c", "resources": {"requests": {"example.com/gpu": "2", "hugepages-2Mi":
                                                                 "4Mi", "nonsense": "3"}}}]),
                 {"example.com/gpu": 2, "hugepages-2Mi": 4 * 2**20},
                 id="scalars-kept-unknown-native-dropped"),
])
def test_pod_requests_follow_upstream(p: dict[str, Any], expected: dict[str, int]) -> None:
    assert dict(pod_demand(p).requests) == expected


def test_bound_pod_counts_the_larger_of_spec_and_resized_status() -> None:
    p = pod([ctr("a", cpu="1"), ctr("b", cpu="3")])
    p["status"] = {"containerStatuses": [
        {"name": "a", "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}},
        {"name": "b", "allocatedResources": {"cpu": "1"}, "resources": {"requests": {"cpu": "1"}}}]}
    # totals: spec 4, allocated 3, actuated 3 -> 4 (upstream takes the max of the totals)
    assert pod_demand(p, use_status=True).requests == {"cpu": 4000}
    p["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    assert pod_demand(p, use_status=True).requests == {"cpu": 3000}
    assert pod_demand(p).requests == {"cpu": 4000}  # a pod being scheduled: spec only


@pytest.mark.parametrize(("name", "scalar"), [
    ("example.com/gpu", True), ("hugepages-1Gi", True), ("kubernetes.io/batch", True),
    ("attachable-volumes-csi-x", True), ("cpu", False), ("pods", False), ("requests.example.com/x", False),
    ("example.com/bad name", False),
])
def test_scalar_resource_names(name: str, scalar: bool) -> None:
    assert is_scalar_resource(name) is scalar


def test_host_ports_of_containers_and_sidecars_only() -> None:
    p = pod([ctr(ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}])],
            [ctr("s", restart="Always", ports=[{"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                                                "hostIP": "10.0.0.1"}]),
             ctr("i", ports=[{"containerPort": 1, "hostPort": 9999}])])
    assert sorted(pod_demand(p).ports) == [("0.0.0.0", "TCP", 8080), ("10.0.0.1", "UDP", 53)]


ALLOC = node(pods="3", cpu="2", memory="4Gi", ephemeral_storage="10Gi", **{"example.com/gpu": "2"})


@pytest.mark.parametrize(("used", "demand", "expected"), [
    pytest.param(NodeTotals(pods=2), PodDemand(), [], id="last-pod-slot"),
    pytest.param(NodeTotals(pods=3), PodDemand(), [TOO_MANY_PODS], id="too-many-pods"),
    pytest.param(NodeTotals(pods=1, requested={"cpu": 1500}), PodDemand({"cpu": 500}), [],
                 id="cpu-exactly-fits"),
    pytest.param(NodeTotals(pods=1, requested={"cpu": 1500}), PodDemand({"cpu": 501}),
                 ["Insufficient cpu"], id="insufficient-cpu"),
    pytest.param(NodeTotals(pods=3, requested={"memory": 4 * 2**30}),
                 PodDemand({"memory": 1, "cpu": 1, "ephemeral-storage": 11 * 2**30}),
                 [TOO_MANY_PODS, "Insufficient ephemeral-storage", "Insufficient memory"],
                 id="every-reason-listed"),
    pytest.param(NodeTotals(), PodDemand({"example.com/gpu": 3}), ["Insufficient example.com/gpu"],
                 id="extended-resource"),
    pytest.param(NodeTotals(), PodDemand({"other.com/fpga": 1}), ["Insufficient other.com/fpga"],
                 id="extended-resource-the-node-lacks"),
])
def test_fit_reasons(used: NodeTotals, demand: PodDemand, expected: list[str]) -> None:
    assert sorted(fit_reasons(node_allocatable(ALLOC), used, demand)) == sorted(expected)


def test_node_without_allocatable_takes_no_pod() -> None:
    assert fit_reasons(node_allocatable({"metadata": {"name": "n"}}), NodeTotals(), PodDemand()) == [
        TOO_MANY_PODS]


@pytest.mark.parametrize(("want", "used", "conflict"), [
    (("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80), True),
    (("10.0.0.1", "TCP", 80), ("0.0.0.0", "TCP", 80), True),
    (("10.0.0.1", "TCP", 80), ("10.0.0.2", "TCP", 80), False),
    (("0.0.0.0", "UDP", 80), ("0.0.0.0", "TCP", 80), False),
    (("0.0.0.0", "TCP", 81), ("0.0.0.0", "TCP", 80), False),
])
def test_host_port_conflicts(want: tuple[str, str, int], used: tuple[str, str, int], conflict: bool) -> None:
    totals = NodeTotals()
    totals.add(PodDemand(ports=(used,)), +1)
    reasons = fit_reasons(node_allocatable(ALLOC), totals, PodDemand(ports=(want,)))
    assert (PORTS_IN_USE in reasons) is conflict


def test_usage_counts_bound_and_assumed_pods_once() -> None:
    usage = NodeUsage()
    n = node(pods="2", cpu="2")
    one_cpu = PodDemand({"cpu": 1000})
    usage.observe("a", PodUsage("n", one_cpu))  # placed by another scheduler
    usage.assume("b", PodUsage("n", one_cpu))  # ours, binding in flight
    assert usage.totals("n").pods == 2
    assert usage.fit_reasons(n, PodDemand()) == [TOO_MANY_PODS]
    usage.observe("b", PodUsage("n", one_cpu))  # the informer shows our binding: still counted once
    assert usage.totals("n").pods == 2 and usage.totals("n").requested["cpu"] == 2000
    assert usage.assumed == 0
    usage.assume("b", PodUsage("n", one_cpu))  # a late assumption of a pod already seen is ignored
    assert usage.totals("n").pods == 2
    usage.observe("a", None)  # finished (terminal pods leave the informer)
    assert usage.fit_reasons(n, one_cpu) == []
    usage.assume("c", PodUsage("n", one_cpu))
    usage.forget("c")  # its binding failed
    usage.observe("b", None)
    assert usage.totals("n") == NodeTotals()


def test_allocatable_is_reparsed_when_the_node_changes() -> None:
    usage = NodeUsage()
    assert usage.allocatable(node(rv="1", pods="1")).pods == 1
    assert usage.allocatable(node(rv="2", pods="5")).pods == 5


@pytest.mark.parametrize(("spec", "needle"), [
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}}]}}}, "inter-pod anti-affinity"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {}}]}}}, "required inter-pod affinity"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]}, "topologySpreadConstraints"),
    ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "x"}}]}, 'volume "data"'),
])
def test_pods_needing_unsupported_filters_are_named(spec: dict[str, Any], needle: str) -> None:
    reason = unsupported_reason(pod([ctr()], **spec))
    assert reason is not None and needle in reason and "draflow does not" in reason


@pytest.mark.parametrize("spec", [
    {},
    {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}},
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                    "whenUnsatisfiable": "ScheduleAnyway"}]},
    {"volumes": [{"name": "cfg", "configMap": {"name": "x"}}]},
])
def test_scoring_only_preferences_are_not_refused(spec: dict[str, Any]) -> None:
    assert unsupported_reason(pod([ctr()], **spec)) is None


def test_dra_backed_extended_resources_are_left_to_dra_unless_the_node_advertises_them() -> None:
    demand = PodDemand({"example.com/gpu": 2, "deviceclass.resource.kubernetes.io/gpu": 1})
    dra = {"example.com/gpu", "deviceclass.resource.kubernetes.io/gpu"}
    plain = node_allocatable({"status": {"allocatable": {"pods": "10"}}})
    assert fit_reasons(plain, NodeTotals(), demand, dra) == []
    assert sorted(fit_reasons(plain, NodeTotals(), demand)) == [
        "Insufficient deviceclass.resource.kubernetes.io/gpu", "Insufficient example.com/gpu"]
    # A device plugin advertises the name on this node: node fit counts it as any extended resource.
    plugin = node_allocatable({"status": {"allocatable": {"pods": "10", "example.com/gpu": "1"}}})
    assert fit_reasons(plugin, NodeTotals(), demand, dra) == ["Insufficient example.com/gpu"]
    gpu_pod = pod([{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}])
    assert unsupported_reason(gpu_pod) is None
