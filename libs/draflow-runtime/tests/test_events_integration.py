"""EventRecorder against the real API server: one Event per (object, reason, message), counted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import EVENTS, SERVICE_ACCOUNTS, KubeClient, Resource

pytestmark = pytest.mark.integration


async def test_repeated_event_increments_count_instead_of_creating_another(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events")
    obj = await kube.get(SERVICE_ACCOUNTS, "default", namespace)
    obj = {**obj, "kind": "ServiceAccount", "apiVersion": "v1"}
    recorder = EventRecorder(kube, "draflow-test")

    await recorder.event(obj, "Warning", "NoDevices", "no device fits")
    await recorder.event(obj, "Warning", "NoDevices", "no device fits")
    await recorder.event(obj, "Warning", "NoDevices", "no device fits")
    await recorder.event(obj, "Normal", "Allocated", "allocated gpu-0")

    events = (await kube.list(EVENTS, namespace))["items"]
    by_reason = {e["reason"]: e for e in events}
    assert sorted(e["reason"] for e in events) == ["Allocated", "NoDevices"]
    warning = by_reason["NoDevices"]
    assert warning["count"] == 3
    assert warning["type"] == "Warning"
    assert warning["source"]["component"] == "draflow-test"
    assert warning["involvedObject"] == {
        "kind": "ServiceAccount", "apiVersion": "v1", "name": "default",
        "namespace": namespace, "uid": obj["metadata"]["uid"],
    }
    assert by_reason["Allocated"]["count"] == 1


async def test_recording_never_raises(kube: KubeClient) -> None:
    recorder = EventRecorder(kube, "draflow-test")
    bad = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x", "namespace": "does-not-exist-ns"}}
    await recorder.event(bad, "Warning", "Reason", "the namespace does not exist")


class _HeldCreates(KubeClient):
    """The real client, except that creating an Event about ``held`` waits for ``release``: a
    slow (throttled, far away) API server as seen by one object's Events."""

    def __init__(self, kube: KubeClient, held: str) -> None:
        super().__init__(kube._api)
        self.held = held
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None,
                     field_manager: str | None = None) -> dict[str, Any]:
        if res is EVENTS and body["involvedObject"]["name"] == self.held:
            self.waiting.set()
            await self.release.wait()
        return await super().create(res, body, namespace, field_manager)


async def test_a_slow_event_about_one_object_does_not_hold_up_events_about_others(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]]
) -> None:
    namespace = await make_namespace("events-slow")
    objs = {}
    for name in ("slow", "quick"):
        created = await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name}}, namespace)
        objs[name] = {**created, "kind": "ServiceAccount", "apiVersion": "v1"}
    held = _HeldCreates(kube, "slow")
    recorder = EventRecorder(held, "draflow-test")

    slow = [asyncio.create_task(recorder.event(objs["slow"], "Warning", "Slow", "same message"))
            for _ in range(3)]
    await asyncio.wait_for(held.waiting.wait(), timeout=60)  # the slow create has started
    # The old recorder serialised every Event behind one lock: this waited for the slow one forever.
    await asyncio.wait_for(recorder.event(objs["quick"], "Normal", "Quick", "not held up"), timeout=60)
    assert not any(task.done() for task in slow)
    held.release.set()
    await asyncio.gather(*slow)

    events = (await kube.list(EVENTS, namespace))["items"]
    by_reason = {e["reason"]: e for e in events}
    assert sorted(e["reason"] for e in events) == ["Quick", "Slow"]
    assert by_reason["Slow"]["count"] == 3  # the concurrent repeats still counted on one Event
    assert by_reason["Quick"]["count"] == 1
    assert len(recorder._locks) == 0  # no lock left behind per key
