"""Conformance table: allocationMode All.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER, Case, check_case, exclusive_alloc, gpus, params
from sa_builders import alloc, claim, req, res, rslice

from structured_allocator.core import PoolUnavailableError

CASES: dict[str, Case] = {
    "all-mode-complete-pool": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(3))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "all-mode-selector-filters": Case(
        [claim("c", req("gpu", mode="All", selectors=(f'device.attributes["{DRIVER}"].numa == 1',)))],
        [rslice("s", gpus(3, numa=[0, 1, 1]))],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "all-mode-incomplete-pool-error": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("part", gpus(2), count=2)],
        error=(PoolUnavailableError, f"resource pool {DRIVER}/node-1 is currently being updated"),
    ),
    "all-mode-no-devices-does-not-fit": Case(
        [claim("c", req("gpu", mode="All"))], [rslice("s", [], node="node-1")], None
    ),
    "all-mode-device-in-use-does-not-fit": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(2))],
        None,
        allocated=[exclusive_alloc("gpu-1")],
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_all_mode(case: Case) -> None:
    check_case(case)
