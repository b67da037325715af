"""The translation registry: rules keyed by the op object, selected by opset."""

from __future__ import annotations

import bisect
import importlib
import inspect
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from pt2onnx._lazy import gc_paused

Rule = Callable[..., Any]
F = TypeVar("F", bound=Rule)


_UNREAD: Any = object()


@dataclass(frozen=True)
class RuleEntry:
    since: int
    fn: Rule
    # Keyword names the rule accepts (None: it takes **kwargs), read from the rule's
    # signature the first time a node needs them: reading all 500 built-in rules'
    # signatures at registration took a third of loading them.
    names: Any = field(compare=False, default=_UNREAD, repr=False)

    @property
    def kwarg_names(self) -> frozenset[str] | None:
        if self.names is _UNREAD:
            object.__setattr__(self, "names", _kwarg_names(self.fn))
        names: frozenset[str] | None = self.names
        return names


def _kwarg_names(fn: Rule) -> frozenset[str] | None:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )


def op_name(op: Any) -> str:
    """A readable name such as ``aten::add.Tensor`` for an op key."""
    if isinstance(op, torch._ops.OpOverload):
        schema = op._schema
        return f"{schema.name}.{schema.overload_name or 'default'}"
    if isinstance(op, torch._ops.HigherOrderOperator):
        return f"higher_order::{op.name()}"
    module = getattr(op, "__module__", None) or ""
    return f"{module}.{getattr(op, '__name__', repr(op))}".lstrip(".")


class Registry:
    """Maps an op (an ``OpOverload`` or a Python callable) to rules by opset.

    Rules for nodes that read or write complex tensors live in a second table
    (``complex=True``): such a node sees its complex values as (real, imag) pairs in
    a trailing axis, which a rule written for real tensors would silently get wrong,
    so the translator looks only there for them.

    ``builtins`` names a package whose import registers rules here (``pt2onnx.rules``
    for the shared ``REGISTRY``); it is imported on the registry's first use, so
    ``import pt2onnx`` does not pay for every rule module, and before the first rule a
    user registers, so a user's rule replaces the built-in one as it always did.
    """

    def __init__(self, builtins: str | None = None) -> None:
        self._rules: dict[Any, list[RuleEntry]] = {}
        self._complex: dict[Any, list[RuleEntry]] = {}
        self._builtins = builtins
        self._loading = False
        self._lock = threading.RLock()

    def load_builtins(self) -> None:
        """Imports the ``builtins`` package now, if it is not in yet (its first use does)."""
        if self._builtins is None:
            return
        with self._lock:  # another thread waits here until the rules are all in
            if self._builtins is None or self._loading:
                return  # loaded meanwhile, or a built-in rule registering itself
            self._loading = True
            try:
                with gc_paused():
                    importlib.import_module(self._builtins)
            finally:
                self._loading = False
            self._builtins = None

    def register(self, op: Any, fn: Rule, since: int = 1, complex: bool = False) -> None:
        self.load_builtins()
        table = self._complex if complex else self._rules
        for key in _expand(op):
            load_deferred(key)  # the built-in rule first, so that this one replaces it
            entries = table.setdefault(key, [])
            entries[:] = [e for e in entries if e.since != since]
            bisect.insort(entries, RuleEntry(since, fn), key=lambda e: e.since)

    def lookup(self, op: Any, opset: int, complex: bool = False) -> RuleEntry | None:
        """The rule with the highest ``since`` at or below ``opset``."""
        self.load_builtins()
        entries = (self._complex if complex else self._rules).get(op)
        if not entries and load_deferred(op):
            entries = (self._complex if complex else self._rules).get(op)
        if not entries:
            return None
        best = None
        for entry in entries:
            if entry.since <= opset:
                best = entry
        return best

    def opsets(self, op: Any, complex: bool = False) -> list[int]:
        self.load_builtins()
        load_deferred(op)
        return [e.since for e in (self._complex if complex else self._rules).get(op, [])]

    def __contains__(self, op: Any) -> bool:
        self.load_builtins()
        load_deferred(op)
        return op in self._rules or op in self._complex

    def ops(self) -> list[Any]:
        self.load_builtins()
        load_deferred(None)
        return list(dict.fromkeys([*self._rules, *self._complex]))

    def copy(self) -> Registry:
        self.load_builtins()
        load_deferred(None)
        new = Registry()
        new._rules = {k: list(v) for k, v in self._rules.items()}
        new._complex = {k: list(v) for k, v in self._complex.items()}
        return new


# op namespace -> the module whose import registers the built-in rules (and extra
# decompositions, and KEEP_UNFOLDED entries) of that namespace's ops; imported the first
# time one of its ops is looked up (rules/__init__.py fills this).
_DEFERRED: dict[str, str] = {}


def defer_namespace(namespace: str, module: str) -> None:
    """Imports ``module`` only when an op of ``namespace`` is first looked up, registered,
    folded or decomposed: for rules whose ops are defined by a module that costs time to
    import, and that a program holding one of them has imported already."""
    _DEFERRED[namespace] = module


def load_deferred(op: Any) -> bool:
    """Imports the deferred module of ``op``'s namespace (every deferred module for
    None); True when one was imported."""
    REGISTRY.load_builtins()  # they declare the deferred namespaces
    if not _DEFERRED:
        return False
    if op is None:
        names = list(_DEFERRED)
    else:
        namespace = getattr(op, "namespace", None)
        if namespace not in _DEFERRED:
            return False
        names = [namespace]
    loaded = False
    with REGISTRY._lock:
        for name in names:
            module = _DEFERRED.pop(name, None)
            if module is None:
                continue  # imported meanwhile
            try:
                with gc_paused():
                    importlib.import_module(module)
            except BaseException:
                _DEFERRED[name] = module
                raise
            loaded = True
    return loaded


def _expand(op: Any) -> Iterable[Any]:
    """An OpOverloadPacket stands for all its overloads; a list for its items."""
    if isinstance(op, (list, tuple)):
        for o in op:
            yield from _expand(o)
    elif isinstance(op, torch._ops.OpOverloadPacket):
        for name in op.overloads():
            yield getattr(op, name)
    else:
        yield op


REGISTRY = Registry(builtins="pt2onnx.rules")

# Ops the translator never folds, even when every input is a constant: a dequantize
# of a constant int8 weight stays a DequantizeLinear over the int8 initializer, the
# QDQ form that runtimes fuse into integer kernels (folding would store float weights).
KEEP_UNFOLDED: set[Any] = set()


def translation(op: Any, *, since: int = 1, registry: Registry | None = None,
                complex: bool = False) -> Callable[[F], F]:
    """Registers ``fn`` as the translation of ``op`` from opset ``since`` on.

    With ``complex=True`` the rule is used for the nodes of ``op`` that read or
    write a complex tensor (and only for those). Complex tensors reach it as
    float values whose last axis of size 2 holds (real, imag); ``g.dtype`` and
    ``g.shape`` describe that layout, and ``pt2onnx.translate._builder.is_complex`` tells
    which inputs are complex.

    ``op`` is an ``OpOverload`` (``torch.ops.aten.gelu.default``), an
    ``OpOverloadPacket`` (all its overloads), a Python callable that appears
    in FX graphs (``operator.getitem``), or a list of these. A rule
    registered later for the same op and ``since`` replaces the earlier one,
    so users can override built-in rules.

    Example:
        >>> import torch, pt2onnx
        >>> @pt2onnx.translation(torch.ops.aten.relu.default)
        ... def relu(g, x):
        ...     return g.op.Relu(x)
    """

    def decorate(fn: F) -> F:
        (registry or REGISTRY).register(op, fn, since, complex)
        return fn

    return decorate
