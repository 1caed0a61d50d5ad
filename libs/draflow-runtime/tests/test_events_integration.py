"""EventRecorder against the real API server: events.k8s.io/v1 Events folded into series like client-go's
tools/events, read back through both events.k8s.io/v1 and core/v1 (what kubectl describe reads)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import EVENTS, EVENTS_V1, NAMESPACES, SERVICE_ACCOUNTS, KubeClient, Resource
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def _account(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    created = await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name}}, namespace)
    return {**created, "kind": "ServiceAccount", "apiVersion": "v1"}


async def _events(kube: KubeClient, namespace: str, api: Resource = EVENTS_V1) -> dict[str, dict[str, Any]]:
    items = (await kube.list(api, namespace))["items"]
    assert len({e["reason"] for e in items}) == len(items), items
    return {e["reason"]: e for e in items}


async def test_a_repeated_event_becomes_a_series_as_client_go_does(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events")
    obj = await _account(kube, namespace, "sa")
    recorder = EventRecorder(kube, "draflow-test", host="h1")

    await recorder.event(obj, "Warning", "NoDevices", "no device fits", action="Allocating")
    first = (await _events(kube, namespace))["NoDevices"]
    assert "series" not in first and first["eventTime"]
    await recorder.event(obj, "Warning", "NoDevices", "no device fits", action="Allocating")
    await recorder.event(obj, "Warning", "NoDevices", "no device fits", action="Allocating")
    await recorder.event(obj, "Normal", "Allocated", "allocated gpu-0", action="Allocating")

    events = await _events(kube, namespace)
    assert sorted(events) == ["Allocated", "NoDevices"]
    warning = events["NoDevices"]
    assert warning["metadata"]["name"] == first["metadata"]["name"]  # patched, not another Event
    assert warning["series"]["count"] == 2  # the third only counted in memory, as client-go does
    assert "series" not in events["Allocated"]
    assert warning["regarding"] == {"kind": "ServiceAccount", "apiVersion": "v1", "name": "sa",
                                    "namespace": namespace, "uid": obj["metadata"]["uid"]}
    assert (warning["reportingController"], warning["reportingInstance"]) == ("draflow-test",
                                                                              "draflow-test-h1")
    assert (warning["action"], warning["note"], warning["type"]) == ("Allocating", "no device fits",
                                                                     "Warning")

    await recorder.aclose()  # writes the pending count
    core = await _events(kube, namespace, EVENTS)  # the same objects as kubectl describe reads them
    assert core["NoDevices"]["series"]["count"] == 3
    assert core["NoDevices"]["series"]["lastObservedTime"] >= core["NoDevices"]["eventTime"]
    assert core["NoDevices"]["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert core["NoDevices"]["message"] == "no device fits"
    assert core["NoDevices"]["reportingComponent"] == "draflow-test"
    assert core["Allocated"]["involvedObject"]["name"] == "sa"


async def test_an_event_about_a_cluster_scoped_object_goes_to_default_with_its_related_object(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-cluster")
    ns = {**await kube.get(NAMESPACES, namespace), "kind": "Namespace", "apiVersion": "v1"}
    related = await _account(kube, namespace, "rel")
    recorder = EventRecorder(kube, "draflow-test")
    await recorder.event(ns, "Normal", "Seen", "about a namespace", action="Testing", related=related)
    items = (await kube.list(EVENTS_V1, "default",
                             field_selector=f"regarding.uid={ns['metadata']['uid']}"))["items"]
    assert [e["note"] for e in items] == ["about a namespace"]
    assert items[0]["related"]["uid"] == related["metadata"]["uid"]
    assert "namespace" not in items[0]["regarding"]


async def test_the_six_minute_window_ends_a_series_and_its_count_is_written(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-window")
    obj = await _account(kube, namespace, "sa")
    clock = _Clock()
    recorder = EventRecorder(kube, "draflow-test", clock=clock)

    await recorder.event(obj, "Normal", "Once", "alone", action="Testing")
    clock.now += 361  # an Event without series is forgotten 6 minutes after it happened
    await recorder.event(obj, "Normal", "Once", "alone", action="Testing")
    once = (await kube.list(EVENTS_V1, namespace))["items"]
    assert len(once) == 2 and not any("series" in e for e in once)

    async def often() -> list[int]:
        items = (await kube.list(EVENTS_V1, namespace))["items"]
        return sorted(e.get("series", {}).get("count", 1) for e in items if e["reason"] == "Often")

    for _ in range(4):
        await recorder.event(obj, "Warning", "Often", "again", action="Testing")
        clock.now += 1
    assert await often() == [2]
    await recorder.sweep()  # not due yet: written neither at the end nor as a refresh
    assert await often() == [2]
    clock.now += 361
    await recorder.sweep()  # quiet for the window: the series is over, its last count written
    assert await often() == [4]
    assert len(recorder._seen) == 0  # both keys forgotten: all their Events are over
    await recorder.event(obj, "Warning", "Often", "again", action="Testing")  # a new Event
    assert await often() == [1, 4]


async def test_a_long_series_is_refreshed_while_it_goes_on(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-refresh")
    obj = await _account(kube, namespace, "sa")
    clock = _Clock()
    recorder = EventRecorder(kube, "draflow-test", clock=clock, refresh=100)
    for _ in range(5):
        await recorder.event(obj, "Warning", "Often", "again", action="Testing")
    clock.now += 101
    await recorder.event(obj, "Warning", "Often", "again", action="Testing")
    await recorder.sweep()
    assert (await _events(kube, namespace))["Often"]["series"]["count"] == 6


async def test_a_series_whose_event_expired_is_created_again(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-expired")
    obj = await _account(kube, namespace, "sa")
    recorder = EventRecorder(kube, "draflow-test")
    await recorder.event(obj, "Warning", "Gone", "ttl", action="Testing")
    first = (await _events(kube, namespace))["Gone"]
    await kube.delete(EVENTS_V1, first["metadata"]["name"], namespace)  # what the event TTL does
    await recorder.event(obj, "Warning", "Gone", "ttl", action="Testing")
    again = (await _events(kube, namespace))["Gone"]
    assert again["series"]["count"] == 2 and again["note"] == "ttl"


async def test_overlong_notes_and_reasons_are_cut_to_the_api_limits_not_lost(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-long")
    obj = await _account(kube, namespace, "sa")
    recorder = EventRecorder(kube, "draflow-test")
    note = "é" * 3000  # 6000 bytes; the limit counts bytes
    await recorder.event(obj, "Warning", "R" * 300, note, action="Testing")
    (event,) = (await kube.list(EVENTS_V1, namespace))["items"]
    assert len(event["note"].encode()) <= 1024 and event["note"].endswith("...")
    assert event["note"].startswith("é" * 500)
    assert len(event["reason"]) == 128


async def test_recording_never_raises(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    recorder = EventRecorder(kube, "draflow-test")
    bad = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x", "namespace": "does-not-exist-ns"}}
    await recorder.event(bad, "Warning", "Reason", "the namespace does not exist", action="Testing")
    namespace = await make_namespace("events-bad")
    obj = await _account(kube, namespace, "sa")
    await recorder.event(obj, "Info", "Reason", "neither Normal nor Warning", action="Testing")
    await recorder.event(obj, "Normal", "Reason", "no action", action="")  # the API server says Invalid
    assert (await kube.list(EVENTS_V1, namespace))["items"] == []


class _Held(KubeClient):
    """The real client, except that writing an Event about ``held`` (create or series patch) waits for
    ``release``: a slow (throttled, far away) API server as seen by one object's Events."""

    def __init__(self, kube: KubeClient, held: str) -> None:
        super().__init__(kube._api)
        self.held = held
        self.held_names: set[str] = set()
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def _hold(self) -> None:
        self.waiting.set()
        await self.release.wait()

    async def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None,
                     field_manager: str | None = None) -> dict[str, Any]:
        if res is EVENTS_V1 and body["regarding"]["name"] == self.held:
            self.held_names.add(body["metadata"]["name"])
            await self._hold()
        return await super().create(res, body, namespace, field_manager)

    async def patch(self, res: Resource, name: str, body: Any, namespace: str | None = None,
                    *args: Any, **kwargs: Any) -> dict[str, Any]:
        if res is EVENTS_V1 and name in self.held_names:
            await self._hold()
        return await super().patch(res, name, body, namespace, *args, **kwargs)


async def test_a_slow_event_about_one_object_does_not_hold_up_events_about_others(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-slow")
    objs = {name: await _account(kube, namespace, name) for name in ("slow", "quick")}
    held = _Held(kube, "slow")
    recorder = EventRecorder(held, "draflow-test")

    slow = [asyncio.create_task(recorder.event(objs["slow"], "Warning", "Slow", "same message",
                                               action="Testing")) for _ in range(3)]
    await asyncio.wait_for(held.waiting.wait(), timeout=60)  # the slow create has started
    await asyncio.wait_for(recorder.event(objs["quick"], "Normal", "Quick", "not held up", action="Testing"),
                           timeout=60)
    assert not any(task.done() for task in slow)
    held.release.set()
    await asyncio.gather(*slow)
    await recorder.flush()

    events = await _events(kube, namespace)
    assert sorted(events) == ["Quick", "Slow"]
    assert events["Slow"]["series"]["count"] == 3  # the concurrent repeats still counted on one Event
    assert "series" not in events["Quick"]
    assert len(recorder._locks) == 0  # no lock left behind per key


async def test_a_slow_series_write_does_not_hold_up_other_events_or_series(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-slow-series")
    objs = {name: await _account(kube, namespace, name) for name in ("slow", "quick")}
    held = _Held(kube, "slow")
    recorder = EventRecorder(held, "draflow-test")
    held.release.set()
    for name in ("slow", "quick"):
        for _ in range(3):
            await recorder.event(objs[name], "Warning", "Repeated", name, action="Testing")
    held.release.clear()
    held.waiting.clear()

    flushing = asyncio.create_task(recorder.flush())  # both series have a count to write
    await asyncio.wait_for(held.waiting.wait(), timeout=60)  # the slow series' patch has started

    async def quick_written() -> bool:
        items = (await kube.list(EVENTS_V1, namespace))["items"]
        return any(e["note"] == "quick" and e["series"]["count"] == 3 for e in items)
    await eventually(quick_written, 60, "the quick series written while the slow one is held")
    await asyncio.wait_for(recorder.event(objs["quick"], "Normal", "Other", "not held up", action="Testing"),
                           timeout=60)
    assert not flushing.done()
    held.release.set()
    await flushing
    slow = [e for e in (await kube.list(EVENTS_V1, namespace))["items"] if e["note"] == "slow"]
    assert [e["series"]["count"] for e in slow] == [3]
