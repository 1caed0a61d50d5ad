"""Conformance table: Selectors (CEL), broken input errors and the explanation of "does not fit".

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER, MEM, Case, check_case, exclusive_alloc, gpus, params
from sa_builders import alloc, claim, dclass, dev, first_available, req, res, rslice, sub

from structured_allocator.core import (
    CelSelectorError,
    Features,
    InvalidRequestError,
    TooManyResultsError,
    UnknownDeviceClassError,
)

CASES: dict[str, Case] = {
    "cel-quantity-compare": Case(
        [claim("c", req("gpu", selectors=(f'{MEM}.compareTo(quantity("40Gi")) >= 0',)))],
        [rslice("s", [dev("gpu-0", cap={"memory": "20Gi"}), dev("gpu-1", cap={"memory": "40960Mi"})])],
        [alloc(res("gpu", "gpu-1"))],
    ),
    "cel-semver-compare": Case(
        [
            claim(
                "c",
                req(
                    "gpu",
                    selectors=(
                        f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.10.0"))',
                    ),
                ),
            )
        ],
        [
            rslice(
                "s",
                [
                    dev("gpu-0", {"driverVersion": ("version", "1.9.0")}),
                    dev("gpu-1", {"driverVersion": ("version", "1.11.0")}),
                ],
            )
        ],
        [alloc(res("gpu", "gpu-1"))],
    ),
    "cel-bind": Case(
        [
            claim(
                "c",
                req(
                    "gpu",
                    selectors=(f'cel.bind(a, device.attributes["{DRIVER}"], a.model == "x" && a.numa == 1)',),
                ),
            )
        ],
        [rslice("s", gpus(2, model=["x", "x"], numa=[0, 1]))],
        [alloc(res("gpu", "gpu-1"))],
    ),
    "cel-unknown-domain-is-empty-map": Case(
        [claim("c", req("gpu", selectors=('!("x" in device.attributes["other.example"])',)))],
        [rslice("s", gpus(1))],
        [alloc(res("gpu", "gpu-0"))],
    ),
    "cel-class-selector-filters": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("a")]), rslice("o", [dev("c")], driver="other.example.com", pool="o")],
        [alloc(res("gpu", "a"))],
    ),
    "unknown-class-error": Case(
        [claim("c", req("gpu", cls="missing"))],
        [rslice("s", gpus(1))],
        error=(
            UnknownDeviceClassError,
            'claim "default/c", request "gpu": device class missing does not exist',
        ),
    ),
    "cel-compile-error": Case(
        [claim("c", req("gpu", selectors=("device.attributes[",)))],
        [rslice("s", gpus(1))],
        error=(
            CelSelectorError,
            'claim "default/c" request "gpu": claim "default/c" selector #0 '
            "'device.attributes[': CEL compile error: compilation failed",
        ),
    ),
    "cel-non-bool-compile-error": Case(
        [claim("c", req("gpu", selectors=("device.driver + 'x'",)))],
        [rslice("s", gpus(1))],
        error=(CelSelectorError, "must evaluate to bool"),
    ),
    "cel-runtime-error-missing-attribute": Case(
        [claim("c", req("gpu", selectors=(f'device.attributes["{DRIVER}"].missing == 1',)))],
        [rslice("s", gpus(1))],
        error=(
            CelSelectorError,
            f'claim "default/c" request "gpu": claim "default/c" selector #0 '
            f"'device.attributes[\"{DRIVER}\"].missing == 1' on device {DRIVER}/node-1/gpu-0: "
            "CEL runtime error: no such key: missing",
        ),
    ),
    "class-cel-runtime-error-names-class": Case(
        [claim("c", req("gpu"))],
        [rslice("s", gpus(1))],
        classes=[dclass("gpu", 'device.attributes["x.example"].y')],
        error=(CelSelectorError, "class gpu selector #0"),
    ),
    "too-many-results-error": Case(
        [claim("c", req("gpu", count=33))],
        [rslice("s", gpus(40))],
        error=(TooManyResultsError, 'request "gpu": adding 33 devices exceeds the claim limit of 32'),
    ),
    "all-mode-over-32-error": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(33))],
        error=(TooManyResultsError, "exceeds the claim limit of 32"),
    ),
    "subrequests-feature-off-error": Case(
        [claim("c", first_available("g", sub("x")))],
        [rslice("s", gpus(1))],
        features=Features(prioritized_list=False),
        error=(InvalidRequestError, "DRAPrioritizedList"),
    ),
    "explain-selector-matches-nothing": Case(
        [
            claim(
                "gpu-big",
                req("gpu", cls="gpu.example.com", selectors=(f'{MEM}.compareTo(quantity("200Gi")) >= 0',)),
            )
        ],
        [rslice("s", [dev(f"gpu-{i}", cap={"memory": "80Gi"}) for i in range(8)])],
        None,
        classes=[dclass("gpu.example.com", f'device.driver == "{DRIVER}"')],
        summary='claim "gpu-big" request "gpu": 8 devices of class gpu.example.com, 0 match selector '
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("200Gi")) >= 0, 0 usable, 1 needed',
    ),
    "explain-in-use-and-count": Case(
        [claim("c", req("gpu", count=3))],
        [rslice("s", gpus(4))],
        None,
        allocated=[exclusive_alloc("gpu-0", "gpu-1")],
        summary='claim "c" request "gpu": 4 devices of class gpu, 2 free (2 in use), 2 usable, 3 needed',
        explain={"gpu": {"class_devices": 4, "matching": 4, "free": 2, "usable": 2, "needed": 3}},
    ),
    "explain-constraint-attribute-missing": Case(
        [claim("c", req("gpu", count=2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])],
        [rslice("s", [dev("gpu-0"), dev("gpu-1"), dev("gpu-2", {"numa": 0})])],
        None,
        explain={"gpu": {"blocked_by_constraints": 2, "usable": 1}},
    ),
    # --- upstream's broken-input cases ---------------------------------------------------------------
    "no-device-classes-at-all": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        classes=[],
        error=(UnknownDeviceClassError, 'request "gpu": device class gpu does not exist'),
        upstream=("no-classes",),
    ),
    "class-name-unknown": Case(
        [claim("c", req("gpu", cls="unknown-class"))],
        [rslice("s", [dev("gpu-0")])],
        error=(UnknownDeviceClassError, "device class unknown-class does not exist"),
        upstream=("unknown-class",),
    ),
    "class-name-empty": Case(
        [claim("c", req("gpu", cls=""))],
        [rslice("s", [dev("gpu-0")])],
        error=(InvalidRequestError, 'request "gpu": missing device class name (unsupported request type?)'),
        upstream=("empty-class",),
    ),
    "selector-without-cel": Case(
        [claim("c", {"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": [{}]}})],
        [rslice("s", [dev("gpu-0")])],
        error=(InvalidRequestError, "selector #0: CEL expression empty (unsupported selector type?)"),
        upstream=("unknown-selector",),
    ),
    "allocation-mode-unknown": Case(
        [claim("c", req("gpu", mode="future-mode"))],
        [rslice("s", [dev("gpu-0")])],
        error=(InvalidRequestError, "unsupported count mode future-mode"),
        upstream=("unknown-allocation-mode",),
    ),
    "claim-selector-undeclared-reference": Case(
        [claim("c", req("gpu", selectors=("noSuchVar",)))],
        [rslice("s", [dev("gpu-0")])],
        error=(CelSelectorError, "undeclared reference"),
        upstream=("invalid-CEL-one-device",),
    ),
    "class-selector-undeclared-reference": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        classes=[dclass("gpu", "noSuchVar")],
        error=(CelSelectorError, "undeclared reference"),
        upstream=("invalid-CEL-one-device-class",),
    ),
    "all-mode-selector-undeclared-reference": Case(
        [claim("c", req("gpu", mode="All", selectors=("noSuchVar",)))],
        [rslice("s", [dev("gpu-0")])],
        error=(CelSelectorError, "undeclared reference"),
        upstream=("invalid-CEL-all-devices",),
    ),
    "derived-attributes-not-implemented-is-an-error": Case(
        [
            claim(
                "c",
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "derivedAttributes": [{"name": "derived/x", "expression": "device.driver"}],
                    },
                },
            )
        ],
        [rslice("s", [dev("gpu-0")])],
        error=(InvalidRequestError, 'request "gpu": cannot handle request with derived attributes'),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_selectors(case: Case) -> None:
    check_case(case)
