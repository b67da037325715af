"""Stage 4, save: an ONNX model becomes a file (``_save``: one file, external data, the
2 GiB limit, atomic writes that leave no half-written file), with weights streamed
from disk or meta tensors (``_weights``), and inline weights spliced into the protobuf
bytes as they are written (``_wire``); a weight's pages mapped from a file handed back
once it is written (``_pages``).

May import: ``passes`` (the rewrites every written file gets), ``translate``
(dtypes), ``_compat``, ``errors``. Must not import: ``capture``, ``frontends`` or
anything above them.
"""

# The door: what other folders may use. Imports from outside this folder name these,
# never a private module.
from pt2onnx.save._pages import FilePages
from pt2onnx.save._save import PROTO_LIMIT_BYTES, check_path, initializer_bytes, is_meta, save_model
from pt2onnx.save._weights import Safetensors, WeightSource, write_safetensors

__all__ = [
    "PROTO_LIMIT_BYTES",
    "FilePages",
    "Safetensors",
    "WeightSource",
    "check_path",
    "initializer_bytes",
    "is_meta",
    "save_model",
    "write_safetensors",
]

