"""``TestTruncateHealthMessage`` of kubelet v1.37.1 end to end (``kubelet_map.py``): the real reference
driver reports a device Unhealthy with a message longer than kube-apiserver takes in a pod status (1024
bytes); the pod still runs and shows the health, with the message cut to 1021 bytes + ``...``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import eventually
from test_health_e2e import _driver_and_settings, _registered, _running_pod_with_health, _set_health

from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import KubeClient
from draflow_testenv.identity import ServiceIdentity
from kubelet_dra_shim.fleet import Fleet

pytestmark = pytest.mark.integration


async def test_a_health_message_too_long_for_the_api_server_is_cut(
    kube: KubeClient, make_namespace: Any, short_dir: Path, run_service: Any,
    shim_identity: ServiceIdentity, driver_identity: ServiceIdentity,
) -> None:
    node, state_dir, settings = await _driver_and_settings(run_service, short_dir, driver_identity, "shimt")
    _set_health(state_dir, {"gpu-0": ("Unhealthy", "E" * 3000)})  # before the pod: its first status has it
    fleet = Fleet(settings, shim_identity.kube, EventRecorder(shim_identity.kube, "kubelet-dra-shim"))
    await fleet.start()
    try:
        await eventually(lambda: _registered(fleet.nodes[node].store), within=60)
        _, health_is = await _running_pod_with_health(kube, make_namespace, node)
        await eventually(lambda: health_is("Unhealthy", "E" * 1021 + "..."), within=30)
    finally:
        await fleet.stop()
