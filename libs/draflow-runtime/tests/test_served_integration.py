"""``served`` against the real kube-apiserver's discovery (the test environment serves the beta and alpha
APIs draflow uses; a version or a resource it does not know is not served)."""

from __future__ import annotations

import pytest

from draflow_runtime.kube import (
    DEVICE_TAINT_RULES,
    POD_GROUPS,
    PODS,
    RESOURCE_POOL_STATUS_REQUESTS,
    KubeClient,
    Resource,
)
from draflow_runtime.served import served

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        pytest.param(POD_GROUPS, True, id="podgroups"),
        pytest.param(RESOURCE_POOL_STATUS_REQUESTS, True, id="resourcepoolstatusrequests"),
        pytest.param(DEVICE_TAINT_RULES, True, id="devicetaintrules"),
        pytest.param(PODS, True, id="core-group"),
        pytest.param(Resource("scheduling.k8s.io", "v1alpha9", "podgroups", "PodGroup", True), False,
                     id="unknown-version"),
        pytest.param(Resource("resource.k8s.io", "v1", "nosuchthings", "NoSuchThing", False), False,
                     id="unknown-resource-of-a-served-version"),
    ],
)
async def test_served_reads_discovery(kube: KubeClient, resource: Resource, expected: bool) -> None:
    assert await served(kube, resource) is expected
