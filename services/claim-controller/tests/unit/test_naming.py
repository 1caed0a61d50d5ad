"""generateName of generated claims, truncated like upstream's resourceclaim controller."""

import pytest

from claim_controller.naming import MAX_GENERATE_NAME_BASE, generate_name


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
