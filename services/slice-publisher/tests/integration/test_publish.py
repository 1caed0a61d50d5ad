"""slice-publisher against the real kube-apiserver and a real reference-driver process."""

from __future__ import annotations

import asyncio
import time

import pytest

from draflow_runtime.kube import RESOURCE_SLICES
from draflow_testenv.wait import consistently, eventually

from .conftest import DRIVER, Harness, settled

pytestmark = pytest.mark.integration


def shape(slices: list[dict]) -> dict:
    """What a consumer sees of a pool: sizes per slice, generations, counts, device names."""
    return {
        "sizes": [len(s["spec"].get("devices") or ()) for s in slices],
        "generations": {s["spec"]["pool"]["generation"] for s in slices},
        "counts": {s["spec"]["pool"]["resourceSliceCount"] for s in slices},
        "devices": sorted(d["name"] for s in slices for d in s["spec"].get("devices") or ()),
    }


def gpus(n: int) -> list[str]:
    return sorted(f"gpu-{i}" for i in range(n))


async def wait_shape(h: Harness, sizes: list[int], generation: int) -> list[dict]:
    want = {"sizes": sizes, "generations": {generation}, "counts": {len(sizes)}, "devices": gpus(sum(sizes))}

    async def check() -> list[dict] | None:
        slices = await h.slices()
        return slices if shape(slices) == want else None

    try:
        return await eventually(check, timeout=30)
    except AssertionError:
        raise AssertionError(f"want {want}, have {shape(await h.slices())}") from None


async def test_inventory_8_200_8_and_restart_writes_nothing(harness: Harness) -> None:
    h = harness
    await h.start_driver()
    pub = await h.start_publisher()

    slices = await wait_shape(h, [8], generation=1)
    owner = slices[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Node", h.dirs.node)
    assert slices[0]["spec"]["driver"] == DRIVER and slices[0]["spec"]["pool"]["name"] == h.dirs.node

    h.dirs.set_gpus(200)
    await wait_shape(h, [64, 64, 64, 8], generation=2)  # slices added: generation bumped

    h.dirs.set_gpus(8)
    # Shrinking: the 3 extra slices are deleted, the one left changes once: generation kept (upstream rule).
    slices = await wait_shape(h, [8], generation=2)
    await eventually(lambda: settled(pub))
    before = {s["metadata"]["name"]: (s["metadata"]["uid"], s["metadata"]["resourceVersion"]) for s in slices}

    await h.stop_publisher(pub)
    again = await h.start_publisher()
    await eventually(lambda: settled(again), timeout=30)

    async def untouched() -> bool:
        now = {s["metadata"]["name"]: (s["metadata"]["uid"], s["metadata"]["resourceVersion"])
               for s in await h.slices()}
        return again.stats.writes == 0 and now == before

    await consistently(untouched, 0.5, "the restarted publisher writes nothing")  # anything late shows up
    assert again.stats.writes == 0, again.stats
    assert again.stats.syncs >= 1  # it did look at the pool
    after = {
        s["metadata"]["name"]: (s["metadata"]["uid"], s["metadata"]["resourceVersion"])
        for s in await h.slices()
    }
    assert after == before


def tainted(slices: list[dict]) -> int:
    return sum(
        1
        for s in slices
        for d in s["spec"].get("devices") or ()
        if any(t["key"] == "draflow.dev/driver-unavailable" for t in d.get("taints") or ())
    )


async def test_driver_killed_taints_at_once_and_driver_back_in_grace_keeps_slices(harness: Harness) -> None:
    h = harness
    proc = await h.start_driver()
    pub = await h.start_publisher(driver_gone_grace=120.0)
    slices = await wait_shape(h, [8], generation=1)
    uids = {s["metadata"]["name"]: s["metadata"]["uid"] for s in slices}
    await eventually(lambda: settled(pub))

    killed = time.monotonic()
    await proc.kill()
    slices = await eventually(lambda: _when(h, lambda s: tainted(s) == 8), interval=0.005)
    delay = time.monotonic() - killed
    print(f"\ntaint delay (driver SIGKILL -> taint visible in the API): {delay * 1000:.0f} ms")
    taint = next(
        t for t in slices[0]["spec"]["devices"][0]["taints"] if t["key"] == "draflow.dev/driver-unavailable"
    )
    assert taint["effect"] == "NoSchedule" and taint["timeAdded"]
    assert {s["metadata"]["name"]: s["metadata"]["uid"] for s in slices} == uids

    # Back within the grace: the taints are removed in place; the slice objects stay (same UIDs).
    await h.start_driver()
    slices = await eventually(lambda: _when(h, lambda s: len(s) == 1 and tainted(s) == 0))
    assert {s["metadata"]["name"]: s["metadata"]["uid"] for s in slices} == uids
    assert shape(slices)["devices"] == gpus(8)
    # The API can show the write before the publisher has read the answer to it and counted it.
    await eventually(lambda: settled(pub))
    assert pub.stats.created == 1 and pub.stats.deleted == 0 and pub.stats.updated == 2


async def test_driver_gone_longer_than_grace_loses_its_slices(harness: Harness) -> None:
    h = harness
    proc = await h.start_driver()
    pub = await h.start_publisher(driver_gone_grace=3.0)
    await wait_shape(h, [8], generation=1)
    await eventually(lambda: settled(pub))
    killed = time.monotonic()
    await proc.kill()
    await eventually(lambda: _when(h, lambda s: tainted(s) == 8))
    await eventually(lambda: _when(h, lambda s: len(s) == 0, empty_ok=True), timeout=30)
    assert time.monotonic() - killed >= 3.0  # not before the grace


async def test_unhealthy_devices_are_tainted_and_untainted(harness: Harness) -> None:
    h = harness
    await h.start_driver("--no-taint-unhealthy-devices")
    await h.start_publisher()
    await wait_shape(h, [8], generation=1)

    def unhealthy(slices: list[dict]) -> list[str]:
        return sorted(
            d["name"]
            for s in slices
            for d in s["spec"].get("devices") or ()
            if any(t["key"] == "draflow.dev/unhealthy" for t in d.get("taints") or ())
        )

    h.dirs.set_unhealthy(["gpu-3"])
    await eventually(lambda: _when(h, lambda s: unhealthy(s) == ["gpu-3"]))
    h.dirs.set_unhealthy([])
    await eventually(lambda: _when(h, lambda s: len(s) == 1 and unhealthy(s) == []))


def foreign_slice(h: Harness, driver: str) -> dict:
    """A slice slice-publisher did not write (no managed-by label), for a driver that never registers."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{h.dirs.node}-{driver.split('.')[0]}"},
        "spec": {
            "driver": driver,
            "nodeName": h.dirs.node,
            "devices": [{"name": "dev-0"}],
            "pool": {"name": h.dirs.node, "generation": 1, "resourceSliceCount": 1},
        },
    }


async def test_foreign_slices_survive_a_publisher_restart_by_default(harness: Harness) -> None:
    """A self-publishing driver that registers late (or never) keeps its slices: they are not ours."""
    h = harness
    proc = await h.start_driver()
    pub = await h.start_publisher()
    await wait_shape(h, [8], generation=1)
    await h.stop_publisher(pub)
    await proc.kill()  # our managed pool loses its driver too: its slices still go
    foreign = await h.kube.create(RESOURCE_SLICES, foreign_slice(h, "late.example.com"))
    again = await h.start_publisher()
    await eventually(lambda: _when(h, lambda s: [x["spec"]["driver"] for x in s] == ["late.example.com"]),
                     timeout=20)
    await asyncio.wait_for(again.startup_cleaned.wait(), timeout=20)
    left = await h.slices()
    assert [(s["metadata"]["uid"], s["metadata"]["resourceVersion"]) for s in left] == [
        (foreign["metadata"]["uid"], foreign["metadata"]["resourceVersion"])
    ]
    assert again.stats.deleted == 1


async def test_startup_with_wipe_foreign_slices_removes_slices_of_drivers_that_did_not_come_back(
    harness: Harness,
) -> None:
    h = harness
    proc = await h.start_driver()
    pub = await h.start_publisher()
    await wait_shape(h, [8], generation=1)
    await h.stop_publisher(pub)
    await proc.kill()
    # A slice some earlier writer left for a driver that is not installed any more.
    await h.kube.create(RESOURCE_SLICES, foreign_slice(h, "old.example.com"))
    started = time.monotonic()
    again = await h.start_publisher(startup_grace=2.0, wipe_foreign_slices=True)

    async def both() -> bool:
        return len(await h.slices()) == 2

    await consistently(both, 1.0, "nothing removed within the grace")
    assert len(await h.slices()) == 2  # nothing removed within the grace
    await eventually(lambda: _when(h, lambda s: len(s) == 0, empty_ok=True), timeout=20)
    assert time.monotonic() - started >= 2.0
    assert again.stats.deleted == 2


async def _when(h: Harness, pred, empty_ok: bool = False):  # type: ignore[no-untyped-def]
    slices = await h.slices()
    if not slices and not empty_ok:
        return None
    return (slices or [{}]) if pred(slices) else None
