"""EventRecorder against the real API server: one Event per (object, reason, message), counted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import EVENTS, SERVICE_ACCOUNTS, KubeClient

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
