"""Write requests the API server counted (``apiserver_request_total``) between two scrapes of its /metrics.

Used by ``churn.py`` to count the claim-controller's writes per pod: the server's count over the run minus
the writes the load generator made itself (it counts them as it goes).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# The verb label as the API server counts it (POST: create, PUT: update, APPLY: a server-side apply patch).
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})

# (verb, resource, subresource); resource is "<group>/<resource>" for a non-core group.
WriteKey = tuple[str, str, str]


async def scrape_writes(kube: Any) -> Counter[WriteKey]:
    """Every write the API server has answered so far (any code), by verb, resource and subresource."""
    text = await kube.get_text("/metrics")
    counts: Counter[WriteKey] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            verb = labels.get("verb", "")
            if verb not in WRITE_VERBS:
                continue
            group = labels.get("group", "")
            resource = f"{group}/{labels.get('resource', '')}" if group else labels.get("resource", "")
            counts[(verb, resource, labels.get("subresource", ""))] += int(sample.value)
    return counts


def label(key: WriteKey) -> str:
    verb, resource, subresource = key
    return f"{verb} {resource}{'/' + subresource if subresource else ''}"


def controller_writes(before: Counter[WriteKey], after: Counter[WriteKey],
                      own: Counter[WriteKey]) -> Counter[WriteKey]:
    """What the API server counted between ``before`` and ``after`` that the load generator (``own``)
    did not write; leases and other background writes of the environment show up as well."""
    delta = Counter(after)
    delta.subtract(before)
    delta.subtract(own)
    return Counter({k: v for k, v in delta.items() if v > 0})
