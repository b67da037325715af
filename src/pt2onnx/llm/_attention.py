"""Fused attention for export-llm: each layer's attention as one GroupQueryAttention.

Decided at capture time, not by matching the exported graph. The wrapper runs the
model with

- a transformers attention function of its own (registered in transformers'
  ``AttentionInterface`` as ``"pt2onnx_gqa"``), which calls ``pt2onnx::gqa``
  (translated to com.microsoft ``GroupQueryAttention``, see ``rules/gqa.py``) with
  the arguments transformers gives every attention function: ``scaling``,
  ``sliding_window`` and ``softcap``, the contract flash attention relies on too;
- a cache whose layers hand the new keys and values back unconcatenated: the op
  grows the cache itself and returns the presents.

transformers builds no mask for an attention function it does not know, so the
mask code leaves the graph as well. A family this can't express (its attention
does not go through ``AttentionInterface``, builds a mask of its own such as ALiBi,
or the result differs) is found by one eager run of the fused wrapper against the
plain one before the capture; export-llm then writes the plain graph, with a note.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from pt2onnx.llm import _families, _rotary, _wrapper
from pt2onnx.llm._families import Layout
from pt2onnx.rules import gqa as _gqa_rule
from pt2onnx.rules import rotary as _rotary_rule

NAME = "pt2onnx_gqa"
_ACTIVE: list[Any] = []  # the cache of the forward being run, innermost last


class NotFusable(Exception):
    """The model's attention can't be captured as GroupQueryAttention."""


def _attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor, attention_mask: torch.Tensor | None,
               dropout: float = 0.0, scaling: float | None = None,
               sliding_window: int | None = None, softcap: float | None = None,
               **kwargs: Any) -> tuple[torch.Tensor, None]:
    """The attention function transformers calls: query ``[B, H, S, D]``, key/value
    ``[B, Hkv, S, D]`` as the cache layer returned them (the new tokens only)."""
    if not _ACTIVE:
        raise NotFusable("the attention ran outside export-llm's wrapper")
    cache = _ACTIVE[-1]
    idx = getattr(module, "layer_idx", None)
    if not isinstance(idx, int) or not 0 <= idx < len(cache.layers):
        raise NotFusable(f"the attention module has no usable layer_idx ({idx!r})")
    layer = cache.layers[idx]
    if not isinstance(layer, SplitLayer) or layer.new is None or layer.new[0] is not key \
            or layer.new[1] is not value:
        raise NotFusable("the keys and values reaching the attention are not the cache's")
    if attention_mask is not None:
        raise NotFusable("the model builds an attention mask or bias of its own")
    if kwargs.get("s_aux") is not None or kwargs.get("sinks") is not None:
        raise NotFusable("the attention has sink logits")
    if not getattr(module, "is_causal", True):
        raise NotFusable("the attention is not causal")
    heads, kv_heads, head = query.shape[1], key.shape[1], query.shape[3]
    if heads % kv_heads or key.shape[3] != head or value.shape[3] != head:
        raise NotFusable(f"{heads} query heads of size {head} against {kv_heads} key/value "
                         f"heads of size {key.shape[3]}/{value.shape[3]}")
    scale = float(scaling) if scaling is not None else head ** -0.5
    window = int(sliding_window) if sliding_window else 0
    cap = float(softcap) if softcap else 0.0
    tables: tuple[torch.Tensor, ...] = ()
    mine = _layer_tables(cache.tables, module, idx)
    rot = 2 * mine[0].shape[-1] if mine is not None else 0
    unturned = _unrotated(cache, query, key, rot) if mine is not None else None
    if unturned is not None and mine is not None and 0 < rot <= head and head % 16 == 0 \
            and rot % 16 == 0:
        # Rotated by the model's apply_rotary_pos_emb (all of each head, or its first
        # `rot` dims): the op rotates them instead (onnxruntime's rotary kernel takes
        # sizes in multiples of 16).
        query, key = unturned
        tables = mine
        layer.rotary = True
    out, present_key, present_value = torch.ops.pt2onnx.gqa(
        query, key, value, layer.keys, layer.values, cache.attention_mask, heads, kv_heads,
        scale, window, cap, *tables, interleaved=bool(tables) and cache.interleaved)
    layer.present = (present_key, present_value)
    return out, None


def _unrotated(cache: Any, query: torch.Tensor, key: torch.Tensor,
               rot: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The query and key reaching the attention as they were before the model's rotary:
    the inputs of the apply_rotary_pos_emb that returned exactly these (its usual form,
    a partial rotary inside it included, as Nemotron's), or, where the model rotated
    only their first ``rot`` dims and joined the rest back (Phi), the last rotation's
    inputs joined with the rest (``_slices.rejoin_slices`` then reads the projections
    through both joins). None where neither fits; the eager check of the fused wrapper
    against the plain one (``check``) decides whether the result is right."""
    turned = cache.rotated.get(id(query))
    if turned is not None and turned[3] is query and turned[2] is key:
        return turned[0], turned[1]
    last = cache.last_rotated
    if last is None or not 0 < rot < query.shape[-1]:
        return None
    q_in, k_in, k_out, q_out = last
    if q_out.shape[-1] != rot or k_out.shape[-1] != rot \
            or q_out.shape[:-1] != query.shape[:-1] or k_out.shape[:-1] != key.shape[:-1]:
        return None
    return torch.cat([q_in, query[..., rot:]], dim=-1), torch.cat([k_in, key[..., rot:]], dim=-1)


def _layer_tables(tables: dict[str | None, tuple[torch.Tensor, torch.Tensor]] | None,
                  module: torch.nn.Module, idx: int) -> tuple[torch.Tensor, ...] | None:
    """The cos/sin tables of layer ``idx``'s kind: the one pair of a model with one
    rotary, or the pair of its ``layer_type`` (Gemma 3: the sliding layers' local rope
    base, the full layers' global one)."""
    if not tables:
        return None
    if None in tables:
        return tables[None]
    kind = getattr(module, "layer_type", None)
    if kind is None:
        kinds = getattr(getattr(module, "config", None), "layer_types", None)
        kind = kinds[idx] if isinstance(kinds, (list, tuple)) and idx < len(kinds) else None
    return tables.get(kind)


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, _attention)


def _split_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class _SplitLayer(DynamicLayer):
        """Holds the past; ``update`` returns the new keys and values as they are."""

        new: tuple[torch.Tensor, torch.Tensor] | None = None
        present: tuple[torch.Tensor, torch.Tensor] | None = None

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor,
                   *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            if self.new is not None:
                raise NotFusable("a cache layer was updated twice in one forward")
            self.new = (key_states, value_states)
            return key_states, value_states

    return _SplitLayer


SplitLayer: Any = None


def setup() -> None:
    global SplitLayer
    if SplitLayer is None:
        _gqa_rule.define_ops()
        _rotary_rule.define_ops()
        _register()
        SplitLayer = _split_layer_class()


@contextlib.contextmanager
def _implementation(config: Any, name: str) -> Iterator[None]:
    """The model's attention implementation set to ``name`` (its sub-configs too)."""
    configs = [config]
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if text is not config:
        configs.append(text)
    saved = [c._attn_implementation for c in configs]
    try:
        for c in configs:
            c._attn_implementation = name
        yield
    finally:
        for c, old in zip(configs, saved):
            c._attn_implementation = old


_STATIC_ROPE = frozenset({"default", "linear", "llama3", "yarn"})


def _rotary_module(model: torch.nn.Module) -> tuple[torch.nn.Module, list[str | None]] | None:
    """The model's one rotary embedding module and the layer kinds it makes tables for
    (``[None]``: one table for every layer; Gemma 3's module makes one per layer type,
    its ``rope_type`` a dict), if its tables do not depend on the sequence length
    (dynamic NTK and LongRoPE rescale with it)."""
    # The decoder's own: a vision-language model's vision tower has one too (Pixtral's,
    # Qwen2.5-VL's), which its text decoder never runs.
    get_decoder = getattr(model, "get_decoder", None)
    decoder = get_decoder() if callable(get_decoder) else None
    root = decoder if isinstance(decoder, torch.nn.Module) else model
    found = [m for m in root.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    if len(found) != 1:
        return None
    rope_type = getattr(found[0], "rope_type", None)
    if isinstance(rope_type, dict):
        if not rope_type or not all(t in _STATIC_ROPE for t in rope_type.values()):
            return None
        return found[0], sorted(rope_type)
    if not isinstance(rope_type, str) or rope_type not in _STATIC_ROPE:
        return None
    return found[0], [None]


Tables = dict[str | None, tuple[torch.Tensor, torch.Tensor]]


def rotary_tables(model: torch.nn.Module, layout: Layout, dtype: torch.dtype) -> Tables | None:
    """GroupQueryAttention's ``cos_cache``/``sin_cache`` ``[context_length, D / 2]`` per
    layer kind (the key None: every layer's): the model's own rotary module run at every
    position (its table for position p is what it computes for p at run time); None for
    families without one."""
    found = _rotary_module(model)
    if found is None:
        return None
    module, kinds = found
    positions = torch.arange(layout.context_length)[None]
    tables: Tables = {}
    for kind in kinds:
        try:
            with torch.no_grad():
                args = (torch.zeros(1, dtype=dtype), positions) + ((kind,) if kind else ())
                cos, sin = module(*args)
        except Exception:
            return None
        if cos.dim() != 3 or cos.shape[-1] % 2 or cos.shape[1] != layout.context_length:
            return None
        half = cos.shape[-1] // 2
        if not (torch.equal(cos[..., :half], cos[..., half:])
                and torch.equal(sin[..., :half], sin[..., half:])):
            return None  # not rotate_half's layout
        # In the file's dtype, as the op takes them (ERNIE 4.5's module gives float32
        # whatever the model's dtype, and rotates in float32).
        tables[kind] = (cos[0, :, :half].to(dtype).contiguous(),
                        sin[0, :, :half].to(dtype).contiguous())
    return tables


class FusedDecoderWithCache(_wrapper.DecoderWithCache):
    """As DecoderWithCache, with each layer's attention one ``pt2onnx::gqa``."""

    def __init__(self, model: torch.nn.Module, num_layers: int,
                 tables: Tables | None = None, rotary_op: bool = True) -> None:
        super().__init__(model, num_layers)
        self.has_tables = tables is not None
        # Where the op can't rotate inside, the model's rotation as pt2onnx::rotary
        # (off when the check finds the model's is not that one).
        self.rotary_op = rotary_op
        # Whether the model turns each pair (x[2i], x[2i + 1]) (GPT-J's, ERNIE 4.5's
        # rotary) rather than the halves (transformers' usual).
        self.interleaved = bool(tables) and tables is not None \
            and _rotary.interleaved(model, next(iter(tables.values())))
        self.table_kinds: dict[str | None, str] = {}
        for kind, (cos, sin) in (tables or {}).items():
            suffix = "" if kind is None else "_" + kind
            self.table_kinds[kind] = suffix
            self.register_buffer("rotary_cos_cache" + suffix, cos, persistent=False)
            self.register_buffer("rotary_sin_cache" + suffix, sin, persistent=False)

    def _tables(self) -> Tables | None:
        if not self.has_tables:
            return None
        return {kind: (getattr(self, "rotary_cos_cache" + suffix),
                       getattr(self, "rotary_sin_cache" + suffix))
                for kind, suffix in self.table_kinds.items()}

    def step(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             past: list[torch.Tensor], **extra: torch.Tensor) -> tuple[torch.Tensor, ...]:
        setup()
        cache: Any = self._new_cache(past)
        attention = self._attention_layers(cache)
        for layer in attention:
            layer.__class__ = SplitLayer
            layer.new = layer.present = None
            layer.rotary = False
        cache.attention_mask = attention_mask
        cache.rotated = {}
        cache.last_rotated = None
        cache.tables = self._tables()
        cache.interleaved = self.interleaved
        cache.rotary_op = self.rotary_op
        cache.position_ids = extra.get("position_ids")
        _ACTIVE.append(cache)
        try:
            with _implementation(self.model.config, NAME), \
                    _rotary.recording(self.model, cache), self._context():
                out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                 **{_families.cache_keyword(self.model): cache},
                                 use_cache=True, **extra)
        finally:
            _ACTIVE.pop()
        # Whether every layer's rotary went into the op (position_ids then unused).
        self.rotary_inside = all(layer.rotary for layer in attention)
        return (out.logits, *self._states(cache))

    # What a hybrid cache (_hybrid.FusedHybridDecoderWithCache) does differently.
    def _new_cache(self, past: list[torch.Tensor]) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache()
        for i in range(self.num_layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        return cache

    def _attention_layers(self, cache: Any) -> list[Any]:
        return list(cache.layers)

    def _context(self) -> Any:
        return contextlib.nullcontext()

    def _states(self, cache: Any) -> list[torch.Tensor]:
        return [x for i, layer in enumerate(cache.layers) for x in present(i, layer)]


def present(i: int, layer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The present keys and values the op returned for layer ``i``."""
    if layer.present is None:
        raise NotFusable(f"layer {i}'s attention did not go through transformers' "
                         "AttentionInterface")
    return layer.present


class FusedDecoderWithCacheNoPositions(FusedDecoderWithCache):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,  # type: ignore[override]
                past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return self.step(input_ids, attention_mask, past)


def agrees(fused: FusedDecoderWithCache, examples: list[Any], wants: list[Any],
            dtype: torch.dtype) -> str | None:
    """None when ``fused`` gives ``wants`` on ``examples``, otherwise why not; its
    ``rotary_inside`` then says whether every layer rotated inside the op in all."""
    inside = True
    for args, want in zip(examples, wants):
        try:
            with torch.no_grad():
                got = fused(*args)
        except NotFusable as exc:
            return str(exc)
        except Exception as exc:
            text = str(exc).strip().splitlines()
            return (f"the model's forward failed without the mask transformers builds for "
                    f"its own attention: {type(exc).__name__}: {text[0][:200] if text else ''}")
        why = _differs(want, got, dtype, args)
        if why is not None:
            return why
        inside = inside and fused.rotary_inside
    fused.rotary_inside = inside
    return None


def _differs(want: Any, got: Any, dtype: torch.dtype, args: Any) -> str | None:
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    past = args[-1][0].shape[2]
    for i, (w, g) in enumerate(zip(want, got)):
        if w.shape != g.shape:
            return f"output {i} has shape {tuple(g.shape)}, not {tuple(w.shape)}"
        scale = max(1.0, float(w.abs().max()))
        err = float((w.float() - g.float()).abs().max())
        if not err <= tol * scale:
            return f"output {i} differs from the model's attention by {err:.3g} (past {past})"
    return None


def shares_buffer(model: Any) -> bool:
    """Whether genai can hand each past buffer in as its present (its
    ``past_present_share_buffer``): every past input is read by one
    GroupQueryAttention, which writes the new tokens into it in place, and otherwise
    only for its batch, head or head-size dims (a shared buffer's length is genai's
    max_length, not the past's)."""
    pasts = [v for v in model.graph.inputs if v.name and v.name.startswith("past_key_values.")]
    if not pasts:
        return False
    for value in pasts:
        fused = 0
        for use in value.uses():
            node, index = use.node, use.idx
            if (node.domain, node.op_type) == (_gqa_rule.MS_DOMAIN, "GroupQueryAttention") \
                    and index in (3, 4) and node.outputs[index - 2].is_graph_output():
                fused += 1
            elif not _reads_no_length(node):
                return False
        if fused != 1:
            return False
    return True


def _reads_no_length(node: Any) -> bool:
    """A Shape node that leaves out dim 2 (the cache's length)."""
    if (node.domain, node.op_type) != ("", "Shape"):
        return False
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", 4)
    start, end = start % 4 if start < 0 else min(start, 4), end % 4 if end < 0 else min(end, 4)
    return end <= 2 or start >= 3


def reads_packed(values: list[Any]) -> bool:
    """Whether ``values`` (projections, in graph order) are the q, k and v inputs of one
    GroupQueryAttention and nothing else reads them: joined, pack_qkv packs them."""
    if len(values) != 3:
        return False
    users = set()
    for i, out in enumerate(values):
        uses = list(out.uses())
        if len(uses) != 1 or out.is_graph_output():
            return False
        user, index = uses[0].node, uses[0].idx
        if (user.domain, user.op_type) != (_gqa_rule.MS_DOMAIN, "GroupQueryAttention") \
                or index != i:
            return False
        users.add(id(user))
    return len(users) == 1


def pack_qkv(model: Any) -> int:
    """GroupQueryAttention reading the three outputs of one Split (the joined q/k/v
    projection, see _fuse) takes the Split's input as its packed query instead, with
    no key and value inputs: the layout onnxruntime documents for packed QKV
    (``[B, S, H * D + 2 * Hkv * D]``). Returns how many."""
    import onnx_ir as ir

    graph = model.graph
    packed = 0
    for node in list(graph):
        if (node.domain, node.op_type) != (_gqa_rule.MS_DOMAIN, "GroupQueryAttention"):
            continue
        q, k, v = node.inputs[0], node.inputs[1], node.inputs[2]
        split = q.producer() if q is not None else None
        if split is None or (split.domain, split.op_type) != ("", "Split") \
                or len(split.outputs) != 3 or list(split.outputs) != [q, k, v]:
            continue
        joined = split.inputs[0]
        if joined is None or joined.shape is None or len(joined.shape) != 3:
            continue
        if split.attributes.get_int("axis", 0) not in (-1, 2):
            continue
        if any(len(x.uses()) != 1 or x.is_graph_output() for x in split.outputs):
            continue
        node.replace_input_with(0, joined)
        node.replace_input_with(1, None)
        node.replace_input_with(2, None)
        graph.remove(split, safe=True)
        packed += 1
    if packed:
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return packed


def _whole_slice(node: Any) -> bool:
    """A Slice from 0 to the end (or past it) with step 1 on every axis it names: the
    ``hidden_states[:, -0:, :]`` of transformers' ``logits_to_keep=0``."""
    import numpy as np

    if (node.domain, node.op_type) != ("", "Slice") or len(node.inputs) < 3:
        return False
    values: list[Any] = []
    for v in list(node.inputs[1:]) + [None] * (5 - len(node.inputs)):
        if v is None:
            values.append(None)
            continue
        if v.const_value is None:
            return False
        values.append(np.asarray(v.const_value.numpy()).reshape(-1))
    starts, ends, _, steps = values
    if starts is None or ends is None:
        return False
    return bool((starts == 0).all() and (ends >= 2**31 - 1).all()
                and (steps is None or (steps == 1).all()))


def drop_reshape_round_trips(model: Any) -> int:
    """``Reshape(Reshape(x, a), b)`` whose result has x's shape (as captured, every dim
    known) is x: the attention output's split into heads and back. A Slice of every
    element goes too. Returns how many."""
    import onnx_ir as ir

    graph = model.graph
    dropped = 0
    for node in list(graph):
        if _whole_slice(node) and not node.outputs[0].is_graph_output():
            ir.convenience.replace_all_uses_with(node.outputs[0], node.inputs[0])
            dropped += 1
            continue
        if (node.domain, node.op_type) != ("", "Reshape"):
            continue
        inner = node.inputs[0].producer() if node.inputs[0] is not None else None
        if inner is None or (inner.domain, inner.op_type) != ("", "Reshape"):
            continue
        x, out = inner.inputs[0], node.outputs[0]
        if x is None or x.shape is None or out.shape is None or out.is_graph_output():
            continue
        if len(x.shape) != len(out.shape) or any(
                d is None or (not isinstance(d, int) and d.value is None) for d in x.shape) \
                or list(x.shape) != list(out.shape):
            continue
        ir.convenience.replace_all_uses_with(out, x)
        dropped += 1
    if dropped:
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return dropped
