"""The public surface (pt2onnx.__all__ and what it reaches) matches tests/api_snapshot.txt.

A change to a public name or signature must be deliberate: update the snapshot with
``PT2ONNX_UPDATE_API_SNAPSHOT=1 python -m pytest tests/test_api_snapshot.py`` and
note the change in CHANGELOG.md (removals go through one release of DeprecationWarning).
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pt2onnx

SNAPSHOT = Path(__file__).with_name("api_snapshot.txt")


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def _instance_attributes(cls: type) -> list[str]:
    """Public attributes that ``__init__`` sets on ``self`` (e.g. ``OnnxProgram.model``)."""
    init = vars(cls).get("__init__")
    if init is None or not inspect.isfunction(init):
        return []
    try:
        source = inspect.getsource(init)
    except (OSError, TypeError):
        return []
    return sorted(set(re.findall(r"\bself\.([a-z]\w*)\s*(?::[^=\n]+)?=(?!=)", source)))


def describe_api() -> str:
    lines = []
    for name in sorted(pt2onnx.__all__):
        obj = getattr(pt2onnx, name)
        if inspect.isclass(obj):
            bases = ", ".join(b.__name__ for b in obj.__bases__)
            lines.append(f"class {name}({bases})")
            for attr in sorted(vars(obj)):
                if attr.startswith("_") and attr != "__init__":
                    continue
                member = vars(obj)[attr]
                if isinstance(member, property):
                    lines.append(f"    {attr}: property")
                elif isinstance(member, (staticmethod, classmethod)):
                    lines.append(f"    {attr}{_signature(member.__func__)}")
                elif callable(member):
                    lines.append(f"    {attr}{_signature(member)}")
            lines += [f"    {attr}: attribute" for attr in _instance_attributes(obj)
                      if attr not in vars(obj)]
        elif callable(obj):
            lines.append(f"def {name}{_signature(obj)}")
        else:
            lines.append(f"{name} = {obj!r}" if name != "__version__" else f"{name}: str")
    return "\n".join(lines) + "\n"


def test_public_api_matches_snapshot():
    current = describe_api()
    if os.environ.get("PT2ONNX_UPDATE_API_SNAPSHOT"):
        SNAPSHOT.write_text(current)
    expected = SNAPSHOT.read_text()
    assert current == expected, (
        "the public API changed. If that is deliberate, run "
        "PT2ONNX_UPDATE_API_SNAPSHOT=1 python -m pytest tests/test_api_snapshot.py, "
        "commit tests/api_snapshot.txt and note the change in CHANGELOG.md."
    )
