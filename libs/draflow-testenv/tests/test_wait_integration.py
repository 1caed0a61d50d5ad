"""quiesce/consistently over ``resource_versions`` of real objects in the real kube-apiserver."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.kube import KubeClient, Resource
from draflow_testenv.wait import consistently, quiesce, resource_versions

pytestmark = pytest.mark.integration

CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", True)


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "0"}}


async def test_quiesce_returns_after_a_burst_of_writes_and_consistently_fails_on_a_late_one(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    ns = await make_namespace("wait")
    await kube.create(CONFIG_MAPS, config_map("a"), namespace=ns)
    probe = resource_versions(kube, CONFIG_MAPS, namespace=ns)

    async def burst() -> None:
        for i in range(1, 6):
            await kube.patch(CONFIG_MAPS, "a", {"data": {"n": str(i)}}, ns)
            await asyncio.sleep(0.1)  # the writer's pace: well inside the quiet period

    writer = asyncio.create_task(burst())
    settled = await quiesce(probe, quiet=1.5, timeout=60, what="the namespace's ConfigMaps")
    assert writer.done()
    assert (await kube.get(CONFIG_MAPS, "a", ns))["data"] == {"n": "5"}
    assert settled == await probe()

    await consistently(lambda: _same(probe, settled), 0.3, "no write to the namespace's ConfigMaps")

    async def late_create() -> None:
        await asyncio.sleep(0.3)  # the wrong write comes late, inside the window
        await kube.create(CONFIG_MAPS, config_map("b"), namespace=ns)

    late = asyncio.create_task(late_create())
    try:
        with pytest.raises(AssertionError, match=r"no write to the namespace's ConfigMaps stopped holding"):
            await consistently(lambda: _same(probe, settled), 30, "no write to the namespace's ConfigMaps")
    finally:
        await late
    assert set(await probe()) == {"a", "b"}


async def _same(probe: Callable[[], Awaitable[dict[str, str]]], settled: dict[str, str]) -> bool:
    return await probe() == settled
