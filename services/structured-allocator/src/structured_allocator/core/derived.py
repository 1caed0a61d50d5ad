"""Derived attributes (DRADerivedAttributes, alpha; upstream experimental allocator).

A request (or subrequest) may define ``derivedAttributes: [{name, expression}]``: a CEL expression over
the same ``device`` variable as selectors whose value becomes an attribute of that name — for that
request's devices only — when the claim's constraints (``matchAttribute``, ``distinctAttribute``) look
the name up. A derived attribute shadows a device attribute of the same name; other requests keep
seeing the device's own attributes.

* The expression must evaluate to a string, int, bool, semver or a list of one of those (compile
  error otherwise, as upstream's check of stored expressions); a list becomes ``strings``/``ints``/
  ``bools``/``versions`` (an empty list an empty ``strings``).
* It is compiled when a constraint first needs it and evaluated at most once per device of a slice
  version and expression (memoised on the :class:`PreparedDevice`, failures included).
* A compile or runtime error (e.g. ``no such key: x`` for a missing attribute) fails the whole
  allocation, naming the request, the attribute, the expression and the device — never "does not fit".
"""

from __future__ import annotations

from typing import Any

from .cel_env import MAX_EXPRESSION_LENGTH, CelCompileError, CelRuntimeError, CompiledSelector, env

__all__ = ["DerivedExpression", "compile_derived"]

_SCALARS = {"BOOL", "INT", "STRING", "DYN", "kubernetes.Semver"}


class _Failure:
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


class DerivedExpression(CompiledSelector):
    """A compiled derived-attribute expression; :meth:`attribute` evaluates it for one device."""

    __slots__ = ()

    def attribute(self, data: dict[str, Any]) -> dict[str, Any]:
        """The value as a ResourceSlice attribute dict (``{"string": ...}``, ``{"ints": [...]}``...).
        Raises :class:`CelRuntimeError`."""
        return _to_attribute(self.expression, self.evaluate(data).value())


def _scalar(value: Any) -> tuple[str, Any] | None:
    if hasattr(value, "plain_value") and hasattr(value, "value"):  # a list element accessor
        value = value.value()
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("string", value)
    descriptor = getattr(value, "DESCRIPTOR", None)
    if descriptor is not None and descriptor.full_name == "kubernetes.Semver":
        return ("version", value.s)
    return None


def _to_attribute(expression: str, value: Any) -> dict[str, Any]:
    scalar = _scalar(value)
    if scalar is not None:
        return {scalar[0]: scalar[1]}
    if isinstance(value, list):
        if not value:
            return {"strings": []}
        items = [_scalar(v) for v in value]
        kind = items[0][0] if items[0] is not None else None
        if kind is None or any(i is None or i[0] != kind for i in items):
            raise CelRuntimeError(expression, "list elements must all be of one scalar type")
        return {kind + "s": [i[1] for i in items if i is not None]}
    raise CelRuntimeError(expression, f"unsupported CEL return type: {type(value).__name__}")


def compile_derived(expression: str) -> DerivedExpression:
    """Compile one derived-attribute expression; raises :class:`CelCompileError`."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(
            expression, f"expression too long ({len(expression)} bytes, limit {MAX_EXPRESSION_LENGTH})"
        )
    try:
        expr = env().compile(expression)
    except RuntimeError as exc:
        raise CelCompileError(expression, "compilation failed: " + str(exc)) from exc
    name = expr.return_type().name()
    element = name[5:-1] if name.startswith("LIST<") and name.endswith(">") else name
    if element not in _SCALARS:
        raise CelCompileError(
            expression,
            "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these "
            f"scalars, not {name}",
        )
    return DerivedExpression(expression, expr)


def evaluate_memo(
    compiled: DerivedExpression, memo: dict[str, Any], data_fn: Any
) -> dict[str, Any] | str:
    """Memoised :meth:`DerivedExpression.attribute` for one device: the attribute or the error text."""
    cached = memo.get(compiled.expression)
    if cached is None:
        try:
            cached = compiled.attribute(data_fn())
        except CelRuntimeError as exc:
            cached = _Failure(exc.message)
        except ValueError as exc:  # malformed device attribute
            cached = _Failure(str(exc))
        memo[compiled.expression] = cached
    return cached.message if isinstance(cached, _Failure) else cached
