"""Fake plugins in the plugin-registry directory that kubelet-dra-shim (registration) and slice-publisher
(inventory) watch: a GetInfo of the wrong plugin type, with no supported version or no name, one that never
answers, sockets that send garbage, hang up at once or never answer; and a well-formed plugin whose
inventory the API server refuses. Each is refused with a log line naming its socket (and the plugin is
told why, as the kubelet does), and the real driver on the same node keeps being used: the control pod
runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from badinput_kit import DRIVER, Stack
from fakeplugins import BadInventory, FakePlugins, FakeRegistration

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_runtime.kube import RESOURCE_SLICES

pytestmark = pytest.mark.integration

V1 = "v1.DRAPlugin"


@pytest.fixture
async def fakes() -> AsyncIterator[FakePlugins]:
    plugins = FakePlugins()
    try:
        yield plugins
    finally:
        await plugins.close()


def _registries(stack: Stack) -> list[Path]:
    assert stack.flow.fleet is not None
    return [stack.flow.fleet / node / "plugins_registry" for node in stack.flow.nodes]


def _info(name: str, endpoint: Path, *, type_: str = "DRAPlugin", versions: tuple[str, ...] = (V1,)) -> Any:
    return reg_pb.PluginInfo(type=type_, name=name, endpoint=str(endpoint), supported_versions=list(versions))


def _failed(path: Path) -> Any:
    return lambda r: r.get("event") == "plugin registration failed" and r.get("socket") == str(path)


async def test_misbehaving_registration_sockets_are_refused_by_name(stack: Stack, fakes: FakePlugins) -> None:
    told: dict[Path, tuple[FakeRegistration, str]] = {}
    quiet: list[Path] = []
    for registry in _registries(stack):
        for label, info_of, reason in [
            ("wrong-type", lambda p: _info("fake-csi.example.com", p, type_="CSIPlugin"), "CSIPlugin"),
            ("old-versions", lambda p: _info("fake-old.example.com", p, versions=("v0.DRAPlugin", "1.0.0")),
             "none of the plugin's versions"),
            ("no-versions", lambda p: _info("fake-none.example.com", p, versions=()),
             "no supported versions"),
            ("no-name", lambda p: _info("", p), "empty name"),
        ]:
            path = registry / f"{label}.sock"
            fake = FakeRegistration(info_of(path))
            await fakes.grpc(path, fake)
            told[path] = (fake, reason)
        quiet.append(await fakes.grpc(registry / "hangs.sock", FakeRegistration(None, hang=True)))
        for behaviour in ("garbage", "close", "silent"):
            quiet.append(await fakes.raw(registry / f"{behaviour}.sock", behaviour))

    for path, (fake, reason) in told.items():
        record = await stack.wait_log("kubelet-dra-shim", _failed(path), f"the refusal of {path.name}")
        assert reason in record["error"], record
        # the plugin was told why (NotifyRegistrationStatus), as the kubelet does
        await stack.until(lambda f=fake: f.statuses, f"{path.name} told it was refused")
        assert not fake.statuses[0].plugin_registered and reason in fake.statuses[0].error
    for path in quiet:  # GetInfo failed (the hanging one after the shim's RPC timeout)
        record = await stack.wait_log("kubelet-dra-shim", _failed(path), f"the failure of {path.name}")
        assert "GetInfo failed" in record["error"], record
    await stack.still_serving()


def _bad_pool(node: str) -> Any:
    """A pool the publisher's own checks pass but the API server refuses: an invalid device name and a
    device with more attributes than a device may have (32)."""
    attributes = {f"a{i}": inv.DeviceAttribute(int_value=i) for i in range(40)}
    return inv.Pool(name=node, generation=1, node_name=node, devices=[
        inv.Device(name="GPU_0!"), inv.Device(name="many-attributes", attributes=attributes)])


async def test_an_inventory_the_api_server_refuses_is_reported_once_and_other_drivers_are_published(
        stack: Stack, fakes: FakePlugins) -> None:
    name = "bad-inventory.example.com"
    node = stack.flow.nodes[0]
    registry = _registries(stack)[0]
    path = registry / "bad-inventory.sock"
    inventory = BadInventory(inv.ListAndWatchResourcesResponse(driver=name, node_name=node,
                                                               pools=[_bad_pool(node)], revision=1))
    await fakes.grpc(path, FakeRegistration(_info(name, path)), inventory)

    def refused(record: dict[str, Any]) -> bool:
        return record.get("event") == "API server refused the driver's pool, not publishing it" and \
            record.get("driver") == name and record.get("pool") == node
    record = await stack.wait_log("slice-publisher", refused, "the refused pool, naming driver and pool")
    assert record["level"] == "error"
    assert '"GPU_0!"' in record["error"] and "must not exceed 32" in record["error"], record
    slices = (await stack.kube.list(RESOURCE_SLICES)).get("items") or []
    assert not [s for s in slices if s["spec"]["driver"] == name]
    assert [s for s in slices if s["spec"]["driver"] == DRIVER and s["spec"].get("nodeName") == node]
    await stack.still_serving()
    # Broken input, not a transient failure: not retried with backoff for ever.
    retries = [r for r in stack.log_since("slice-publisher")
               if r.get("event") == "reconcile failed, retrying" and name in r.get("key", "")]
    assert not retries, retries[0]
