"""Names and well-known keys of the ResourceClaims the controller generates (pure).

The generated name follows upstream's resourceclaim controller: ``generateName = "<pod>-<podClaim>-"``;
the API server appends five random characters. A base longer than 57 characters (63, the DNS label
limit, minus the hyphen and the five characters) is shortened by truncating *both* parts in proportion
to their length, so the pod claim name stays recognisable even for long pod names; the truncated form
has no trailing hyphen (upstream does the same).
"""

from __future__ import annotations

__all__ = [
    "MAX_GENERATE_NAME_BASE",
    "POD_CLAIM_NAME_ANNOTATION",
    "generate_name",
]

#: Annotation on a generated claim naming the pod claim (``pod.spec.resourceClaims[].name``) it is for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

#: Longest ``generateName`` that still leaves room for five random characters in a 63-character name.
MAX_GENERATE_NAME_BASE = 57


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The ``metadata.generateName`` of the claim generated for ``pod_claim_name`` of pod ``pod_name``.

    ``"my-pod" + "gpu"`` gives ``"my-pod-gpu-"``. When that is longer than 57 characters both parts are
    cut proportionally: ``pod[:len(pod)*57//total] + "-" + claim[:len(claim)*57//total]`` where
    ``total`` is the length of the untruncated base (with both hyphens), exactly as upstream computes it.
    """
    base = f"{pod_name}-{pod_claim_name}-"
    total = len(base)
    if total <= MAX_GENERATE_NAME_BASE:
        return base
    pod_part = pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // total]
    claim_part = pod_claim_name[: len(pod_claim_name) * MAX_GENERATE_NAME_BASE // total]
    return f"{pod_part}-{claim_part}"
