"""Conformance table: Consumable capacity (DRAConsumableCapacity, DRAFractionalCapacityRange).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import Case, check_case, gpus, params, shared_alloc
from sa_builders import alloc, claim, dev, req, res, rslice, share

from structured_allocator.core import Features, InvalidRequestError

MULTI_CAP = {
    "memory": {
        "value": "100Gi",
        "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "max": "60Gi", "step": "10Gi"}},
    },
    "bandwidth": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "20", "40"]}},
}


CASES: dict[str, Case] = {
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
}


@pytest.mark.parametrize("case", params(CASES))
def test_capacity(case: Case) -> None:
    check_case(case)
