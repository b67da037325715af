"""torch.onnx.export's keywords, accepted by pt2onnx.export with a defined meaning.

Code written for ``torch.onnx.export`` passes keywords pt2onnx has no need of. Each
one either does what it did there (``opset_version``, ``export_params``,
``keep_initializers_as_inputs``, ``training``, ``custom_opsets``, ``verbose``,
``custom_translation_table``) or is accepted with a warning that says why it has no
effect. docs/migration.md has the table.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.errors import InvalidInputError

# keyword -> why it has no effect in pt2onnx (a warning says so when a value other
# than torch.onnx's default is given).
IGNORED: dict[str, tuple[Any, str]] = {
    "dynamo": (True, "pt2onnx always captures with torch.export; there is no TorchScript "
                     "path to choose"),
    "do_constant_folding": (True, "pt2onnx folds ops whose inputs are all constants while "
                                  "translating; pass optimize=False to skip the ONNX passes"),
    "operator_export_type": (None, "pt2onnx writes standard ONNX ops only; an op without a "
                                   "rule raises UnsupportedOperatorError listing it (add a "
                                   "rule with @pt2onnx.translation)"),
    "profile": (False, "use the export report (report=True) for per-stage timings"),
    "dump_exported_program": (False, "the captured program is in the report (report=True) "
                                     "and in pt2onnx.debug"),
    "artifacts_dir": (".", "pass report=<path> to choose where the report goes"),
    "autograd_inlining": (True, "it applies to TorchScript autograd functions only"),
}
KNOWN = set(IGNORED) | {
    "opset_version", "export_params", "keep_initializers_as_inputs", "training",
    "custom_opsets", "verbose", "custom_translation_table",
}


@dataclass
class Options:
    """What the torch.onnx keywords ask pt2onnx to do."""

    export_params: bool = True
    keep_initializers_as_inputs: bool = False
    training: Any = None  # a torch.onnx.TrainingMode, or None: the model's own mode
    custom_opsets: dict[str, int] = field(default_factory=dict)
    verbose: bool = False
    warnings: list[str] = field(default_factory=list)


def normalize(opset: int | None, custom_translations: Any,
              given: dict[str, Any]) -> tuple[int | None, Any, Options]:
    """Checks the torch.onnx keywords; returns the opset, rules and options they imply."""
    unknown = sorted(set(given) - KNOWN)
    if unknown:
        raise InvalidInputError(
            f"pt2onnx.export got unexpected keyword(s) {unknown}. It takes pt2onnx's own "
            "keywords and every keyword of torch.onnx.export "
            f"({', '.join(sorted(KNOWN))}). Next step: check the spelling; see "
            "help(pt2onnx.export) and docs/migration.md."
        )
    opts = Options()
    if "opset_version" in given and given["opset_version"] is not None:
        alias = int(given["opset_version"])
        if opset is not None and opset != alias:
            raise InvalidInputError(
                f"opset={opset} and opset_version={alias} disagree. Next step: pass one of "
                "them (opset_version is torch.onnx's name for opset)."
            )
        opset = alias
    table = given.get("custom_translation_table")
    if table:
        for op, fn in table.items():
            if type(fn).__name__ in ("OnnxFunction", "TracedOnnxFunction"):
                raise InvalidInputError(
                    f"custom_translation_table[{op}] is an onnxscript function; pt2onnx rules "
                    "are plain Python functions (g, *args) that emit nodes with g.op.<Op>. "
                    "Next step: rewrite it as in docs/migration.md and pass it as "
                    "custom_translations={op: rule}."
                )
        custom_translations = {**dict(table), **dict(custom_translations or {})}
    opts.export_params = bool(given.get("export_params", True))
    opts.keep_initializers_as_inputs = bool(given.get("keep_initializers_as_inputs") or False)
    opts.training = given.get("training")
    opsets = given.get("custom_opsets") or {}
    if not isinstance(opsets, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) for k, v in opsets.items()):
        raise InvalidInputError(
            f"custom_opsets must map domain names to opset versions, got {opsets!r}. "
            "Next step: pass e.g. custom_opsets={'com.microsoft': 1}."
        )
    opts.custom_opsets = dict(opsets)
    opts.verbose = bool(given.get("verbose") or False)
    for key, (default, why) in IGNORED.items():
        if key not in given:
            continue
        value = given[key]
        if key == "operator_export_type":
            if value is None or getattr(value, "name", str(value)).endswith("ONNX"):
                continue
        elif value == default or (key == "artifacts_dir" and os.fspath(value) == "."):
            continue
        opts.warnings.append(f"{key}={value!r} has no effect in pt2onnx: {why}.")
    return opset, custom_translations, opts


@contextlib.contextmanager
def training_mode(model: Any, mode: Any) -> Iterator[None]:
    """Puts ``model`` in the mode torch.onnx's ``training=`` asks for while it is
    captured (EVAL: eval(), TRAINING: train(), PRESERVE or None: as it is), then
    restores every submodule's own mode."""
    name = getattr(mode, "name", None) if mode is not None else None
    if name not in ("EVAL", "TRAINING") or not isinstance(model, torch.nn.Module):
        yield
        return
    before = {m: m.training for m in model.modules()}
    model.train(name == "TRAINING")
    try:
        yield
    finally:
        for m, was in before.items():
            m.training = was


def in_mode(fn: Any, model: Any, mode: Any) -> Any:
    """``fn`` called with ``model`` in ``mode`` (see :func:`training_mode`)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        with training_mode(model, mode):
            return fn(*args, **kwargs)

    return call


def apply(model: ir.Model, opts: Options, weight_names: set[str]) -> None:
    """Weights as graph inputs, and extra opset imports, as torch.onnx wrote them.

    ``weight_names`` are the model's parameters and buffers; constants the rules made
    stay initializers, as torch.onnx kept its constants in the graph."""
    graph = model.graph
    if not opts.export_params or opts.keep_initializers_as_inputs:
        for name, value in list(graph.initializers.items()):
            if value.is_graph_input() or name not in weight_names:
                continue
            if not opts.export_params:
                # The file carries no weights: each becomes an input the caller feeds.
                graph.initializers.pop(name)
                value.const_value = None
            graph.inputs.append(value)
    for domain, version in opts.custom_opsets.items():
        graph.opset_imports[domain] = version
        model.opset_imports[domain] = version
