"""Upstream's resourceclaim controller tests, case by case, and how draflow's tests restate each one.

``UPSTREAM_CASES`` lists every case of kube-controller-manager's resourceclaim controller tests at
k8s.io/kubernetes v1.37.1 (``pkg/controller/resourceclaim/controller_test.go``; the package has no other
test file, and the PodGroup (DRAWorkloadResourceClaims) cases are part of those tables), as
``<TestFunction>/<case>``, in file order: ``TestCreateClaimDoesNotMutateTemplate``, ``TestSyncHandler``,
``TestClaimExists``, ``TestEventHandlers``, ``TestWorkqueue``, ``TestGetAdminAccessMetricLabel``. Checked
in because the Go module cache is not guaranteed to exist when ``make test`` runs.

Each case is in exactly one of:

- ``COVERED``: the draflow test(s) that restate it (``<path from the repository root>::<test function>``);
- ``DIFFERS``: ``"differs: <why>"``, a deliberate difference the claim-controller README documents;
- ``NOT_APPLICABLE``: ``"n/a: <why>"``, Go plumbing or a combination Kubernetes v1.37 cannot produce.

``test_upstream_map.py`` checks that every upstream name is mapped exactly once and that every test named
here exists.
"""

from __future__ import annotations

CC = "services/claim-controller/tests/"
RUNTIME = "libs/draflow-runtime/tests/"

# -- the upstream cases -----------------------------------------------------------------------------------

_SYNC_HANDLER = (
    "create", "create-adminaccess-feature-disabled", "create-adminaccess-feature-enabled",
    "create-for-grouped-pod", "skip-create-for-pod-podgroup-does-not-exist", "create-for-podgroup",
    "skip-create-podgroup-claim-for-pod", "update-pod-status-with-podgroup-claim",
    "skip-create-for-pod-with-podgroup-claim-genericworkload-disabled",
    "skip-create-for-pod-with-podgroup-claim-workloadresourceclaims-disabled",
    "create-for-grouped-pod-with-claim-workloadresourceclaims-disabled", "nop", "nop-podgroup",
    "nop-claim-in-mutation-cache-only", "nop-claim-in-mutation-cache-only-for-podgroup",
    "nop-claim-in-apiserver-only", "nop-claim-in-apiserver-only-for-podgroup", "recreate",
    "recreate-for-podgroup", "missing-template", "missing-template-podgroup", "find-existing-claim-by-label",
    "find-existing-claim-by-label-podgroup", "find-created-claim-in-cache",
    "find-created-claim-in-cache-podgroup", "recreate-wrong-owner", "recreate-wrong-owner-podgroup",
    "no-such-pod", "no-such-podgroup", "pod-deleted", "podgroup-deleted", "no-volumes",
    "create-with-other-claim", "create-with-other-claim-podgroup", "wrong-claim-owner",
    "wrong-claim-owner-podgroup", "create-conflict", "create-conflict-admin-access",
    "create-conflict-podgroup", "stay-reserved-seen", "stay-reserved-not-seen", "clear-reserved-structured",
    "clear-reserved-podgroup", "dont-clear-reserved-podgroup-feature-disabled",
    "dont-clear-reserved-structured", "clear-reserved-structured-deleted", "structured-deleted",
    "clear-reserved-when-done", "remove-reserved", "delete-claim-when-done", "add-reserved",
    "add-reserved-podgroup", "skip-add-reserved-podgroup-genericworkload-disabled",
    "skip-add-reserved-podgroup-workloadresourceclaims-disabled",
    "remove-pod-reservation-with-non-pod-reservation-present", "flapping-resourceclaim-statuses",
)
_CLAIM_EXISTS = (
    "found in mutation cache", "found in underlay store", "found in apiserver fallback",
    "not found anywhere", "apiserver returns error", "owner check fails",
)
_EVENT_HANDLERS = (
    "nothing", "new-claim", "update-claim", "allocate-claim", "allocate-another-claim", "deallocate-claim",
    "delete-deallocated-claim", "delete-allocated-claim", "new-claim-admin-access",
    "update-claim-admin-access", "allocate-claim-admin-access", "allocate-another-claim-admin-access",
    "deallocate-claim-admin-access", "delete-deallocated-claim-admin-access",
    "delete-allocated-claim-admin-access", "new-claim-extended-resources",
    "allocate-claim-extended-resources", "deallocate-claim-extended-resources",
    "delete-claim-extended-resources", "new-pods", "new-template-for-pod",
    "new-template-for-pod-other-namespace", "pod-without-resource-claims",
    "running-pod-with-extended-resource-claim", "completed-pod-with-extended-resource-claim",
    "faled-pod-with-extended-resource-claim", "delete-pod-with-extended-resource-claim",
    "completed-pod-with-regular-and-extended-resource-claim", "new-podgroup-feature-disabled",
    "new-podgroup", "new-podgroup-templated-claim-already-exists", "new-templated-claim-for-podgroup",
    "new-template-for-podgroup", "podgroup-claim-status-update",
    "podgroup-claim-status-update-feature-disabled",
)
_WORKQUEUE = ("no-error", "retryable-error", "nonretryable-error", "wrapped-nonretryable-error", "shutdown")
_ADMIN_ACCESS_LABEL = (
    "nil-claim", "no-requests", "admin-access-false", "admin-access-true", "prioritized-list",
    "one-of-multiple-requests-with-admin-access-true", "multiple-requests-admin-access-false-or-nil",
)

UPSTREAM_CASES: tuple[str, ...] = (
    *(f"TestCreateClaimDoesNotMutateTemplate/{c}" for c in ("pod", "podGroup")),
    *(f"TestSyncHandler/{c}" for c in _SYNC_HANDLER),
    *(f"TestClaimExists/{c}" for c in _CLAIM_EXISTS),
    *(f"TestEventHandlers/{c}" for c in _EVENT_HANDLERS),
    *(f"TestWorkqueue/{c}" for c in _WORKQUEUE),
    *(f"TestGetAdminAccessMetricLabel/{c}" for c in _ADMIN_ACCESS_LABEL),
)

# -- draflow's tests ---------------------------------------------------------------------------------------


def _t(path: str, *tests: str) -> tuple[str, ...]:
    return tuple(f"{path}::{t}" for t in tests)


_PODS = CC + "integration/test_claims_for_pods_integration.py"
_CLEANUP = CC + "integration/test_cleanup_integration.py"
_WRITES = CC + "integration/test_writes_integration.py"
_GROUPS = CC + "integration/test_pod_groups_integration.py"
_SHARDS = CC + "integration/test_shards_integration.py"
_RESERVATIONS = CC + "unit/test_reservations.py"
_GROUP_RESERVATIONS = CC + "unit/test_pod_group_reservations.py"
_RUNNER = RUNTIME + "test_reconcile_runner.py"
_UP_PODS = CC + "integration/test_upstream_pods_integration.py"
_UP_GROUPS = CC + "integration/test_upstream_podgroups_integration.py"
_GATES = CC + "integration/test_workload_gates_integration.py"
_CREATES = CC + "integration/test_create_metrics_integration.py"
_HANDLERS = CC + "integration/test_event_handlers_integration.py"
_NAMING = CC + "unit/test_naming.py"
_METRICS = CC + "unit/test_claim_metrics.py"
_LOOKUP = CC + "unit/test_claim_lookup.py"

COVERED: dict[str, tuple[str, ...]] = {
    "TestSyncHandler/create-for-grouped-pod":
        _t(_GROUPS, "test_a_podgroups_claim_is_made_once_and_recorded_for_the_group_and_its_members"),
    "TestSyncHandler/skip-create-podgroup-claim-for-pod":
        _t(_GROUPS, "test_a_podgroups_claim_is_made_once_and_recorded_for_the_group_and_its_members"),
    "TestSyncHandler/update-pod-status-with-podgroup-claim":
        _t(_GROUPS, "test_a_podgroups_claim_is_made_once_and_recorded_for_the_group_and_its_members"),
    "TestSyncHandler/nop": _t(_WRITES, "test_statuses_stay_right_across_a_restart_and_are_not_rewritten"),
    "TestSyncHandler/recreate":
        _t(_PODS, "test_deleted_generated_claim_of_a_live_pod_is_recreated_with_an_event"),
    "TestSyncHandler/missing-template":
        _t(_PODS, "test_missing_template_is_reported_and_the_claim_created_when_it_appears"),
    "TestSyncHandler/find-existing-claim-by-label":
        _t(_PODS, "test_restart_between_create_and_status_update_creates_no_duplicate"),
    "TestSyncHandler/find-existing-claim-by-label-podgroup":
        _t(_GROUPS, "test_a_claim_made_for_the_group_before_its_status_was_written_is_reused"),
    "TestSyncHandler/find-created-claim-in-cache":
        _t(_PODS,
           "test_failed_status_update_retried_before_the_informer_saw_the_claim_creates_no_duplicate"),
    "TestSyncHandler/find-created-claim-in-cache-podgroup":
        _t(_SHARDS, "test_a_podgroup_claim_the_previous_holder_just_created_is_found_not_made_again"),
    "TestSyncHandler/no-such-pod": _t(_PODS, "test_pod_deleted_mid_flight_leaves_no_claim_behind"),
    "TestSyncHandler/no-such-podgroup":
        _t(_GROUPS, "test_a_bound_member_reserves_the_groups_claim_for_the_group_until_the_group_is_gone"),
    "TestSyncHandler/stay-reserved-seen": (
        *_t(_CLEANUP, "test_finished_pod_claims_are_unreserved_deallocated_and_deleted"),
        *_t(_RESERVATIONS, "test_running_consumer_keeps_everything"),
    ),
    "TestSyncHandler/stay-reserved-not-seen":
        _t(_CLEANUP, "test_reservation_of_a_pod_the_cache_does_not_know_is_checked_live"),
    "TestSyncHandler/dont-clear-reserved-podgroup-feature-disabled":
        _t(_GROUP_RESERVATIONS, "test_with_the_gate_off_a_podgroup_reservation_is_left_alone"),
    "TestSyncHandler/dont-clear-reserved-structured": (
        *_t(_CLEANUP,
            "test_shared_claim_stays_allocated_while_a_consumer_lives_and_is_released_after_the_last"),
        *_t(_RESERVATIONS, "test_shared_claim_stays_allocated_while_one_consumer_lives"),
    ),
    "TestSyncHandler/structured-deleted": (
        *_t(_CLEANUP, "test_deleted_claim_with_nothing_reserved_is_released"),
        *_t(_RESERVATIONS, "test_deleted_claim_with_nothing_reserved_is_released"),
    ),
    "TestSyncHandler/delete-claim-when-done":
        _t(_CLEANUP, "test_finished_pod_claims_are_unreserved_deallocated_and_deleted"),
    "TestSyncHandler/add-reserved-podgroup":
        _t(_GROUPS, "test_a_bound_member_reserves_the_groups_claim_for_the_group_until_the_group_is_gone"),
    "TestSyncHandler/remove-pod-reservation-with-non-pod-reservation-present":
        _t(_CLEANUP, "test_unknown_reservation_kinds_are_left_alone"),
    "TestClaimExists/found in underlay store":
        _t(_WRITES, "test_statuses_stay_right_across_a_restart_and_are_not_rewritten"),
    "TestClaimExists/not found anywhere":
        _t(_PODS, "test_deleted_generated_claim_of_a_live_pod_is_recreated_with_an_event"),
    "TestWorkqueue/no-error": _t(_RUNNER, "test_done_forgets_the_key_backoff"),
    "TestWorkqueue/retryable-error": _t(_RUNNER, "test_other_exceptions_retry_with_growing_backoff"),
    "TestWorkqueue/nonretryable-error":
        _t(_RUNNER, "test_terminal_error_calls_on_terminal_and_is_not_retried"),
    "TestWorkqueue/shutdown": _t(_RUNNER, "test_runner_returns_when_the_queue_shuts_down"),
}

_NOT_MUTATED = _t(_NAMING, "test_claim_body_leaves_the_cached_templates_annotations_alone")
_COUNTED = _t(_CREATES, "test_creates_are_counted_and_a_refused_create_is_retried")
_ADMIN = _t(_CREATES, "test_an_admin_access_claim_is_made_once_its_namespace_allows_admin_access")
_GROUP_TEMPLATE = _t(_UP_GROUPS,
                     "test_a_podgroups_claim_waits_for_its_template_is_made_again_when_deleted_and_kept_on_restart")
_GROUP_NOT_OWNED = _t(_UP_GROUPS, "test_a_group_claim_recorded_but_not_the_groups_is_replaced_and_left_alone")
_GROUP_LAGGING = _t(_UP_GROUPS,
                    "test_a_recorded_group_claim_the_cache_lacks_is_found_live_or_in_the_processs_own_writes")
_WRC_OFF = _t(_GATES,
              "test_with_workload_claims_off_a_groups_claim_is_refused_but_a_members_own_claim_is_made")
_GW_OFF = _t(_GATES, "test_with_generic_workload_off_a_member_pod_gets_an_event_and_nothing_else")
_NOT_CONTROLLED = _t(_UP_PODS, "test_a_recorded_claim_the_pod_does_not_control_is_replaced_and_left_alone")
_NAMED_ALIKE = _t(_UP_PODS, "test_a_claim_named_like_the_generated_one_but_not_the_pods_is_never_taken")
_READ_LIVE = _t(_UP_PODS, "test_a_recorded_claim_the_cache_lacks_is_read_live_and_not_made_again")
_OWN_WRITE = _t(_UP_PODS, "test_a_recorded_claim_only_this_process_has_written_is_not_made_again")
_H_PODS = _t(_HANDLERS, "test_pods_and_templates")
_H_FINISHED = _t(_HANDLERS, "test_finished_pods_queue_their_claims")
_H_GROUPS = _t(_HANDLERS, "test_podgroups")
_H_GROUPS_OFF = _t(_HANDLERS, "test_podgroups_with_workload_claims_off")

COVERED.update({
    "TestCreateClaimDoesNotMutateTemplate/pod": _NOT_MUTATED,
    "TestCreateClaimDoesNotMutateTemplate/podGroup": _NOT_MUTATED,
    "TestSyncHandler/create-adminaccess-feature-enabled": _ADMIN,
    "TestSyncHandler/skip-create-for-pod-podgroup-does-not-exist": (
        *_t(_UP_GROUPS, "test_a_member_of_a_podgroup_that_does_not_exist_yet_waits_for_it"), *_WRC_OFF),
    "TestSyncHandler/skip-create-for-pod-with-podgroup-claim-genericworkload-disabled": _GW_OFF,
    "TestSyncHandler/skip-create-for-pod-with-podgroup-claim-workloadresourceclaims-disabled": _WRC_OFF,
    "TestSyncHandler/create-for-grouped-pod-with-claim-workloadresourceclaims-disabled": _WRC_OFF,
    "TestSyncHandler/nop-podgroup": _GROUP_TEMPLATE,
    "TestSyncHandler/nop-claim-in-mutation-cache-only": _OWN_WRITE,
    "TestSyncHandler/nop-claim-in-mutation-cache-only-for-podgroup": _GROUP_LAGGING,
    "TestSyncHandler/nop-claim-in-apiserver-only": _READ_LIVE,
    "TestSyncHandler/nop-claim-in-apiserver-only-for-podgroup": _GROUP_LAGGING,
    "TestSyncHandler/recreate-for-podgroup": _GROUP_TEMPLATE,
    "TestSyncHandler/missing-template-podgroup": _GROUP_TEMPLATE,
    "TestSyncHandler/recreate-wrong-owner": _NOT_CONTROLLED,
    "TestSyncHandler/recreate-wrong-owner-podgroup": _GROUP_NOT_OWNED,
    "TestSyncHandler/pod-deleted": _t(_UP_PODS, "test_a_pod_being_deleted_or_without_claims_gets_no_claim"),
    "TestSyncHandler/podgroup-deleted": _t(_UP_GROUPS, "test_a_podgroup_being_deleted_gets_no_claim"),
    "TestSyncHandler/no-volumes": _t(_UP_PODS, "test_a_pod_being_deleted_or_without_claims_gets_no_claim"),
    "TestSyncHandler/create-with-other-claim": _NAMED_ALIKE,
    "TestSyncHandler/create-with-other-claim-podgroup": _GROUP_NOT_OWNED,
    "TestSyncHandler/wrong-claim-owner": _NAMED_ALIKE,
    "TestSyncHandler/wrong-claim-owner-podgroup": _GROUP_NOT_OWNED,
    "TestSyncHandler/create-conflict": _COUNTED,
    "TestSyncHandler/create-conflict-admin-access": _ADMIN,
    "TestSyncHandler/create-conflict-podgroup": _COUNTED,
    "TestSyncHandler/clear-reserved-structured-deleted": (
        *_t(_RESERVATIONS,
            "test_deleted_claim_reserved_for_a_gone_pod_is_unreserved_deallocated_and_released"),
        *_t(_CLEANUP, "test_deleted_claim_in_use_waits_for_its_consumer"),
    ),
    "TestSyncHandler/remove-reserved": (
        *_t(_RESERVATIONS, "test_a_gone_consumer_goes_and_a_pending_one_keeps_the_allocation"),
        *_t(_CLEANUP, "test_reservation_of_a_pod_the_cache_does_not_know_is_checked_live"),
    ),
    "TestSyncHandler/add-reserved":
        _t(_UP_PODS, "test_an_allocated_claim_of_a_pod_bound_without_the_allocator_is_reserved_for_it"),
    "TestSyncHandler/skip-add-reserved-podgroup-genericworkload-disabled": _GW_OFF,
    "TestSyncHandler/skip-add-reserved-podgroup-workloadresourceclaims-disabled": _WRC_OFF,
    "TestSyncHandler/flapping-resourceclaim-statuses":
        _t(_UP_PODS, "test_an_older_recorded_claim_and_a_new_one_are_recorded_with_one_apply"),
    "TestClaimExists/found in mutation cache": _OWN_WRITE,
    "TestClaimExists/found in apiserver fallback": _READ_LIVE,
    "TestClaimExists/apiserver returns error":
        _t(_LOOKUP, "test_an_error_reading_the_recorded_claim_is_raised_not_taken_for_gone"),
    "TestClaimExists/owner check fails": _NOT_CONTROLLED,
    "TestEventHandlers/nothing": (*_H_PODS, *_t(_METRICS, "test_claims_gauge")),
    "TestEventHandlers/new-pods": _H_PODS,
    "TestEventHandlers/new-template-for-pod": _H_PODS,
    "TestEventHandlers/new-template-for-pod-other-namespace": _H_PODS,
    "TestEventHandlers/pod-without-resource-claims": _H_PODS,
    "TestEventHandlers/running-pod-with-extended-resource-claim": _H_FINISHED,
    "TestEventHandlers/completed-pod-with-extended-resource-claim": _H_FINISHED,
    "TestEventHandlers/faled-pod-with-extended-resource-claim": _H_FINISHED,
    "TestEventHandlers/delete-pod-with-extended-resource-claim": _H_FINISHED,
    "TestEventHandlers/completed-pod-with-regular-and-extended-resource-claim": _H_FINISHED,
    "TestEventHandlers/new-podgroup-feature-disabled": _H_GROUPS_OFF,
    "TestEventHandlers/new-podgroup": _H_GROUPS,
    "TestEventHandlers/new-podgroup-templated-claim-already-exists":
        (*_H_GROUPS, *_t(_METRICS, "test_claims_gauge")),
    "TestEventHandlers/new-template-for-podgroup": _H_GROUPS,
    "TestEventHandlers/podgroup-claim-status-update": _H_GROUPS,
    "TestEventHandlers/podgroup-claim-status-update-feature-disabled": _H_GROUPS_OFF,
    **{f"TestGetAdminAccessMetricLabel/{c}": _t(_METRICS, "test_admin_access_label")
       for c in _ADMIN_ACCESS_LABEL},
})

_FINALIZER_AT_CREATE = CC + "integration/test_finalizer_at_create_integration.py"
_WITH_FINALIZER = (
    "differs: the claim is created with the delete-protection finalizer upstream's scheduler adds later "
    "with a write of its own (--create-with-finalizer, default on: README, Differences from upstream; "
    f"{_FINALIZER_AT_CREATE}::test_a_generated_claim_carries_the_finalizer_from_its_first_version); off, "
    f"the object is upstream's ({_FINALIZER_AT_CREATE}::"
    "test_with_the_setting_off_the_claim_is_created_without_the_finalizer); otherwise as upstream: ")

DIFFERS: dict[str, str] = {
    "TestSyncHandler/create": (
        f"{_WITH_FINALIZER}{_PODS}::test_pod_with_two_template_claims_gets_two_claims_recorded_in_its_"
        "status, "
        f"{_CREATES}::test_creates_are_counted_and_a_refused_create_is_retried"),
    "TestSyncHandler/create-for-podgroup": (
        f"{_WITH_FINALIZER}{_GROUPS}::test_a_podgroups_claim_is_made_once_and_recorded_for_the_group_and_"
        f"its_members, {_CREATES}::test_creates_are_counted_and_a_refused_create_is_retried"),
    "TestSyncHandler/clear-reserved-structured": (
        "differs: the reservation of the gone pod goes, the claim is deallocated and its finalizer released "
        "as upstream, but the claim generated for that gone pod is then deleted, where upstream leaves it "
        "to the garbage collector (README, Differences from upstream: draflow does not assume one runs); "
        f"{_CLEANUP}::test_pod_deleted_while_reserved_leaves_nothing_behind"),
    "TestSyncHandler/clear-reserved-podgroup": (
        "differs: the reservation of the gone PodGroup goes, the claim is deallocated and its finalizer "
        "released as upstream "
        f"({_GROUP_RESERVATIONS}::test_the_podgroup_gone_drops_its_reservation_and_deallocates), but the "
        "claim, generated for a pod that is gone too, is then deleted where upstream leaves it to the "
        "garbage collector (README, Differences from upstream)"),
    "TestSyncHandler/clear-reserved-when-done": (
        "differs: the claim has no delete-protection finalizer; upstream then only drops the reservation "
        "and keeps the allocation, draflow deallocates it as well (README, Differences from upstream: "
        "deallocation does not require the finalizer); "
        f"{_RESERVATIONS}::test_last_consumer_done_deallocates_and_releases"),
}


_OWNER_QUEUED = (
    "draflow's claim handler also queues the pod (or PodGroup and its members) that controls the claim, "
    "a no-op reconcile when nothing is to be done (README, Differences from upstream); the claim's key "
    "and the gauge are as upstream")
_DELETED_QUEUED = (
    "upstream queues nothing for a deleted claim; draflow queues its key (the reconcile publishes the "
    "claim's `deleted` event on NATS) and its owner's (README, Differences from upstream); the gauge "
    "is as upstream")
for _case in ("new-claim", "update-claim", "allocate-claim", "allocate-another-claim", "deallocate-claim",
              "new-claim-admin-access", "update-claim-admin-access", "allocate-claim-admin-access",
              "allocate-another-claim-admin-access", "deallocate-claim-admin-access",
              "new-claim-extended-resources", "allocate-claim-extended-resources",
              "deallocate-claim-extended-resources"):
    DIFFERS[f"TestEventHandlers/{_case}"] = (
        f"differs: {_OWNER_QUEUED} ({_HANDLERS}::test_claim_changes, {_METRICS}::test_claims_gauge)")
for _case in ("delete-deallocated-claim", "delete-allocated-claim", "delete-deallocated-claim-admin-access",
              "delete-allocated-claim-admin-access", "delete-claim-extended-resources"):
    DIFFERS[f"TestEventHandlers/{_case}"] = (
        f"differs: {_DELETED_QUEUED} ({_HANDLERS}::test_claim_changes, {_METRICS}::test_claims_gauge)")
DIFFERS["TestEventHandlers/new-templated-claim-for-podgroup"] = (
    f"differs: {_OWNER_QUEUED} ({_HANDLERS}::test_podgroups, {_METRICS}::test_claims_gauge)")

NOT_APPLICABLE: dict[str, str] = {
    "TestSyncHandler/create-adminaccess-feature-disabled": (
        "n/a: DRAAdminAccess is GA and locked on in Kubernetes v1.37; draflow_runtime.featuregates refuses "
        "DRAAdminAccess=false as kube-controller-manager does, so no claim-controller runs with it off "
        "(upstream's table still tries every combination)"),
    "TestWorkqueue/wrapped-nonretryable-error": (
        "n/a: Go error wrapping (fmt.Errorf %w around a nonRetryableError, found with errors.As); a "
        "Python reconcile raises the TerminalError itself, which stays one through every frame "
        f"({_RUNNER}::test_terminal_error_calls_on_terminal_and_is_not_retried)"),
}

# Not restated yet: nothing (the map test fails for a name listed here that is mapped elsewhere too).
TO_RESTATE: tuple[str, ...] = ()


def mapping() -> dict[str, tuple[str, ...] | str]:
    """upstream case -> the draflow tests that restate it, or the "differs: ..."/"n/a: ..." reason."""
    out: dict[str, tuple[str, ...] | str] = {}
    out.update(COVERED)
    out.update(DIFFERS)
    out.update(NOT_APPLICABLE)
    return out
