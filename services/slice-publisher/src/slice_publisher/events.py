"""Pool-change events on NATS: the only module that knows their subjects and payloads.

Subject: ``draflow.events.pool.<driver>.<pool>.changed``. NATS subjects are dot-separated tokens and driver
names are DNS subdomains (``gpu.draflow.example``), pool names may contain ``/``, so both are encoded with
:func:`subject_token` (``.`` and ``/`` become ``_``, which DNS names never contain, so nothing collides);
the payload carries the real names. Subscribers that only want a nudge use ``draflow.events.pool.>``.

Payload (JSON)::

    {"driver", "node", "pool", "generation", "resourceSliceCount", "devices", "taintedDevices",
     "created", "updated", "deleted", "time": <unix seconds>}

``devices`` is 0 and ``resourceSliceCount`` 0 when the pool was deleted. Publishing never fails a sync:
the bus keeps events in its outbox while NATS is down, anything else is logged and dropped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import orjson

from draflow_runtime.log import get_logger
from slice_publisher.pool_sync import ApplyResult, Plan

log = get_logger(__name__)

SUBJECT_PREFIX = "draflow.events.pool"
STREAM_SUBJECTS = [f"{SUBJECT_PREFIX}.>"]
Publish = Callable[[str, bytes], Awaitable[object]]


def subject_token(name: str) -> str:
    return name.replace(".", "_").replace("/", "_") or "_"


def subject(driver: str, pool: str) -> str:
    return f"{SUBJECT_PREFIX}.{subject_token(driver)}.{subject_token(pool)}.changed"


def payload(plan: Plan, result: ApplyResult, tainted: int) -> bytes:
    return orjson.dumps(
        {
            "driver": plan.driver,
            "node": plan.owner_node,
            "pool": plan.pool,
            "generation": plan.generation,
            "resourceSliceCount": plan.slice_count,
            "devices": plan.device_count,
            "taintedDevices": tainted,
            "created": result.created,
            "updated": result.updated,
            "deleted": result.deleted,
            "time": time.time(),
        }
    )


async def pool_changed(publish: Publish | None, plan: Plan, result: ApplyResult, tainted: int) -> None:
    if publish is None:
        return
    try:
        await publish(subject(plan.driver, plan.pool), payload(plan, result, tainted))
    except Exception as exc:
        log.warning("pool event not published", driver=plan.driver, pool=plan.pool, error=repr(exc))
