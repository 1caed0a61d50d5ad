"""Conformance table: Binding conditions (DRADeviceBindingConditions + DRAResourceClaimDeviceStatus).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import STAMP, Case, check_case, params
from sa_builders import alloc, claim, dev, req, res, rslice

from structured_allocator.core import Features

CASES: dict[str, Case] = {
    "binding-conditions-binds-to-node": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s",
                [
                    dev(
                        "fabric-0",
                        bindingConditions=["attached"],
                        bindingFailureConditions=["failed"],
                        bindsToNode=True,
                    )
                ],
                node=None,
                pool="fabric",
                allNodes=True,
            )
        ],
        [
            alloc(
                res(
                    "gpu",
                    "fabric-0",
                    pool="fabric",
                    bindingConditions=["attached"],
                    bindingFailureConditions=["failed"],
                ),
                allocationTimestamp="2026-01-02T03:04:05Z",
            )
        ],
    ),
    "binding-condition-pools-last": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [dev("slow", bindingConditions=["ready"])], node=None, pool="a-pool", allNodes=True),
            rslice("s2", [dev("plain")], node=None, pool="b-pool", allNodes=True),
        ],
        [alloc(res("gpu", "plain", pool="b-pool"), node_selector=None)],
    ),
    "binding-conditions-feature-off-not-selectable": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [dev("slow", bindingConditions=["ready"])], node=None, pool="a", allNodes=True)],
        None,
        features=Features(device_binding_and_status=False),
    ),
    # Issue 12 defect 9: kube-scheduler stamps every allocation when both binding gates are on (the
    # runner checks allocationTimestamp on every case); with the gates off nothing is stamped.
    "allocation-timestamp-without-binding-conditions": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"), allocationTimestamp=STAMP)],
    ),
    "no-allocation-timestamp-with-binding-gates-off": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"))],
        features=Features(device_binding_and_status=False),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_binding(case: Case) -> None:
    check_case(case)
