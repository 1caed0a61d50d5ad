"""Conformance table: Backtracking and claim constraints (matchAttribute, distinctAttribute).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER, Case, check_case, gpus, params
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

CASES: dict[str, Case] = {
    "backtrack-match-attribute-across-requests": Case(
        [
            claim(
                "c",
                req("a"),
                req("b", selectors=(f'device.attributes["{DRIVER}"].model == "big"',)),
                constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
            )
        ],
        [rslice("s", gpus(3, numa=[0, 1, 1], model=["small", "small", "big"]))],
        [alloc(res("a", "gpu-1"), res("b", "gpu-2"))],
    ),
    "match-attribute-only-named-requests": Case(
        [
            claim(
                "c",
                req("a"),
                req("b"),
                req("x", selectors=(f'device.attributes["{DRIVER}"].numa == 0',)),
                constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}],
            )
        ],
        [rslice("s", gpus(4, numa=[0, 1, 1, 0]))],
        [alloc(res("a", "gpu-1"), res("b", "gpu-2"), res("x", "gpu-0"))],
    ),
    "match-attribute-device-lacking-attribute-fails": Case(
        [claim("c", req("gpu", count=2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])],
        [rslice("s", [dev("gpu-0"), dev("gpu-1", {"numa": 1}), dev("gpu-2", {"numa": 1})])],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "match-attribute-other-domain": Case(
        [claim("c", req("gpu", count=2), constraints=[{"matchAttribute": "topo.example.com/socket"}])],
        [
            rslice(
                "s",
                [
                    dev("gpu-0", {"topo.example.com/socket": 0}),
                    dev("gpu-1", {"topo.example.com/socket": 1}),
                    dev("gpu-2", {"topo.example.com/socket": 1}),
                ],
            )
        ],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "match-attribute-parent-covers-subrequests": Case(
        [
            claim(
                "c",
                req("a"),
                first_available("b", sub("x", selectors=(f'device.attributes["{DRIVER}"].numa == 1',))),
                constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}],
            )
        ],
        [rslice("s", gpus(3, numa=[0, 1, 1]))],
        [alloc(res("a", "gpu-1"), res("b/x", "gpu-2"))],
    ),
    "distinct-attribute": Case(
        [claim("c", req("gpu", count=3), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])],
        [rslice("s", gpus(5, numa=[0, 0, 1, 1, 2]))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-2"), res("gpu", "gpu-4"))],
    ),
    "distinct-attribute-impossible": Case(
        [claim("c", req("gpu", count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])],
        [rslice("s", gpus(3, numa=[0, 0, 0]))],
        None,
        summary='claims "c": every request has usable devices on its own, but not all together '
        "(constraints, or requests competing for the same devices)",
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_constraints(case: Case) -> None:
    check_case(case)
