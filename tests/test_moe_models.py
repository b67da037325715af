"""Mixture-of-experts decoders from transformers, built from tiny configs (random weights).

Each exports once with a dynamic batch and sequence and must match eager at the
example and at a second input whose routing differs (another batch size, sequence
length and tokens): the per-expert token counts are data, so a graph specialised to
the example's routing fails the second input. The test checks that the routing does
differ, in the first MoE layer.
"""

from __future__ import annotations

from typing import Any

import onnx
import pytest
import torch

import pt2onnx
from conftest import export_and_verify

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

VOCAB = 128
TINY: dict[str, Any] = dict(
    vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2, hidden_size=32,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, use_cache=False,
    # A wider init than the default 0.02 so the router's choices depend on the tokens.
    initializer_range=0.2,
)
# Router-logit outputs are asked for where the model returns them.
LOGITS = {"output_router_logits": True}


def _mixtral() -> Any:
    return transformers.MixtralForCausalLM(transformers.MixtralConfig(
        intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, **TINY))


def _qwen3_moe() -> Any:
    return transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
        intermediate_size=64, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
        head_dim=8, norm_topk_prob=True, **TINY))


def _olmoe() -> Any:
    return transformers.OlmoeForCausalLM(transformers.OlmoeConfig(
        intermediate_size=16, num_experts=4, num_experts_per_tok=2, **TINY))


def _gpt_oss() -> Any:
    # GPT-OSS: biased experts, a clamped gated activation, router bias, sliding layers.
    cfg = dict(TINY, max_position_embeddings=4096)
    return transformers.GptOssForCausalLM(transformers.GptOssConfig(
        intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, head_dim=8,
        sliding_window=4, **cfg))


def _granitemoe() -> Any:
    return transformers.GraniteMoeForCausalLM(transformers.GraniteMoeConfig(
        intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, **TINY))


def _qwen2_moe() -> Any:
    # A shared expert with a sigmoid gate beside the routed ones; top-k not renormalised.
    return transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(
        intermediate_size=64, moe_intermediate_size=16, shared_expert_intermediate_size=32,
        num_experts=4, num_experts_per_tok=2, **TINY))


def _granitemoeshared() -> Any:
    return transformers.GraniteMoeSharedForCausalLM(transformers.GraniteMoeSharedConfig(
        intermediate_size=16, shared_intermediate_size=16, num_local_experts=4,
        num_experts_per_tok=2, **TINY))


def _deepseek_v3() -> Any:
    # Group-limited routing (sigmoid scores, a correction bias, top groups), a shared
    # expert, a scaling factor, one dense layer first.
    cfg = dict(TINY, num_hidden_layers=3, num_key_value_heads=4)
    return transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(
        intermediate_size=64, moe_intermediate_size=16, n_shared_experts=1, n_routed_experts=8,
        n_group=4, topk_group=2, num_experts_per_tok=2, first_k_dense_replace=1,
        kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=4, qk_nope_head_dim=4,
        v_head_dim=8, **cfg))


def _phimoe() -> Any:
    # PhiMoE's sparsemixer router.
    return transformers.PhimoeForCausalLM(transformers.PhimoeConfig(
        intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, **TINY))


def _qwen3_5_moe() -> Any:
    # Gated-delta-rule (linear attention) layers beside full attention; shared expert.
    cfg = dict(TINY, head_dim=8)
    return transformers.Qwen3_5MoeForCausalLM(transformers.Qwen3_5MoeTextConfig(
        linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
        linear_num_value_heads=4, moe_intermediate_size=16, shared_expert_intermediate_size=16,
        num_experts=4, num_experts_per_tok=2, layer_types=["linear_attention", "full_attention"],
        **cfg))


def _nemotron_h() -> Any:
    # Mamba2, attention and MoE layers (pattern M*E), a shared expert.
    cfg = dict(TINY, num_hidden_layers=3, head_dim=8)
    return transformers.NemotronHForCausalLM(transformers.NemotronHConfig(
        hybrid_override_pattern="M*E", n_routed_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=16, moe_shared_expert_intermediate_size=16, n_groups=1,
        mamba_num_heads=4, mamba_head_dim=8, ssm_state_size=8, n_group=1, topk_group=1, **cfg))


# Static shapes only, for reasons outside the experts: Qwen3.5-MoE's attention fixes the
# sequence (a guard in transformers' sdpa_attention_forward), Nemotron-H's Mamba2 chunking
# ties it to multiples of its chunk size. They are checked at one shape, two routings.
STATIC = {"qwen3_5_moe": (_qwen3_5_moe, LOGITS), "nemotron_h": (_nemotron_h, {})}

CASES = {
    "mixtral": (_mixtral, LOGITS),
    "qwen3_moe": (_qwen3_moe, LOGITS),
    "olmoe": (_olmoe, LOGITS),
    "gpt_oss": (_gpt_oss, LOGITS),
    "granitemoe": (_granitemoe, LOGITS),
    "qwen2_moe": (_qwen2_moe, LOGITS),
    "granitemoeshared": (_granitemoeshared, LOGITS),
    "deepseek_v3": (_deepseek_v3, {}),
    "phimoe": (_phimoe, LOGITS),
}


def _inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, seq - 2:] = 0  # right padding on the last row
    return {"input_ids": ids, "attention_mask": mask}


def _expert_counts(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Tokens per expert in the first routed layer, from its experts' top-k indices."""
    seen: list[torch.Tensor] = []
    experts = next(m for name, m in model.named_modules() if name.endswith("experts")
                   and hasattr(m, "num_experts"))

    def hook(module: Any, args: tuple[Any, ...]) -> None:
        seen.append(torch.bincount(args[1].reshape(-1), minlength=module.num_experts))

    handle = experts.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        handle.remove()
    return seen[0]


def check_moe(name: str, tmp_path: Any, experts: str | None = None) -> Any:
    factory, extra = CASES[name]
    torch.manual_seed(0)
    model = factory().eval()
    if experts is not None:
        model.set_experts_implementation(experts)
    first, second = _inputs(2, 10, 1), _inputs(3, 7, 2)
    counts = [_expert_counts(model, x) for x in (first, second)]
    shares = [c / c.sum() for c in counts]
    assert not torch.equal(shares[0], shares[1]), f"the two inputs route alike: {counts}"
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    path = tmp_path / f"{name}.onnx"
    prog = pt2onnx.export(model, (), path, kwargs={**first, **extra}, dynamic_axes=axes)
    onnx.checker.check_model(str(path), full_check=True)
    assert prog.report.capture_strategy.startswith("torch.export"), prog.report.fallbacks
    graph_inputs = prog.model.graph.inputs
    assert all(not isinstance(v.shape[0], int) and not isinstance(v.shape[1], int)
               for v in graph_inputs), [v.shape for v in graph_inputs]
    result = prog.verify()  # the example, then a second size of batch and sequence
    assert result.ok, f"onnxruntime does not match eager PyTorch:\n{result}"
    again = prog.verify(**second, **extra)
    assert again.ok, f"onnxruntime does not match eager at the second routing:\n{again}"
    names = [v.name for v in prog.model.graph.outputs]
    assert "logits" in names, names
    if extra.get("output_router_logits"):
        assert any("router_logits" in n for n in names), names
    return model


class GroupedMM(torch.nn.Module):
    """transformers' grouped product with the offsets as an input: any grouping."""

    def __init__(self, experts: int, k: int, n: int, aten: bool = False) -> None:
        super().__init__()
        dtype = torch.bfloat16 if aten else torch.float32
        self.weight = torch.nn.Parameter(torch.randn(experts, k, n).to(dtype))
        self.aten = aten

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        if self.aten:  # bfloat16 inside (onnxruntime takes no bfloat16 input)
            return torch._grouped_mm(x.to(torch.bfloat16), self.weight, offs=offs).float()
        return torch.ops.transformers.grouped_mm_fallback(x, self.weight, offs)


def _offsets(*ends: int) -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32)


@pytest.mark.parametrize("formulation,opset", [("sparse", 21), ("dense", 21), ("sparse", 17)])
def test_grouped_mm_fallback(formulation, opset, tmp_path):
    import transformers.integrations.moe  # noqa: F401  (defines the op)

    from pt2onnx.rules import moe

    op = torch.ops.transformers.grouped_mm_fallback.default
    model = GroupedMM(4, 16, 8)
    x = torch.randn(12, 16)
    custom = {op: moe.grouped_mm_dense} if formulation == "dense" else None
    prog = pt2onnx.export(model, (x, _offsets(3, 5, 9, 12)), tmp_path / "g.onnx",
                          dynamic_axes={"x": {0: "rows"}}, custom_translations=custom,
                          opset=opset)
    onnx.checker.check_model(str(tmp_path / "g.onnx"), full_check=True)
    # Empty groups (first, middle, last), rows past the last offset (zeros), one group.
    for rows, offs in ((12, _offsets(3, 5, 9, 12)), (7, _offsets(0, 4, 4, 7)),
                       (9, _offsets(2, 2, 6, 6)), (5, _offsets(5, 5, 5, 5)),
                       (6, _offsets(0, 0, 0, 4)), (1, _offsets(0, 0, 1, 1))):
        result = prog.verify(torch.randn(rows, 16), offs)
        assert result.ok, f"offsets {offs.tolist()}:\n{result}"


def test_aten_grouped_mm(tmp_path):
    """aten::_grouped_mm (transformers' path for bfloat16 experts), computed in float32."""
    model = GroupedMM(3, 16, 8, aten=True)
    x = torch.randn(10, 16)
    prog = pt2onnx.export(model, (x, _offsets(2, 7, 10)), tmp_path / "g.onnx",
                          dynamic_axes={"x": {0: "rows"}})
    # Rows past the last offset are left uninitialised by torch: every row is grouped here.
    for rows, offs in ((10, _offsets(2, 7, 10)), (6, _offsets(0, 6, 6)), (4, _offsets(1, 2, 4))):
        result = prog.verify(torch.randn(rows, 16), offs)
        assert result.ok, f"offsets {offs.tolist()}:\n{result}"


def test_histc_integer_counts():
    """histc of integer input (CUDA's histc takes it; CPU capture cannot), run through the
    rule directly and compared with torch.histc of the same values as float64."""
    import numpy as np
    import onnx_ir as ir
    import onnxruntime as ort

    from pt2onnx.rules.statistics import histc
    from pt2onnx.translate._builder import RuleContext

    for dtype, onnx_type in ((torch.int32, ir.DataType.INT32), (torch.int64, ir.DataType.INT64)):
        x = ir.Value(name="x", type=ir.TensorType(onnx_type), shape=ir.Shape(["n"]))
        graph = ir.Graph(inputs=[x], outputs=[], nodes=[], opset_imports={"": 21}, name="h")
        g = RuleContext(graph, 21)
        g.meta = torch.empty(8, dtype=dtype)
        out = histc(g, x, 8, 0, 7)
        graph.extend(g.nodes)
        graph.outputs.append(out)
        proto = ir.serde.serialize_model(ir.Model(graph, ir_version=10))
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        for n in (40, 3, 0):
            values = torch.randint(-2, 10, (n,)).to(dtype)  # some outside [0, 7]
            got = sess.run(None, {"x": values.numpy()})[0]
            expected = torch.histc(values.double(), 8, 0, 7).to(dtype).numpy()
            assert got.dtype == expected.dtype and np.array_equal(got, expected), (got, expected)


def test_mixtral_moe_block(tmp_path):
    """The fast tier: one Mixtral MoE block (router + experts), dynamic batch and sequence."""
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    torch.manual_seed(0)
    cfg = transformers.MixtralConfig(hidden_size=16, intermediate_size=32, num_local_experts=4,
                                     num_experts_per_tok=2)
    cfg._experts_implementation = "grouped_mm"  # what a model sets; a bare config has None
    block = MixtralSparseMoeBlock(cfg).eval()
    for p in block.parameters():
        torch.nn.init.normal_(p)
    x, x2 = torch.randn(2, 6, 16), torch.randn(3, 5, 16)
    routes = []
    for inp in (x, x2):
        _, _, top = block.gate(inp.reshape(-1, 16))
        routes.append(torch.bincount(top.reshape(-1), minlength=4))
    assert not torch.equal(routes[0], routes[1]), routes
    prog = pt2onnx.export(block, (x,), tmp_path / "moe.onnx",
                          dynamic_axes={"hidden_states": {0: "batch", 1: "seq"}})
    onnx.checker.check_model(str(tmp_path / "moe.onnx"), full_check=True)
    ops = {n.op_type for n in prog.model.graph}
    assert "MatMul" in ops and "TopK" in ops, ops
    for args in ((x,), (x2,), (torch.randn(1, 1, 16),)):
        result = prog.verify(*args)
        assert result.ok, f"onnxruntime does not match eager PyTorch:\n{result}"


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(CASES))
def test_moe_model(name, tmp_path):
    check_moe(name, tmp_path)


@pytest.mark.models
@pytest.mark.parametrize("name", sorted(STATIC))
def test_moe_model_static(name, tmp_path):
    factory, extra = STATIC[name]
    torch.manual_seed(0)
    model = factory().eval()
    first, second = _inputs(2, 10, 1), _inputs(2, 10, 2)
    counts = [_expert_counts(model, x) for x in (first, second)]
    assert not torch.equal(counts[0], counts[1]), f"the two inputs route alike: {counts}"
    prog = export_and_verify(model, (), tmp_path, kwargs={**first, **extra}, name=name)
    again = prog.verify(**second, **extra)
    assert again.ok, f"onnxruntime does not match eager at the second routing:\n{again}"


@pytest.mark.models
@pytest.mark.parametrize("experts", ["eager", "batched_mm"])
def test_experts_implementation(experts, tmp_path):
    """transformers' other experts paths: eager (captured as grouped_mm, the model's own
    choice restored after) and batched_mm (one weight gather per routed token)."""
    if experts == "eager":
        with pytest.warns(UserWarning, match="experts_implementation='eager'"):
            model = check_moe("mixtral", tmp_path, experts)
    else:
        model = check_moe("mixtral", tmp_path, experts)
    assert model.config._experts_implementation == experts
