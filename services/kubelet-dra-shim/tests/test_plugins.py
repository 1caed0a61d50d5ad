"""Plugin registration over real unix sockets: versions, deregistration, restarts, rolling updates."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from fakedriver import HEALTH_V1ALPHA1, FakeDriver

from draflow_testenv.wait import eventually
from kubelet_dra_shim.plugins import PluginStore, choose_version
from kubelet_dra_shim.registration import registration_watcher


@pytest.mark.parametrize(
    ("offered", "want"),
    [
        (["v1.DRAPlugin", "v1beta1.DRAPlugin"], "v1.DRAPlugin"),
        (["v1beta1.DRAPlugin", "v1.DRAPlugin"], "v1beta1.DRAPlugin"),  # the plugin's order wins
        (["v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"], "v1beta1.DRAPlugin"),
        (["v1alpha4.DRAPlugin"], None),
        ([], None),
    ],
)
def test_choose_version(offered: list[str], want: str | None) -> None:
    assert choose_version(offered) == want


def _driver(root: Path, name: str = "gpu.test", **kw: object) -> FakeDriver:
    return FakeDriver(name, root / "reg", root / "plugins", root / "cdi", kube=None, **kw)  # type: ignore[arg-type]


async def test_registers_a_driver_and_tells_it(short_dir: Path) -> None:
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir, versions=("v1beta1.DRAPlugin",), health=(HEALTH_V1ALPHA1,))
    await driver.start()
    try:
        await watcher.sync()
        plugin = store.get("gpu.test")
        assert plugin is not None
        assert plugin.version == "v1beta1.DRAPlugin"
        assert plugin.health_service == "v1alpha1.DRAResourceHealth"
        assert plugin.endpoint == str(driver.dra_socket)
        assert driver.registrations == [(True, "")]
    finally:
        await driver.stop()
        await watcher.close()


async def test_unsupported_versions_are_refused_with_a_reason(short_dir: Path) -> None:
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir, versions=("v1alpha3.DRAPlugin",))
    await driver.start()
    try:
        await watcher.sync()
        assert store.get("gpu.test") is None
        assert driver.registrations[0][0] is False
        assert "v1alpha3.DRAPlugin" in driver.registrations[0][1]
    finally:
        await driver.stop()
        await watcher.close()


async def test_socket_gone_deregisters_and_restart_registers_again(short_dir: Path) -> None:
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir)
    await driver.start()
    await watcher.sync()
    first = store.get("gpu.test")
    await driver.stop()
    await watcher.sync()
    assert store.get("gpu.test") is None
    await driver.start()
    await watcher.sync()
    second = store.get("gpu.test")
    assert second is not None and second is not first
    await driver.stop()
    await watcher.close()


async def test_restart_between_two_scans_is_seen_as_a_new_registration(short_dir: Path) -> None:
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir)
    await driver.start()
    await watcher.sync()
    first = store.get("gpu.test")
    await driver.stop()
    await driver.start()  # new socket file at the same path before the next scan
    await watcher.sync()
    assert store.get("gpu.test") is not first
    assert driver.registrations == [(True, ""), (True, "")]
    await driver.stop()
    await watcher.close()


async def test_rolling_update_newest_endpoint_wins(short_dir: Path) -> None:
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    old = _driver(short_dir, socket_suffix="-old")
    new = _driver(short_dir, socket_suffix="-new")
    await old.start()
    await watcher.sync()
    await new.start()
    await watcher.sync()
    current = store.get("gpu.test")
    assert current is not None and current.endpoint == str(new.dra_socket)
    await new.stop()  # the new pod goes away first: the old one serves again
    await watcher.sync()
    current = store.get("gpu.test")
    assert current is not None and current.endpoint == str(old.dra_socket)
    await old.stop()
    await watcher.close()


async def test_poll_loop_finds_a_driver_that_starts_later(short_dir: Path) -> None:
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)}, interval=0.1)
    task = asyncio.create_task(watcher.run())
    driver = _driver(short_dir)
    try:
        await driver.start()
        await eventually(lambda: store.get("gpu.test") is not None, 10, "the driver registered")
        assert store.get("gpu.test") is not None
    finally:
        task.cancel()
        await driver.stop()
        await watcher.close()


# --- kubelet v1.37.1's file rules (draflow_runtime.pluginwatcher), each a difference the shim had -------


async def test_a_dot_file_socket_is_not_a_plugin(short_dir: Path) -> None:
    """The kubelet ignores names starting with '.'; the shim took every ``*.sock``."""
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir)
    await driver.start()
    try:
        os.rename(driver.reg_socket, short_dir / "reg" / ".gpu.test-reg.sock")
        await watcher.sync()
        assert store.get("gpu.test") is None
        assert driver.registrations == []
    finally:
        await driver.stop()
        await watcher.close()


async def test_any_socket_name_and_subdirectories_are_plugins(short_dir: Path) -> None:
    """The kubelet registers every socket under the directory, subdirectories included, whatever its
    name; the shim looked for ``*.sock`` at the top only."""
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    nested = FakeDriver("gpu.test", short_dir / "reg" / "gpu", short_dir / "plugins", short_dir / "cdi",
                        kube=None)  # type: ignore[arg-type]
    other = _driver(short_dir, name="nic.test")
    await nested.start()
    await other.start()
    try:
        os.rename(other.reg_socket, short_dir / "reg" / "nic.test-registration")
        await watcher.sync()
        assert store.get("gpu.test") is not None
        assert store.get("nic.test") is not None
        assert nested.registrations == [(True, "")] and other.registrations == [(True, "")]
    finally:
        await nested.stop()
        await other.stop()
        await watcher.close()


async def test_chmod_of_a_registered_socket_is_not_a_new_registration(short_dir: Path) -> None:
    """Identity is the socket path; only a socket created again is a new registration. The shim
    compared the ctime, which a chmod changes: the plugin was deregistered and registered again."""
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir)
    await driver.start()
    try:
        await watcher.sync()
        first = store.get("gpu.test")
        os.chmod(driver.reg_socket, 0o600)
        await watcher.sync()
        assert store.get("gpu.test") is first
        assert driver.registrations == [(True, "")]
    finally:
        await driver.stop()
        await watcher.close()


async def test_an_empty_endpoint_means_the_registration_socket(short_dir: Path) -> None:
    """The kubelet dials the registration socket when GetInfo names no endpoint (one socket serving both
    services); the shim refused such a plugin ("plugin info has an empty endpoint")."""
    store = PluginStore()
    watcher = registration_watcher({"n": (short_dir / "reg", store)})
    driver = _driver(short_dir, one_socket=True)
    await driver.start()
    try:
        await watcher.sync()
        plugin = store.get("gpu.test")
        assert plugin is not None and plugin.endpoint == str(driver.reg_socket)
        assert driver.registrations == [(True, "")]
        m = plugin.messages
        response = await plugin.stub().NodeUnprepareResources(m.NodeUnprepareResourcesRequest(), timeout=5)
        assert len(response.claims) == 0  # the DRA service answers on that socket
    finally:
        await driver.stop()
        await watcher.close()
