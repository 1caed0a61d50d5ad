"""Table-driven conformance suite for the allocation core (upstream incubating allocator semantics).

Every case names the input (classes, slices, already-allocated claims, claims to allocate, node) and
the full expected ``status.allocation`` dicts, or the expected error, or the expected explanation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from sa_builders import (
    DRIVER,
    FIXED_NOW,
    NODE,
    PIN_NODE1,
    alloc,
    claim,
    dclass,
    dev,
    first_available,
    req,
    res,
    rslice,
    share,
    share_ids,
    sub,
)

from structured_allocator.core import (
    AllocatedState,
    AllocationError,
    Allocator,
    CelSelectorError,
    Features,
    InvalidRequestError,
    PoolUnavailableError,
    TooManyResultsError,
    UnknownDeviceClassError,
)

GPU_CLASS = dclass("gpu", f'device.driver == "{DRIVER}"')
MEM = f'device.capacity["{DRIVER}"].memory'


@dataclass
class Case:
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    expect: list[dict[str, Any]] | None = None  # None: does not fit
    classes: list[dict[str, Any]] = field(default_factory=lambda: [GPU_CLASS])
    allocated: list[dict[str, Any]] = field(default_factory=list)
    node: dict[str, Any] = field(default_factory=lambda: NODE)
    features: Features = field(default_factory=Features.all)
    error: tuple[type[Exception], str] | None = None
    summary: str | None = None  # expected explanation summary when it does not fit
    explain: dict[str, dict[str, Any]] | None = None  # request name -> expected count fields
    admin_allowed: bool = True


def gpus(n: int, **attrs_per: Any) -> list[dict[str, Any]]:
    return [dev(f"gpu-{i}", {k: v[i] for k, v in attrs_per.items()} or None) for i in range(n)]


def shared_alloc(device: str, sid: int, **consumed: str) -> dict[str, Any]:
    return claim(
        "existing",
        req("gpu"),
        allocation=alloc(res("gpu", device, shareID=share(sid), consumedCapacity=consumed)),
    )


def exclusive_alloc(*devices: str, pool: str = "node-1") -> dict[str, Any]:
    return claim("existing", req("gpu"), allocation=alloc(*[res("gpu", d, pool=pool) for d in devices]))


MULTI_CAP = {
    "memory": {
        "value": "100Gi",
        "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "max": "60Gi", "step": "10Gi"}},
    },
    "bandwidth": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "20", "40"]}},
}
COUNTER_SLICE = rslice(
    "counters", [], sharedCounters=[{"name": "gpu-0-mem", "counters": {"memory": {"value": "80Gi"}}}]
)


def partition(name: str, mem: str, kind: str) -> dict[str, Any]:
    return dev(
        name,
        {"kind": kind},
        consumesCounters=[{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": mem}}}],
    )


PARTITIONS = rslice(
    "devices",
    [
        partition("full", "80Gi", "full"),
        partition("half-a", "40Gi", "half"),
        partition("half-b", "40Gi", "half"),
    ],
    count=2,
)
COUNTER_SLICE2 = rslice(
    "counters", [], count=2, sharedCounters=[{"name": "gpu-0-mem", "counters": {"memory": {"value": "80Gi"}}}]
)

CASES: dict[str, Case] = {
    # --- basics and ordering ----------------------------------------------------------------------
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
    # --- pools: generations, completeness, validity ---------------------------------------------
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
    # --- allocation mode All ----------------------------------------------------------------------
    "all-mode-complete-pool": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(3))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "all-mode-selector-filters": Case(
        [claim("c", req("gpu", mode="All", selectors=(f'device.attributes["{DRIVER}"].numa == 1',)))],
        [rslice("s", gpus(3, numa=[0, 1, 1]))],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "all-mode-incomplete-pool-error": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("part", gpus(2), count=2)],
        error=(PoolUnavailableError, f"resource pool {DRIVER}/node-1 is currently being updated"),
    ),
    "all-mode-no-devices-does-not-fit": Case(
        [claim("c", req("gpu", mode="All"))], [rslice("s", [], node="node-1")], None
    ),
    "all-mode-device-in-use-does-not-fit": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(2))],
        None,
        allocated=[exclusive_alloc("gpu-1")],
    ),
    # --- backtracking and constraints -------------------------------------------------------------
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
    # --- firstAvailable ---------------------------------------------------------------------------
    "first-available-falls-back": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu",
                    sub("big", selectors=(f'{MEM}.compareTo(quantity("200Gi")) >= 0',)),
                    sub("small", count=2),
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": "80Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu/small", "gpu-0"), res("gpu/small", "gpu-1"))],
    ),
    "first-available-first-choice": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu", sub("big", selectors=(f'{MEM}.compareTo(quantity("40Gi")) >= 0',)), sub("small")
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": "20Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu/big", "gpu-1"))],
    ),
    "first-available-backtracks-within-subrequest": Case(
        [
            claim(
                "c",
                first_available("a", sub("one"), sub("two", count=2)),
                req("b", selectors=(f'device.attributes["{DRIVER}"].numa == 0',)),
                constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
            )
        ],
        [rslice("s", gpus(3, numa=[1, 0, 0]))],
        [alloc(res("a/one", "gpu-1"), res("b", "gpu-2"))],
    ),
    # --- admin access -----------------------------------------------------------------------------
    "admin-access-in-use-device": Case(
        [claim("c", req("gpu", admin=True))],
        [rslice("s", gpus(1))],
        [alloc(res("gpu", "gpu-0", adminAccess=True))],
        allocated=[exclusive_alloc("gpu-0")],
    ),
    "admin-access-not-allowed-in-namespace": Case(
        [claim("c", req("gpu", admin=True))],
        [rslice("s", gpus(1))],
        admin_allowed=False,
        error=(InvalidRequestError, "admin access is requested"),
    ),
    "admin-access-result-does-not-block": Case(
        [claim("c", req("gpu"))],
        [rslice("s", gpus(1))],
        [alloc(res("gpu", "gpu-0"))],
        allocated=[
            claim("admin", req("gpu", admin=True), allocation=alloc(res("gpu", "gpu-0", adminAccess=True)))
        ],
    ),
    # --- taints -----------------------------------------------------------------------------------
    "taint-no-schedule-blocks": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[{"key": "broken", "effect": "NoSchedule"}]), dev("gpu-1")])],
        [alloc(res("gpu", "gpu-1"))],
    ),
    "taint-no-execute-blocks": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[{"key": "broken", "value": "x", "effect": "NoExecute"}])])],
        None,
        summary='claim "c" request "gpu": 1 devices of class gpu, 1 blocked by taints, 0 usable, 1 needed',
    ),
    "taint-effect-none-ignored": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[{"key": "k", "effect": "None"}])])],
        [alloc(res("gpu", "gpu-0"))],
    ),
    "taint-tolerated-equal": Case(
        [
            claim(
                "c",
                req(
                    "gpu",
                    tolerations=[{"key": "broken", "operator": "Equal", "value": "x", "effect": "NoExecute"}],
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", taints=[{"key": "broken", "value": "x", "effect": "NoExecute"}])])],
        [
            alloc(
                res(
                    "gpu",
                    "gpu-0",
                    tolerations=[{"key": "broken", "operator": "Equal", "value": "x", "effect": "NoExecute"}],
                )
            )
        ],
    ),
    "taint-tolerated-exists-empty-key": Case(
        [claim("c", req("gpu", tolerations=[{"operator": "Exists"}]))],
        [
            rslice(
                "s",
                [
                    dev(
                        "gpu-0",
                        taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}],
                    )
                ],
            )
        ],
        [alloc(res("gpu", "gpu-0", tolerations=[{"operator": "Exists"}]))],
    ),
    "taint-toleration-wrong-value": Case(
        [claim("c", req("gpu", tolerations=[{"key": "broken", "value": "y"}]))],
        [rslice("s", [dev("gpu-0", taints=[{"key": "broken", "value": "x", "effect": "NoSchedule"}])])],
        None,
    ),
    "taints-ignored-with-feature-off": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[{"key": "k", "effect": "NoSchedule"}])])],
        [alloc(res("gpu", "gpu-0"))],
        features=Features(device_taints=False),
    ),
    # --- partitionable devices (counters) ---------------------------------------------------------
    "counters-two-halves": Case(
        [claim("c", req("gpu", count=2, selectors=(f'device.attributes["{DRIVER}"].kind == "half"',)))],
        [COUNTER_SLICE2, PARTITIONS],
        [alloc(res("gpu", "half-a"), res("gpu", "half-b"))],
    ),
    "counters-full-exhausts-memory": Case(
        [
            claim(
                "c",
                req("a", selectors=(f'device.attributes["{DRIVER}"].kind == "full"',)),
                req("b", selectors=(f'device.attributes["{DRIVER}"].kind == "half"',)),
            )
        ],
        [COUNTER_SLICE2, PARTITIONS],
        None,
        summary='claims "c": every request has usable devices on its own, but not all together '
        "(constraints, or requests competing for the same devices)",
    ),
    "counters-consumed-by-allocated-device": Case(
        [claim("c", req("gpu", selectors=(f'device.attributes["{DRIVER}"].kind == "half"',)))],
        [COUNTER_SLICE2, PARTITIONS],
        None,
        allocated=[exclusive_alloc("full")],
        summary=f'claim "c" request "gpu": 3 devices of class gpu, 2 match selector '
        f'device.attributes["{DRIVER}"].kind == "half", 2 blocked by counters, 0 usable, 1 needed',
        explain={
            "gpu": {"class_devices": 3, "matching": 2, "free": 2, "blocked_by_counters": 2, "usable": 0}
        },
    ),
    "counters-one-half-left": Case(
        [claim("c", req("gpu", selectors=(f'device.attributes["{DRIVER}"].kind != "full"',)))],
        [COUNTER_SLICE2, PARTITIONS],
        [alloc(res("gpu", "half-b"))],
        allocated=[exclusive_alloc("half-a")],
    ),
    "counters-feature-off-skips-partitionable-slices": Case(
        [claim("c", req("gpu"))],
        [COUNTER_SLICE2, PARTITIONS],
        None,
        features=Features(partitionable_devices=False),
    ),
    # --- consumable capacity ----------------------------------------------------------------------
    "capacity-step-rounding-and-share": Case(
        [claim("c", req("gpu", capacity={"memory": "15Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("gpu", "gpu-0", shareID=share(1), consumedCapacity={"memory": "20Gi", "bandwidth": "10"})
            )
        ],
    ),
    "capacity-valid-values-rounding": Case(
        [claim("c", req("gpu", capacity={"bandwidth": "25"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("gpu", "gpu-0", shareID=share(1), consumedCapacity={"memory": "10Gi", "bandwidth": "40"})
            )
        ],
    ),
    "capacity-above-max-not-eligible": Case(
        [claim("c", req("gpu", capacity={"memory": "70Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
        explain={"gpu": {"blocked_by_capacity": 1, "usable": 0}},
    ),
    "capacity-exceeded-by-existing-shares": Case(
        [claim("c", req("gpu", capacity={"memory": "20Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
        allocated=[
            shared_alloc("gpu-0", 90, memory="60Gi", bandwidth="10"),
            claim(
                "e2",
                req("gpu"),
                allocation=alloc(res("gpu", "gpu-0", shareID=share(91), consumedCapacity={"memory": "30Gi"})),
            ),
        ],
        summary='claim "c" request "gpu": 1 devices of class gpu, 1 blocked by capacity, 0 usable, 1 needed',
    ),
    "capacity-fits-next-to-existing-share": Case(
        [claim("c", req("gpu", capacity={"memory": "40Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("gpu", "gpu-0", shareID=share(1), consumedCapacity={"memory": "40Gi", "bandwidth": "10"})
            )
        ],
        allocated=[shared_alloc("gpu-0", 90, memory="60Gi", bandwidth="10")],
    ),
    "capacity-two-requests-share-one-device": Case(
        [claim("c", req("a", capacity={"memory": "50Gi"}), req("b", capacity={"memory": "50Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("a", "gpu-0", shareID=share(1), consumedCapacity={"memory": "50Gi", "bandwidth": "10"}),
                res("b", "gpu-0", shareID=share(2), consumedCapacity={"memory": "50Gi", "bandwidth": "10"}),
            )
        ],
    ),
    "capacity-third-share-exceeds": Case(
        [
            claim(
                "c",
                req("a", capacity={"memory": "50Gi"}),
                req("b", capacity={"memory": "50Gi"}),
                req("d", capacity={"memory": "10Gi"}),
            )
        ],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
    ),
    # Within one request devices are combinations, not permutations: one device cannot fill two slots.
    "capacity-count-two-needs-two-devices": Case(
        [claim("c", req("gpu", count=2, capacity={"memory": "50Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
    ),
    "capacity-unknown-capacity-name-skips-device": Case(
        [claim("c", req("gpu", capacity={"nope": "1"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
    ),
    "capacity-request-on-exclusive-device": Case(
        [claim("c", req("gpu", capacity={"memory": "50Gi"}))],
        [rslice("s", [dev("gpu-0", cap={"memory": "40Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu", "gpu-1"))],
    ),
    "capacity-request-feature-off-error": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", gpus(1))],
        features=Features(consumable_capacity=False),
        error=(InvalidRequestError, "DRAConsumableCapacity"),
    ),
    # --- binding conditions -----------------------------------------------------------------------
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
    # --- config -----------------------------------------------------------------------------------
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
    # --- CEL --------------------------------------------------------------------------------------
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
    # --- errors -----------------------------------------------------------------------------------
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
        error=(TooManyResultsError, "number of requested devices 33 exceeds the claim limit of 32"),
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
    # --- explanation ------------------------------------------------------------------------------
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
}


def run_case(case: Case):  # type: ignore[no-untyped-def]
    allocator = Allocator(
        {c["metadata"]["name"]: c for c in case.classes},
        case.slices,
        AllocatedState.from_claims(case.allocated),
        case.features,
        new_share_id=share_ids(),
        clock=lambda: FIXED_NOW,
    )
    return allocator.allocate(case.node, case.claims, admin_access_allowed=case.admin_allowed)


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_allocator_conformance(case: Case) -> None:
    if case.error is not None:
        exc_type, message = case.error
        with pytest.raises(exc_type) as info:
            run_case(case)
        assert message in str(info.value)
        assert isinstance(info.value, AllocationError)
        return
    outcome = run_case(case)
    if case.expect is None:
        assert not outcome.fits, outcome.results
        assert outcome.results == []
        explanation = outcome.explanation
        assert explanation is not None
        if case.summary is not None:
            assert explanation.summary == case.summary
        for name, fields_ in (case.explain or {}).items():
            entry = next(r for r in explanation.requests if r.request == name)
            for k, v in fields_.items():
                assert getattr(entry, k) == v, (k, entry)
        assert explanation.to_dict()["node"] == NODE["metadata"]["name"]
    else:
        assert outcome.fits, outcome.explanation and outcome.explanation.summary
        assert outcome.results == case.expect


def test_inputs_are_not_mutated() -> None:
    import copy

    case = CASES["capacity-step-rounding-and-share"]
    before = copy.deepcopy((case.claims, case.slices))
    run_case(case)
    assert (case.claims, case.slices) == before


def test_pin_node_selector_shape() -> None:
    assert PIN_NODE1["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-1"]
