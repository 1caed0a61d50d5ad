"""A fleet-mode driver gone from every node it serves: slice-publisher taints all its devices with one
DeviceTaintRule (no slice write), structured-allocator honours the rule exactly as it honours a slice
taint (a new pod is not placed, its condition says "blocked by taints"), and the rule goes when the
driver is back (the pod then runs). The five services as processes, a driver name of the test's own (a
driver-wide rule needs every published pool of the driver to be gone).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from draflow_runtime.devicetaints import rule_selects
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_SLICES, KubeClient
from draflow_testenv.fleetflow import ServiceFlow
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

UNAVAILABLE = "draflow.dev/driver-unavailable"


@pytest.mark.timeout(600)
async def test_driver_gone_from_every_node_is_one_rule_the_allocator_honours(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("gone")
    suffix = ns.rpartition("-")[2]
    driver = f"gone-{suffix}.draflow.example"
    flow = ServiceFlow(testenv, kube, ns, suffix, nodes=2, gpus=2, driver=driver)
    fleet = Path(tempfile.mkdtemp(prefix="dgr-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    publisher_args = ["--driver-gone-rule-min-pools", "2", "--driver-gone-grace", "600",
                      "--startup-grace", "1"]
    try:
        await flow.start(run_service, fleet, extra={"slice-publisher": publisher_args})
        await flow.wait_nodes_ready()
        await flow.create_objects()
        await flow.create_pod("before")
        await flow.wait_running("before")
        slices_before = _versions(await _slices(kube, driver))

        driver_proc = flow.procs[0]
        assert driver_proc.name.startswith("reference-driver")
        await driver_proc.kill()

        async def rule() -> dict[str, Any] | None:
            rules = (await kube.list(DEVICE_TAINT_RULES))["items"]
            return next((r for r in rules if r["spec"].get("deviceSelector") == {"driver": driver}), None)

        found = await eventually(rule, 120, "one DeviceTaintRule for the gone driver")
        taint = found["spec"]["taint"]
        assert (taint["key"], taint["effect"]) == (UNAVAILABLE, "NoSchedule")
        slices = await _slices(kube, driver)
        devices = [(s["spec"]["pool"]["name"], d) for s in slices for d in s["spec"].get("devices") or ()]
        assert len(devices) == 2 * 2
        assert all(rule_selects(found, driver, pool, d["name"]) for pool, d in devices)
        # The rule replaced the slice writes: no slice carries the taint, none was rewritten.
        assert not [d for _, d in devices if any(t["key"] == UNAVAILABLE for t in d.get("taints") or ())]
        assert _versions(slices) == slices_before

        # The allocator sees the rule's taint on every device: the new pod is not placed.
        await flow.create_pod("during")

        async def blocked() -> str | None:
            pod = await kube.get(PODS, "during", namespace=ns)
            for cond in (pod.get("status") or {}).get("conditions") or ():
                if cond["type"] == "PodScheduled" and cond["status"] == "False" and \
                        "blocked by taints" in cond.get("message", ""):
                    return str(cond["message"])
            return None

        await eventually(blocked, 120, "the new pod unschedulable: devices blocked by taints")

        flow.procs[0] = await testenv.restart_service(driver_proc)

        async def rule_gone() -> bool:
            return await rule() is None

        await flow.until(rule_gone, "the rule removed once the driver is back")
        await flow.wait_running("during")
    finally:
        with contextlib.suppress(Exception):
            await flow.stop()
        with contextlib.suppress(Exception):
            await flow.clean_up()
        with contextlib.suppress(Exception):
            r = await rule()
            if r is not None:
                await kube.delete(DEVICE_TAINT_RULES, r["metadata"]["name"])
        shutil.rmtree(fleet, ignore_errors=True)


async def _slices(kube: KubeClient, driver: str) -> list[dict[str, Any]]:
    items = (await kube.list(RESOURCE_SLICES, field_selector=f"spec.driver={driver}"))["items"]
    return sorted(items, key=lambda s: s["metadata"]["name"])


def _versions(slices: list[dict[str, Any]]) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in slices}
