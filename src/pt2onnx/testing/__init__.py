"""Testing tools shipped with pt2onnx (the differential fuzzer: ``pt2onnx.testing.fuzz``)."""
