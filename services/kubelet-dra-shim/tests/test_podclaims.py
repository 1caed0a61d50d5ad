"""Pure decisions: which claims a pod has, whether one may be prepared, what each container sees."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_dra_shim.checkpoint import ClaimInfo, PreparedDevice
from kubelet_dra_shim.podclaims import (
    PodClaim,
    allocated_resources_status,
    check_claim_for_pod,
    container_cdi_devices,
    pod_claims,
)
from kubelet_dra_shim.simkubelet import parse_duration, running_status


def _pod(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
        "spec": {"resourceClaims": claims, "containers": extra.get("containers", [])},
        "status": {"resourceClaimStatuses": statuses or []},
    }


@pytest.mark.parametrize(
    ("claims", "statuses", "want"),
    [
        pytest.param(
            [{"name": "a", "resourceClaimName": "shared"}],
            [],
            [PodClaim("a", "shared", None, generated=False)],
            id="direct-claim",
        ),
        pytest.param(
            [{"name": "a", "resourceClaimTemplateName": "t"}],
            [],
            [PodClaim("a", None, "t", generated=True)],
            id="template-not-generated",
        ),
        pytest.param(
            [{"name": "a", "resourceClaimTemplateName": "t"}],
            [{"name": "a", "resourceClaimName": "p-a-x"}],
            [PodClaim("a", "p-a-x", "t", generated=True)],
            id="template-generated",
        ),
        pytest.param(
            [{"name": "a", "resourceClaimTemplateName": "t"}], [{"name": "a"}], [], id="template-not-needed"
        ),
    ],
)
def test_pod_claims(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]], want: list[PodClaim]
) -> None:
    got = pod_claims(_pod(claims, statuses))
    assert got == want
    assert [pc.waiting for pc in got] == [
        "ResourceClaim not generated yet" if pc.claim_name is None else "" for pc in want
    ]


def test_extended_resource_claim_is_included() -> None:
    pod = _pod([])
    pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "ext", "requestMappings": []}
    assert pod_claims(pod) == [PodClaim("", "ext", None, generated=True)]


def _claim(*, owned: bool = True, allocated: bool = True, reserved: bool = True) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "cu",
            "ownerReferences": (
                [{"uid": "pod-uid", "controller": True, "kind": "Pod", "name": "p"}] if owned else []
            ),
        },
        "status": {},
    }
    if allocated:
        claim["status"]["allocation"] = {
            "devices": {"results": [{"driver": "d", "pool": "p", "device": "x", "request": "r"}]}
        }
    if reserved:
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
    return claim


@pytest.mark.parametrize(
    ("claim", "template", "want"),
    [
        pytest.param(_claim(), True, "", id="ok"),
        pytest.param(_claim(owned=False), True, "ResourceClaim was not created for this pod", id="not-owned"),
        pytest.param(_claim(owned=False), False, "", id="direct-claim-needs-no-owner"),
        pytest.param(
            _claim(allocated=False, reserved=False), False, "ResourceClaim is not allocated", id="unallocated"
        ),
        pytest.param(
            _claim(reserved=False), False, "pod is not in the ResourceClaim's reservedFor", id="not-reserved"
        ),
    ],
)
def test_check_claim_for_pod(claim: dict[str, Any], template: bool, want: str) -> None:
    assert check_claim_for_pod(_pod([]), claim, template) == want


def _prepared() -> dict[str, ClaimInfo]:
    return {
        "gpus": ClaimInfo(
            "u",
            "c",
            "ns",
            drivers={
                "d": [
                    PreparedDevice("p", "g0", ["big"], ["d/gpu=g0"]),
                    PreparedDevice("p", "g1", ["small"], ["d/gpu=g1"]),
                ]
            },
        )
    }


def test_container_cdi_devices_follow_requests_like_get_resources() -> None:
    pod = _pod(
        [],
        containers=[
            {"name": "all", "resources": {"claims": [{"name": "gpus"}]}},
            {"name": "small", "resources": {"claims": [{"name": "gpus", "request": "small"}]}},
            {"name": "none"},
        ],
    )
    assert container_cdi_devices(pod, _prepared()) == {"all": ["d/gpu=g0", "d/gpu=g1"], "small": ["d/gpu=g1"]}


def test_containers_see_the_extended_resource_claim_through_its_request_mappings() -> None:
    """kube-scheduler's claim for extended resources (``limits: {gpu.example/gpu: 2}``) is named in
    ``status.extendedResourceClaimStatus``; like kubelet's GetResources, a container sees the devices of
    the requests mapped to it, for the extended resources it requests."""
    ext = ClaimInfo(
        claim_uid="ext-uid", claim_name="p-extended-resources-abc", namespace="ns", pod_uids={"pod-uid"},
        drivers={"d": [PreparedDevice("p", "g0", ["container-0-request-0"], ["d/gpu=g0"]),
                       PreparedDevice("p", "g1", ["container-0-request-0"], ["d/gpu=g1"]),
                       PreparedDevice("p", "g2", ["container-1-request-0"], ["d/gpu=g2"]),
                       PreparedDevice("p", "g3", ["container-2-request-0"], ["d/gpu=g3"])]},
    )
    pod = _pod([], containers=[
        {"name": "two", "resources": {"requests": {"gpu.example/gpu": "2", "cpu": "1"}}},
        {"name": "one", "resources": {"requests": {"gpu.example/gpu": "1"}}},
        {"name": "other", "resources": {"requests": {"cpu": "1"}}},
        {"name": "zero", "resources": {"requests": {"gpu.example/gpu": "0"}}},
    ])
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "p-extended-resources-abc",
        "requestMappings": [
            {"containerName": c, "resourceName": "gpu.example/gpu", "requestName": f"container-{i}-request-0"}
            for i, c in enumerate(["two", "one", "zero"])
        ],
    }
    assert container_cdi_devices(pod, {"": ext}) == {"two": ["d/gpu=g0", "d/gpu=g1"], "one": ["d/gpu=g2"]}


def test_allocated_resources_status_names_claim_and_request() -> None:
    pod = _pod([], containers=[{"name": "c", "resources": {"claims": [{"name": "gpus", "request": "big"}]}}])
    got = allocated_resources_status(pod, _prepared(), {("d", "p", "g0"): ("Unhealthy", "ecc")})
    assert got == {
        "c": [
            {
                "name": "claim:gpus/big",
                "resources": [{"resourceID": "d/gpu=g0", "health": "Unhealthy", "message": "ecc"}],
            }
        ]
    }


@pytest.mark.parametrize(
    ("text", "want"),
    [("5s", 5.0), ("1m30s", 90.0), ("250ms", 0.25), ("2h", 7200.0), ("", None), ("five", None)],
)
def test_parse_duration(text: str, want: float | None) -> None:
    assert parse_duration(text) == want


def test_running_status_keeps_start_time_and_reports_every_container() -> None:
    pod = _pod([], containers=[{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])
    pod["status"]["startTime"] = "2024-01-01T00:00:00Z"
    status = running_status(pod, "2024-01-01T00:00:05Z")
    assert status["phase"] == "Running"
    assert status["startTime"] == "2024-01-01T00:00:00Z"
    assert [c["name"] for c in status["containerStatuses"]] == ["a", "b"]
    assert all(c["state"]["running"] for c in status["containerStatuses"])



def _group_claim(owner_kind: str = "PodGroup", owner_api: str = "scheduling.k8s.io/v1beta1",
                 reserved_group: str = "g") -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
            {"apiVersion": owner_api, "kind": owner_kind, "name": "g", "uid": "group-uid",
             "controller": True}]},
        "status": {
            "allocation": {"devices": {"results": [
                {"driver": "d", "pool": "p", "device": "x", "request": "r"}]}},
            "reservedFor": [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": reserved_group,
                             "uid": "group-uid"}],
        },
    }


@pytest.mark.parametrize(
    ("claim", "group", "gate", "want"),
    [
        pytest.param(_group_claim(), "g", True, "", id="group-claim-serves-a-member"),
        pytest.param(_group_claim(owner_api="scheduling.k8s.io/v1alpha2"), "g", True, "", id="any-version"),
        pytest.param(_group_claim(), "g", False, "ResourceClaim was not created for this pod", id="gate-off"),
        pytest.param(_group_claim(), "", True, "ResourceClaim was not created for this pod or its PodGroup",
                     id="pod-in-no-group"),
        pytest.param(_group_claim(owner_api="example.com/v1"), "g", True,
                     "ResourceClaim was not created for this pod or its PodGroup", id="other-api-group"),
        pytest.param(_group_claim(reserved_group="other"), "g", True,
                     "pod is not in the ResourceClaim's reservedFor (nor its PodGroup)",
                     id="reserved-for-another"),
    ],
)
def test_a_podgroup_claim_is_prepared_for_the_groups_pods_with_the_gate_on(
    claim: dict[str, Any], group: str, gate: bool, want: str
) -> None:
    pod = _pod([])
    if group:
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    assert check_claim_for_pod(pod, claim, True, gate) == want
