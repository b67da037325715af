"""Decoder export for generation: ``export_llm`` writes a folder onnxruntime-genai runs."""

from pt2onnx.llm._export import LLMExport, export_llm
from pt2onnx.llm._quant import quantize_rtn

__all__ = ["LLMExport", "export_llm", "quantize_rtn"]
