"""Conformance table: Admin access (DRAAdminAccess) and device taints (DRADeviceTaints).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import Case, check_case, exclusive_alloc, gpus, params
from sa_builders import alloc, claim, dev, req, res, rslice

from structured_allocator.core import Features, InvalidRequestError

CASES: dict[str, Case] = {
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
}


@pytest.mark.parametrize("case", params(CASES))
def test_taints_admin(case: Case) -> None:
    check_case(case)
