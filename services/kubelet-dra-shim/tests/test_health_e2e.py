"""Device health end to end: the real reference-driver process (its health control file) → the shim's
v1.DRAResourceHealth stream → ``containerStatuses[].allocatedResourcesStatus`` in the real kube-apiserver.

kube-apiserver drops ``allocatedResourcesStatus`` unless the ``ResourceHealthStatus`` feature gate is on
(``dropDisabledPodStatusFields``; Alpha/off 1.31-1.35, Beta/on since 1.36) and ``message`` unless
``ResourceHealthStatusMessage`` is (Beta/on since 1.36). The pinned v1.37.1 has both on by default, so
no ``--feature-gates`` are needed; an older binary would make this test fail at the first assertion.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import allocate, claim, device_class, eventually, pod

from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import PODS, KubeClient
from draflow_testenv.identity import ServiceIdentity
from kubelet_dra_shim.fleet import Fleet
from kubelet_dra_shim.settings import ShimSettings
from kubelet_dra_shim.simkubelet import now_rfc3339

pytestmark = pytest.mark.integration

DRIVER = "gpu.draflow.example"  # the reference driver's default name
REFERENCE_DRIVER = shutil.which("reference-driver") or str(
    Path(os.sys.executable).parent / "reference-driver"
)


def _set_health(state_dir: Path, devices: dict[str, tuple[str, str]]) -> None:
    """Write the reference driver's health control file atomically."""
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / "health.json.tmp"
    tmp.write_text(json.dumps({"devices": {d: {"health": h, "message": m} for d, (h, m) in devices.items()}}))
    tmp.rename(state_dir / "health.json")


async def _driver_and_settings(
    run_service: Any, short_dir: Path, driver_identity: ServiceIdentity, prefix: str
) -> tuple[str, Path, ShimSettings]:
    """A reference driver process for a new node, and the settings of a shim serving that node."""
    node = f"{prefix}-{uuid.uuid4().hex[:6]}"
    d = short_dir / node
    state_dir = d / "state"
    await run_service(
        [
            REFERENCE_DRIVER,
            "--node-name", node,
            "--registry-dir", str(d / "plugins_registry"),
            "--plugins-dir", str(d / "plugins"),
            "--cdi-root", str(d / "cdi"),
            "--state-dir", str(state_dir),
            "--poll-interval", "0.1",
            "--http-port", "0",
            "--nats-url", "",
        ],
        kubeconfig=driver_identity.kubeconfig,
        name=f"reference-driver-{node}",
    )  # fmt: skip
    (short_dir / "boot_id").write_text("b\n")
    settings = ShimSettings(
        nodes=node,
        fleet_root=str(short_dir),
        http_port=0,
        nats_url="",
        boot_id_file=str(short_dir / "boot_id"),
        registry_poll_interval=0.1,
    )
    return node, state_dir, settings


async def _running_pod_with_health(kube: KubeClient, make_namespace: Any, node: str) -> tuple[str, Any]:
    """A claim allocated on ``node`` for a pod ``p``; returns (namespace, health_is(state, message))."""
    ns = await make_namespace("shimh")
    cls = await device_class(kube, DRIVER)
    c = await claim(kube, ns, "gpu", cls)
    p = await pod(kube, ns, "p", node, ["gpu"])
    await allocate(kube, ns, "gpu", p, node, DRIVER, ["gpu-0"])
    cdi_id = f"{DRIVER}/gpu={c['metadata']['uid']}-gpu-0"

    async def health_is(state: str, message: str | None) -> bool:
        got = await kube.get(PODS, "p", namespace=ns)
        if got["status"].get("phase") != "Running":
            return False
        statuses = got["status"]["containerStatuses"][0].get("allocatedResourcesStatus")
        want = {"resourceID": cdi_id, "health": state}
        if message is not None:
            want["message"] = message
        assert statuses == [{"name": "claim:gpu", "resources": [want]}]
        return True

    return ns, health_is


async def test_unhealthy_device_shows_in_allocated_resources_status_and_recovers(
    kube: KubeClient, make_namespace: Any, short_dir: Path, run_service: Any,
    shim_identity: ServiceIdentity, driver_identity: ServiceIdentity,
) -> None:
    node, state_dir, settings = await _driver_and_settings(run_service, short_dir, driver_identity, "shimh")
    fleet = Fleet(settings, shim_identity.kube, EventRecorder(shim_identity.kube, "kubelet-dra-shim"))
    await fleet.start()
    try:
        store = fleet.nodes[node].store
        plugins = await eventually(lambda: _registered(store), within=60)
        # The reference driver advertises v1 and v1alpha1; like kubelet v1.37.1 the shim takes v1, so what
        # follows runs over the v1 stream.
        assert plugins[0].health_service == "v1.DRAResourceHealth"
        _, health_is = await _running_pod_with_health(kube, make_namespace, node)

        await eventually(lambda: health_is("Healthy", None), within=30)

        _set_health(state_dir, {"gpu-0": ("Unhealthy", "fell off the bus")})
        await eventually(lambda: health_is("Unhealthy", "fell off the bus"), within=30)

        _set_health(state_dir, {})  # back to Healthy: the driver's message must go too
        await eventually(lambda: health_is("Healthy", None), within=30)
    finally:
        await fleet.stop()


async def test_a_restarted_shim_does_not_rewrite_the_health_a_running_pod_already_shows(
    kube: KubeClient, make_namespace: Any, short_dir: Path, run_service: Any,
    shim_identity: ServiceIdentity, driver_identity: ServiceIdentity,
) -> None:
    """After a restart the shim's memory of what it wrote is empty; the pod's status is what counts (a
    rewrite of every running pod's status was ~350 writes in a chaos run)."""
    node, state_dir, settings = await _driver_and_settings(run_service, short_dir, driver_identity, "shimr")
    recorder = EventRecorder(shim_identity.kube, "kubelet-dra-shim")
    fleet = Fleet(settings, shim_identity.kube, recorder)
    await fleet.start()
    try:
        await eventually(lambda: _registered(fleet.nodes[node].store), within=60)
        ns, health_is = await _running_pod_with_health(kube, make_namespace, node)
        await eventually(lambda: health_is("Healthy", None), within=30)
    finally:
        await fleet.stop()
    before = await kube.get(PODS, "p", namespace=ns)
    # A status written again within the same second as the last one would be a no-op for the API server
    # (its condition times have one-second resolution) and show no MODIFIED event: let the clock move on.
    written_at = {c["lastTransitionTime"] for c in before["status"]["conditions"]}
    await eventually(lambda: now_rfc3339() not in written_at, within=5)
    writes: list[dict[str, Any]] = []

    async def watch() -> None:
        rv = before["metadata"]["resourceVersion"]
        stream = kube.watch(PODS, namespace=ns, resource_version=rv, field_selector="metadata.name=p")
        async for etype, obj in stream:
            if etype == "MODIFIED":
                writes.append(obj)

    watcher = asyncio.create_task(watch())
    fleet = Fleet(settings, shim_identity.kube, recorder)
    await fleet.start()
    try:
        uid = before["metadata"]["uid"]
        # the restarted shim has seen the pod with the driver's health (it decides right after recording)
        await eventually(lambda: uid in fleet.controller._health_written, within=60)
        _set_health(state_dir, {"gpu-0": ("Unhealthy", "fell off the bus")})
        await eventually(lambda: health_is("Unhealthy", "fell off the bus"), within=30)
        await eventually(lambda: len(writes) >= 1, within=30)
        shown = [w["status"]["containerStatuses"][0]["allocatedResourcesStatus"] for w in writes]
        assert len(writes) == 1, shown  # only the change: not the same health again first
    finally:
        watcher.cancel()
        await fleet.stop()


async def _registered(store: Any) -> list[Any]:
    return [p for p in store.all() if p.driver == DRIVER]
