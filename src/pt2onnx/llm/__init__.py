"""Decoder export for generation: ``export_llm`` writes a folder onnxruntime-genai runs.

May import: ``_api`` and every stage below it. Must not import: the package's
``__init__`` (``import pt2onnx``), ``cli``, ``testing``.
"""

from pt2onnx.llm._export import export_llm
from pt2onnx.llm._files import LLMExport
from pt2onnx.llm._meta import params_on_meta
from pt2onnx.llm._quant import quantize_rtn
from pt2onnx.llm._vision import vision_wrapper

__all__ = ["LLMExport", "export_llm", "params_on_meta", "quantize_rtn", "vision_wrapper"]
