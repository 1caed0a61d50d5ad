"""Conformance table: Admin access (DRAAdminAccess) and device taints (DRADeviceTaints).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import GPU_CLASS, NIC_CLASS, Case, check_case, exclusive_alloc, gpus, params
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import Features, InvalidRequestError

NO_SCHEDULE = {"key": "k", "value": "v", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "k", "value": "v2", "effect": "NoExecute"}
TOLERATE_NO_SCHEDULE = {"operator": "Exists", "key": "k", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "k", "value": "v2", "effect": "NoExecute"}
TWO_TAINTED = [dev("gpu-0", taints=[NO_SCHEDULE]), dev("gpu-1", taints=[NO_EXECUTE])]
TWO_FREE = [dev("gpu-0"), dev("gpu-1")]


def admin(name: str = "gpu", **kw: Any) -> dict[str, Any]:
    return req(name, admin=True, **kw)


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
    # --- upstream's admin access cases ---------------------------------------------------------------
    "admin-access-feature-off-is-an-error": Case(
        [claim("c", admin())],
        [rslice("s", [dev("gpu-0")])],
        features=Features(admin_access=False),
        error=(InvalidRequestError, 'request "gpu": admin access is requested, but the feature is disabled'),
        upstream=("admin-access-disabled",),
    ),
    "admin-access-gets-allocated-device": Case(
        [claim("c", admin())],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0", adminAccess=True))],
        allocated_devices=("gpu-0", "gpu-1"),
        upstream=("admin-access-enabled",),
    ),
    "admin-access-all-mode-includes-allocated": Case(
        [claim("c", admin(mode="All"))],
        [rslice("s", TWO_FREE)],
        [alloc(res("gpu", "gpu-0", adminAccess=True), res("gpu", "gpu-1", adminAccess=True))],
        allocated_devices=("gpu-0",),
        upstream=("all-devices-some-allocated-admin-access",),
    ),
    "admin-access-all-mode-after-same-claim-took-one": Case(
        [claim("c", admin("a"), admin("b", mode="All"))],
        [rslice("s", TWO_FREE)],
        None,
        upstream=("all-devices-some-allocating-admin-access",),
    ),
    "admin-access-count-two-includes-allocated": Case(
        [claim("c", admin(count=2))],
        [rslice("s", TWO_FREE)],
        [alloc(res("gpu", "gpu-0", adminAccess=True), res("gpu", "gpu-1", adminAccess=True))],
        allocated_devices=("gpu-0",),
        upstream=("count-devices-some-allocated-admin-access",),
    ),
    "admin-access-two-claims-same-device": Case(
        [claim("c1", admin()), claim("c2", admin())],
        [rslice("s", TWO_FREE)],
        [alloc(res("gpu", "gpu-0", adminAccess=True)), alloc(res("gpu", "gpu-0", adminAccess=True))],
        upstream=("separate-claims-share-device-admin-access",),
    ),
    "admin-access-device-taken-by-earlier-claim": Case(
        [claim("c1", req("gpu")), claim("c2", admin())],
        [rslice("s", TWO_FREE)],
        [alloc(res("gpu", "gpu-0")), alloc(res("gpu", "gpu-0", adminAccess=True))],
        upstream=("admin-access-claims-device-allocating-for-non-admin-access",),
    ),
    # --- upstream's taint cases -------------------------------------------------------------------------
    "taints-on-both-devices": Case(
        [claim("c", req("gpu"))], [rslice("s", TWO_TAINTED)], None, upstream=("tainted-two-devices",)
    ),
    "two-taints-on-one-device": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE, NO_EXECUTE])])],
        None,
        upstream=("tainted-one-device-two-taints",),
    ),
    "only-second-device-tolerated": Case(
        [claim("c", req("gpu", tolerations=[TOLERATE_NO_EXECUTE]))],
        [rslice("s", TWO_TAINTED)],
        [alloc(res("gpu", "gpu-1", tolerations=[TOLERATE_NO_EXECUTE]))],
        upstream=("tainted-two-devices-tolerated",),
    ),
    "only-second-subrequest-tolerates": Case(
        [claim("c", first_available("gpu", sub("a"), sub("b", tolerations=[TOLERATE_NO_EXECUTE])))],
        [rslice("s", TWO_TAINTED)],
        [alloc(res("gpu/b", "gpu-1", tolerations=[TOLERATE_NO_EXECUTE]))],
        upstream=("tainted-two-devices-prioritized-list-tolerated",),
    ),
    "taint-with-effect-none": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[{"key": "k", "value": "v", "effect": "None"}])])],
        [alloc(res("gpu", "gpu-0"))],
        upstream=("tainted-no-effect",),
    ),
    "both-taints-tolerated": Case(
        [claim("c", req("gpu", tolerations=[TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE, NO_EXECUTE])])],
        [alloc(res("gpu", "gpu-0", tolerations=[TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]))],
        upstream=("tainted-one-device-two-taints-both-tolerated",),
    ),
    "taints-feature-off": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE, NO_EXECUTE])])],
        [alloc(res("gpu", "gpu-0"))],
        features=Features(device_taints=False),
        upstream=("tainted-disabled",),
    ),
    "tainted-device-for-second-subrequest": Case(
        [claim("c", first_available("gpu", sub("nic", cls="nic"), sub("gpu")))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE])])],
        None,
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("tainted-prioritized-list",),
    ),
    "tainted-device-for-second-subrequest-feature-off": Case(
        [claim("c", first_available("gpu", sub("nic", cls="nic"), sub("gpu")))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE])])],
        [alloc(res("gpu/gpu", "gpu-0"))],
        classes=[GPU_CLASS, NIC_CLASS],
        features=Features(device_taints=False),
        upstream=("tainted-prioritized-list-disabled",),
    ),
    "admin-access-does-not-bypass-taints": Case(
        [claim("c", admin())],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE])])],
        None,
        allocated_devices=("gpu-0", "gpu-1"),
        upstream=("tainted-admin-access",),
    ),
    "admin-access-tainted-feature-off": Case(
        [claim("c", admin())],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE])])],
        [alloc(res("gpu", "gpu-0", adminAccess=True))],
        allocated_devices=("gpu-0", "gpu-1"),
        features=Features(device_taints=False),
        upstream=("tainted-admin-access-disabled",),
    ),
    "all-mode-tainted-device": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE])])],
        None,
        upstream=("tainted-all-devices-single",),
    ),
    "all-mode-tainted-device-feature-off": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0", taints=[NO_SCHEDULE])])],
        [alloc(res("gpu", "gpu-0"))],
        features=Features(device_taints=False),
        upstream=("tainted-all-devices-single-disabled",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_taints_admin(case: Case) -> None:
    check_case(case)
