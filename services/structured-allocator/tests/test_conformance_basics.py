"""Conformance table: ordering, node selection, pools (generations, completeness, validity).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER, Case, check_case, exclusive_alloc, gpus, params
from sa_builders import alloc, claim, dev, req, res, rslice

CASES: dict[str, Case] = {
    "single-device": Case([claim("c", req("gpu"))], [rslice("s", gpus(2))], [alloc(res("gpu", "gpu-0"))]),
    "exact-count-two": Case(
        [claim("c", req("gpu", count=2))],
        [rslice("s", gpus(3))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"))],
    ),
    "slices-in-name-order": Case(
        [claim("c", req("gpu"))],
        [rslice("b-slice", [dev("dev-b")], count=2), rslice("a-slice", [dev("dev-a")], count=2)],
        [alloc(res("gpu", "dev-a"))],
    ),
    "pools-in-driver-pool-order": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [dev("dev-b")], pool="pool-b"), rslice("s2", [dev("dev-a")], pool="pool-a")],
        [alloc(res("gpu", "dev-a", pool="pool-a"))],
    ),
    "two-claims-get-different-devices": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", gpus(2))],
        [alloc(res("gpu", "gpu-0")), alloc(res("gpu", "gpu-1"))],
    ),
    "already-allocated-device-skipped": Case(
        [claim("c", req("gpu"))],
        [rslice("s", gpus(2))],
        [alloc(res("gpu", "gpu-1"))],
        allocated=[exclusive_alloc("gpu-0")],
    ),
    "other-node-slice-ignored": Case(
        [claim("c", req("gpu"))],
        [rslice("s", gpus(1), node="node-2")],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed',
    ),
    "all-nodes-slice-no-node-selector": Case(
        [claim("c", req("gpu"))],
        [rslice("s", gpus(1), node=None, pool="net", allNodes=True)],
        [alloc(res("gpu", "gpu-0", pool="net"), node_selector=None)],
    ),
    "node-selector-slice-merged": Case(
        [claim("c", req("gpu", count=2))],
        [
            rslice(
                "s1",
                [dev("a")],
                node=None,
                pool="p1",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                },
            ),
            rslice(
                "s2",
                [dev("b")],
                node=None,
                pool="p2",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "rack", "operator": "In", "values": ["r1"]},
                                {"key": "zone", "operator": "In", "values": ["a"]},
                            ]
                        }
                    ]
                },
            ),
        ],
        [
            alloc(
                res("gpu", "a", pool="p1"),
                res("gpu", "b", pool="p2"),
                node_selector={
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a"]},
                                {"key": "rack", "operator": "In", "values": ["r1"]},
                            ]
                        }
                    ]
                },
            )
        ],
    ),
    "node-selector-not-matching": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s1",
                [dev("a")],
                node=None,
                pool="p1",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                    ]
                },
            )
        ],
        None,
    ),
    "per-device-node-selection": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s",
                [dev("remote", nodeName="node-2"), dev("local", nodeName="node-1")],
                node=None,
                pool="p",
                perDeviceNodeSelection=True,
            )
        ],
        [alloc(res("gpu", "local", pool="p"))],
    ),
    "per-device-all-nodes": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("any", allNodes=True)], node=None, pool="p", perDeviceNodeSelection=True)],
        [alloc(res("gpu", "any", pool="p"), node_selector=None)],
    ),
    "newest-generation-wins": Case(
        [claim("c", req("gpu"))],
        [rslice("old", [dev("gpu-old")], gen=1), rslice("new", [dev("gpu-new")], gen=2)],
        [alloc(res("gpu", "gpu-new"))],
    ),
    "incomplete-pool-skipped": Case(
        [claim("c", req("gpu"))],
        [rslice("part", [dev("x")], pool="big", count=2), rslice("s", [dev("y")], pool="small")],
        [alloc(res("gpu", "y", pool="small"))],
    ),
    "incomplete-pool-only": Case(
        [claim("c", req("gpu"))],
        [rslice("part", [dev("x")], pool="big", count=2)],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"incomplete pools skipped: {DRIVER}/big",
    ),
    "incomplete-pool-with-newer-generation-elsewhere-dropped": Case(
        [claim("c", req("gpu"))],
        [
            rslice("part", [dev("x")], pool="p", count=2),
            rslice("newer", [dev("z")], node="node-2", pool="p", gen=2),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed',
    ),
    "pool-complete-via-slices-of-other-nodes": Case(
        [claim("c", req("gpu"))],
        [
            rslice("mine", [dev("x")], pool="p", count=2),
            rslice("theirs", [dev("z")], node="node-2", pool="p", count=2),
        ],
        [alloc(res("gpu", "x", pool="p"))],
    ),
    "invalid-pool-duplicate-device": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [dev("gpu-0")], count=2), rslice("s2", [dev("gpu-0")], count=2)],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/node-1 (duplicate device name gpu-0)",
    ),
    "invalid-pool-dangling-counter": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s", [dev("p", consumesCounters=[{"counterSet": "nope", "counters": {"m": {"value": "1"}}}])]
            )
        ],
        None,
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_basics(case: Case) -> None:
    check_case(case)
