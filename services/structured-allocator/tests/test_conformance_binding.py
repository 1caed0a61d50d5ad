"""Conformance table: Binding conditions (DRADeviceBindingConditions + DRAResourceClaimDeviceStatus).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import STAMP, Case, check_case, consumes, counters, labels, params
from sa_builders import alloc, claim, dev, req, res, rslice

from structured_allocator.core import Features

TAINT = {"key": "key1", "value": "value1", "effect": "NoSchedule"}
TOLERATION = {"operator": "Exists", "key": "key1", "effect": "NoSchedule"}


def bc(name: str, cond: str, fail: str, **extra: Any) -> dict[str, Any]:
    """A device with one binding condition and one binding failure condition."""
    return dev(name, bindingConditions=[cond], bindingFailureConditions=[fail], **extra)


def bc_res(request: str, device: str, cond: str, fail: str, **extra: Any) -> dict[str, Any]:
    return res(request, device, bindingConditions=[cond], bindingFailureConditions=[fail], **extra)


def mem(counter_set: str, value: str) -> list[dict[str, Any]]:
    return [consumes(counter_set, memory=value)]


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
    # --- upstream's binding-condition cases -----------------------------------------------------------
    "binding-conditions-copied-to-result": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [bc("gpu-0", "IsPrepared", "BindingFailed")])],
        [alloc(bc_res("gpu", "gpu-0", "IsPrepared", "BindingFailed"))],
        upstream=("device-binding-conditions",),
    ),
    "binding-conditions-per-device": Case(
        [claim("c", req("a", count=2), req("b"))],
        [rslice("s", [bc("gpu-0", "P0", "F0"), bc("gpu-1", "P1", "F1"), bc("gpu-2", "P2", "F2")])],
        [
            alloc(
                bc_res("a", "gpu-0", "P0", "F0"),
                bc_res("a", "gpu-1", "P1", "F1"),
                bc_res("b", "gpu-2", "P2", "F2"),
            )
        ],
        upstream=("binding-conditions-multiple-devices",),
    ),
    "binding-conditions-on-one-of-two-devices": Case(
        [claim("c", req("a"), req("b"))],
        [rslice("s", [dev("gpu-0"), bc("gpu-1", "P", "F")])],
        [alloc(res("a", "gpu-0"), bc_res("b", "gpu-1", "P", "F"))],
        upstream=("binding-conditions-with-and-without",),
    ),
    "binding-conditions-gates-off-device-not-selectable": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [bc("gpu-0", "P", "F")])],
        None,
        features=Features(device_binding_and_status=False),
        upstream=("binding-conditions-without-feature-gate",),
    ),
    "binds-to-node-pins-the-node": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", bindsToNode=True)], node=None, pool="p", nodeSelector=labels(rack="r1"))],
        [alloc(res("gpu", "gpu-0", pool="p"))],
        upstream=("node-restriction",),
    ),
    "binding-conditions-partition": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [bc("gpu-0", "P", "F", consumesCounters=mem("set", "4Gi"))], count=2),
            counters("s2", set={"memory": "8Gi"}),
        ],
        [alloc(bc_res("gpu", "gpu-0", "P", "F"))],
        upstream=("partitionable-devices-with-binding-conditions",),
    ),
    "binding-conditions-two-partitions": Case(
        [claim("c", req("gpu", count=2))],
        [
            rslice(
                "s1",
                [
                    bc("gpu-0", "P0", "F0", consumesCounters=mem("set", "4Gi")),
                    bc("gpu-1", "P1", "F1", consumesCounters=mem("set", "4Gi")),
                ],
                count=2,
            ),
            counters("s2", set={"memory": "8Gi"}),
        ],
        [alloc(bc_res("gpu", "gpu-0", "P0", "F0"), bc_res("gpu", "gpu-1", "P1", "F1"))],
        upstream=("partitionable-devices-with-binding-conditions-multiple",),
    ),
    "binding-conditions-on-some-partitions": Case(
        [claim("c", req("gpu", count=3))],
        [
            rslice(
                "s1",
                [
                    bc("gpu-0", "P0", "F0", consumesCounters=mem("set", "2Gi")),
                    dev("gpu-1", consumesCounters=mem("set", "2Gi")),
                    bc("gpu-2", "Ready", "Timeout", consumesCounters=mem("set", "4Gi")),
                ],
                count=2,
            ),
            counters("s2", set={"memory": "8Gi"}),
        ],
        [
            alloc(
                bc_res("gpu", "gpu-0", "P0", "F0"),
                res("gpu", "gpu-1"),
                bc_res("gpu", "gpu-2", "Ready", "Timeout"),
            )
        ],
        upstream=("partitionable-devices-with-binding-conditions-some-devices-no-conditions",),
    ),
    "binding-conditions-partitions-in-four-slices": Case(
        [claim("c", req("gpu", count=2))],
        [
            rslice("s4", [bc("gpu-0", "P", "F", consumesCounters=mem("set-1", "4Gi"))], count=4),
            counters("s3", count=4, set_1={"memory": "8Gi"}),
            rslice("s2", [dev("gpu-1", consumesCounters=mem("set-2", "4Gi"))], count=4),
            counters("s1", count=4, set_2={"memory": "8Gi"}),
        ],
        [alloc(res("gpu", "gpu-1"), bc_res("gpu", "gpu-0", "P", "F"))],
        upstream=("partitionable-devices-with-binding-conditions-multi-slices",),
    ),
    "binding-conditions-tainted-partition": Case(
        [claim("c", req("gpu", count=2))],
        [
            rslice(
                "s1",
                [
                    bc("gpu-0", "P", "F", consumesCounters=mem("set", "4Gi"), taints=[TAINT]),
                    dev("gpu-1", consumesCounters=mem("set", "4Gi")),
                ],
            ),
            counters("s2", count=1, set={"memory": "8Gi"}),
        ],
        None,
        upstream=("partitionable-devices-with-binding-conditions-and-taints",),
    ),
    "binding-conditions-tainted-partition-tolerated": Case(
        [claim("c", req("gpu", count=2, tolerations=[TOLERATION]))],
        [
            rslice(
                "s1",
                [
                    bc("gpu-0", "P", "F", consumesCounters=mem("set", "4Gi"), taints=[TAINT]),
                    dev("gpu-1", consumesCounters=mem("set", "4Gi")),
                ],
                count=2,
            ),
            counters("s2", set={"memory": "8Gi"}),
        ],
        [
            alloc(
                bc_res("gpu", "gpu-0", "P", "F", tolerations=[TOLERATION]),
                res("gpu", "gpu-1", tolerations=[TOLERATION]),
            )
        ],
        upstream=("partitionable-devices-with-binding-conditions-and-taints-tolerated",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_binding(case: Case) -> None:
    check_case(case)
