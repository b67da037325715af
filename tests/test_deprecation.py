"""A public name or keyword changes only after one release of DeprecationWarning."""

from __future__ import annotations

import warnings

import pytest

from pt2onnx._deprecation import deprecated, renamed_kwarg


def test_deprecated_function_warns_and_still_works():
    @deprecated(since="0.1", removed_in="0.3", instead="new_fn")
    def old_fn(x):
        """Adds one."""
        return x + 1

    with pytest.warns(DeprecationWarning, match=r"old_fn is deprecated since pt2onnx 0\.1 "
                      r"and will be removed in 0\.3; use new_fn instead") as record:
        assert old_fn(1) == 2
    assert record[0].filename == __file__, "the warning points at the caller"
    assert old_fn.__doc__ == "Adds one." and old_fn.__name__ == "old_fn"


def test_renamed_keyword_argument():
    @renamed_kwarg("opset_version", "opset", since="0.1", removed_in="0.3")
    def fn(*, opset=None):
        return opset

    with pytest.warns(DeprecationWarning, match="use opset="):
        assert fn(opset_version=18) == 18
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fn(opset=19) == 19
        assert fn() is None
    with pytest.raises(TypeError, match="both"):
        fn(opset_version=18, opset=19)
