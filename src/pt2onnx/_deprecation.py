"""Deprecation helpers: a public name changes only after one release of warnings."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def deprecated(since: str, removed_in: str, instead: str) -> Callable[[F], F]:
    """Marks a function as deprecated: each call warns with what to use instead."""

    def decorate(fn: F) -> F:
        message = (f"{fn.__qualname__} is deprecated since pt2onnx {since} and will be removed "
                   f"in {removed_in}; use {instead} instead.")

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def renamed_kwarg(old: str, new: str, since: str, removed_in: str) -> Callable[[F], F]:
    """Accepts ``old=`` as ``new=`` for one release, with a DeprecationWarning."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{fn.__qualname__}() got both {old}= and {new}=")
                warnings.warn(
                    f"{fn.__qualname__}({old}=...) is deprecated since pt2onnx {since} and "
                    f"will be removed in {removed_in}; use {new}=... instead.",
                    DeprecationWarning, stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
