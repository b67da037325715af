"""A graph output that nodes inside the graph also read is given its own Identity.

``BertModel`` returns ``last_hidden_state`` and reads it again for the pooler. Such a
value is valid ONNX, but tools that rewrite a graph's boundary mishandle it:
onnxconverter-common's float16 conversion with ``keep_io_types`` casts the output back
to float32 and leaves the pooler reading that float32 value as if it were float16, so
onnxruntime refuses the converted file (torch.onnx's BERT fails the same way). With
``inner -> Identity -> last_hidden_state``, the output is read by nothing else, and
the tools see a plain boundary. onnxruntime removes the Identity when it loads the file.

It runs when the file is written (``_save.save_model``), after everything that works
on the in-memory graph: export-llm stamps its decoder layers on the graph as
translated, where a layer's outputs are the graph's.
"""

from __future__ import annotations

import onnx_ir as ir


def apply(model: ir.Model) -> int:
    """Rewrites the main graph in place; returns how many outputs got an Identity."""
    graph = model.graph
    taken = {v.name for node in graph for v in node.outputs} | {v.name for v in graph.inputs}
    taken |= set(graph.initializers)
    count = 0
    for i, out in enumerate(list(graph.outputs)):
        if out.producer() is None or not list(out.uses()):
            continue  # an input or initializer returned as is, or read by nothing else
        name = out.name or f"output_{i}"
        inner = f"{name}_inner"
        while inner in taken:
            inner += "_"
        taken.add(inner)
        out.name = inner
        node = ir.Node("", "Identity", [out], name=f"{name}/output")
        result = node.outputs[0]
        result.name, result.type, result.shape = name, out.type, out.shape
        graph.append(node)
        graph.outputs[i] = result
        count += 1
    return count
