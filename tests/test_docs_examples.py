"""Every ```python block in docs/extending.md and docs/migration.md runs, in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("page", ["extending.md", "migration.md"])
def test_python_blocks_run(page, capsys):
    from pt2onnx.translate._registry import REGISTRY

    text = (DOCS / page).read_text()
    blocks = BLOCK.findall(text)
    assert blocks, f"no python blocks in {page}"
    saved = REGISTRY.copy()
    namespace: dict = {"__name__": f"docs_{page.replace('.', '_')}"}
    try:
        for i, block in enumerate(blocks):
            code = compile(block, f"docs/{page} (block {i + 1})", "exec")
            exec(code, namespace)
    finally:
        REGISTRY._rules = saved._rules  # the docs override built-in rules; put them back
