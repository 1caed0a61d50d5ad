"""A GPU configured the normal way, end to end: opaque driver config in the DeviceClass and in the
ResourceClaimTemplate → claim created by claim-controller → allocated by structured-allocator (finalizer,
config copied into ``status.allocation``) → prepared by kubelet-dra-shim calling reference-driver, which
applies the config (its CDI spec's environment) → pod Running → pod deleted, claim deallocated and gone.

Issue 12 defect 1: the opaque parameters went to the API server in bytes it would not write itself, so the
allocator's finalizer patch got ``422 spec: field is immutable`` forever and the pod stayed Pending.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from draflow_runtime.kube import PODS, KubeClient
from draflow_testenv.fleetflow import DRIVER, ServiceFlow
from reference_driver.cdi import env_prefix, spec_file_name

pytestmark = pytest.mark.integration

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
# The class asks for time slicing with short slices; the claim overrides the interval. Keys deliberately
# not in sorted order, as a user writes them.
CLASS_PARAMETERS = {"kind": "GpuConfig", "apiVersion": f"{DRIVER}/v1",
                    "sharing": {"timeSlicing": {"interval": "Short"}, "strategy": "TimeSlicing"}}
CLAIM_PARAMETERS = {"kind": "GpuConfig", "apiVersion": f"{DRIVER}/v1",
                    "sharing": {"timeSlicing": {"interval": "Long"}, "strategy": "TimeSlicing"}}


def _opaque(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"opaque": {"driver": DRIVER, "parameters": parameters}}


@pytest.mark.timeout(600)
async def test_claim_with_opaque_config_from_a_template_runs_its_pod(
    testenv: Any, kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    ns = await make_namespace("opaque")
    flow = ServiceFlow(testenv, kube, ns, ns.rpartition("-")[2], nodes=1)
    fleet = Path(tempfile.mkdtemp(prefix="dop-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    try:
        await flow.start(run_service, fleet)
        await flow.wait_nodes_ready()
        await flow.create_objects(class_config=[_opaque(CLASS_PARAMETERS)],
                                  claim_config=[{"requests": ["gpu"], **_opaque(CLAIM_PARAMETERS)}])
        await flow.create_pod("configured")

        pod = await flow.wait_running("configured")  # stuck Pending before the fix

        claim = await flow.claim_of(pod)
        assert claim["spec"]["devices"]["config"][0]["opaque"]["parameters"] == CLAIM_PARAMETERS
        assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
        allocation = claim["status"]["allocation"]["devices"]
        assert [(c["source"], c["opaque"]["parameters"]) for c in allocation["config"]] == [
            ("FromClass", CLASS_PARAMETERS), ("FromClaim", CLAIM_PARAMETERS)]
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]

        # The driver applied the config: the claim's config (last match) wins over the class's.
        (result,) = allocation["results"]
        spec_file = spec_file_name(DRIVER, "gpu", claim["metadata"]["uid"])
        spec_path = flow.cdi_root(pod["spec"]["nodeName"]) / spec_file
        (device,) = json.loads(spec_path.read_text())["devices"]
        prefix = env_prefix(result["device"])
        env = device["containerEdits"]["env"]
        assert f"{prefix}_SHARING_STRATEGY=TimeSlicing" in env, env
        assert f"{prefix}_TIMESLICE_INTERVAL=Long" in env, env

        # The way back writes the claim again (reservedFor, allocation, finalizer): it must go too.
        await kube.delete(PODS, "configured", namespace=ns)

        await flow.wait_claim_gone(claim["metadata"]["name"], "the generated claim deallocated and deleted")
        assert not spec_path.exists()
    finally:
        await flow.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        await flow.clean_up()
