"""``draflow events [--claim ns/name] [--last N]``: lifecycle history from JetStream.

With ``--claim``: that claim's timeline (every kind, in publish order). Without: the last N events of
every claim and pool. Both read the ``DRAFLOW_EVENTS`` stream through
:mod:`draflow_runtime.lifecycle` (ephemeral consumers; nothing is acknowledged or changed).
"""

from __future__ import annotations

from datetime import UTC, datetime

import nats
import nats.errors
import nats.js.errors

from draflow_runtime.busauth import NatsSecurity
from draflow_runtime.lifecycle import ClaimEvent, PoolChanged, claim_timeline, kind_name, recent_events


def describe(event: ClaimEvent | PoolChanged) -> str:
    """One readable line for an event."""
    if isinstance(event, PoolChanged):
        where = f" node={event.node}" if event.node else ""
        return (
            f"pool {event.driver}/{event.pool} changed{where} gen={event.generation} "
            f"devices={event.devices} tainted={event.tainted_devices} slices={event.resource_slice_count}"
        )
    parts = [f"{kind_name(event.kind) if event.kind else 'unknown':<17}", f"{event.namespace}/{event.name}"]
    if event.pod.name:
        parts.append(f"pod={event.pod.namespace}/{event.pod.name}")
    if event.node:
        parts.append(f"node={event.node}")
    if event.driver:
        parts.append(f"driver={event.driver}")
    if event.devices:
        parts.append("devices=" + ",".join(f"{d.pool}/{d.device}" for d in event.devices))
    if event.service:
        parts.append(f"by={event.service}")
    if event.reason:
        parts.append(f"reason={event.reason}")
    if event.message:
        parts.append(f"message={event.message!r}")
    return " ".join(parts)


def _when(event: ClaimEvent | PoolChanged) -> str:
    if not event.HasField("time"):
        return "-" * 23
    dt = datetime.fromtimestamp(event.time.ToNanoseconds() / 1e9, tz=UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]


def format_events(events: list[ClaimEvent | PoolChanged]) -> str:
    return "\n".join(f"{_when(e)}  {describe(e)}" for e in events)


async def run(nats_url: str, claim: tuple[str, str] | None, last: int,
              security: NatsSecurity | None = None) -> str:
    """``security``: credentials and TLS (the server gives a reader the ``DRAFLOW_READER`` permissions of
    ``deploy/kustomize/components/nats-auth/permissions.conf``)."""
    try:
        nc = await nats.connect(nats_url, connect_timeout=3, max_reconnect_attempts=0, allow_reconnect=False,
                                **(security or NatsSecurity()).connect_options())
    except (nats.errors.Error, OSError) as exc:
        raise SystemExit(f"draflow: cannot reach NATS at {nats_url}: {exc!r}") from exc
    try:
        js = nc.jetstream()
        try:
            if claim is not None:
                events: list[ClaimEvent | PoolChanged] = list(await claim_timeline(js, *claim))
                header = f"claim {claim[0]}/{claim[1]}: {len(events)} event(s)"
                if last:
                    events = events[-last:]
            else:
                events = [r.event for r in await recent_events(js, last=last or 100)]
                header = f"last {len(events)} event(s)"
        except nats.js.errors.NotFoundError:
            return "no events stream (DRAFLOW_EVENTS) yet: no service has published"
    finally:
        await nc.close()
    return header + ("\n" + format_events(events) if events else "")
