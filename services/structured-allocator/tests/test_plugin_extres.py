"""kube-scheduler v1.37.1 DynamicResources ``extendeddynamicresources_test.go``: the requests of the special
claim for extended resources backed by DRA and the ``requestMappings`` of
``pod.status.extendedResourceClaimStatus`` (upstream ``createRequestsAndMappings``), restated on
:func:`structured_allocator.extres.requests_and_mappings` with upstream's pods and expectations."""

from __future__ import annotations

from typing import Any

import pytest

from structured_allocator.extres import requests_and_mappings

GPU, GPU1, INIT = "example.com/gpu", "example.com/gpu1", "example.com/gpuinit"
IMPLICIT = "deviceclass.resource.kubernetes.io/classInit"


class Pod:
    """upstream's st.MakePod(): Res → con<N>, InitReq → init-con<N>, SidecarReq → sidecar-con<N>."""

    def __init__(self) -> None:
        self.containers: list[dict[str, Any]] = []
        self.inits: list[dict[str, Any]] = []

    def res(self, **requests: str) -> Pod:
        self.containers.append(_container(f"con{len(self.containers)}", requests))
        return self

    def init(self, **requests: str) -> Pod:
        self.inits.append(_container(f"init-con{len(self.inits)}", requests))
        return self

    def sidecar(self, **requests: str) -> Pod:
        sidecar = _container(f"sidecar-con{len(self.inits)}", requests)
        self.inits.append({**sidecar, "restartPolicy": "Always"})
        return self

    def obj(self) -> dict[str, Any]:
        return {"metadata": {"name": "my-pod", "namespace": "default", "uid": "1234"},
                "spec": {"containers": self.containers, "initContainers": self.inits}}


NAMES = {"gpu": GPU, "gpu1": GPU1, "init": INIT, "implicit": IMPLICIT}


def _container(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {NAMES[k]: v for k, v in requests.items()}}}


POD1 = Pod().res(gpu="1", gpu1="2").obj()
POD2 = Pod().res(gpu="1").res(gpu1="2").obj()
POD_INIT = Pod().res(gpu="1").init(init="2").obj()
POD_INIT2 = Pod().res(gpu="1").init(init="1").init(init="2").obj()
POD_INIT3 = Pod().res(gpu="1").init(init="1").sidecar(init="1").init(init="2").obj()
POD1_INIT_IMPLICIT = Pod().init(init="1", implicit="2").obj()
POD_INIT_IMPLICIT = Pod().res(gpu="1").init(init="1").init(implicit="2").obj()

CLASS = {GPU: "class"}
CLASS2 = {GPU: "class", GPU1: "class1"}
CLASS_INIT = {GPU: "class", INIT: "classInit", IMPLICIT: "classInit"}


@pytest.mark.parametrize(("pod", "resources", "classes", "want"), [
    pytest.param(POD1, {}, {}, [], id="nil"),
    pytest.param(POD1, {GPU}, CLASS, [("container-0-request-0", "class", 1)], id="one resource match"),
    pytest.param(POD1, {GPU, GPU1}, CLASS, [("container-0-request-0", "class", 1)],
                 id="one resource match, one resource not match"),
    pytest.param(POD1, {GPU, GPU1}, CLASS2,
                 [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
                 id="two resources match"),
    pytest.param(POD2, {GPU, GPU1}, CLASS2,
                 [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
                 id="two containers match"),
    pytest.param(POD_INIT, {GPU, INIT}, CLASS_INIT,
                 [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
                 id="one init container, one regular container"),
    pytest.param(POD_INIT2, {GPU, INIT}, CLASS_INIT,
                 [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
                 id="two init containers, one regular container"),
    pytest.param(POD_INIT3, {GPU, INIT}, CLASS_INIT,
                 [("container-1-request-0", "classInit", 1), ("container-2-request-0", "classInit", 2),
                  ("container-3-request-0", "class", 1)],
                 id="three init containers, one sidecar, one regular container"),
])
def test_create_requests_and_mappings_requests(
        pod: dict[str, Any], resources: set[str], classes: dict[str, str],
        want: list[tuple[str, str, int]]) -> None:
    requests, _ = requests_and_mappings(pod, resources, classes)
    got = sorted((r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests)
    assert got == want
    assert all(r["exactly"].get("allocationMode", "ExactCount") == "ExactCount" for r in requests)


@pytest.mark.parametrize(("pod", "resources", "classes", "want"), [
    pytest.param(POD1, {GPU, GPU1}, CLASS2,
                 [("container-0-request-0", "con0", GPU), ("container-0-request-1", "con0", GPU1)],
                 id="one container, two requests"),
    pytest.param(POD1_INIT_IMPLICIT, {GPU, INIT, IMPLICIT}, CLASS_INIT,
                 [("container-0-request-0", "init-con0", IMPLICIT),
                  ("container-0-request-1", "init-con0", INIT)],
                 id="one container, one explicit and one implicit request"),
    pytest.param(POD2, {GPU, GPU1}, CLASS2,
                 [("container-0-request-0", "con0", GPU), ("container-1-request-0", "con1", GPU1)],
                 id="two containers, two requests"),
    pytest.param(POD_INIT, {GPU, INIT}, CLASS_INIT,
                 [("container-0-request-0", "init-con0", INIT), ("container-1-request-0", "con0", GPU)],
                 id="one init container, one regular container, one request"),
    pytest.param(POD_INIT2, {GPU, INIT}, CLASS_INIT,
                 [("container-1-request-0", "init-con0", INIT),
                  ("container-1-request-0", "init-con1", INIT),
                  ("container-2-request-0", "con0", GPU)],
                 id="three containers (two are init container), two requests"),
    pytest.param(POD_INIT_IMPLICIT, {GPU, INIT, IMPLICIT}, CLASS_INIT,
                 [("container-0-request-0", "init-con0", INIT),
                  ("container-1-request-0", "init-con1", IMPLICIT),
                  ("container-2-request-0", "con0", GPU)],
                 id="three containers (two are init container), both explicit and implicit resources"),
    pytest.param(POD_INIT3, {GPU, INIT}, CLASS_INIT,
                 [("container-1-request-0", "init-con0", INIT),
                  ("container-1-request-0", "sidecar-con1", INIT),
                  ("container-2-request-0", "init-con2", INIT), ("container-3-request-0", "con0", GPU)],
                 id="four containers (two are init container, one sidecar), three requests"),
])
def test_create_requests_and_mappings_mappings(
        pod: dict[str, Any], resources: set[str], classes: dict[str, str],
        want: list[tuple[str, str, str]]) -> None:
    _, mappings = requests_and_mappings(pod, resources, classes)
    got = sorted((m["requestName"], m["containerName"], m["resourceName"]) for m in mappings)
    assert got == want
