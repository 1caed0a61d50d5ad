"""Conformance table: firstAvailable (DRAPrioritizedList).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER, MEM, Case, check_case, gpus, params
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

CASES: dict[str, Case] = {
    "first-available-falls-back": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu",
                    sub("big", selectors=(f'{MEM}.compareTo(quantity("200Gi")) >= 0',)),
                    sub("small", count=2),
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": "80Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu/small", "gpu-0"), res("gpu/small", "gpu-1"))],
    ),
    "first-available-first-choice": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu", sub("big", selectors=(f'{MEM}.compareTo(quantity("40Gi")) >= 0',)), sub("small")
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": "20Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu/big", "gpu-1"))],
    ),
    "first-available-backtracks-within-subrequest": Case(
        [
            claim(
                "c",
                first_available("a", sub("one"), sub("two", count=2)),
                req("b", selectors=(f'device.attributes["{DRIVER}"].numa == 0',)),
                constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
            )
        ],
        [rslice("s", gpus(3, numa=[1, 0, 0]))],
        [alloc(res("a/one", "gpu-1"), res("b", "gpu-2"))],
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_prioritized(case: Case) -> None:
    check_case(case)
