"""Who a replica counts as a live shard member, on the pure ShardView with a fake clock.

Chaos run defect (``make chaos --short``, fault "kill claim-controller with most shards"): the killed
replica, restarted as a new process, counted the dead process's member slot as live for a whole lease
duration of its own clock (it had never seen that record before, so it could not know how old it was),
while the survivors, who had seen it expire, did not. With three replicas and four shards the views
disagreed on one shard: the survivors left it to the newcomer, the newcomer left it to the dead member,
and nobody held it for ~15 s (a new pod in it got its claim 17.8 s late).
"""

from __future__ import annotations

from draflow_runtime.shards import ShardView, desired_shards, member_lease_name

DURATION, RETRY, SHARDS = 15.0, 2.0, 4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def slot(holder: str, renewed: float) -> dict[str, object]:
    return {"holderIdentity": holder, "leaseDurationSeconds": int(DURATION), "renewTime": f"{renewed:.3f}"}


def read(view: ShardView, api: dict[str, dict[str, object]]) -> None:
    for name, seen in view.observed():
        seen.observe(api.get(name))


def test_a_new_replica_does_not_count_a_dead_member_it_never_saw_renew() -> None:
    clock = FakeClock()
    view = ShardView("ctl", SHARDS, "d", DURATION, clock)
    api = {member_lease_name("ctl", 2): slot("c", -5.0)}  # c died at -5; a and b renew every RETRY
    for now in (0.0, RETRY, 2 * RETRY):
        clock.now = now
        api[member_lease_name("ctl", 0)] = slot("a", now)
        api[member_lease_name("ctl", 1)] = slot("b", now)
        read(view, api)
    assert view.live_members() == {"a", "b"}, "the dead member c counted a lease duration after start"
    assert view.wanted(member=True) == desired_shards("d", {"a", "b"}, SHARDS)


def test_a_member_counts_once_its_slot_is_seen_renewed_or_taken_and_until_it_expires() -> None:
    clock = FakeClock()
    view = ShardView("ctl", SHARDS, "d", DURATION, clock)
    api = {member_lease_name("ctl", 0): slot("a", 0.0)}
    read(view, api)  # the first read: not known to be alive yet
    assert view.live_members() == set()
    clock.now = RETRY
    api[member_lease_name("ctl", 0)] = slot("a", RETRY)
    api[member_lease_name("ctl", 1)] = slot("b", RETRY)  # taken while this replica watched
    read(view, api)
    assert view.live_members() == {"a", "b"}
    clock.now = RETRY + DURATION  # neither renewed since: both expired
    read(view, api)
    assert view.live_members() == set()
