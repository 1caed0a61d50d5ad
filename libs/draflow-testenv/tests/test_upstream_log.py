"""dra_log_errors: which upstream log lines count against draflow (pure; lines as kcm v1.37.1 wrote them)."""

from __future__ import annotations

from pathlib import Path

from draflow_testenv.upstream import dra_log_errors

OTHER_TESTS_GROUP = (
    'E1124 23:48:57.592031    9426 controller.go:862] "Work item failed" err="PodGroup cc-47c463ab/crew, '
    'PodGroupResourceClaim gpu: resource claim template \\"t\\": '
    'resourceclaimtemplate.resource.k8s.io \\"t\\" not found" logger="UnhandledError" '
    'item="podgroup:cc-47c463ab/crew"')
OWN_CLAIM = (
    'E1124 23:49:01.000001    9426 controller.go:862] "Work item failed" err="resourceclaim up-1/gpu: '
    'invalid ResourceClaim" logger="UnhandledError" item="claim:up-1/gpu"')
SCHEDULER_OWN_POD = (
    'E1124 23:49:02.000001    9427 dynamicresources.go:1000] "ResourceSlice broken" pod="up-1/legacy" '
    'resourceSlice="s-1"')
OTHER_TESTS_EVENT = (
    'E1125 00:07:13.298579   15906 event.go:365] "Server rejected event (will not retry!)" '
    'err="namespaces \\"cc-164531ac\\" not found" event="&Event{ObjectMeta:{workers.18eb2110f9cccb4d  '
    'cc-164531ac    0 0001-01-01 00:00:00 +0000 UTC <nil> <nil> map[] map[] [] [] []},InvolvedObject:'
    'ObjectReference{Kind:PodGroup,Namespace:cc-164531ac,Name:workers,UID:cbaa9f8c,APIVersion:'
    'scheduling.k8s.io/v1beta1,ResourceVersion:2063,FieldPath:,},Reason:FailedResourceClaimCreation,'
    'Message:resourceclaimtemplate.resource.k8s.io not found}"')
CLUSTER_SCOPED = (
    'E1124 23:49:03.000001    9427 dynamicresources.go:1000] "ResourceSlice broken" resourceSlice="s-2"')


def test_lines_about_other_namespaces_do_not_count_when_a_namespace_is_given(tmp_path: Path) -> None:
    log = tmp_path / "kcm.log"
    lines = [OTHER_TESTS_GROUP, OWN_CLAIM, SCHEDULER_OWN_POD, OTHER_TESTS_EVENT, CLUSTER_SCOPED, "I1124 fine"]
    log.write_text("\n".join(lines))
    assert dra_log_errors(log, "up-1") == [OWN_CLAIM, SCHEDULER_OWN_POD, CLUSTER_SCOPED]
    assert dra_log_errors(log) == [OTHER_TESTS_GROUP, OWN_CLAIM, SCHEDULER_OWN_POD, OTHER_TESTS_EVENT,
                                   CLUSTER_SCOPED]
    assert dra_log_errors(log, "cc-47c463ab") == [OTHER_TESTS_GROUP, CLUSTER_SCOPED]
    assert dra_log_errors(log, "cc-164531ac") == [OTHER_TESTS_EVENT, CLUSTER_SCOPED]
