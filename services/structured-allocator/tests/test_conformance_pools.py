"""Conformance table: which slices and pools a node sees — node selection of slices (node name,
label selectors, all nodes) and the merged node selector of the result, generations, pools spread
over several nodes, incomplete and invalid pools.

Upstream reports "invalid resource pools were encountered" as an error wrapping
``ErrFailedAllocationOnNode`` (a failure for this node only, which kube-scheduler turns into
"unschedulable on this node"); draflow returns "does not fit" with the invalid pool and its reason in
the explanation — the same scheduling outcome, with the reason kept for the user.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER, NODE2, Case, check_case, labels, params, pin
from sa_builders import alloc, claim, dev, req, res, rslice

ZONE_A = labels(zone="a")


def gen(name: str, node: str, device: str, generation: int, count: int = 2) -> dict:  # type: ignore[type-arg]
    """One slice of the pool "p" (slices of one pool may target different nodes)."""
    return rslice(name, [dev(device)], node=node, pool="p", gen=generation, count=count)


CASES: dict[str, Case] = {
    "slice-for-label-selector": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")], node=None, pool="net", nodeSelector=ZONE_A)],
        [alloc(res("gpu", "gpu-0", pool="net"), node_selector=ZONE_A)],
        upstream=("network-attached-device",),
    ),
    "slice-for-label-selector-other-node": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")], node=None, pool="net", nodeSelector=ZONE_A)],
        None,
        node=NODE2,
        upstream=("unsuccessful-allocation-network-attached-device",),
    ),
    "node-selectors-of-four-slices-merged": Case(
        [claim("c", req("gpu", count=4))],
        [
            rslice("s1", [dev("gpu-0")], node=None, pool="p1", nodeSelector=ZONE_A),
            rslice("s2", [dev("gpu-0")], node=None, pool="p2", allNodes=True),
            rslice("s3", [dev("gpu-0")], node=None, pool="p3", nodeSelector=labels(rack="r1")),
            rslice("s4", [dev("gpu-0")], node=None, pool="p4", nodeSelector=pin("node-1")),
        ],
        [
            alloc(
                *[res("gpu", "gpu-0", pool=f"p{i}") for i in range(1, 5)],
                node_selector={
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a"]},
                                {"key": "rack", "operator": "In", "values": ["r1"]},
                            ],
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
                        }
                    ]
                },
            )
        ],
        upstream=("many-network-attached-devices",),
    ),
    "node-local-device-pins-the-node": Case(
        [claim("c", req("gpu", count=2))],
        [
            rslice("s1", [dev("gpu-0")], node=None, pool="p1", nodeSelector=ZONE_A),
            rslice("s2", [dev("gpu-0")], pool="p2"),
        ],
        [alloc(res("gpu", "gpu-0", pool="p1"), res("gpu", "gpu-0", pool="p2"))],
        upstream=("local-and-network-attached-devices",),
    ),
    # --- generations, pools spread over nodes -------------------------------------------------------------
    "newer-generation-replaces-slice": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")], count=2), rslice("s", [dev("gpu-1")], gen=2, count=2)],
        None,
        upstream=("obsolete-slice",),
    ),
    "stale-slice-of-this-node-while-other-node-has-newer": Case(
        [claim("c", req("gpu"))],
        [gen("s1", "node-1", "gpu-0", 1), gen("s2", "node-2", "gpu-1", 2)],
        None,
        upstream=("multi-host-resource-pool-with-stale-slice-for-current-node",),
    ),
    "complete-old-generation-here-new-one-elsewhere": Case(
        [claim("c", req("gpu"))],
        [
            gen("a1", "node-1", "gpu-0", 1),
            gen("a2", "node-1", "gpu-1", 1),
            gen("b1", "node-2", "gpu-0", 2),
            gen("b2", "node-2", "gpu-1", 2),
        ],
        [alloc(res("gpu", "gpu-0", pool="p"))],
        upstream=("multi-host-resource-pool-complete-update-from-node-1-to-node-2",),
    ),
    "complete-new-generation-here": Case(
        [claim("c", req("gpu"))],
        [
            gen("a1", "node-2", "gpu-0", 1),
            gen("a2", "node-2", "gpu-1", 1),
            gen("b1", "node-1", "gpu-0", 2),
            gen("b2", "node-1", "gpu-1", 2),
        ],
        [alloc(res("gpu", "gpu-0", pool="p"))],
        upstream=("multi-host-resource-pool-complete-update-from-node-2-to-node-1",),
    ),
    "complete-old-generation-here-partial-new-one-elsewhere": Case(
        [claim("c", req("gpu"))],
        [gen("a1", "node-1", "gpu-0", 1), gen("a2", "node-1", "gpu-1", 1), gen("b1", "node-2", "gpu-0", 2)],
        [alloc(res("gpu", "gpu-0", pool="p"))],
        upstream=("multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",),
    ),
    "partial-new-generation-here": Case(
        [claim("c", req("gpu"))],
        [gen("a1", "node-2", "gpu-0", 1), gen("a2", "node-2", "gpu-1", 1), gen("b1", "node-1", "gpu-0", 2)],
        None,
        upstream=("multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",),
    ),
    "slices-of-one-pool-on-two-nodes": Case(
        [claim("c", req("gpu"))],
        [gen("s1", "node-2", "gpu-0", 1), gen("s2", "node-1", "gpu-1", 1)],
        [alloc(res("gpu", "gpu-1", pool="p"))],
        upstream=("different-resourceslices-in-pool-can-target-different-nodes",),
    ),
    "all-mode-takes-the-devices-of-this-node-of-a-spread-pool": Case(
        [claim("c", req("gpu", mode="All"))],
        [gen("s1", "node-1", "gpu-0", 1), gen("s2", "node-2", "gpu-1", 1)],
        [alloc(res("gpu", "gpu-0", pool="p"))],
        upstream=("allocation-mode-all-with-multi-host-resource-pool",),
    ),
    "incomplete-pool-is-not-used": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")], count=2)],
        None,
        upstream=("no-allocation-from-incomplete-pools",),
    ),
    # --- invalid pools ---------------------------------------------------------------------------------
    "same-device-in-two-slices-of-a-pool": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [dev("gpu-0")], count=2), rslice("s1-2", [dev("gpu-0")], count=2)],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/node-1 (duplicate device name gpu-0)",
        upstream=("duplicate-slice",),
    ),
    "invalid-pool-while-another-pool-fits": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [dev("gpu-0")], pool="p1", count=2),
            rslice("s2", [dev("gpu-0")], pool="p1", count=2),
            rslice("s3", [dev("gpu-1")], pool="p2"),
        ],
        [alloc(res("gpu", "gpu-1", pool="p2"))],
        upstream=("invalid-pool-is-ok-if-devices-can-be-allocated-from-other",),
    ),
    "invalid-pool-and-other-pool-in-use": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [dev("gpu-0")], pool="p1", count=2),
            rslice("s2", [dev("gpu-0")], pool="p1", count=2),
            rslice("s3", [dev("gpu-1")], pool="p2"),
        ],
        None,
        allocated_devices=("p2/gpu-1",),
        summary='claim "c" request "gpu": 1 devices of class gpu, 0 free (1 in use), 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/p1 (duplicate device name gpu-0)",
        upstream=("invalid-pool-is-error-if-no-other-device-can-be-allocated",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_pools(case: Case) -> None:
    check_case(case)
