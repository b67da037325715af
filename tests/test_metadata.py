"""ONNX nodes carry the FX node's source line and module path."""

from __future__ import annotations

import torch
from torch import nn

import pt2onnx


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.proj(x))  # metadata source line


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x)


def test_module_path_and_source_in_node_metadata():
    prog = pt2onnx.export(Net().eval(), (torch.randn(2, 4),))
    props = [dict(n.metadata_props) for n in prog.model.graph]
    modules = {p.get("pt2onnx.module") for p in props}
    assert {"blocks.0.proj", "blocks.1.proj", "blocks.0", "blocks.1"} <= modules
    relu = [p for p in props if p.get("pt2onnx.aten") == "aten::relu.default"]
    assert len(relu) == 2
    assert all("torch.relu(self.proj(x))  # metadata source line" in p["pt2onnx.source"]
               for p in relu)
    assert all(p["pt2onnx.module_type"] == "Block" for p in relu)


def test_metadata_survives_serialization(tmp_path):
    import onnx

    pt2onnx.export(Net().eval(), (torch.randn(2, 4),), tmp_path / "m.onnx")
    proto = onnx.load(str(tmp_path / "m.onnx"))
    gemm = [n for n in proto.graph.node if n.op_type == "Gemm"]
    assert gemm
    meta = {p.key: p.value for p in gemm[0].metadata_props}
    assert meta["pt2onnx.module"] == "blocks.0.proj"
