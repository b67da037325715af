"""Testing tools shipped with pt2onnx (the differential fuzzer: ``pt2onnx.testing.fuzz``;
the downstream-tool checks: ``pt2onnx.testing.downstream``).

May import anything (it is the top layer, with the CLI); nothing in pt2onnx imports it.
"""
