"""Oversized ResourceSlices written by someone else (another driver's publisher, a user). The API server's
limits come first: more than 128 devices, more than 32 attributes and capacities on a device, names over
their length limits are refused. What gets past (every slice at the limits, a pool of many such slices, a
pool that says it has more slices than exist) must not break the allocator: the control pod is placed,
and a device of the big pool is allocated by a selector on its longest attribute."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from badinput_kit import Stack

from draflow_runtime.errors import Invalid, NotFound
from draflow_runtime.kube import DEVICE_CLASSES, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES

pytestmark = pytest.mark.integration

BIG = "big.example.com"
LABEL63 = "d" * 63


def _device(i: int, attributes: int = 32) -> dict[str, Any]:
    name = f"{i:04d}-{LABEL63}"[:63]
    # attribute names: at most 32 bytes; string values: at most 64
    attrs: dict[str, Any] = {f"{'a' * 30}{k:02d}": {"string": f"{i:04d}" + "v" * 60}
                             for k in range(attributes)}
    return {"name": name, "attributes": attrs}


def _slice(name: str, pool: str, devices: list[dict[str, Any]], count: int = 1, driver: str = BIG,
           **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
                     "allNodes": True, "devices": devices, **spec}}


@pytest.mark.parametrize(("devices", "field", "driver"), [
    pytest.param([_device(i, 1) for i in range(129)], "spec.devices", BIG, id="129-devices"),
    pytest.param([_device(0, 33)], "spec.devices[0]", BIG, id="33-attributes"),
    pytest.param([{"name": "x" * 64}], "spec.devices[0].name", BIG, id="64-char-device-name"),
    pytest.param([{"name": "x", "attributes": {"a" * 33: {"int": 1}}}], "spec.devices[0].attributes", BIG,
                 id="33-byte-attribute-name"),
    pytest.param([{"name": "x", "attributes": {"a": {"string": "v" * 65}}}], "spec.devices[0].attributes",
                 BIG, id="65-char-string-value"),
    pytest.param([{"name": "x"}], "spec.driver", "d" * 64 + ".example.com", id="long-driver-name"),
])
async def test_api_server_refuses_slices_over_its_limits(
        stack: Stack, devices: list[dict[str, Any]], field: str, driver: str) -> None:
    with pytest.raises(Invalid) as refused:
        await stack.kube.create(RESOURCE_SLICES, _slice(stack.name("too-big"), "p", devices, driver=driver))
    assert field in str(refused.value), refused.value


async def test_slices_at_every_limit_do_not_break_allocation(stack: Stack) -> None:
    names = [stack.name("big") for _ in range(8)]
    klass = stack.name("big-class") + "." + BIG
    try:
        # one pool of 8 slices x 128 devices x 32 attributes, every name and value at its maximum length
        for s, name in enumerate(names):
            await stack.kube.create(RESOURCE_SLICES, _slice(
                name, "big-pool", [_device(s * 128 + i) for i in range(128)], count=len(names)))
        # a pool that claims 1000 slices and has one (incomplete: upstream does not allocate from it)
        names.append(stack.name("incomplete"))
        await stack.kube.create(RESOURCE_SLICES, _slice(names[-1], "incomplete", [_device(0, 2)], count=1000))

        await stack.still_serving()  # the control pod's class filters out all of them
        # a claim for one device of the big pool, chosen by its longest attribute
        wanted = _device(1000)
        attr, value = next(iter(wanted["attributes"].items()))
        await stack.kube.create(DEVICE_CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": klass},
            "spec": {"selectors": [{"cel": {"expression":
                f'device.driver == "{BIG}" && device.attributes["{BIG}"].{attr} == "{value["string"]}"'}}]}})
        await stack.template("t-big", klass)
        await stack.pod("big", {"gpu": {"resourceClaimTemplateName": "t-big"}})

        async def allocated() -> list[dict[str, Any]] | None:
            pod = await stack.kube.get(PODS, "big", namespace=stack.ns)
            if not pod["spec"].get("nodeName"):
                return None
            claim = await stack.flow.claim_of(pod)
            return ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")

        results = await stack.until(allocated, "the big pool's device allocated")
        assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(BIG, "big-pool", wanted["name"])]
    finally:
        for name in names:
            with contextlib.suppress(NotFound):
                await stack.kube.delete(RESOURCE_SLICES, name)
        with contextlib.suppress(NotFound):
            await stack.kube.delete(PODS, "big", namespace=stack.ns)
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIM_TEMPLATES, "t-big", namespace=stack.ns)
        with contextlib.suppress(NotFound):
            await stack.kube.delete(DEVICE_CLASSES, klass)
