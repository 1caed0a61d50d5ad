"""Pods of unusual shape. A pod with 12 template claims is created, allocated on one node and prepared in
one batch; when one of its 12 cannot be satisfied, none of them is allocated (no half-written pod) and the
condition names the one that cannot. (A claim shared by 300 pods: structured-allocator's
``test_claim_shared_by_300_pods_reserves_256_without_rejected_writes``.)"""

from __future__ import annotations

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.dra import claim_names
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from reference_driver.cdi import spec_file_name

pytestmark = pytest.mark.integration


async def test_a_pod_with_12_claims_runs_with_12_devices_on_one_node(stack: Stack) -> None:
    await stack.pod("twelve", {f"c{i}": {"resourceClaimTemplateName": "one-gpu"} for i in range(12)})
    try:
        pod = await stack.flow.wait_running("twelve")
        names = claim_names(pod)
        assert len(names) == 12
        devices = set()
        cdi = stack.flow.cdi_root(pod["spec"]["nodeName"])
        for name in names:
            claim = await stack.kube.get(RESOURCE_CLAIMS, name, namespace=stack.ns)
            (result,) = claim["status"]["allocation"]["devices"]["results"]
            assert result["pool"] == pod["spec"]["nodeName"]
            devices.add(result["device"])
            assert (cdi / spec_file_name(DRIVER, "gpu", claim["metadata"]["uid"])).exists(), name
        assert len(devices) == 12
    finally:
        await stack.kube.delete(PODS, "twelve", namespace=stack.ns)
    await stack.still_serving()


async def test_one_impossible_claim_of_12_allocates_none_and_is_named(stack: Stack) -> None:
    missing = stack.name("nosuch-class") + f".{DRIVER}"
    await stack.template("t-impossible", missing)
    claims = {f"c{i}": {"resourceClaimTemplateName": "one-gpu"} for i in range(11)}
    claims["c11"] = {"resourceClaimTemplateName": "t-impossible"}
    await stack.pod("eleven-and-one", claims)
    try:
        message = await stack.wait_condition("eleven-and-one", missing)
        assert "does not exist" in message, message
        pod = await stack.kube.get(PODS, "eleven-and-one", namespace=stack.ns)
        assert len(claim_names(pod)) == 12
        for name in claim_names(pod):
            claim = await stack.kube.get(RESOURCE_CLAIMS, name, namespace=stack.ns)
            assert not (claim.get("status") or {}).get("allocation"), name
        await stack.still_serving()
    finally:
        await stack.kube.delete(PODS, "eleven-and-one", namespace=stack.ns)
