"""An ordinary cluster: kube-apiserver v1.37.1 does not serve the beta and alpha APIs unless its
``--runtime-config`` enables them. PodGroups (``scheduling.k8s.io/v1beta1``, GenericWorkload) and
ResourcePoolStatusRequests (``resource.k8s.io/v1alpha3``) are not served here, nor DeviceTaintRules (GA, but
any resource can be turned off there), while the services keep their default feature gates
(DRAWorkloadResourceClaims, DRAResourcePoolStatus and DRADeviceTaintRules on).

The five services as processes on a one-node fleet: a pod with a template claim gets its claim, which is
allocated and reserved for it, and the pod is bound and Running; claim-controller and structured-allocator
each log one warning per API that is not served, naming it and the feature gate they treat as off.

Before: the PodGroup informers of both services listed 404 forever and never synced, so no claim was made
and nothing was placed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, POD_GROUPS, RESOURCE_POOL_STATUS_REQUESTS, KubeClient
from draflow_testenv.environment import Environment
from draflow_testenv.fleetflow import ServiceFlow

pytestmark = pytest.mark.integration

# After the environment's own --runtime-config (which turns them on): the last value of a key wins.
NOT_SERVED = ("--runtime-config=scheduling.k8s.io/v1beta1=false,resource.k8s.io/v1alpha3=false,"
              "resource.k8s.io/v1/devicetaintrules=false")
WARNING = "api not served, feature off"


def _warnings(log: Path) -> list[tuple[str, str, str]]:
    """(resource, api_version, gate) of each 'api not served' line of a service's JSON log."""
    found = []
    for line in log.read_text().splitlines():
        try:
            entry: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == WARNING:
            assert entry.get("level") == "warning", entry
            found.append((entry.get("resource"), entry.get("api_version"), entry.get("gate")))
    return found


@pytest.mark.timeout(600)
async def test_without_the_podgroup_api_a_template_claim_is_made_allocated_and_its_pod_bound() -> None:
    async with Environment(apiserver_args=(NOT_SERVED,)) as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        suffix = uuid.uuid4().hex[:8]
        ns = f"unserved-{suffix}"
        fleet = Path(tempfile.mkdtemp(prefix="dus-", dir="/tmp"))  # short: unix socket paths <= 107 bytes
        flow = ServiceFlow(env, kube, ns, suffix, nodes=1, gpus=2)
        try:
            for res in (POD_GROUPS, RESOURCE_POOL_STATUS_REQUESTS, DEVICE_TAINT_RULES):
                with pytest.raises(NotFound):
                    await kube.list(res, limit=1)
            await env.admin.ensure_namespace(ns)
            await env.admin.ensure_service_account(ns, "default")
            await flow.start(env.run_service, fleet)
            await flow.wait_nodes_ready()
            await flow.create_objects()
            await flow.create_pod("solo")

            pod = await flow.wait_running("solo")
            claim = await flow.claim_of(pod)
            assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
            assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
            assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]

            pod_groups = ("podgroups", "scheduling.k8s.io/v1beta1", "DRAWorkloadResourceClaims")
            pool_status = ("resourcepoolstatusrequests", "resource.k8s.io/v1alpha3", "DRAResourcePoolStatus")
            taint_rules = ("devicetaintrules", "resource.k8s.io/v1", "DRADeviceTaintRules")
            logs = env.logs_dir
            assert sorted(_warnings(logs / f"claim-controller-{flow.prefix}.log")) == [
                taint_rules, pod_groups]
            assert sorted(_warnings(logs / f"structured-allocator-{flow.prefix}.log")) == [
                taint_rules, pod_groups, pool_status]
        finally:
            await flow.stop()
            shutil.rmtree(fleet, ignore_errors=True)
            await kube.close()
