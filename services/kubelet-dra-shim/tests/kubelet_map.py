# ruff: noqa: E501  (a data table: upstream test names are long)
"""How draflow covers every case of kubelet v1.37.1's DRA manager tests (:mod:`kubelet_cases`).

Each upstream name is in exactly one of (``test_kubelet_map.py`` checks it):

- ``COVERED``: the draflow tests that restate it (``<path from the repository root>::<test function>``; the
  test must exist). Where upstream's unit test runs on a fake clientset and an in-process fake plugin, the
  restatement runs on the real API server and real gRPC over unix sockets when the case is about what the
  node does, in memory when it is about pure logic;
- ``DIFFERS``: ``"differs: <why>"``, a deliberate difference that the shim README's "Differences from
  kubelet v1.37.1" section documents (the phrase after ``README:`` is checked to be there);
- ``NOT_APPLICABLE``: ``"n/a: <why>"``, Go plumbing (locks, map helpers, constructor arguments) or a
  combination the API cannot produce;
- ``TO_RESTATE``: not restated yet, with what is missing (meant to become empty).
"""

from __future__ import annotations

from kubelet_cases import UPSTREAM_CASES

__all__ = ["COVERED", "DIFFERS", "NOT_APPLICABLE", "TO_RESTATE", "UPSTREAM_CASES", "mapping"]

SHIM = "services/kubelet-dra-shim/tests/"
RUNTIME = "libs/draflow-runtime/tests/"
FLOWS = "tests/integration/"


def _t(path: str, *tests: str) -> tuple[str, ...]:
    return tuple(f"{path}::{t}" for t in tests)


_CKPT = SHIM + "test_checkpoint.py"
_CKPT_KUBELET = SHIM + "test_checkpoint_kubelet.py"
_PODCLAIMS = SHIM + "test_podclaims.py"
_INTEGRATION = SHIM + "test_integration.py"
_PARTIAL = SHIM + "test_partial_unprepare.py"
_NODEOPS = SHIM + "test_nodeops.py"
_NODE_OPERATIONS = SHIM + "test_node_operations.py"
_PLUGINS = SHIM + "test_plugins.py"
_HEALTH_E2E = SHIM + "test_health_e2e.py"
_HEALTH_VERSIONS = SHIM + "test_health_versions.py"
_LOCKS = SHIM + "test_claim_locks.py"
_UP_PREPARE = SHIM + "test_upstream_prepare.py"
_EXTENDED = FLOWS + "test_extended_resource_flow.py"
_GROUPS = FLOWS + "test_pod_group_flow.py"

_PREPARED = _t(_INTEGRATION, "test_prepared_pod_runs_and_deleting_it_unprepares")
_SHARED = _t(_INTEGRATION, "test_shared_claim_is_unprepared_only_when_its_last_pod_ends")
_CDI_BY_REQUEST = (*_t(_PODCLAIMS, "test_container_cdi_devices_follow_requests_like_get_resources"),
                   *_t(_CKPT, "test_cdi_ids_follow_the_container_request_filter"))
_EXTENDED_CDI = _t(_PODCLAIMS, "test_containers_see_the_extended_resource_claim_through_its_request_mappings")
_EXTENDED_FLOW = _t(_EXTENDED, "test_pods_asking_for_dra_backed_extended_resources_run_and_their_claims_go_with_them")
_KUBELET_READS = _t(_CKPT_KUBELET, "test_kubelet_reads_every_claim_of_a_shim_written_file")
_SHIM_READS = _t(_CKPT_KUBELET, "test_shim_reads_every_claim_device_and_pod_of_a_kubelet_written_file")
_UNKNOWN = _t(_UP_PREPARE, "test_a_claim_of_an_unregistered_driver_is_not_recorded_and_its_pod_can_be_deleted")

COVERED: dict[str, tuple[str, ...]] = {
    "TestNewManagerImpl/valid directory path": (
        *_t(_CKPT, "test_read_missing_file_is_none"),
        *_t(SHIM + "test_upstream_checkpoint.py", "test_a_missing_state_directory_is_made_at_start")),
    "TestGetResources/claim info with devices": _CDI_BY_REQUEST,
    "TestGetResources/extended resource claim info with devices": _EXTENDED_CDI,
    "TestPrepareResources/unknown driver": _UNKNOWN,
    "TestPrepareResources/pod is not allowed to use resource claim": _t(_PODCLAIMS, "test_check_claim_for_pod"),
    "TestPrepareResources/pod is not allowed to use resource claim from podgroup":
        _t(_PODCLAIMS, "test_a_podgroup_claim_is_prepared_for_the_groups_pods_with_the_gate_on"),
    "TestPrepareResources/resource already prepared": _SHARED,
    "TestPrepareResources/claim UIDs mismatch": _t(_UP_PREPARE, "test_a_claim_of_the_same_name_waits_until_the_old_one_is_unprepared"),
    "TestPrepareResources/should prepare resource, claim not in cache": _PREPARED,
    "TestPrepareResources/should prepare extended resource claim backed by DRA": _EXTENDED_FLOW,
    "TestPrepareResources/should prepare resource for podgroup, claim not in cache": (
        *_t(_PODCLAIMS, "test_a_podgroup_claim_is_prepared_for_the_groups_pods_with_the_gate_on"),
        *_t(_GROUPS, "test_a_podgroups_claim_is_made_once_reserved_for_the_group_and_shared_by_its_running_pods")),
    "TestPrepareResources/should fail to prepare resource for podgroup when the feature is disabled":
        _t(_PODCLAIMS, "test_a_podgroup_claim_is_prepared_for_the_groups_pods_with_the_gate_on"),
    "TestPrepareResources/should prepare resources with share id": (
        *_t(_CKPT, "test_round_trip_keeps_everything_but_prepared"), *_KUBELET_READS),
    "TestPrepareResourcesWithUnpreparingClaim":
        _t(_PARTIAL, "test_a_claim_being_unprepared_is_prepared_again_through_every_driver"),
    "TestUnprepareResources/resource claim referenced by other pod(s)": _SHARED,
    "TestUnprepareResources/should unprepare already prepared extended resource backed by DRA": _EXTENDED_FLOW,
    "TestUnprepareResources/should unprepare already prepared resource": _PREPARED,
    "TestUnprepareResources/should unprepare using cache when ResourceClaimStatuses is missing":
        _t(_INTEGRATION, "test_force_deleted_pod_with_deleted_claim_is_unprepared_from_the_checkpoint"),
    "TestGetContainerClaimInfos/should get claim info": _CDI_BY_REQUEST,
    "TestGetContainerClaimInfos/should get extended resource claim info": _EXTENDED_CDI,
    "TestParallelPrepareUnprepareResources": (
        *_t(_LOCKS, "test_a_driver_hanging_on_one_claim_does_not_hold_up_other_pods_on_the_node"),
        *_t(_CKPT, "test_concurrent_saves_leave_the_newest_claims_on_disk")),
    "TestHandleWatchResourcesStream/HealthChangeForAllocatedDevice":
        _t(_HEALTH_E2E, "test_unhealthy_device_shows_in_allocated_resources_status_and_recovers"),
    "TestUpdateAllocatedResourcesStatus/Direct claim":
        _t(_PODCLAIMS, "test_allocated_resources_status_names_claim_and_request"),
    "TestBuildResourceHealth/message enabled and CDI id":
        _t(_PODCLAIMS, "test_allocated_resources_status_names_claim_and_request"),
    "TestPrepareUnprepareResourcesSkipNodeOperations/SkipNodeOperationAll/Prepare fails when feature gate is disabled":
        _t(_NODE_OPERATIONS, "test_with_the_gate_off_a_skipping_claim_fails_with_an_event_and_the_node_does_not_declare_it"),
    "TestPrepareUnprepareResourcesSkipNodeOperations/SkipNodeOperationAll/Feature gate enabled for prepare and unprepare":
        _t(_NODE_OPERATIONS, "test_skipped_driver_is_never_called_and_the_claim_is_still_checkpointed"),
    "TestPrepareUnprepareResourcesSkipNodeOperations/SkipNodeOperationNodeUnprepareResources/Feature gate enabled for prepare and unprepare":
        _t(_NODE_OPERATIONS, "test_a_claim_skipping_only_unprepare_is_prepared_but_never_unprepared"),
    "TestNewClaimInfoFromClaim/successfully created object": _t(_NODEOPS, "test_a_driver_is_skipped_only_when_every_result_of_it_skips"),
    "TestNewClaimInfoFromClaim/successfully created object with empty allocation": _t(_PODCLAIMS, "test_check_claim_for_pod"),
    "TestNewClaimInfoFromState/successfully created object": _t(_CKPT, "test_round_trip_keeps_everything_but_prepared"),
    "TestNewClaimInfoCache/successfully created cache": _t(_CKPT, "test_read_missing_file_is_none"),
    "TestSyncToCheckpoint/successfully checkpointed cache": (
        *_t(_CKPT, "test_write_atomically_replaces_and_leaves_no_temp_files"), *_KUBELET_READS),
    "TestNewClaimInfoSkipNodeOperations/feature gate enabled": _t(_CKPT, "test_skip_node_operations_survive_and_are_omitted_when_empty"),
    "TestCheckpointVersionCompatibility": (*_SHIM_READS, *_KUBELET_READS),
    "TestAddSameName": _t(_PLUGINS, "test_rolling_update_newest_endpoint_wins"),
    "TestDelete": _t(_PLUGINS, "test_socket_gone_deregisters_and_restart_registers_again"),
    "TestGetDRAPlugin/driver name not found in the list": _UNKNOWN,
    "TestGetDRAPlugin/plugin exists": _t(_PLUGINS, "test_registers_a_driver_and_tells_it"),
    "TestGRPCMethods/v1": _PREPARED,
    "TestGRPCMethods/mismatch": _t(_PLUGINS, "test_choose_version", "test_unsupported_versions_are_refused_with_a_reason"),
    "TestPlugin_WatchResources": _t(_HEALTH_VERSIONS, "test_health_is_watched_on_the_negotiated_version"),
    "TestPlugin_WatchResources_V1Alpha1": _t(_HEALTH_VERSIONS, "test_health_is_watched_on_the_negotiated_version"),
    "TestRegistrationHandler/no-services": _t(_PLUGINS, "test_unsupported_versions_are_refused_with_a_reason"),
    "TestRegistrationHandler/current-service": _t(_PLUGINS, "test_registers_a_driver_and_tells_it"),
    "TestRegistrationHandler/two-services": _t(_PLUGINS, "test_choose_version"),
    "TestRegistrationHandler/version": _t(_PLUGINS, "test_choose_version"),
    "TestRegistrationHandler/replace": _t(_PLUGINS, "test_rolling_update_newest_endpoint_wins"),
    "TestCheckpointGetOrCreate/new-checkpoint": _t(_CKPT_KUBELET, "test_empty_checkpoint_is_the_kubelets"),
    **{f"TestCheckpointGetOrCreate/{c}": _SHIM_READS for c in (
        "single-claim-info-state", "single-claim-info-state-with-share-id",
        "claim-info-state-with-multiple-devices", "two-claim-info-states")},
    "TestCheckpointGetOrCreate/incorrect-checksum": _t(_CKPT, "test_corrupt_content_is_an_error_not_an_empty_state"),
    "TestCheckpointGetOrCreate/invalid-JSON": _t(_CKPT, "test_corrupt_content_is_an_error_not_an_empty_state"),
    **{f"TestCheckpointStateStore/{c}": (*_KUBELET_READS, *_t(_CKPT, "test_format_is_the_kubelets_with_crc32_of_data"))
       for c in ("single-claim-info-state", "single-claim-info-state-with-share-id",
                 "claim-info-state-with-multiple-devices", "two-claim-info-states")},
    **{f"TestPickHealthService/{c}": _t(_HEALTH_VERSIONS, "test_choose_health_service")
       for c in ("none", "empty", "only-v1alpha1", "only-v1", "both-picks-v1")},
}

_HEALTH = SHIM + "test_upstream_health.py"
COVERED.update({
    **{f"TestBuildDeviceHealth/{c}": _t(_HEALTH, "test_a_timeout_that_is_not_positive_is_the_default") for c in (
        "healthy with positive timeout", "unhealthy with zero timeout", "unknown with negative timeout")},
    **{f"TestToDeviceHealthStatus/{c}": _t(_HEALTH, "test_health_states_and_an_unexpected_one_is_unknown")
       for c in ("healthy", "unhealthy", "unknown", "unexpected")},
    **{f"TestToResourceHealthStatus/{c}": _t(_HEALTH, "test_health_states_and_an_unexpected_one_is_unknown",
                                             "test_resource_health_entries_like_kubelets")
       for c in ("healthy", "unhealthy", "unknown", "empty", "unexpected")},
    "TestGetHealthInfo": _t(_HEALTH, "test_a_report_is_kept_for_its_timeout_then_unknown"),
    **{f"TestGetHealthInfoRobust/{c}": _t(_HEALTH, "test_an_empty_cache_knows_no_device") for c in (
        "empty cache", "device does not exist", "driver does not exist", "pool does not exist")},
    **{f"TestGetHealthInfoRobust/{c}": _t(_HEALTH, "test_a_report_is_kept_for_its_timeout_then_unknown") for c in (
        "device exists and is healthy", "device exists and is unhealthy", "device exists but timed out",
        "device exists, just within timeout", "device does not exist, just outside of timeout", "multiple devices")},
    "TestUpdateHealthInfo": _t(_HEALTH, "test_only_a_change_of_state_or_message_is_a_change"),
    "TestHandleWatchResourcesStream/NoActualStateChange": _t(_HEALTH, "test_only_a_change_of_state_or_message_is_a_change"),
    "TestUpdateHealthInfoStaleEntryRemoval": _t(_HEALTH, "test_a_device_no_longer_reported_is_dropped"),
    "TestUpdateHealthInfoDeviceCap": _t(_HEALTH, "test_a_driver_keeps_at_most_the_cap_of_devices"),
    "TestClearDriver": _t(_HEALTH, "test_clearing_a_driver_drops_only_its_devices"),
    "TestHandleWatchResourcesStream/StreamError": _t(_HEALTH, "test_clearing_a_driver_drops_only_its_devices"),
    **{f"TestTruncateHealthMessage/{c}": _t(_HEALTH, "test_health_messages_are_cut_to_what_the_api_server_takes",
                                            "test_a_long_message_is_cut_in_the_pod_status") for c in (
        "empty message", "short message", "message at exactly max length", "message one character over max length",
        "very long message", "message with meaningful content", "long message with meaningful content")},
    **{f"TestBuildResourceHealth/{c}": _t(_HEALTH, "test_resource_health_entries_like_kubelets") for c in (
        "empty message", "unhealthy status", "unknown status", "fallback resource id")},
    **{f"TestUpdateAllocatedResourcesStatus_Subrequest/{c}": _t(_HEALTH, "test_a_subrequest_is_reported_under_its_request")
       for c in ("Subrequest matches base name", "Subrequest does not match different base name",
                 "Base request matches base name", "Empty request matches any device")},
})

_CALLS = SHIM + "test_upstream_driver_calls.py"
COVERED.update({
    "TestPrepareResources/driver returns empty result":
        _t(_CALLS, "test_a_prepare_the_driver_does_not_answer_for_fails_the_claim_until_it_does"),
    "TestGRPCMethods/internal-error":
        _t(_CALLS, "test_a_prepare_the_driver_does_not_answer_for_fails_the_claim_until_it_does"),
    "TestPrepareResources/should timeout":
        _t(_CALLS, "test_a_prepare_the_driver_does_not_answer_for_fails_the_claim_until_it_does"),
    "TestGRPCWithTimeoutEnforced":
        _t(_CALLS, "test_a_prepare_the_driver_does_not_answer_for_fails_the_claim_until_it_does"),
    "TestUnprepareResources/should fail when driver returns empty response":
        _t(_CALLS, "test_an_unprepare_the_driver_does_not_answer_for_keeps_the_claim_until_it_does"),
    "TestUnprepareResources/should timeout":
        _t(_CALLS, "test_an_unprepare_the_driver_does_not_answer_for_keeps_the_claim_until_it_does"),
    "TestUnprepareResources/unknown driver":
        _t(_CALLS, "test_an_unprepare_the_driver_does_not_answer_for_keeps_the_claim_until_it_does"),
    "TestGRPCMethods/v1beta1":
        _t(_CALLS, "test_a_claim_is_prepared_and_unprepared_through_a_v1beta1_driver"),
    "TestPrepareResources/should not duplicate devices on prepare retry":
        _t(_CALLS, "test_a_retried_prepare_records_each_device_once"),
    "TestPrepareResourcesWithPreparedAndNewClaim":
        _t(_CALLS, "test_only_the_new_claim_of_a_pod_is_sent_to_the_driver"),
    "TestUnprepareResources/should skip unprepare for pod that never prepared the claim":
        _t(_CALLS, "test_a_pod_that_never_got_the_claim_leaves_it_prepared_when_it_goes"),
})

_ENTRIES = _t(_HEALTH, "test_entries_are_named_after_the_pod_claim_for_renamed_templated_and_shared_claims")
_ROLLBACK = _t(SHIM + "test_upstream_nodeops.py", "test_a_rollback_of_the_gate_still_skips_the_recorded_unprepare")
_OLDER_FILE = _t(SHIM + "test_upstream_checkpoint.py", "test_a_file_of_an_older_kubelet_is_read")
COVERED.update({
    "TestUpdateAllocatedResourcesStatus/Renamed claim": _ENTRIES,
    "TestUpdateAllocatedResourcesStatus/Templated claim": _ENTRIES,
    "TestUpdateAllocatedResourcesStatus/Claim with ShareID": _ENTRIES,
    "TestPrepareUnprepareResourcesSkipNodeOperations/SkipNodeOperationAll/Feature gate disabled during unprepare": _ROLLBACK,
    "TestPrepareUnprepareResourcesSkipNodeOperations/SkipNodeOperationNodeUnprepareResources/Feature gate disabled during unprepare": _ROLLBACK,
    "TestCheckpointGetOrCreate/upgraded-structure": _OLDER_FILE,
    "TestCheckpointGetOrCreate/upgraded-structure-and-version": _OLDER_FILE,
})
for _case in list(COVERED):
    if _case.startswith("TestTruncateHealthMessage/"):
        COVERED[_case] += _t(SHIM + "test_upstream_health_e2e.py", "test_a_health_message_too_long_for_the_api_server_is_cut")

_SHARED_HEALTH = _t(SHIM + "test_upstream_health_shared.py",
                   "test_a_device_of_two_pods_claims_shows_its_health_in_both_and_no_other_device_shows")
COVERED.update({
    "TestNewManagerImpl/invalid directory path": _t(
        SHIM + "test_upstream_checkpoint.py", "test_a_state_directory_that_cannot_be_made_fails_the_start_naming_it"),
    "TestPrepareResources/no container uses the claim": _t(_UP_PREPARE, "test_a_claim_no_container_names_is_prepared_too"),
    "TestHandleWatchResourcesStream/NonAllocatedDeviceChange": _SHARED_HEALTH,
    "TestHandleWatchResourcesStream/HealthChangeForDeviceWithShareID": _SHARED_HEALTH,
    "TestHandleWatchResourcesStream/HealthChangeForMultiplePodsWithSharedDevice": _SHARED_HEALTH,
    "TestNewClaimInfoSkipNodeOperations/feature gate disabled":
        _t(_NODE_OPERATIONS, "test_with_the_gate_off_a_skipping_claim_fails_with_an_event_and_the_node_does_not_declare_it"),
})

# -- deliberate differences (each documented in the README section named in the reason) -----------------------

_WAITING = ("differs: a claim not there yet, not allocated or not reserved for the pod is waited for (retried, "
            "no Event) where kubelet returns an error; README: Claims not ready are waited for")
_SLICES = ("differs: ResourceSlices are slice-publisher's (it watches the same registration directory), the "
           "shim never writes or wipes them; README: ResourceSlices are not the shim's")
_HEALTH_MEMORY = ("differs: device health is kept in memory only (Unknown until the streams report again after "
                  "a restart), kubelet persists its health cache; README: Device health is not persisted")

DIFFERS: dict[str, str] = {
    "TestGetResources/same claim referenced by multiple requests": (
        "differs: a container naming one claim under two requests that one device serves gets the device's "
        "CDI ID once (the draflow.dev/cdi-devices annotation), kubelet hands it to the runtime twice "
        f"({_PODCLAIMS}::test_container_cdi_devices_follow_requests_like_get_resources); "
        "README: CDI devices are listed once"),
    "TestBuildResourceHealth/message disabled": (
        "differs: the shim always writes the driver's message; kube-apiserver drops it when its "
        "ResourceHealthStatusMessage gate is off, where kubelet leaves it out with its own gate; "
        "README: with the gate off it is silently dropped"),
    "TestPrepareResources/claim doesn't exist": _WAITING,
    "TestRegistrationHandler/manage-resource-slices": _SLICES,
    "TestConnectionHandling/wipe-on-disconnect": _SLICES,
    "TestConnectionHandling/no-wipe-on-reconnect": _SLICES,
    "TestNewHealthInfoCache/successfully created cache": _HEALTH_MEMORY,
    "TestNewHealthInfoCache/empty state file": _HEALTH_MEMORY,
}

# -- not applicable ---------------------------------------------------------------------------------------------

_NIL = ("n/a: a nil entry of a Go map in the response; on the wire protobuf sends an empty message, which the "
        "shim reads as success without devices like any empty result")
_PLUMBING = "n/a: Go plumbing of the claim-info cache (set and map helpers); the shim's ClaimInfo is a dataclass"
_LOCKS_NA = ("n/a: Go mutex plumbing; the shim locks per claim on one event loop "
             f"({_LOCKS}::test_a_driver_hanging_on_one_claim_does_not_hold_up_other_pods_on_the_node)")
_CACHE_NAME = "n/a: the constructor's arguments; the shim's checkpoint name is fixed (dra_manager_state)"
_API_REFUSES = "n/a: kube-apiserver refuses a pod whose container names a claim the pod does not list, or a pod claim with neither source"

_READY_ONLY = ("n/a: the simulated kubelet publishes a pod's container devices only once every claim of the pod "
               "is prepared (PrepareOutcome.ready), from the claims that prepare returned: no container "
               "names a claim the node does not know")

NOT_APPLICABLE: dict[str, str] = {
    "TestGetResources/nil claiminfo": _READY_ONLY,
    "TestGetContainerClaimInfos/should fail when claim info is not cached": _READY_ONLY,
    "TestPrepareResources/should prepare resources, driver returns nil value": _NIL,
    "TestUnprepareResources/should unprepare resource when driver returns nil value": _NIL,
    "TestGetContainerClaimInfos/should fail when claim info not found": _API_REFUSES,
    "TestGetContainerClaimInfos/should fail when none of the supported fields are set": _API_REFUSES,
    "TestPodMightNeedToUnprepareResources": "n/a: a query of kubelet's pod workers; the shim's sweep reads its own cache (NodeManager.pod_uids)",
    **{f"TestClaimInfoAddDevice/{c}": _PLUMBING for c in ("add new device", "other new device")},
    **{f"{f}/{c}": _PLUMBING for f in ("TestClaimInfoHasPodReference", "TestClaimInfoDeletePodReference")
       for c in ("claim doesn't reference pod", "claim references pod", "empty claim info")},
    **{f"TestClaimInfoAddPodReference/{c}": _PLUMBING for c in ("empty PodUIDs list", "first pod reference", "second pod reference")},
    **{f"{f}/{c}": _PLUMBING for f in ("TestClaimInfoSetPrepared", "TestClaimInfoIsPrepared")
       for c in ("claim info is not prepared", "claim info is prepared", "empty claim info")},
    **{f"TestNewClaimInfoCache/{c}": _CACHE_NAME for c in ("empty parameters", "empty checkpoint name", "incorrect checkpoint name")},
    **{f"TestClaimInfoCacheWithLock/{c}": _LOCKS_NA for c in (
        "cache is locked inside a function", "cache is Rlocked inside a function", "successfully called function", "erroring function")},
    **{f"TestClaimInfoCacheWithRLock/{c}": _LOCKS_NA for c in (
        "RLock-ed cache allows another RLock", "cache is locked inside a function", "successfully called function", "erroring function")},
    **{f"TestClaimInfoCacheAdd/{c}": _PLUMBING for c in ("claimInfo successfully added", "prepared claimInfo", "add more prepared claimInfo")},
    **{f"TestClaimInfoCacheContains/{c}": _PLUMBING for c in ("cache hit", "cache miss", "cache miss: empty cache and empty claim info")},
    **{f"TestClaimInfoCacheGet/{c}": _PLUMBING for c in ("cache hit", "cache miss")},
    **{f"TestClaimInfoCacheDelete/{c}": _PLUMBING for c in ("item in cache", "item not in cache")},
    **{f"TestClaimInfoCacheHasPodReference/{c}": _PLUMBING for c in ("uid is referenced", "uid is not referenced")},
    **{f"TestWithLock/{c}": _LOCKS_NA for c in ("lock prevents concurrent lock", "erroring function")},
    **{f"TestWithRLock/{c}": _LOCKS_NA for c in ("rlock allows concurrent rlock", "rlock prevents lock")},
    "TestGRPCConnIsReused": "n/a: gRPC client plumbing; the shim keeps one channel per registered plugin (plugins.py)",
    "TestGRPCConnUsableAfterIdle": "n/a: gRPC client plumbing (grpc-go idle mode); grpc.aio reconnects a channel by itself",
    "TestGetDRAPlugin/driver-name is empty": "n/a: an allocation result always names its driver (API validation)",
    "TestHandleWatchResourcesStream/ContextCanceled": "n/a: Go context plumbing; the shim cancels a plugin's health task when it deregisters (health.py)",
}

# -- not restated yet -------------------------------------------------------------------------------------------

TO_RESTATE: dict[str, str] = {}


def mapping() -> dict[str, tuple[str, ...] | str]:
    """upstream case -> the draflow tests that restate it, or the "differs: ..."/"n/a: ..." reason."""
    out: dict[str, tuple[str, ...] | str] = {}
    out.update(COVERED)
    out.update(DIFFERS)
    out.update(NOT_APPLICABLE)
    out.update(TO_RESTATE)
    return out
