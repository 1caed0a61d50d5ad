"""The DRAResourceHealth negotiation shared by kubelet-dra-shim and slice-publisher."""

from __future__ import annotations

import pytest

from draflow_runtime.drahealth import HEALTH_APIS, HEALTH_SERVICES, choose_health_service


@pytest.mark.parametrize(
    ("offered", "want"),
    [
        pytest.param(["v1.DRAPlugin", "v1.DRAResourceHealth"], "v1.DRAResourceHealth", id="v1"),
        pytest.param(
            ["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"], "v1alpha1.DRAResourceHealth", id="v1alpha1"
        ),
        pytest.param(
            ["v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"],
            "v1.DRAResourceHealth",
            id="ours-not-theirs",
        ),
        pytest.param(["v1.DRAPlugin", "v1beta1.DRAResourceHealth"], "", id="unknown-version"),
        pytest.param([], "", id="none"),
    ],
)
def test_choose_health_service(offered: list[str], want: str) -> None:
    assert choose_health_service(offered) == want


def test_every_service_has_its_generated_api_with_the_same_health_numbers() -> None:
    assert tuple(HEALTH_APIS) == HEALTH_SERVICES
    numbers = set()
    for messages, grpc_module in HEALTH_APIS.values():
        assert hasattr(grpc_module, "DRAResourceHealthStub")
        numbers.add((messages.UNKNOWN, messages.HEALTHY, messages.UNHEALTHY))
    assert len(numbers) == 1
