"""rules_allow: a SelfSubjectRulesReview's resourceRules evaluated as the RBAC authorizer does."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_runtime.access import rules_allow

LEASES = {"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
          "resourceNames": ["ctl-shard-0", "ctl-member-0"]}
CREATE = {"verbs": ["create"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}
EVERYTHING = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
BASIC = {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews"]}


@pytest.mark.parametrize(("rules", "verb", "name", "allowed"), [
    pytest.param([LEASES], "get", "ctl-shard-0", True, id="named"),
    pytest.param([LEASES], "update", "ctl-member-0", True, id="named-other-verb"),
    pytest.param([LEASES], "update", "ctl-shard-1", False, id="name-not-listed"),
    pytest.param([LEASES], "delete", "ctl-shard-0", False, id="verb-not-listed"),
    pytest.param([LEASES, CREATE], "create", "", True, id="create-without-names"),
    pytest.param([LEASES], "create", "", False, id="create-needs-a-rule-without-names"),
    pytest.param([CREATE], "get", "ctl-shard-0", False, id="create-grants-no-get"),
    pytest.param([EVERYTHING], "update", "ctl-shard-7", True, id="wildcards"),
    pytest.param([BASIC], "get", "ctl-shard-0", False, id="other-group"),
    pytest.param([], "get", "ctl-shard-0", False, id="no-rules"),
])
def test_rules_allow(rules: list[dict[str, Any]], verb: str, name: str, allowed: bool) -> None:
    assert rules_allow(rules, verb, "coordination.k8s.io", "leases", name) is allowed
