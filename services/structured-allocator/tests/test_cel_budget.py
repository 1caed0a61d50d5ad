"""The evaluation budget of a selector (:mod:`structured_allocator.core.cel_cost`) and what running out
of it is: a CEL runtime error, i.e. broken input of the class or claim, never a stray exception."""

import threading

import pytest
from sa_builders import DRIVER, NODE, claim, dclass, dev, req, rslice

from structured_allocator.core import AllocatedState, Allocator, CelSelectorError, SliceIndex
from structured_allocator.core.cel_cost import COST_LIMIT, MATCH_COST, meter
from structured_allocator.core.cel_env import CelRuntimeError, compile_selector, device_input
from structured_allocator.decision import describe_error

DEVICE = device_input(DRIVER, {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}})
L25 = "[" + ", ".join(str(i) for i in range(25)) + "]"
# Accepted by the apiserver (its estimated cost is far below 1,000,000); 25**3 loop iterations.
THREE_DEEP = f"{L25}.all(a, {L25}.all(b, {L25}.all(c, a + b + c >= 0)))"
L100 = "[" + ", ".join(str(i) for i in range(100)) + "]"


def test_comprehension_budget_is_a_runtime_error() -> None:
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded") as info:
        compile_selector(THREE_DEEP).matches(DEVICE)
    assert "10000 comprehension iterations" in info.value.message
    assert info.value.expression == THREE_DEEP


def test_deep_nesting_within_budget_evaluates_as_upstream() -> None:
    assert compile_selector("[1].all(a, [1].all(b, [1].all(c, [1].exists(d, a + b + c + d == 4))))").matches(
        DEVICE
    )


def test_library_calls_are_charged_the_kubernetes_cost() -> None:
    # find on a 4000-character string with a 4-character pattern: 401 units upstream, + 50 per call
    # here; 100 x 25 calls are 1,127,500 > 1,000,000.
    text = "x" * 4000
    expr = f'{L100}.all(a, {L25}.all(b, "{text}".find("x{{1}}") == "x"))'
    with pytest.raises(CelRuntimeError, match=f"actual cost limit exceeded \\(limit {COST_LIMIT}\\)"):
        compile_selector(expr).matches(DEVICE)


def test_find_all_is_charged_per_match() -> None:
    # 4000 matches a call: (50 + 401 + 4000 x 10) units, so the budget ends in the 25th call instead
    # of after 2,500 calls and ten million matches (upstream charges by input length only).
    text = "x" * 4000
    expr = f'{L100}.all(a, "{text}".findAll("x{{1}}").size() == 4000)'
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        compile_selector(expr).matches(DEVICE)
    assert meter().exceeded
    assert meter().spent <= COST_LIMIT + MATCH_COST  # it stopped at the first match over the limit


def test_running_out_cannot_be_absorbed_by_the_expression() -> None:
    text = "x" * 4000
    expr = f'{L100}.all(a, {L25}.all(b, "{text}".find("x{{1}}") == "x")) || true'
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        compile_selector(expr).matches(DEVICE)


def test_budget_is_per_evaluation() -> None:
    # 100 x 20 calls of 451 = 902,000: within the budget, every time.
    text = "x" * 4000
    sel = compile_selector(f'{L100}.all(a, {L25}.filter(b, b < 20).all(b, "{text}".find("x{{1}}") != ""))')
    assert sel.matches(DEVICE)
    assert sel.matches(DEVICE)
    assert 900_000 < meter().spent <= COST_LIMIT


def test_allocator_reports_budget_as_broken_class_input() -> None:
    """The allocator turns it into CelSelectorError naming the class and the expression (before the
    fix cel-cpp's RuntimeError escaped the allocator)."""
    allocator = Allocator(
        {"gpu": dclass("gpu", THREE_DEEP)},
        [rslice("s", [dev("gpu-0"), dev("gpu-1")])],
        AllocatedState.from_claims([]),
    )
    with pytest.raises(CelSelectorError) as info:
        allocator.allocate(NODE, [claim("c", req("r"))])
    err = info.value
    assert err.device_class == "gpu"
    assert err.expression == THREE_DEEP
    assert err.runtime
    assert "actual cost limit exceeded" in str(err)


def test_broken_class_message_is_the_same_for_every_device() -> None:
    """The pod's condition and Event name the class and the expression, and not the device that
    happened to be evaluated first, so that retries on other nodes do not write them again."""
    classes = {"gpu": dclass("gpu", THREE_DEEP)}
    messages = set()
    for node, device in (("node-1", "gpu-0"), ("node-2", "gpu-7")):
        allocator = Allocator(
            classes,
            [rslice("s", [dev(device)], node=node)],
            AllocatedState.from_claims([]),
        )
        with pytest.raises(CelSelectorError) as info:
            allocator.allocate({"metadata": {"name": node}}, [claim("c", req("r"))])
        messages.add(describe_error(info.value))
    assert len(messages) == 1
    (message,) = messages
    assert message.startswith('DeviceClass "gpu": ')
    assert THREE_DEEP in message
    assert "gpu-0" not in message and "gpu-7" not in message


def test_budget_error_is_memoised_per_device() -> None:
    """The next decision (a new Allocator over the same slices) gets the error from the device's memo
    instead of running the expensive expression again."""
    index = SliceIndex([rslice("s", [dev("gpu-0")])])
    classes = {"gpu": dclass("gpu", THREE_DEEP)}
    errors = []
    for _ in range(2):
        allocator = Allocator(classes, index, AllocatedState.from_claims([]))
        with pytest.raises(CelSelectorError) as info:
            allocator.allocate(NODE, [claim("c", req("r"))])
        errors.append(str(info.value))
        (device,) = [d for s in index.slices_for_node(NODE["metadata"]["name"]) for d in s.devices]
        assert not isinstance(device.matches[THREE_DEEP], bool)  # the failure itself is memoised
    assert errors[0] == errors[1]


def test_broken_claim_selector_message_names_claim_and_expression() -> None:
    allocator = Allocator(
        {"gpu": dclass("gpu")}, [rslice("s", [dev("gpu-0")])], AllocatedState.from_claims([])
    )
    with pytest.raises(CelSelectorError) as info:
        allocator.allocate(NODE, [claim("c", req("r", selectors=(THREE_DEEP,)))])
    message = describe_error(info.value)
    assert info.value.device_class == ""
    assert message.startswith('claim "default/c" request "r": claim "default/c" selector #0 ')
    assert THREE_DEEP in message and "actual cost limit exceeded" in message
    assert "gpu-0" not in message


def test_each_thread_has_its_own_meter() -> None:
    text = "x" * 4000
    compile_selector(f'{L100}.all(a, "{text}".find("x") != "")').matches(DEVICE)
    spent = meter().spent
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(meter().spent))
    thread.start()
    thread.join()
    assert spent > 0
    assert seen == [0]
