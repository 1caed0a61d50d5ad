"""A claim whose unprepare keeps failing (its driver answers an error, or went away after the prepare)
holds up its own pod only, as the kubelet unprepares per pod (v1.37.1 ``pkg/kubelet/cm/dra``
``UnprepareDynamicResources``). Before: every later pod deleted on the node got that claim's failure as
its own, so none of them was ever finished and their devices stayed allocated until the node ran out
(found by the generated hostile input of ``tests/integration/badinput/test_hostile.py``, with claims of
a driver that never registered, before such claims were refused ahead of being recorded)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from fakedriver import FakeDriver
from helpers import claim, device_class, eventually, pod
from shimenv import DRIVER, Env, _gone, _running

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

NET = "net.shimtest.example"


@pytest_asyncio.fixture(loop_scope="session")
async def net(env: Env) -> AsyncIterator[FakeDriver]:
    """A second driver on the env's node."""
    d = env.root / env.node
    driver = FakeDriver(NET, d / "plugins_registry", d / "plugins", d / "cdi", env.kube)
    await driver.start()
    try:
        yield driver
    finally:
        await driver.stop()


async def _allocate(env: Env, ns: str, name: str, p: dict[str, Any], driver: str, device: str) -> None:
    status = {
        "allocation": {
            "devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": env.node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [env.node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}],
    }
    await env.kube.patch(RESOURCE_CLAIMS, name, {"status": status}, namespace=ns, subresource="status")


async def test_a_claim_that_cannot_be_unprepared_holds_up_only_its_own_pod(
    env: Env, net: FakeDriver, make_namespace: Any
) -> None:
    ns = await make_namespace("shim-isolation")
    await env.start_shim()
    cls = await device_class(env.kube, DRIVER)
    uid = (await claim(env.kube, ns, "orphan", cls))["metadata"]["uid"]
    stuck = await pod(env.kube, ns, "stuck", env.node, ["orphan"])
    await _allocate(env, ns, "orphan", stuck, NET, "nic-0")
    await eventually(lambda: _running(env.kube, ns, "stuck"))
    net.fail_unprepare["orphan"] = "nic-0 is wedged"
    try:
        await env.kube.delete(PODS, "stuck", namespace=ns)  # its unprepare fails from now on
        await eventually(lambda: net.unprepared.count(uid) >= 1)

        await claim(env.kube, ns, "fine", cls)
        ok = await pod(env.kube, ns, "ok", env.node, ["fine"])
        await _allocate(env, ns, "fine", ok, DRIVER, "gpu-0")
        await eventually(lambda: _running(env.kube, ns, "ok"))
        await env.kube.delete(PODS, "ok", namespace=ns)
        # before: never (stuck's failure counted as its own)
        await eventually(lambda: _gone(env.kube, PODS, "ok", ns))
        assert not await _gone(env.kube, PODS, "stuck", ns), "stuck's claim was never unprepared"
    finally:
        net.fail_unprepare.pop("orphan", None)
    await eventually(lambda: _gone(env.kube, PODS, "stuck", ns))
