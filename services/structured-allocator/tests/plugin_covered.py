# ruff: noqa: E501  (a data table: upstream test names are long)
"""The draflow tests that restate each covered case of kube-scheduler's DynamicResources plugin tests
(:mod:`plugin_cases`): ``<file>::<test>`` under ``tests/``, or ``conformance:<case>`` (a case of upstream's
allocator table that ``conformance_map`` maps). Part of :mod:`plugin_map`."""

from __future__ import annotations

_P = "TestPlugin/"
DEC = "test_plugin_decisions.py::"
PB = "test_plugin_binding.py::"
WRT = "integration/test_plugin_writes_integration.py::"
SCHED = "integration/test_scheduling_integration.py::"
DEVS = "integration/test_devices_integration.py::"
EXT = "integration/test_extended_resources_integration.py::"
PGC = "test_podgroup_conformance.py::"
PGD = "test_decision_pod_groups.py::"
BC = "test_bindingconds.py::"
BUDGET = "test_decision_budget.py::"
NA = "test_nodealloc.py::"
NAN = "test_nodealloc_nodes.py::"
ASSUME = "test_assume.py::"
SCORE = "test_plugin_scoring.py::"
PA = "test_plugin_assume.py::"
XR = "test_plugin_extres.py::"
PNA = "test_plugin_nodealloc.py::"
PNI = "test_plugin_nodealloc_info.py::"
PPL = "test_plugin_podlevel.py::"

COVERED: dict[str, tuple[str, ...]] = {
    # -- TestPlugin: claims the pod uses, and what ends up in the API
    _P + "claim-reference": (DEC + "test_claim_reference_an_allocated_claim_is_only_reserved",
                             SCHED + "test_shared_claim_lists_every_pod_in_reserved_for",
        WRT + "test_an_existing_allocation_is_not_stamped_the_api_server_refuses_it",),
    _P + "claim-template": (DEC + "test_claim_reference_an_allocated_claim_is_only_reserved",
                            SCHED + "test_template_claims_are_allocated_and_pods_bound",
        WRT + "test_an_existing_allocation_is_not_stamped_the_api_server_refuses_it",),
    _P + "podgroup-claim-reference-feature-disabled-reserves-for-pod": (
        PGD + "test_with_the_gate_off_the_same_member_reserves_for_itself",),
    _P + "podgroup-claim-reference": (PGD + "test_a_members_new_allocation_is_reserved_for_its_podgroup",
                                      "integration/test_pod_groups_integration.py::"
                                      "test_members_share_a_claim_reserved_once_for_their_podgroup"),
    _P + "podgroup-claim-template": (PGD + "test_the_groups_allocated_template_claim_is_reserved_for_the_group",),
    _P + "missing-claim": ("test_decision_claims.py::test_a_template_claim_without_a_status_entry_is_waited_for",),
    _P + "no-resources": (SCHED + "test_explanation_of_an_impossible_claim_names_request_and_reason",),
    _P + "with-resources": (SCHED + "test_template_claims_are_allocated_and_pods_bound",),
    _P + "podgroup-with-resources": (PGD + "test_a_members_new_allocation_is_reserved_for_its_podgroup",),
    _P + "podgroup-with-resources-feature-disabled-reserves-for-pod": (
        PGD + "test_with_the_gate_off_the_same_member_reserves_for_itself",),
    _P + "skip-bind": (ASSUME + "test_assumed_devices_are_in_use_until_released",),
    _P + "tainted-device-disabled": ("conformance:tainted-disabled",),
    _P + "tainted-device-enabled": (DEVS + "test_device_taint_rule_steers_pods_away_unless_the_claim_tolerates_it",
                                    "conformance:tainted-two-devices"),
    _P + "request-admin-access-with-DRAAdminAccess-featuregate": ("conformance:admin-access-enabled",
                                                                  "conformance:count-devices-some-allocated-admin-access"),
    _P + "request-admin-access-without-DRAAdminAccess-featuregate": ("conformance:admin-access-disabled",),
    _P + "structured-ignore-allocated-admin-access": ("conformance:separate-claims-share-device-admin-access",),
    _P + "claim-parameters-CEL-runtime-error": ("conformance:invalid-CEL-one-device",),
    _P + "class-parameters-CEL-runtime-error": ("conformance:invalid-CEL-one-device-class",
                                                SCHED + "test_invalid_cel_in_device_class_is_reported_while_others_schedule"),
    _P + "wrong-topology": (DEVS + "test_claim_allocated_on_a_node_that_stopped_working_is_deallocated_and_moved",
                            "test_postfilter.py::test_deallocatable",
                            DEC + "test_postfilter_gives_back_the_claim_another_node_found_unavailable",
                            DEC + "test_postfilter_keeps_an_available_allocation_when_something_else_does_not_fit",
                            DEC + "test_postfilter_keeps_an_available_allocation_when_another_claim_does_not_fit"),
    _P + "bind-failure-preserves-inflight-until-unreserve": (
        "test_settle.py::test_an_undo_that_could_not_read_the_claim_keeps_the_devices_held",
        "test_settle.py::test_an_undo_that_deallocated_releases"),
    _P + "postfilter-deallocate-reserved-podgroup": (PGC + "test_postfilter_deallocate_reserved_podgroup",),
    _P + "postfilter-skip-deallocate-reserved-podgroup-feature-disabled": (
        PGC + "test_skip_deallocate_feature_disabled",),
    _P + "postfilter-deallocate-unreserved-podgroup": (PGC + "test_postfilter_deallocate_unreserved_podgroup",),
    _P + "postfilter-skip-deallocate-reserved-podgroup-when-pods-active": (
        PGC + "test_postfilter_skip_deallocate_reserved_podgroup_when_pods_active",),
    _P + "reserved-okay-podgroup": (PGD + "test_a_claim_already_reserved_for_the_group_needs_no_write",),
    _P + "claim-with-prioritized-list-feature-disabled": ("conformance:prioritized-list-disabled",),
    _P + "claim-with-prioritized-list": ("conformance:prioritized-list-first-unavailable",),
    # -- extended resources backed by DRA
    _P + "extended-resource-name-with-node-resource": (
        "test_extres.py::test_only_mapped_names_are_dra_demand_and_device_plugin_nodes_do_not_serve_them_by_dra",
        "test_nodefit.py::test_dra_backed_extended_resources_are_left_to_dra_unless_the_node_advertises_them"),
    _P + "extended-resource-name-with-resources": (
        EXT + "test_dra_serves_extended_resources_where_no_device_plugin_does",),
    _P + "implicit-extended-resource-name-with-resources": (DEC + "test_implicit_and_explicit_names_of_one_class",),
    _P + "implicit-extended-resource-name-two-containers-with-resources": (DEC + "test_implicit_and_explicit_names_of_one_class",),
    _P + "extended-resource-name-with-resources-fail-patch": (
        EXT + "test_a_failed_placement_deletes_the_claim_it_created_and_the_retry_makes_a_new_one",),
    _P + "extended-resource-name-with-resources-has-claim": (
        EXT + "test_a_special_claim_left_from_an_earlier_attempt_is_deleted_and_the_pod_placed_afresh",),
    _P + "extended-resource-name-with-resources-delete-claim": (
        EXT + "test_a_special_claim_left_from_an_earlier_attempt_is_deleted_and_the_pod_placed_afresh",),
    _P + "extended-resource-name-bind-failure": (
        EXT + "test_a_failed_placement_deletes_the_claim_it_created_and_the_retry_makes_a_new_one",),
    _P + "extended-resource-name-skip-bind": (
        EXT + "test_a_failed_placement_deletes_the_claim_it_created_and_the_retry_makes_a_new_one",),
    # -- the search budget (DRASchedulerFilterTimeout)
    _P + "canceled": (BUDGET + "test_cancellation_stops_the_search",),
    _P + "timeout": (BUDGET + "test_the_filter_timeout_stops_the_whole_search",
                     "integration/test_search_budget_integration.py::"
                     "test_pathological_claim_gets_budget_explanation_while_other_pods_schedule"),
    _P + "timeout_disabled": ("test_featuregates.py::test_filter_timeout_and_taint_rules_follow_their_gates",),
    _P + "timeout_zero": ("test_search_budget.py::test_without_budget_the_search_runs_to_its_answer",),
    # -- allocationTimestamp and binding conditions
    _P + "dont-add-allocation-timestamp": ("conformance:binding-conditions-without-feature-gate",),
    _P + "add-allocation-timestamp": (SCHED + "test_template_claims_are_allocated_and_pods_bound",
                                      "test_validate_memo.py::test_allocation_timestamps_follow_the_clock_to_the_second"),
    _P + "bind-claim-with-binding-conditions": (DEVS + "test_pod_is_bound_only_once_binding_conditions_are_true",
                                                BC + "test_waiter_gives_up_after_the_timeout"),
    _P + "bind-failure-concurrent-deallocation": (BC + "test_waiter_gives_up_after_the_timeout",
                                                  BC + "test_waiter_fails_when_the_claim_is_replaced"),
    _P + "bound-claim-with-succeeded-binding-conditions": (
        PB + "test_claims_whose_binding_conditions_hold_are_reserved",
        BC + "test_already_allocated_claims_are_read_from_the_cache",),
    _P + "bound-claim-with-failed-binding": (
        PB + "test_a_claim_whose_binding_failed_or_timed_out_is_given_back",
        DEVS + "test_allocated_claim_whose_binding_failed_is_unavailable_and_given_back",),
    _P + "bound-claim-with-timed-out-binding": (
        PB + "test_a_claim_whose_binding_failed_or_timed_out_is_given_back",
        BC + "test_binding_status",),
    _P + "prebind-fail-with-binding-timeout": (
        PB + "test_prebind_fail_with_binding_timeout_not_yet_timed_out_is_still_reserved",
        BC + "test_waiter_gives_up_after_the_timeout",),
    _P + "bound-claim-with-mixed-binding-conditions": (
        PB + "test_a_claim_whose_binding_failed_or_timed_out_is_given_back",
        BC + "test_binding_status",),
    _P + "bound-claim-without-binding-conditions": (
        PB + "test_claims_whose_binding_conditions_hold_are_reserved",
        BC + "test_devices_without_binding_conditions_need_no_wait",),
    _P + "multi-claims-binding-conditions-all-success": (
        PB + "test_claims_whose_binding_conditions_hold_are_reserved",),
    _P + "multi-claims-binding-conditions-one-fail": (
        PB + "test_a_claim_whose_binding_failed_or_timed_out_is_given_back",),
    # -- node-allocatable resources (DRANodeAllocatableResources)
    _P + "node-allocatable-resource-multiplier": (
        "test_decision_nodealloc.py::test_the_devices_cpu_share_is_counted_and_recorded_for_the_pod",
        "integration/test_node_allocatable_integration.py::"
        "test_a_devices_cpu_share_counts_for_the_pod_and_stays_counted_once_it_is_bound"),
    _P + "node-allocatable-mapping-and-overhead-in-same-device": (
        NA + "test_statuses_sum_mappings_and_overheads_per_claim_with_the_referencing_containers",),
    _P + "node-allocatable-resource-capacitykey": (
        NAN + "test_consumed_capacity_without_the_key_adds_nothing_and_with_it_the_multiple",),
    _P + "node-allocatable-resource-capacitykey-and-multiplier": (
        NA + "test_statuses_sum_mappings_and_overheads_per_claim_with_the_referencing_containers",),
    _P + "node-allocatable-resource-insufficient-resources-with-multiplier": (
        NA + "test_the_plugin_checks_cpu_memory_storage_and_hugepages_only",),
    _P + "node-allocatable-direct-mapped-sharing-rejected": (
        NA + "test_an_allocated_claim_with_a_mapped_device_is_only_for_the_pod_it_is_reserved_for",),
    _P + "node-allocatable-mapping-and-overhead-sharing-rejected": (
        NA + "test_an_allocated_claim_with_a_mapped_device_is_only_for_the_pod_it_is_reserved_for",),
    _P + "node-allocatable-overhead-only-sharing-allowed": (
        NA + "test_an_allocated_claim_with_a_mapped_device_is_only_for_the_pod_it_is_reserved_for",
        NA + "test_only_a_mapping_makes_a_claim_unshareable"),

    # -- other tests of dynamicresources_test.go
    "TestPreFilterReusesPendingAllocationWithNilNodeSelector": (
        PGC + "test_pre_filter_reuses_pending_allocation_with_nil_node_selector",),
    "TestFilterReusesPendingAllocationRequiresDRAOptionalNodeOperations": (
        PGC + "test_filter_reuses_pending_allocation_requires_dra_optional_node_operations",),
    "TestGatherAllocatedState/no-claims": (ASSUME + "test_assumed_devices_are_in_use_until_released",),
    "TestGatherAllocatedState/single-allocated-claim": (
        ASSUME + "test_the_informer_copy_replaces_the_assumption_and_deallocation_frees",),
    "TestGatherAllocatedState/single-allocated-claim-with-shared-device": (
        ASSUME + "test_shared_allocations_add_and_remove_consumed_capacity",),
    "TestGatherAllocatedState/single-allocated-claim-with-capacity": (
        ASSUME + "test_shared_allocations_add_and_remove_consumed_capacity",),
    "TestGatherAllocatedState/mixed-allocated-claim": (
        ASSUME + "test_shared_allocations_add_and_remove_consumed_capacity",),
    "TestGatherAllocatedState/add-inflight-allocated-claim-with-capacity": (
        ASSUME + "test_shared_allocations_add_and_remove_consumed_capacity",
        ASSUME + "test_assumed_devices_are_in_use_until_released"),
    "TestPodGroupPostFilter/empty": (PGC + "test_empty",),
    "TestPodGroupPostFilter/deallocate-pod-level-claim": (PGC + "test_deallocate_pod_level_claim",),
    "TestPodGroupPostFilter/deallocate-podgroup-level-claim": (PGC + "test_deallocate_podgroup_level_claim",),
    "TestPodGroupPostFilter/delete-pod-level-extended-claim": (PGC + "test_delete_pod_level_extended_claim",),
    "TestPodGroupPostFilter/unreserve-podgroup-claim": (PGC + "test_unreserve_podgroup_claim",),
    "TestPodGroupPostFilter/unreserve-podgroup-multiple-unscheduled-pods": (
        PGC + "test_unreserve_podgroup_multiple_unscheduled_pods",),
    "TestPodGroupPostFilter/mixed-pod-level-and-podgroup-claims": (PGC + "test_mixed_pod_level_and_podgroup_claims",),
    "TestPodGroupPostFilter/skip-deallocate-feature-disabled": (PGC + "test_skip_deallocate_feature_disabled",),
    "TestPodGroupPostFilter/skip-deallocate-topology-aware-podgroup": (
        PGC + "test_skip_deallocate_topology_aware_podgroup",),

    # -- nodeallocatabledynamicresources_test.go
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, shared (other pod using it)": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/overhead-only mapped claim, shared (other pod using it)": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, already reserved for another pod - early exit": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapping and overhead in same device, shared (other pod using it)": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestBuildNodeAllocatableDRAInfo/Combined CPU request and Auxiliary Request": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Multiple Claims per Container": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Combined Capacity and PerAllocatedUnitQuantity": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Capacity Key Missing in Allocation - Should be Ignored": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Overhead Mappings": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/device with both mapped and overhead": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Invalid -  Device Not Found": (
        NAN + "test_a_counted_claim_with_a_device_for_another_node_is_an_error",),
    "TestNodeFitsNativeResources/insufficient cpu": (PNA + "test_node_fits_native_resources",),
    "TestNodeFitsNativeResources/insufficient hugepages 2Mi": (PNA + "test_node_fits_native_resources",),
    "TestNodeFitsNativeResources/all resources sufficient": (PNA + "test_node_fits_native_resources",),
    "TestFilterSlicesForNode/matches NodeName exactly": (PNA + "test_filter_slices_for_node_a_slice_that_reaches_the_node_counts",),
    "TestFilterSlicesForNode/matches AllNodes": (PNA + "test_filter_slices_for_node_a_slice_that_reaches_the_node_counts",),
    "TestFilterSlicesForNode/matches NodeSelector": (PNA + "test_filter_slices_for_node_a_slice_that_reaches_the_node_counts",),
    # -- restated by this session's tests
    "TestPlugin/empty": (DEC + "test_empty_a_pod_without_claims_is_placed_with_nothing_to_write",),
    "TestPlugin/empty-with-extended-resources-enabled": (DEC + "test_empty_a_pod_without_claims_is_placed_with_nothing_to_write",),
    "TestPlugin/deleted-claim": (DEC + "test_deleted_claim_a_claim_being_deleted_is_not_used",),
    "TestPlugin/wrong-claim": (DEC + "test_wrong_claim_a_generated_claim_another_pod_owns_is_not_used",),
    "TestPlugin/with-resources-has-finalizer": (WRT + "test_with_resources_has_finalizer",),
    "TestPlugin/with-resources-finalizer-gets-removed": (WRT + "test_with_resources_finalizer_gets_removed_or_added_before_the_write",),
    "TestPlugin/with-resources-finalizer-gets-added": (WRT + "test_with_resources_finalizer_gets_removed_or_added_before_the_write",),
    "TestPlugin/exhausted-resources-in-informer-cache": (DEC + "test_exhausted_resources_in_informer_cache",),
    "TestPlugin/exhausted-resources-in-flight-claim": (DEC + "test_resources_held_by_an_in_flight_claim",),
    "TestPlugin/other-resources-in-flight-claim": (DEC + "test_resources_held_by_an_in_flight_claim",),
    "TestPlugin/CEL-runtime-error-for-one-of-two-nodes": (DEC + "test_cel_runtime_error_for_one_node_keeps_the_pod_pending",),
    "TestPlugin/CEL-runtime-error-for-one-of-three-nodes": (DEC + "test_cel_runtime_error_for_one_node_keeps_the_pod_pending",),
    "TestPlugin/missing-class": (DEC + "test_missing_class_no_device_class_at_all",),
    "TestPlugin/good-topology": (DEC + "test_good_topology_a_label_selector_of_the_allocation_picks_the_node",
        WRT + "test_an_existing_allocation_is_not_stamped_the_api_server_refuses_it",),
    "TestPlugin/allocated-skip-node-operations-missing-feature": (DEC + "test_allocated_skip_node_operations_needs_a_node_declaring_the_feature",),
    "TestPlugin/allocated-skip-node-operations-with-feature": (DEC + "test_allocated_skip_node_operations_needs_a_node_declaring_the_feature",
        WRT + "test_an_existing_allocation_is_not_stamped_the_api_server_refuses_it",),
    "TestPlugin/bind-failure": (WRT + "test_bind_failure_takes_the_pod_out_of_reserved_for_and_keeps_the_allocation",),
    "TestPlugin/bind-podgroup-failure": (WRT + "test_bind_podgroup_failure_keeps_the_podgroups_reservation",),
    "TestPlugin/reserved-okay": (DEC + "test_reserved_okay_a_claim_already_reserved_for_the_pod_needs_no_write",),
    "TestPlugin/claim-with-request-with-unknown-device-class": (DEC + "test_unknown_device_class_is_named",),
    "TestPlugin/claim-with-prioritized-list-unknown-device-class": (DEC + "test_unknown_device_class_is_named",),
    "TestPlugin/extended-resource-one-device-plugin-one-dra": (DEC + "test_extended_resource_one_device_plugin_one_dra",),
    "TestPlugin/extended-resource-name-with-zero-allocatable": (DEC + "test_extended_resource_name_with_zero_allocatable_is_served_by_dra",),
    "TestPlugin/non-DRA-extended-resource-name-with-zero-allocatable": (DEC + "test_non_dra_extended_resource_name_with_zero_allocatable_does_not_fit",),
    "TestPlugin/extended-resource-name-no-resource": (DEC + "test_extended_resource_name_no_resource",),
    "TestPlugin/extended-resource-name-claim-creation-failure": (WRT + "test_extended_resource_name_claim_creation_failure",),
    "TestPlugin/add-allocation-timestamp-failure": (WRT + "test_add_allocation_timestamp_failure_a_claim_deallocated_before_the_reservation",),
    "TestPlugin/single-claim-prioritized-list-scoring": (SCORE + "test_single_claim_prioritized_list_scoring",),
    "TestPlugin/multiple-claims-prioritized-list-scoring": (SCORE + "test_multiple_claims_prioritized_list_scoring",),
    "TestPlugin/multiple-requests-prioritized-list-scoring": (SCORE + "test_multiple_requests_prioritized_list_scoring",),
    "TestPostFilterNoOpStatusHasNoUserVisibleReason/no claims": (DEC + "test_postfilter_no_claims_an_unschedulable_pod_without_claims_gives_nothing_back",),
    "Test_allocationResultRequiresDRAOptionalNodeOperations/nil": (DEC + "test_allocation_result_requires_dra_optional_node_operations",),
    "Test_allocationResultRequiresDRAOptionalNodeOperations/empty-results": (DEC + "test_allocation_result_requires_dra_optional_node_operations",),
    "Test_allocationResultRequiresDRAOptionalNodeOperations/no-skip-node-operations": (DEC + "test_allocation_result_requires_dra_optional_node_operations",),
    "Test_allocationResultRequiresDRAOptionalNodeOperations/with-skip-node-operations": (DEC + "test_allocation_result_requires_dra_optional_node_operations",),
    "Test_allocationResultRequiresDRAOptionalNodeOperations/empty-skip-node-operations": (DEC + "test_allocation_result_requires_dra_optional_node_operations",),
    "Test_allocationResultRequiresDRAOptionalNodeOperations/mixed-skip-node-operations": (DEC + "test_allocation_result_requires_dra_optional_node_operations",),
    "Test_computesScore/mix-of-allocated-and-unallocated-claims": (SCORE + "test_computes_score",),
    "Test_computesScore/single-request-only-subrequest-allocated": (SCORE + "test_computes_score",),
    "Test_computesScore/single-request-last-subrequest-allocated": (SCORE + "test_computes_score",),
    "Test_computesScore/multiple-requests-with-middle-subrequests-allocated": (SCORE + "test_computes_score",),
    "Test_computesScore/multiple-requests-with-top-subrequests-allocated": (SCORE + "test_computes_score",),
    "Test_computesScore/multiple-claims-with-last-subrequests-allocated": (SCORE + "test_computes_score",),
    "Test_computesScore/multiple-claims-with-top-subrequests-allocated": (SCORE + "test_computes_score",),
    "Test_computesScore/more-claims-than-allocations": (SCORE + "test_computes_score_more_claims_than_allocations",),
    "TestSignalClaimPendingAllocation/empty": (
        PA + "test_signal_empty_the_first_pod_assumes_the_allocation",),
    "TestSignalClaimPendingAllocation/claim-already-allocated": (
        DEC + "test_claim_reference_an_allocated_claim_is_only_reserved",),
    "TestSignalClaimPendingAllocation/extended-resource-claim-not-in-cache": (
        PA + "test_signal_extended_resource_claim_not_in_cache_is_held_too",),
    "TestSignalClaimPendingAllocation/already-exists": (
        PA + "test_signal_already_exists_counts_a_second_sharer_and_keeps_the_first_allocation",),
    "TestSignalClaimPendingAllocation/already-exists-ignores-different-claim-argument": (
        PA + "test_signal_already_exists_counts_a_second_sharer_and_keeps_the_first_allocation",),
    "TestGetPendingAllocation/empty": (PA + "test_get_pending_allocation",),
    "TestGetPendingAllocation/claim": (PA + "test_get_pending_allocation",),
    "TestMaybeRemoveClaimPendingAllocation/empty": (PA + "test_maybe_remove_empty",),
    "TestMaybeRemoveClaimPendingAllocation/delete-last-sharer": (
        PA + "test_maybe_remove_the_last_sharer_gives_the_devices_back",),
    "TestMaybeRemoveClaimPendingAllocation/force-delete-last-sharer": (
        PA + "test_maybe_remove_force_delete_last_sharer",),
    "TestMaybeRemoveClaimPendingAllocation/decrement-remaining-sharers": (
        PA + "test_maybe_remove_decrement_remaining_sharers",),
    "TestMaybeRemoveClaimPendingAllocation/force-delete-remaining-sharers": (
        PA + "test_maybe_remove_force_delete_remaining_sharers",),
    "Test_createRequestsAndMappings_requests/nil": (XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_mappings/one container, one explicit and one implicit request": (
        XR + "test_create_requests_and_mappings_mappings",),
    "Test_createRequestsAndMappings_mappings/one init container, one regular container, one request": (
        XR + "test_create_requests_and_mappings_mappings",),
    "Test_createRequestsAndMappings_mappings/three containers (two are init container), two requests": (
        XR + "test_create_requests_and_mappings_mappings",),
    "Test_createRequestsAndMappings_mappings/three containers (two are init container), both explicit and implicit resources": (
        XR + "test_create_requests_and_mappings_mappings",),
    "Test_createRequestsAndMappings_mappings/four containers (two are init container, one sidecar), three requests": (
        XR + "test_create_requests_and_mappings_mappings",),
    "Test_createRequestsAndMappings_requests/one resource match": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_requests/one resource match, one resource not match": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_requests/two resources match": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_requests/two containers match": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_requests/one init container, one regular container": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_requests/two init containers, one regular container": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_requests/three init containers, one sidecar, one regular container": (
        XR + "test_create_requests_and_mappings_requests",),
    "Test_createRequestsAndMappings_mappings/one container, two requests": (
        XR + "test_create_requests_and_mappings_mappings",),
    "Test_createRequestsAndMappings_mappings/two containers, two requests": (
        XR + "test_create_requests_and_mappings_mappings",),
    "TestGatherAllocatedState/disabled-single-allocated-claim-with-capacity": (
        DEC + "test_gather_allocated_state_a_shared_allocation_blocks_the_device_with_the_gate_off",),
    "TestGatherAllocatedState/disabled-inflight-allocated-claim-with-capacity": (
        DEC + "test_gather_allocated_state_a_shared_allocation_blocks_the_device_with_the_gate_off",),
    "TestValidateNodeAllocatableDRAClaimSharing/empty claim": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/claim not allocated yet": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, not shared (no other pods on node)": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, same name but different namespace (sharing allowed)": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, shared (other pod using it via template)": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, reserved for same pod group, workload claims enabled - allowed since no pods on node": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, reserved for different pod group, workload claims enabled - exit early": (
        PNA + "test_validate_node_allocatable_dra_claim_sharing",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, pending allocation by another pod in same group": (
        PNA + "test_a_pending_allocation_of_the_cycle_with_a_mapped_device_is_one_pods",),
    "TestValidateNodeAllocatableDRAClaimSharing/mapped claim, pending allocation by same pod in same group": (
        PNA + "test_a_pending_allocation_of_the_cycle_with_a_mapped_device_is_one_pods",),
    "TestValidateNodeAllocatableDRAClaimSharing/overhead-only claim, pending allocation by another pod in same group": (
        PNA + "test_a_pending_allocation_of_the_cycle_with_a_mapped_device_is_one_pods",),
    "TestNodeFitsNativeResources/empty pod request": (PNA + "test_node_fits_native_resources",),
    "TestNodeFitsNativeResources/sufficient cpu and memory": (PNA + "test_node_fits_native_resources",),
    "TestNodeFitsNativeResources/insufficient memory": (PNA + "test_node_fits_native_resources",),
    "TestNodeFitsNativeResources/sufficient hugepages": (PNA + "test_node_fits_native_resources",),
    "TestNodeFitsNativeResources/insufficient hugepages 1Gi": (PNA + "test_node_fits_native_resources",),
    "TestBuildNodeAllocatableDRAInfo/empty": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/one container, one claim, per instance quantity": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Pod with Standard and DRA CPU and Memory Request": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Fungible GPU/CPU claim - GPU selected": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Fungible GPU/CPU claim - CPU selected": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Pod Level Resources with shared CPU claim and sidecar containers": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Unreferenced Claims": (PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Unreferenced Claims with Overhead": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Unreferenced Claims with Overhead Per Container Only": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Overhead Mappings - Only PerPod": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Overhead Mappings - Only PerContainer": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Overhead Mappings - Multiple Containers": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Combined direct mapped and overhead mappings for the same resource": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestBuildNodeAllocatableDRAInfo/Driver name collision with same pool and device name": (
        PNI + "test_build_node_allocatable_dra_info",),
    "TestPlugin/node-allocatable-resource-insufficient-with-capacityKey": (
        "conformance:consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",),
    "TestPlugin/node-allocatable-unreferenced-claim-direct-mapped": (
        PNI + "test_build_node_allocatable_dra_info", NA + "test_statuses_sum_mappings_and_overheads_per_claim_with_the_referencing_containers",),
    "TestPlugin/node-allocatable-unreferenced-claim-overhead": (
        PNI + "test_build_node_allocatable_dra_info", NA + "test_statuses_sum_mappings_and_overheads_per_claim_with_the_referencing_containers",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevelResources enabled, no pod resources set": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel resources sufficient": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel insufficient for one of the resource": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel insufficient for multiple resources": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel resources sufficient with overheads": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel resources sufficient with DRA Overhead": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel resources insufficient with DRA Overhead": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel limits cover DRA": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel limits does not cover DRA": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestValidatePodLevelResourcesCoverDRA/PodLevel limits overcommitted but individual container limits with DRA covered by pod level limits": (
        PPL + "test_validate_pod_level_resources_cover_dra",),
    "TestPatchNodeAllocatableResourceClaimStatus/no node allocatable resource claims for this pod": (
        DEC + "test_patch_node_allocatable_no_claims_for_this_pod_means_no_status",),
    "TestPatchNodeAllocatableResourceClaimStatus/pod status patch error": (
        WRT + "test_patch_and_clear_node_allocatable_resource_claim_status",),
    "TestClearNodeAllocatableResourceClaimStatus/no status to clear": (
        WRT + "test_patch_and_clear_node_allocatable_resource_claim_status",),
    "TestClearNodeAllocatableResourceClaimStatus/status cleared": (
        WRT + "test_patch_and_clear_node_allocatable_resource_claim_status",),
}
