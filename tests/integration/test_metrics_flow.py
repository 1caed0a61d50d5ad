"""The metrics of docs/observability.md, scraped from the five services running as processes on a fleet of
two simulated nodes (real kube-apiserver, NATS, gRPC sockets, files):

* the allocator's per-pool gauges follow what happens: four free devices per pool; a pod allocates one
  (allocated 1, free 3, the allocation latency histogram counts it); a DeviceTaintRule taints a device of
  the other pool (tainted 1, by key in ``draflow_resourcepool_device_taints``); the driver reports another
  unhealthy (unhealthy 1, tainted 2); a claim nobody can satisfy waits (pending 1 with its since-time);
* every metric the Grafana dashboard and the alert rules name (the kubelet's own excepted) is in a real
  scrape of the services.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from monitoring_kit import dashboard, dashboard_expressions, metric_names, rules, samples, scraped_names

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.fleetflow import DRIVER, ServiceFlow

pytestmark = pytest.mark.integration

POOL_GAUGES = ("total", "allocated", "tainted", "unhealthy", "free")
KUBELET_METRICS = {"dra_operations_duration_seconds_count"}  # a real kubelet's, named by one alert


async def scrape(port: int) -> str:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session, \
            session.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        return await resp.text()


def pool_numbers(text: str, pool: str) -> dict[str, float]:
    out = {}
    for gauge in POOL_GAUGES:
        for labels, value in samples(text, f"draflow_resourcepool_devices_{gauge}"):
            if labels["driver"] == DRIVER and labels["pool_name"] == pool:
                assert labels["node_name"] == pool  # the reference driver's pools are its nodes
                out[gauge] = value
    return out


def write_health(fleet: Path, node: str, device: str) -> None:
    state = fleet / node / "state"
    state.mkdir(parents=True, exist_ok=True)
    tmp = state / "health.json.tmp"
    tmp.write_text(json.dumps({"devices": {device: {"health": "Unhealthy", "message": "metrics test"}}}))
    tmp.rename(state / "health.json")


@pytest.mark.timeout(600)
async def test_pool_gauges_follow_allocation_taints_health_and_waiting_claims(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("mf")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=2, gpus=4)
    fleet = Path(tempfile.mkdtemp(prefix="dmf-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    rule_name = f"{flow.prefix}maintenance"
    try:
        await flow.start(run_service, fleet, http=True)
        await flow.wait_nodes_ready()
        await flow.create_objects()
        allocator = flow.http_ports["structured-allocator"]

        async def pools_are(expected: dict[str, dict[str, float]]) -> str | None:
            text = await scrape(allocator)
            return text if {p: pool_numbers(text, p) for p in expected} == expected else None

        free = {"total": 4, "allocated": 0, "tainted": 0, "unhealthy": 0, "free": 4}
        await flow.until(lambda: pools_are({n: free for n in flow.nodes}), "four free devices per pool")

        # --- allocate one --------------------------------------------------------------------------------
        await flow.create_pod("first")
        first_pod = await flow.wait_running("first")
        claim = await flow.claim_of(first_pod)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        used = result["pool"]
        (other,) = [n for n in flow.nodes if n != used]
        text = await flow.until(lambda: pools_are({
            used: {**free, "allocated": 1, "free": 3}, other: free}), "the allocated device counted")
        assert samples(text, "draflow_resourceclaims_pending") == [({}, 0.0)]
        latency = [v for labels, v in samples(text, "draflow_allocator_claim_allocation_seconds_count")
                   if labels["driver"] == DRIVER]
        assert latency and latency[0] >= 1

        # --- taint a device of the other pool (DeviceTaintRule), then make another one unhealthy --------
        await kube.create(DEVICE_TAINT_RULES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": rule_name},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": other, "device": "gpu-0"},
                     "taint": {"key": "draflow.dev/metrics-test", "effect": "NoSchedule"}}})
        text = await flow.until(lambda: pools_are({other: {**free, "tainted": 1, "free": 3}}),
                                "the tainted device counted")
        taints = samples(text, "draflow_resourcepool_device_taints")
        by_key = {(lb["key"], lb["effect"]): v for lb, v in taints if lb["pool_name"] == other}
        assert by_key == {("draflow.dev/metrics-test", "NoSchedule"): 1}

        write_health(fleet, other, "gpu-1")
        text = await flow.until(lambda: pools_are({other: {**free, "tainted": 2, "unhealthy": 1, "free": 2}}),
                                "the unhealthy device counted")

        # --- a claim nobody can satisfy waits -------------------------------------------------------------
        before = time.time()
        await kube.create(RESOURCE_CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "too-big"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": flow.device_class, "allocationMode": "ExactCount", "count": 64}}]}},
        }, namespace=ns)
        await kube.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting"},
            "spec": {"schedulerName": flow.scheduler, "affinity": first_pod["spec"]["affinity"],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": "too-big"}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "gpu"}]}}]},
        }, namespace=ns)

        async def waiting() -> str | None:
            text = await scrape(allocator)
            return text if samples(text, "draflow_resourceclaims_pending") == [({}, 1.0)] else None

        text = await flow.until(waiting, "the waiting claim counted")
        (since,) = [v for lb, v in samples(text, "draflow_resourceclaims_pending_oldest_timestamp_seconds")
                    if lb == {"namespace": ns}]
        assert before - 2 <= since <= time.time()  # creationTimestamp has whole seconds

        # --- every metric the dashboard and the alerts name is exported -------------------------------
        exported: set[str] = set()
        for port in flow.http_ports.values():
            exported |= scraped_names(await scrape(port))
        in_dashboard = {n for _, expr in dashboard_expressions(dashboard()) for n in metric_names(expr)}
        in_rules = {n for r in rules() for n in metric_names(r["expr"])} - KUBELET_METRICS
        assert in_dashboard - exported == set()
        assert in_rules - exported == set()
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(DEVICE_TAINT_RULES, rule_name)
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
