"""The bundled example models export and match eager PyTorch in onnxruntime."""

from __future__ import annotations

import pytest

from conftest import export_and_verify
from pt2onnx.examples import EXAMPLES


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("opset", [17, None])
def test_example_model(name, opset, tmp_path):
    model, inputs = EXAMPLES[name]()
    prog = export_and_verify(model, inputs, tmp_path, name=name, opset=opset)
    assert set(prog.report.timings) >= {"capture", "decompose", "translate", "optimize", "save"}


def test_transformer_uses_fused_ops(tmp_path):
    model, inputs = EXAMPLES["tiny_transformer"]()
    prog = export_and_verify(model, inputs, tmp_path, opset=21)
    hist = prog.report.op_histogram
    assert hist.get("LayerNormalization", 0) == 5
    assert hist.get("Gelu", 0) == 2
