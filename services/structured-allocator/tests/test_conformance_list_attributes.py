"""Conformance table: list-type attributes in claim constraints (DRAListTypeAttributes, alpha, off by
default; ``Features(list_type_attributes=True)``): ``matchAttribute`` needs a common element across
all devices, ``distinctAttribute`` pairwise disjoint values; a scalar counts as a one-element list.
With the gate off a list attribute satisfies neither constraint.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import DRIVER, Case, check_case, params
from sa_builders import alloc, claim, dev, req, res, rslice

from structured_allocator.core import CelSelectorError, Features

LISTS = Features(list_type_attributes=True)
NUMA_NODE = "resource.kubernetes.io/numaNode"


def devs(attribute: str, *values: Any) -> list[dict[str, Any]]:
    """One device per value: a list becomes ``strings``/``ints``/``bools``, a scalar stays scalar."""
    out = []
    for i, value in enumerate(values):
        if isinstance(value, list):
            kind = (
                "bools"
                if value and isinstance(value[0], bool)
                else "ints"
                if value and isinstance(value[0], int)
                else "strings"
            )
            attrs = {attribute: {kind: value}}
        else:
            attrs = {attribute: {"bool": value} if isinstance(value, bool) else {"string": value}}
        out.append(dev(f"gpu-{i}", attributes=attrs))
    return out


def versions(*values: list[str]) -> list[dict[str, Any]]:
    return [dev(f"gpu-{i}", attributes={"driverVersion": {"versions": v}}) for i, v in enumerate(values)]


def match(attribute: str = "str", n: int = 2) -> dict[str, Any]:
    return claim("c", req("gpu", count=n), constraints=[{"matchAttribute": f"{DRIVER}/{attribute}"}])


def distinct(attribute: str = "str", n: int = 2) -> dict[str, Any]:
    return claim("c", req("gpu", count=n), constraints=[{"distinctAttribute": f"{DRIVER}/{attribute}"}])


def got(*indices: int) -> list[dict[str, Any]]:
    return [alloc(*[res("gpu", f"gpu-{i}") for i in indices])]


def case(
    claim_: dict[str, Any], devices: list[dict[str, Any]], expect: Any, upstream: str, **kw: Any
) -> Case:
    return Case(
        [claim_],
        [rslice("s", devices)],
        expect,
        features=kw.pop("features", LISTS),
        upstream=(upstream,),
        **kw,
    )


U = "list-attributes-"
CASES: dict[str, Case] = {
    "match-scalars": case(
        match(), devs("str", "v1", "v1"), got(0, 1), U + "match-constaint-scalar-string-values"
    ),
    "match-lists-sharing-elements": case(
        match(),
        devs("str", ["v1", "v2", "v3"], ["v2", "v3", "v4"]),
        got(0, 1),
        U + "match-constaint-list-of-string-values-with-common-elements",
    ),
    "match-three-lists-pairwise-but-not-jointly-common": case(
        match(n=3),
        devs("str", ["v1", "v2"], ["v2", "v3"], ["v3", "v1"]),
        None,
        U + "match-constaint-list-of-string-values-with-partially-common-elements",
    ),
    "match-backtrack-restores-the-intersection": case(
        match(n=3),
        devs("str", ["v1", "v2"], ["v1"], ["v2"], ["v2"]),
        got(0, 2, 3),
        "list-attributes-match-constraint-backtrack-needs-intersection-restore",
    ),
    "match-disjoint-lists-two-requests": Case(
        [claim("c", req("a"), req("b"), constraints=[{"matchAttribute": f"{DRIVER}/str"}])],
        [rslice("s", devs("str", ["v1", "v2"], ["v3", "v4"]))],
        None,
        features=LISTS,
        upstream=(U + "match-constaint-list-of-string-values-without-common-elements",),
    ),
    "match-scalar-in-list": case(
        match(),
        devs("str", "v1", ["v1", "v2"]),
        got(0, 1),
        U + "match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
    ),
    "match-scalar-and-lists-not-jointly-common": case(
        match(n=3),
        devs("str", "v1", ["v1", "v2"], ["v2", "v3"]),
        None,
        U + "match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
    ),
    "match-scalar-not-in-list": case(
        match(),
        devs("str", "v1", ["v2", "v3"]),
        None,
        U + "match-constaint-mixed-scalar-and-list-of-string-values-without-common-elements",
    ),
    "match-int-lists": case(
        match("numa"),
        devs("numa", [0, 1, 2], [1, 2, 3]),
        got(0, 1),
        U + "match-constaint-list-of-int-values-with-common-elements",
    ),
    "match-bool-lists": case(
        match("flag"),
        devs("flag", [True, False], [True]),
        got(0, 1),
        U + "match-constaint-list-of-bool-values-with-common-elements",
    ),
    "match-version-lists": case(
        match("driverVersion"),
        versions(["1.0.0", "1.1.0", "2.0.0"], ["1.1.0", "2.0.0", "2.1.0"]),
        got(0, 1),
        U + "match-constaint-list-of-version-values-with-common-elements",
    ),
    "match-attribute-without-value-is-an-error": case(
        match(),
        [dev("gpu-0", attributes={"str": {}}), dev("gpu-1", attributes={"str": {"strings": []}})],
        None,
        U + "match-constaint-with-empty-or-unknown-type",
        error=(CelSelectorError, "unsupported attribute value"),
    ),
    "match-lists-gate-off": case(
        match(),
        devs("str", ["v1", "v2", "v3"], ["v2", "v3", "v4"]),
        None,
        U + "disabled-match-constraint-with-lists",
        features=Features(),
    ),
    "distinct-scalars": case(
        distinct(),
        devs("str", "v1", "v2"),
        got(0, 1),
        U + "distinct-constraint-scalar-string-values-all-distinct",
    ),
    "distinct-scalars-equal": case(
        distinct(), devs("str", "v1", "v1"), None, U + "distinct-constraint-scalar-string-values-not-distinct"
    ),
    "distinct-count-three-repeated": case(
        distinct(n=3),
        devs("str", "v1", "v2", "v1"),
        None,
        U + "distinct-constraint-single-request-count-3-not-distinct",
    ),
    "distinct-count-three": case(
        distinct(n=3),
        devs("str", "v1", "v2", "v3"),
        got(0, 1, 2),
        U + "distinct-constraint-single-request-count-3-all-distinct",
    ),
    "distinct-lists-skip-overlapping": case(
        distinct(),
        devs("str", ["v1", "v2"], ["v2", "v3"], ["v3", "v4"]),
        got(0, 2),
        U + "distinct-constraint-list-of-string-values-all-distinct",
    ),
    "distinct-lists-overlap": case(
        distinct(),
        devs("str", ["v1", "v2", "v3"], ["v2", "v4", "v5"]),
        None,
        U + "distinct-constraint-list-of-string-values-with-common-elements",
    ),
    "distinct-scalar-and-lists": case(
        distinct(),
        devs("str", "v1", ["v1", "v2"], ["v2", "v3"]),
        got(0, 2),
        U + "distinct-constraint-mixed-scalar-and-list-all-distinct",
    ),
    "distinct-scalar-in-list": case(
        distinct(),
        devs("str", "v1", ["v1", "v2"]),
        None,
        U + "distinct-constraint-mixed-scalar-and-list-with-common-elements",
    ),
    "distinct-int-lists": case(
        distinct("numa"),
        devs("numa", [0, 1], [1, 2], [2, 3]),
        got(0, 2),
        U + "distinct-constraint-list-of-int-values-all-distinct",
    ),
    "distinct-bool-lists": case(
        distinct("flag"),
        devs("flag", [True], [True, False], [False]),
        got(0, 2),
        U + "distinct-constraint-list-of-bool-values-all-distinct",
    ),
    "distinct-version-lists": case(
        distinct("driverVersion"),
        versions(["1.0.0", "1.1.0"], ["1.1.0", "2.0.0"], ["2.0.0", "2.1.0"]),
        got(0, 2),
        U + "distinct-constraint-list-of-version-values-all-distinct",
    ),
    "distinct-attribute-without-value-is-an-error": case(
        distinct("driverVersion"),
        [
            dev("gpu-0", attributes={"driverVersion": {"versions": []}}),
            dev("gpu-1", attributes={"driverVersion": {}}),
        ],
        None,
        U + "distinct-constaint-with-empty-or-unknown-type",
        error=(CelSelectorError, "unsupported attribute value"),
    ),
    "distinct-lists-gate-off": case(
        distinct(),
        devs("str", ["v1", "v2", "v3"], ["v2", "v3", "v4"]),
        None,
        U + "disabled-distinct-constraint-with-lists",
        features=Features(),
    ),
    "distinct-backtrack-removes-the-set": Case(
        [
            claim(
                "c",
                req("a"),
                req("b"),
                req("d"),
                constraints=[{"distinctAttribute": f"{DRIVER}/str", "requests": ["a", "b", "d"]}],
            )
        ],
        [
            rslice(
                "s",
                devs("str", ["v1", "v2", "v3"], ["v3", "v4", "v5"], ["v1", "v2"], ["v3", "v4"], ["v5", "v6"]),
            )
        ],
        [alloc(res("a", "gpu-2"), res("b", "gpu-3"), res("d", "gpu-4"))],
        features=LISTS,
        upstream=(U + "distinct-constraint-backtrack-needs-remove",),
    ),
}

# resource.kubernetes.io/numaNode: a standard attribute name outside the driver's domain.
CASES["match-numa-node-lists-overlapping"] = Case(
    [claim("c", req("gpu", count=2), constraints=[{"matchAttribute": NUMA_NODE}])],
    [
        rslice(
            "s",
            [
                dev("gpu-0", attributes={NUMA_NODE: {"ints": [4]}}),
                dev("gpu-1", attributes={NUMA_NODE: {"ints": [4, 5, 6, 7]}}),
            ],
        )
    ],
    got(0, 1),
    features=LISTS,
    upstream=("numanode-matchattribute-overlapping-lists-are-co-placed",),
)
CASES["match-numa-node-lists-disjoint"] = Case(
    [claim("c", req("gpu", count=2), constraints=[{"matchAttribute": NUMA_NODE}])],
    [
        rslice(
            "s",
            [
                dev("gpu-0", attributes={NUMA_NODE: {"ints": [0]}}),
                dev("gpu-1", attributes={NUMA_NODE: {"ints": [4, 5, 6, 7]}}),
            ],
        )
    ],
    None,
    features=LISTS,
    upstream=("numanode-matchattribute-disjoint-lists-are-not-allocated",),
)


@pytest.mark.parametrize("case", params(CASES))
def test_list_attributes(case: Case) -> None:
    check_case(case)
