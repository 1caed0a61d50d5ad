"""Conformance table: derived attributes (DRADerivedAttributes, alpha, off by default;
``Features(derived_attributes=True)``). A request's ``derivedAttributes`` define, by CEL, attributes
that the claim's constraints see for that request's devices only; they shadow device attributes of the
same name. A CEL error while deriving fails the allocation with the error. The gate-off error is in
``test_conformance_selectors.py``.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import DRIVER, DRIVER_B, GPU_CLASS, NIC_CLASS, Case, check_case, params
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import CelSelectorError, Features

DERIVED = Features(derived_attributes=True)
BOTH = Features(derived_attributes=True, list_type_attributes=True)


def derive(request: dict[str, Any], **attrs: str) -> dict[str, Any]:
    """``request`` (or subrequest) with derived attributes ``derived/<name>`` = expression."""
    body = request.get("exactly", request)
    body["derivedAttributes"] = [{"name": f"derived/{k}", "expression": v} for k, v in attrs.items()]
    return request


def of(driver: str, attribute: str) -> str:
    return f'device.attributes["{driver}"]["{attribute}"]'


def match(*requests: str, name: str = "derived/numa", kind: str = "matchAttribute") -> list[dict[str, Any]]:
    return [{"requests": list(requests), kind: name}]


GPUS_NUMA = rslice("gpus", [dev("gpu-a", {"numa": "numa-0"}), dev("gpu-b", {"numa": "numa-1"})])
NICS_NUMA = rslice(
    "nics",
    [dev("nic-a", {"numaNode": "numa-1"}), dev("nic-b", {"numaNode": "numa-2"})],
    driver=DRIVER_B,
    pool="nics",
)
BOTH_CLASSES = [GPU_CLASS, NIC_CLASS]

CASES: dict[str, Case] = {
    "two-drivers-matched-on-a-derived-name": Case(
        [
            claim(
                "c",
                derive(req("gpu"), numa=of(DRIVER, "numa")),
                derive(req("nic", "nic"), numa=of(DRIVER_B, "numaNode")),
                constraints=match("gpu", "nic"),
            )
        ],
        [GPUS_NUMA, NICS_NUMA],
        [alloc(res("gpu", "gpu-b"), res("nic", "nic-a", pool="nics", driver=DRIVER_B))],
        classes=BOTH_CLASSES,
        features=DERIVED,
        upstream=("derived-attributes",),
    ),
    "each-subrequest-derives-its-own": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu",
                    derive(sub("by-foo"), match=of(DRIVER, "foo")),
                    derive(sub("by-bar"), match=of(DRIVER, "bar")),
                ),
                derive(req("nic", "nic"), match=of(DRIVER_B, "baz")),
                constraints=match("gpu", "nic", name="derived/match"),
            )
        ],
        [
            rslice("gpus", [dev("gpu-0", {"foo": "A", "bar": "B"})]),
            rslice("nics", [dev("nic-0", {"baz": "B"})], driver=DRIVER_B, pool="nics"),
        ],
        [alloc(res("gpu/by-bar", "gpu-0"), res("nic", "nic-0", pool="nics", driver=DRIVER_B))],
        classes=BOTH_CLASSES,
        features=DERIVED,
        upstream=("derived-attributes-with-prioritized-list",),
    ),
    "a-derived-attribute-shadows-the-device-one-for-its-request-only": Case(
        [
            claim(
                "c",
                {"name": "a", "exactly": {
                    "deviceClassName": "gpu",
                    "derivedAttributes": [{"name": f"{DRIVER}/color", "expression": '"blue"'}],
                }},
                req("b"),
                constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/color"}],
            )
        ],
        [rslice("s", [dev("gpu-0", {"color": "red"}), dev("gpu-1", {"color": "blue"})])],
        [alloc(res("a", "gpu-0"), res("b", "gpu-1"))],
        features=DERIVED,
        upstream=("derived-attributes-override",),
    ),
    "a-missing-attribute-is-an-error-not-a-misfit": Case(
        [
            claim(
                "c",
                derive(req("gpu"), missing=of(DRIVER, "missingAttr")),
                constraints=match("gpu", name="derived/missing"),
            )
        ],
        [rslice("s", [dev("gpu-0", {"existingAttr": "yes"})])],
        error=(CelSelectorError, "no such key: missingAttr"),
        features=DERIVED,
        upstream=("derived-attributes-cel-missing-attribute",),
    ),
    "values-of-different-types-never-match": Case(
        [
            claim(
                "c",
                derive(req("gpu", count=2), value=of(DRIVER, "static")),
                constraints=match("gpu", name="derived/value"),
            )
        ],
        [rslice("s", [dev("gpu-0", {"static": "value"}), dev("gpu-1", {"static": 1})])],
        None,
        features=DERIVED,
        upstream=("derived-attributes-type-mismatch",),
    ),
    "distinct-on-a-computed-value": Case(
        # index / 2 groups 0,1 | 2,3: two distinct halves are gpu-0 and gpu-2.
        [
            claim(
                "c",
                derive(req("gpu", count=2), half=f"{of(DRIVER, 'index')} / 2"),
                constraints=match(name="derived/half", kind="distinctAttribute"),
            )
        ],
        [rslice("s", [dev(f"gpu-{i}", {"index": i}) for i in range(4)])],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-2"))],
        features=DERIVED,
    ),
    "a-derived-list-with-list-type-attributes": Case(
        [
            claim(
                "c",
                derive(req("gpu", count=2), links=f"[{of(DRIVER, 'a')}, {of(DRIVER, 'b')}]"),
                constraints=match(name="derived/links"),
            )
        ],
        [rslice("s", [dev("gpu-0", {"a": "x", "b": "y"}), dev("gpu-1", {"a": "z", "b": "w"}),
                      dev("gpu-2", {"a": "y", "b": "q"})])],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-2"))],
        features=BOTH,
    ),
    "a-result-type-that-is-no-attribute-does-not-compile": Case(
        [claim("c", derive(req("gpu"), bad="1.5"), constraints=match(name="derived/bad"))],
        [rslice("s", [dev("gpu-0")])],
        error=(CelSelectorError, "must evaluate to a primitive scalar"),
        features=DERIVED,
    ),
    "unused-derived-attributes-are-not-evaluated": Case(
        [claim("c", derive(req("gpu"), unused=of(DRIVER, "missingAttr")))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"))],
        features=DERIVED,
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_derived_attributes(case: Case) -> None:
    check_case(case)
