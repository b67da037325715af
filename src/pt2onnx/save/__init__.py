"""Stage 4, save: an ONNX model becomes a file (``_save``: one file, external data, the
2 GiB limit, atomic writes that leave no half-written file), with weights streamed
from disk or meta tensors (``_weights``).

May import: ``passes`` (the rewrites every written file gets), ``translate._builder``
(dtypes), ``_compat``, ``errors``. Must not import: ``capture``, ``frontends`` or
anything above them.
"""
