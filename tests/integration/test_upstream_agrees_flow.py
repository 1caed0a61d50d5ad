"""Upstream agrees: the demo workload allocated by upstream kube-scheduler v1.37.1 (with
kube-controller-manager, no draflow controller) and by draflow's claim-controller + structured-allocator, each
on three fresh simulated nodes with the same inventory (reference-driver, ``partitionable`` profile, 8 GPUs
each).

Which node and which GPU a claim gets may differ (the two score nodes differently); everything else must
match: every pod that runs under one runs under the other, each claim gets the same number of devices per
request, the same kind of device (whole GPU or partition), the same admin access, devices of one GPU where a
``matchAttribute`` asks for it, the first alternative of a ``firstAvailable`` request that fits, and the same
node-selection semantics (a pod on its devices' node, the pods sharing a claim on one node); the claim that
fits nowhere is refused by both, and neither hands out a device a NoSchedule DeviceTaintRule taints.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from upstream_kit import (
    ADMIN_ACCESS_LABEL,
    UNFIT,
    allocation_shape,
    claims_of,
    demo_running,
    namespaced_demo,
    same_node_problems,
)

from draflow_runtime.dra import claim_results
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_CLASSES, DEVICE_TAINT_RULES, NAMESPACES, PODS, KubeClient
from draflow_testenv.fleetflow import DRIVER, ServiceFlow
from draflow_testenv.upstream import start_control_plane

pytestmark = pytest.mark.integration

WITHIN = 240.0
TAINTED = "gpu-0"


async def _run(stack: str, testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
               run_service: Callable[..., Awaitable[Any]],
               ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The demo on fresh nodes under ``stack`` (``upstream`` or ``draflow``); its (pods, claims) once every
    pod that can run is Running. Everything it started is stopped before it returns."""
    ns = await make_namespace(f"agree-{stack[:2]}")
    await kube.patch(NAMESPACES, ns, {"metadata": {"labels": {ADMIN_ACCESS_LABEL: "true"}}})
    suffix = ns.rpartition("-")[2]
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=3, gpus=8)
    fleet = Path(tempfile.mkdtemp(prefix="dag-", dir="/tmp"))
    upstream = stack == "upstream"
    objects = namespaced_demo(ns, suffix, flow.nodes, scheduler=None if upstream else flow.scheduler)
    started: list[Any] = []
    rule = f"{suffix}-reserved-gpu"
    try:
        await flow.start(run_service, fleet, control_plane=not upstream,
                         extra={"reference-driver": ["--profile", "partitionable"]})
        await flow.wait_nodes_ready()
        if upstream:
            started = list((await start_control_plane(testenv, run_service)).processes.values())
        # gpu-0 of every node tainted NoSchedule: neither allocator may hand it out.
        await kube.create(DEVICE_TAINT_RULES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": rule},
            "spec": {"deviceSelector": {"driver": DRIVER, "device": TAINTED},
                     "taint": {"key": "draflow.example/reserved", "effect": "NoSchedule"}}})
        pods = await demo_running(flow, objects, WITHIN)
        return pods, await claims_of(kube, ns)
    finally:
        for proc in started:
            await proc.stop()
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await kube.delete_collection(PODS, namespace=ns)
        await flow.clean_up()
        with contextlib.suppress(NotFound):
            await kube.delete(DEVICE_TAINT_RULES, rule)
        for obj in objects:
            if obj["kind"] == "DeviceClass":
                with contextlib.suppress(NotFound):
                    await kube.delete(DEVICE_CLASSES, obj["metadata"]["name"])


@pytest.mark.timeout(900)
async def test_draflow_allocates_the_demo_as_upstream_kube_scheduler_does(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    up_pods, up_claims = await _run("upstream", testenv, kube, make_namespace, run_service)
    df_pods, df_claims = await _run("draflow", testenv, kube, make_namespace, run_service)

    assert same_node_problems(up_pods, up_claims) == []
    assert same_node_problems(df_pods, df_claims) == []
    upstream, draflow = allocation_shape(up_pods, up_claims), allocation_shape(df_pods, df_claims)
    differ = {pod: {"upstream": upstream.get(pod), "draflow": draflow.get(pod)}
              for pod in sorted(set(upstream) | set(draflow)) if upstream.get(pod) != draflow.get(pod)}
    assert differ == {}, differ
    assert upstream[UNFIT] == [("unscheduled",)]
    for stack, claims in (("upstream", up_claims), ("draflow", df_claims)):
        used = [c for c, claim in claims.items() if any(r["device"] == TAINTED for r in claim_results(claim))]
        assert used == [], f"{stack} allocated the NoSchedule-tainted {TAINTED} to {used}"
    # The shape has something in it: e.g. the firstAvailable pod got the second alternative, one GPU.
    assert upstream["flexible"] == [("gpu", [("gpu/one", 1)], ["whole"], [False], True)]
