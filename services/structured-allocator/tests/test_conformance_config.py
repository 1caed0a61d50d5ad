"""Conformance table: device configuration in the result — class config once per class, claim config
for the chosen requests/subrequests, ``requests`` dropped when a config covers every request.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import DRIVER, DRIVER_B, GPU_CLASS, NIC_CLASS, Case, check_case, gpus, params
from sa_builders import alloc, claim, dclass, dev, first_available, req, res, rslice, sub


def opaque(key: str, driver: str = DRIVER) -> dict[str, Any]:
    return {"opaque": {"driver": driver, "parameters": {key: f"{key}Value"}}}


def from_class(key: str, *requests: str, driver: str = DRIVER) -> dict[str, Any]:
    out: dict[str, Any] = {"source": "FromClass"}
    if requests:
        out["requests"] = list(requests)
    return {**out, **opaque(key, driver)}


def from_claim(key: str, *requests: str, driver: str = DRIVER) -> dict[str, Any]:
    out: dict[str, Any] = {"source": "FromClaim"}
    if requests:
        out["requests"] = list(requests)
    return {**out, **opaque(key, driver)}


def claim_config(key: str, *requests: str, driver: str = DRIVER) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": list(requests)} if requests else {}
    return {**out, **opaque(key, driver)}


GPU_CFG = dclass("gpu", f'device.driver == "{DRIVER}"', config=[opaque("classA")])
NIC_CFG = dclass("nic", f'device.driver == "{DRIVER_B}"', config=[opaque("classB", DRIVER_B)])
NIC = DRIVER_B

CASES: dict[str, Case] = {
    "config-class-then-claim": Case(
        [
            claim(
                "c",
                req("a"),
                req("b", cls="gpu2"),
                req("d"),
                config=[
                    {"requests": ["a"], "opaque": {"driver": DRIVER, "parameters": {"claim": "a"}}},
                    {"opaque": {"driver": DRIVER, "parameters": {"claim": "all"}}},
                    {"requests": ["zzz"], "opaque": {"driver": DRIVER, "parameters": {"claim": "none"}}},
                ],
            )
        ],
        [rslice("s", gpus(3))],
        [
            alloc(
                res("a", "gpu-0"),
                res("b", "gpu-1"),
                res("d", "gpu-2"),
                config=[
                    {
                        "source": "FromClass",
                        "requests": ["a", "d"],
                        "opaque": {"driver": DRIVER, "parameters": {"k": 1}},
                    },
                    {
                        "source": "FromClass",
                        "requests": ["b"],
                        "opaque": {"driver": DRIVER, "parameters": {"k": 2}},
                    },
                    {
                        "source": "FromClaim",
                        "requests": ["a"],
                        "opaque": {"driver": DRIVER, "parameters": {"claim": "a"}},
                    },
                    {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {"claim": "all"}}},
                ],
            )
        ],
        classes=[
            dclass("gpu", config=[{"opaque": {"driver": DRIVER, "parameters": {"k": 1}}}]),
            dclass("gpu2", config=[{"opaque": {"driver": DRIVER, "parameters": {"k": 2}}}]),
        ],
    ),
    "config-subrequest-and-applies-to-all": Case(
        [
            claim(
                "c",
                first_available("g", sub("x")),
                config=[{"requests": ["g/x"], "opaque": {"driver": DRIVER, "parameters": {}}}],
            )
        ],
        [rslice("s", gpus(1))],
        [
            alloc(
                res("g/x", "gpu-0"),
                config=[
                    {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"k": 1}}},
                    {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {}}},
                ],
            )
        ],
        classes=[dclass("gpu", config=[{"opaque": {"driver": DRIVER, "parameters": {"k": 1}}}])],
    ),
    "class-config": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"), config=[from_class("classA")])],
        classes=[GPU_CFG],
        upstream=("with-class-device-config",),
    ),
    "class-config-once-per-class": Case(
        [claim("c", req("a"), req("b"), req("n", cls="nic"))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")]), rslice("n", [dev("nic-0")], driver=NIC)],
        [
            alloc(
                res("a", "gpu-0"),
                res("b", "gpu-1"),
                res("n", "nic-0", driver=NIC),
                config=[from_class("classA", "a", "b"), from_class("classB", "n", driver=NIC)],
            )
        ],
        classes=[GPU_CFG, NIC_CFG],
        upstream=("with-class-device-config-with-multiple-request-and-configs",),
    ),
    "claim-config-for-two-of-three-requests": Case(
        [claim("c", req("a"), req("b"), req("d"), config=[claim_config("dev", "a", "b")])],
        [rslice("s", gpus(3))],
        [
            alloc(
                res("a", "gpu-0"), res("b", "gpu-1"), res("d", "gpu-2"), config=[from_claim("dev", "a", "b")]
            )
        ],
        upstream=("with-claim-config-for-two-requests",),
    ),
    "claim-config-for-all": Case(
        [claim("c", req("gpu"), config=[claim_config("dev")])],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"), config=[from_claim("dev")])],
        upstream=("claim-with-device-config",),
    ),
    "claim-config-of-the-chosen-subrequest": Case(
        [
            claim(
                "c",
                first_available("r", sub("a"), sub("b", cls="nic", count=2)),
                config=[claim_config("foo", "r/a"), claim_config("bar", "r/b", driver=NIC)],
            )
        ],
        [rslice("s", [dev("nic-0"), dev("nic-1")], driver=NIC)],
        [
            alloc(
                res("r/b", "nic-0", driver=NIC),
                res("r/b", "nic-1", driver=NIC),
                config=[from_claim("bar", driver=NIC)],
            )
        ],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("prioritized-list-device-config",),
    ),
    "class-config-of-the-chosen-subrequest": Case(
        [claim("c", first_available("r", sub("a", count=2), sub("b", cls="nic", count=2)))],
        [rslice("s1", [dev("nic-0"), dev("nic-1")], driver=NIC), rslice("s2", [dev("gpu-0")], pool="p2")],
        [
            alloc(
                res("r/b", "nic-0", driver=NIC),
                res("r/b", "nic-1", driver=NIC),
                config=[from_class("classB", driver=NIC)],
            )
        ],
        classes=[GPU_CFG, NIC_CFG],
        upstream=("prioritized-list-class-config",),
    ),
    "claim-config-naming-both-subrequests-of-one-request": Case(
        [
            claim(
                "c",
                first_available("r", sub("a"), sub("b", cls="nic")),
                req("x"),
                config=[claim_config("scoped", "r/a", "r/b")],
            )
        ],
        [rslice("s", gpus(2))],
        [alloc(res("r/a", "gpu-0"), res("x", "gpu-1"), config=[from_claim("scoped", "r/a", "r/b")])],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("claim-config-scoped-to-subrequests-of-one-request",),
    ),
    "claim-config-covering-every-request-drops-requests": Case(
        [
            claim(
                "c",
                first_available("r", sub("a"), sub("b", cls="nic")),
                req("x"),
                config=[claim_config("all", "r/a", "x")],
            )
        ],
        [rslice("s", gpus(2))],
        [alloc(res("r/a", "gpu-0"), res("x", "gpu-1"), config=[from_claim("all")])],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("claim-config-covering-all-requests-is-cleared",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_config(case: Case) -> None:
    check_case(case)
