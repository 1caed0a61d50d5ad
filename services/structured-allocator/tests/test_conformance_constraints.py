"""Conformance table: Backtracking and claim constraints (matchAttribute, distinctAttribute).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import DRIVER, Case, check_case, gpus, params
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import InvalidRequestError

FOUR = {"driverVersion": ("version", "1.0.0"), "numa": 1, "str": "value", "flag": True}


def match(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"matchAttribute": f"{DRIVER}/{attribute}"}
    if requests:
        out["requests"] = list(requests)
    return out


def two_with(attribute: str, a: Any, b: Any) -> list[dict[str, Any]]:
    return [dev("gpu-0", {attribute: a}), dev("gpu-1", {attribute: b})]


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
    # --- upstream's matchAttribute cases ------------------------------------------------------------
    "match-four-attributes-of-every-type": Case(
        [
            claim(
                "c",
                req("a"),
                req("b"),
                constraints=[match("numa"), match("driverVersion"), match("str"), match("flag")],
            )
        ],
        [rslice("s", [dev("gpu-0", FOUR), dev("gpu-1", FOUR)])],
        [alloc(res("a", "gpu-0"), res("b", "gpu-1"))],
        upstream=("with-constraint",),
    ),
    "match-attribute-nobody-has": Case(
        [claim("c", req("gpu"), constraints=[match("NonExistentAttribute")])],
        [rslice("s", [dev("gpu-0")])],
        None,
        upstream=("with-constraint-non-existent-attribute",),
    ),
    "match-int-differs": Case(
        [claim("c", req("gpu", count=2), constraints=[match("numa")])],
        [rslice("s", two_with("numa", 1, 2))],
        None,
        upstream=("with-constraint-not-matching-int-attribute",),
    ),
    "match-string-differs": Case(
        [claim("c", req("gpu", count=2), constraints=[match("str")])],
        [rslice("s", two_with("str", "value", "value2"))],
        None,
        upstream=("with-constraint-not-matching-string-attribute",),
    ),
    "match-bool-differs": Case(
        [claim("c", req("gpu", count=2), constraints=[match("flag")])],
        [rslice("s", two_with("flag", True, False))],
        None,
        upstream=("with-constraint-not-matching-bool-attribute",),
    ),
    "match-version-differs": Case(
        [claim("c", req("gpu", count=2), constraints=[match("driverVersion")])],
        [rslice("s", two_with("driverVersion", ("version", "1.0.0"), ("version", "2.0.0")))],
        None,
        upstream=("with-constraint-not-matching-version-attribute",),
    ),
    "match-only-for-named-request": Case(
        [claim("c", req("a"), req("b"), constraints=[match("driverVersion", "a")])],
        [rslice("s", two_with("driverVersion", ("version", "1.0.0"), ("version", "2.0.0")))],
        [alloc(res("a", "gpu-0"), res("b", "gpu-1"))],
        upstream=("with-constraint-for-request",),
    ),
    "match-two-constraints-retry-first-request": Case(
        [claim("c", req("a"), req("b"), constraints=[match("driverVersion", "a"), match("str")])],
        [
            rslice(
                "s",
                [
                    dev("gpu-0", {"driverVersion": ("version", "1.0.0"), "str": "a"}),
                    dev("gpu-1", {"driverVersion": ("version", "2.0.0"), "str": "b"}),
                    dev("gpu-2", {"driverVersion": ("version", "3.0.0"), "str": "b"}),
                ],
            )
        ],
        [alloc(res("a", "gpu-1"), res("b", "gpu-2"))],
        upstream=("with-constraint-for-request-retry",),
    ),
    "unknown-constraint-type-is-an-error": Case(
        [claim("c", req("gpu"), constraints=[{}])],
        [rslice("s", [dev("gpu-0")])],
        error=(InvalidRequestError, "constraint #0: empty constraint (unsupported constraint type?)"),
        upstream=("unknown-constraint",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_constraints(case: Case) -> None:
    check_case(case)
