"""Which DRAResourceHealth version the shim watches: v1 first, v1alpha1 second (kubelet v1.37.1's order),
over real unix sockets with a driver that advertises and serves v1 only, v1alpha1 only, or both."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakedriver import HEALTH_BOTH, HEALTH_V1, HEALTH_V1ALPHA1, FakeDriver

from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_testenv.wait import eventually
from kubelet_dra_shim.health import NodeHealth
from kubelet_dra_shim.plugins import PluginStore, choose_health_service
from kubelet_dra_shim.registration import registration_watcher


@pytest.mark.parametrize(
    ("offered", "want"),
    [
        (["v1.DRAPlugin", "v1.DRAResourceHealth"], "v1.DRAResourceHealth"),
        (["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"], "v1alpha1.DRAResourceHealth"),
        # The shim's (kubelet's) preference wins over the plugin's order for the health service.
        (["v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"], "v1.DRAResourceHealth"),
        (["v1.DRAPlugin", "v1beta1.DRAResourceHealth"], ""),
        (["v1.DRAPlugin"], ""),
    ],
)
def test_choose_health_service(offered: list[str], want: str) -> None:
    assert choose_health_service(offered) == want


@pytest.mark.parametrize(
    ("served", "negotiated"),
    [
        pytest.param((HEALTH_V1,), HEALTH_V1, id="v1-only"),
        pytest.param((HEALTH_V1ALPHA1,), HEALTH_V1ALPHA1, id="v1alpha1-only"),
        pytest.param(HEALTH_BOTH, HEALTH_V1, id="both"),
        pytest.param((HEALTH_V1ALPHA1, HEALTH_V1), HEALTH_V1, id="both-v1alpha1-listed-first"),
    ],
)
async def test_health_is_watched_on_the_negotiated_version(
    short_dir: Path, served: tuple[str, ...], negotiated: str
) -> None:
    store = PluginStore()
    changes: list[tuple[str, str]] = []
    health = NodeHealth("n", store, lambda node, driver: changes.append((node, driver)))
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = FakeDriver(
        "gpu.test", short_dir / "reg", short_dir / "plugins", short_dir / "cdi", None, health=served
    )  # type: ignore[arg-type]
    driver.device_health[("pool", "gpu-0")] = health_v1.UNHEALTHY
    await driver.start()
    try:
        await watcher.sync()
        plugin = store.get("gpu.test")
        assert plugin is not None and plugin.health_service == negotiated
        await eventually(
            lambda: health.view().get(("gpu.test", "pool", "gpu-0")) == ("Unhealthy", "")
        )
        assert driver.health_streams == [negotiated]
        assert changes == [("n", "gpu.test")]
    finally:
        await health.close()
        await watcher.close()
        await driver.stop()
