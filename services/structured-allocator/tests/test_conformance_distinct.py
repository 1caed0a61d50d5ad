"""Conformance table: the ``distinctAttribute`` constraint (upstream tests it together with
DRAConsumableCapacity, which introduced it): pairwise different values per attribute, over the requests
it names (a parent name covers its subrequests), devices lacking the attribute never satisfy it.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import (
    DRIVER,
    MULTI_CLASS,
    Case,
    attr,
    check_case,
    gpus,
    multi_dev,
    params,
    range_cap,
    shared,
)
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import CelSelectorError


def distinct(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"distinctAttribute": f"{DRIVER}/{attribute}"}
    if requests:
        out["requests"] = list(requests)
    return out


def strs(*values: str) -> list[dict[str, Any]]:
    return [dev(f"gpu-{i}", {"str": v}) for i, v in enumerate(values)]


def numas(*values: int) -> list[dict[str, Any]]:
    return [dev(f"gpu-{i}", {"numa": v}) for i, v in enumerate(values)]


FLAG = (attr("flag"),)

CASES: dict[str, Case] = {
    "three-constraints-over-nested-request-sets": Case(
        [
            claim(
                "c",
                req("a"),
                req("b"),
                req("d"),
                req("e"),
                constraints=[
                    distinct("flag", "a", "b"),
                    distinct("driverVersion", "a", "b", "d"),
                    distinct("numa", "a", "b", "d", "e"),
                ],
            )
        ],
        [
            rslice(
                "s",
                [
                    multi_dev(f"gpu-{i}", None, {"driverVersion": ("version", ver), "numa": i, "flag": flag})
                    for i, (ver, flag) in enumerate(
                        [("1.0.0", True), ("1.0.1", False), ("1.0.2", True), ("1.0.0", True)]
                    )
                ],
            )
        ],
        [
            alloc(
                shared("a", "gpu-0", 1),
                shared("b", "gpu-1", 2),
                shared("d", "gpu-2", 3),
                shared("e", "gpu-3", 4),
            )
        ],
        upstream=("with-distinct-constraints",),
    ),
    "count-three-two-values": Case(
        [claim("c", req("gpu", count=3), constraints=[distinct("str")])],
        [rslice("s", strs("v1", "v2", "v1"))],
        None,
        upstream=("distinct-constraint-single-request-count-3-not-distinct",),
    ),
    "count-three-three-values": Case(
        [claim("c", req("gpu", count=3), constraints=[distinct("str")])],
        [rslice("s", strs("v1", "v2", "v3"))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
        upstream=("distinct-constraint-single-request-count-3-all-distinct",),
    ),
    "two-requests-three-devices-two-values": Case(
        [claim("c", req("a", count=2), req("b"), constraints=[distinct("str", "a", "b")])],
        [rslice("s", strs("v1", "v2", "v1"))],
        None,
        upstream=("distinct-constraint-two-requests-with-count-not-distinct",),
    ),
    "device-without-the-attribute": Case(
        [claim("c", req("gpu"), constraints=[distinct("flag", "gpu")])],
        [rslice("s", [multi_dev("gpu-0")])],
        None,
        upstream=("with-distinct-constraints-attribute-not-set",),
    ),
    "attribute-without-a-value-is-an-error": Case(
        [claim("c", req("gpu"), constraints=[distinct("flag", "gpu")])],
        [rslice("s", [multi_dev("gpu-0", attributes={"flag": {}})])],
        error=(CelSelectorError, "unsupported attribute value"),
        upstream=("with-distinct-constraints-unknown-type-attribute",),
    ),
    "subrequests-fall-back-to-stay-distinct": Case(
        [
            claim(
                "c",
                first_available("a", sub("flagged", selectors=FLAG), sub("any")),
                first_available("b", sub("flagged", selectors=FLAG), sub("any")),
                first_available("d", sub("flagged", selectors=FLAG), sub("any")),
                constraints=[distinct("flag", "a", "b")],
            )
        ],
        [rslice("s", [multi_dev("gpu-0", None, {"flag": True}), multi_dev("gpu-1", None, {"flag": False})])],
        [
            alloc(
                shared("a/flagged", "gpu-0", 1), shared("b/any", "gpu-1", 2), shared("d/flagged", "gpu-0", 3)
            )
        ],
        upstream=("with-distinct-constraints-with-subrequests",),
    ),
    "count-three-none-has-the-attribute": Case(
        [claim("c", req("gpu", count=3), constraints=[distinct("numa")])],
        [rslice("s", gpus(3))],
        None,
        upstream=("distinct-constraint-single-request-multiple-devices-attribute-not-set",),
    ),
    "count-three-only-two-values": Case(
        [claim("c", req("gpu", count=3), constraints=[distinct("numa")])],
        [rslice("s", numas(1, 2, 2, 2))],
        None,
        upstream=("distinct-constraint-single-request-not-enough-distinct-values",),
    ),
    "count-three-skips-repeated-value": Case(
        [claim("c", req("gpu", count=3), constraints=[distinct("numa")])],
        [rslice("s", numas(1, 2, 1, 3))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"), res("gpu", "gpu-3"))],
        upstream=("distinct-constraint-single-request-multiple-devices-attribute-set",),
    ),
    "one-shared-device-cannot-be-distinct-from-itself": Case(
        [
            claim(
                "c",
                req("a", capacity={"memory": "1"}),
                req("b", capacity={"memory": "1"}),
                constraints=[distinct("str")],
            )
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("2")}, {"str": "v"})])],
        None,
        classes=[MULTI_CLASS],
        upstream=("distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",),
    ),
    "two-shared-devices-distinct": Case(
        [
            claim(
                "c",
                req("a", capacity={"memory": "2"}),
                req("b", capacity={"memory": "2"}),
                constraints=[distinct("str")],
            )
        ],
        [
            rslice("s1", [multi_dev("gpu-0", {"memory": range_cap("4")}, {"str": "v1"})], count=2),
            rslice("s2", [multi_dev("gpu-1", {"memory": range_cap("4")}, {"str": "v2"})], count=2),
        ],
        [alloc(shared("a", "gpu-0", 1, memory="2"), shared("b", "gpu-1", 2, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=("distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_distinct(case: Case) -> None:
    check_case(case)
