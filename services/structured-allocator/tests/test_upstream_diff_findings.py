"""Defects of the allocator core found by the differential check against upstream (test_upstream_diff.py),
each minimised to a unit case whose expectation is upstream's answer (k8s.io/dynamic-resource-allocation
v0.37.1, incubating allocator)."""

from __future__ import annotations

from sa_builders import DRIVER, NODE, claim, dclass, dev, req, rslice

from structured_allocator.core import AllocatedState, Allocator, Features

ANY = dclass("any", "true")


def allocate(slices, *claims):  # type: ignore[no-untyped-def]
    allocator = Allocator({"any": ANY}, slices, AllocatedState(), Features.all())
    return allocator.allocate(NODE, list(claims))


def test_explaining_a_failure_does_not_evaluate_selectors_the_search_never_reached() -> None:
    """Request r0 cannot be served (two devices wanted, one exists), so the search stops there and
    never evaluates r1's selector, which fails at run time on this device (no attribute "fast").
    Upstream: unsatisfiable. The explanation must not turn that into a CEL error."""
    slices = [rslice("s", [dev("gpu-0", {"model": "a"})])]
    c = claim(
        "c",
        req("r0", "any", count=2),
        req("r1", "any", selectors=(f'device.attributes["{DRIVER}"].fast',)),
    )
    outcome = allocate(slices, c)
    assert not outcome.fits
    r1 = next(r for r in outcome.explanation.requests if r.request == "r1")
    assert r1.matching == 0  # the failing selector counts as not matching


def test_a_domain_only_in_capacity_reads_as_an_empty_attribute_map_and_the_reverse() -> None:
    """Upstream's CEL environment answers a lookup of an unknown domain in ``device.attributes`` or
    ``device.capacity`` with an empty map, separately for each. A device with capacity in the domain
    example.com but no attribute there (or the reverse) made the lookup an error here."""
    slices = [rslice("s", [
        dev("only-capacity", None, {"example.com/slots": "2"}),
        dev("only-attribute", {"example.com/numa": 0}),
    ])]
    c = claim(
        "c",
        req("attr", "any", selectors=('!has(device.attributes["example.com"].numa)',)),
        req("cap", "any", selectors=('!has(device.capacity["example.com"].slots)',)),
    )
    outcome = allocate(slices, c)
    assert outcome.fits, outcome.explanation and outcome.explanation.summary
    devices = [r["device"] for r in outcome.results[0]["devices"]["results"]]
    assert devices == ["only-capacity", "only-attribute"]
