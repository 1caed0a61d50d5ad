"""generateName of generated claims, truncated like upstream's resourceclaim controller; their body."""

import copy

import pytest

from claim_controller.naming import (
    MAX_GENERATE_NAME_BASE,
    POD_CLAIM_NAME_ANNOTATION,
    claim_body,
    generate_name,
)


@pytest.mark.parametrize(
    ("pod", "claim", "expected"),
    [
        pytest.param("my-pod", "gpu", "my-pod-gpu-", id="short"),
        pytest.param("my-pod", "resource-1a", "my-pod-resource-1a-", id="claim-ending-in-digit-letter"),
        pytest.param("p" * 27, "c" * 28, "p" * 27 + "-" + "c" * 28 + "-", id="exactly-57"),
        pytest.param("p" * 28, "c" * 28, "p" * 27 + "-" + "c" * 27, id="58-truncates-both"),
        pytest.param("p" * 100, "c" * 10, "p" * 50 + "-" + "c" * 5, id="long-pod-keeps-part-of-claim"),
        pytest.param("p" * 253, "gpu", "p" * 55 + "-", id="very-long-pod-short-claim"),
    ],
)
def test_generate_name(pod: str, claim: str, expected: str) -> None:
    assert generate_name(pod, claim) == expected


def test_truncated_names_leave_room_for_the_random_suffix() -> None:
    for pod_len in range(1, 254, 7):
        for claim_len in range(1, 64, 5):
            name = generate_name("p" * pod_len, "c" * claim_len)
            assert len(name) <= MAX_GENERATE_NAME_BASE


def test_claim_body_copies_the_template_and_names_the_owner() -> None:
    template = {"spec": {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                         "spec": {"devices": {"requests": [{"name": "gpu"}]}}}}
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": "u1", "controller": True}
    body = claim_body(owner, "ns", "gpu", template)
    assert body == {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": "trainer-gpu-", "namespace": "ns", "labels": {"team": "a"},
                     "annotations": {"note": "x", POD_CLAIM_NAME_ANNOTATION: "gpu"},
                     "ownerReferences": [owner]},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
    }
    body["metadata"]["labels"]["team"] = "b"  # a fresh dict: the template (a cached object) is untouched
    body["metadata"]["ownerReferences"][0]["name"] = "other"
    assert template["spec"]["metadata"]["labels"] == {"team": "a"} and owner["name"] == "trainer"


def test_claim_body_carries_the_finalizers_it_is_given_and_none_by_default() -> None:
    """``--create-with-finalizer``: the allocator's delete-protection finalizer from the first version;
    off, no ``metadata.finalizers`` at all (kube-controller-manager's object)."""
    template = {"spec": {"spec": {}}}
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}
    finalizer = "resource.kubernetes.io/delete-protection"
    protected = claim_body(owner, "ns", "gpu", template, finalizers=(finalizer,))
    assert protected["metadata"]["finalizers"] == [finalizer]
    assert "finalizers" not in claim_body(owner, "ns", "gpu", template)["metadata"]


@pytest.mark.parametrize("owner", [
    pytest.param({"apiVersion": "v1", "kind": "Pod", "name": "test-pod", "uid": "u1", "controller": True,
                  "blockOwnerDeletion": True}, id="pod"),
    pytest.param({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "test-podgroup",
                  "uid": "u2", "controller": True}, id="podGroup"),
])
def test_claim_body_leaves_the_cached_templates_annotations_alone(owner: dict) -> None:
    """Upstream TestCreateClaimDoesNotMutateTemplate: the claim carries the template's annotation and the
    pod-claim annotation, the (informer-cached) template gains neither, even when the body's annotations
    are written to afterwards (the trace annotation is added that way)."""
    template = {"spec": {"metadata": {"annotations": {"example.com/color": "blue"}}, "spec": {}}}
    before = copy.deepcopy(template)
    body = claim_body(owner, "my-namespace", "acme-resource", template)
    body["metadata"]["annotations"]["draflow.dev/traceparent"] = "00-1-2-01"
    assert template == before
    assert POD_CLAIM_NAME_ANNOTATION not in template["spec"]["metadata"]["annotations"]
    assert body["metadata"]["annotations"]["example.com/color"] == "blue"
    assert body["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] == "acme-resource"
