"""What a failed capture's exception says: whether it is about the dynamic_shapes spec
(no other capture fixes that), about a data-dependent value (a trace may), or about
``int()`` of a size (strict mode may); and the message the user gets for a spec."""

from __future__ import annotations

from pt2onnx.capture import _dynamic


def short(exc: BaseException, limit: int = 1200) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > limit:
        text = text[:limit] + " [...]"
    return text


def int_of_size(message: str) -> bool:
    """Whether a refusal may come from int() of a size, which non-strict torch.export
    evaluates (a dim fixed, or a guard on ``math.trunc(... sym_float(b))``) and strict
    mode keeps symbolic."""
    return any(s in message for s in ("can only take one size", "math.trunc(", "sym_float("))


def spec_error_message(exc: BaseException) -> str:
    """torch.export's complaint about a dynamic_shapes spec, with the next step for its kind."""
    text = _dynamic._torch_message(exc)
    if "structure" in text or "same length" in text or "dynamic_shapes" in text:
        step = ("give dynamic_shapes the structure of the inputs: a dict keyed by forward's "
                "argument names (or a tuple in order), None for a static input, a dict "
                "{axis: Dim} for a tensor, and a list of those for a list of tensors or a cache.")
        kind = "the dynamic_shapes spec does not match the inputs"
    elif "must always be equal" in text or "must be related" in text:
        step = "use one Dim for dims that are always equal, or a derived Dim (2 * d) for related ones."
        kind = "dims declared independent are related in the model"
    elif "not in range" in text:
        step = "widen the Dim's min/max so the example's size is inside it, or change the example."
        kind = "an example size is outside its Dim's range"
    else:
        step = ("a guard above bounds or specialises a dim. Narrow that Dim's min/max to the range "
                "the model supports, make it static, or use Dim.AUTO to let torch.export choose.")
        kind = "torch.export rejected the dynamic shapes"
    return f"{kind}:\n  - {text}\nNext step: {step}"


def is_shape_spec_error(exc: BaseException) -> bool:
    """A torch.export error about the dynamic_shapes spec itself (a violated Dim range,
    a spec that does not fit the inputs), which strict mode or a trace would not fix."""
    if type(exc).__name__ == "ConstraintViolationError":
        return True
    if is_data_dependent(exc):
        # Strict mode reports a guard on a data-dependent value (an if on tensor data,
        # .item() as a size) as a constraint violation; no spec fixes it, a trace may.
        return False
    if type(exc).__name__ != "UserError":
        return False
    kind = getattr(getattr(exc, "error_type", None), "name", "")
    text = str(exc)
    if kind in ("CONSTRAINT_VIOLATION", "DYNAMIC_DIM"):
        return True
    return kind == "INVALID_INPUT" and "dynamic_shapes" in text


def is_data_dependent(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__name__ == "GuardOnDataDependentSymNode" or \
                "data-dependent expression" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
