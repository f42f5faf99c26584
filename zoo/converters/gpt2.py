"""GPT-2 checkpoints from Hugging Face (`GPT2LMHeadModel`, `GPT2Model`) into `CausalLM`.

GPT-2 stores its projections as `Conv1D` weights, `(in, out)`, already Keras' layout; the
query, key and value projections are one fused `c_attn` of `(d, 3 d)`, columns [q | k | v]:

    h.N.ln_1, h.N.ln_2                  -> the block's self-attention / feed-forward LayerNorm
    h.N.attn.c_attn (d, 3 d)            -> query, key, value kernels (d, heads, head_dim)
    h.N.attn.c_proj (d, d)              -> output kernel (heads, head_dim, d)
    h.N.mlp.c_fc, h.N.mlp.c_proj        -> the feed-forward Dense layers
    h.N.crossattention.q_attn (d, d), .c_attn (d, 2 d) [k | v], .c_proj, h.N.ln_cross_attn
                                        -> the cross-attention (add_cross_attention=True)
    wte, wpe, ln_f                      -> token and position tables, final LayerNorm

The names may carry `transformer.` (as `GPT2LMHeadModel` saves them); `lm_head.weight`, when
present, must equal `wte` (GPT-2 ties them); the causal-mask buffers of older files
(`attn.bias`, `attn.masked_bias`) are not weights and are skipped.

Example (a folder with `model.safetensors`, `config.json`, `vocab.json`, `merges.txt`):

    >>> from zoo.converters.gpt2 import causal_lm_from_hf
    >>> lm = causal_lm_from_hf("gpt2/")                       # doctest: +SKIP
    >>> lm.generate(["The meaning of life is"], max_new_tokens=20)   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from zoo.converters._config import (check_heads, config_float, config_int, config_name,
                                    config_value, load_config)
from zoo.converters._tensors import (Checkpoint, assign, keras_activation, load_tensors,
                                     set_attention, set_layer_norm, set_linear)
from zoo.training.errors import UserError

# Hugging Face's `activation_function` -> the backbone's.
_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
                "relu": "relu"}
_BUFFERS = (".attn.bias", ".attn.masked_bias", ".crossattention.bias",
            ".crossattention.masked_bias")


def gpt2_backbone_config(config: Any, ckpt: Checkpoint) -> dict[str, Any]:
    """The `GPT2Backbone` arguments of a GPT-2 `config.json`, each checked, and checked
    against the tensors' shapes before anything is built.

    Raises:
        UserError: a bad or contradicted value; the message names the file and the key.
    """
    sizes = {key: config_int(config, key) for key in (
        "vocab_size", "n_positions", "n_embd", "n_layer", "n_head")}
    width = sizes["n_embd"]
    inner = config_int(config, "n_inner", 4 * width)
    check_heads(config, width, sizes["n_head"], "n_embd", "n_head")
    ckpt.check_sizes(config_name(config), {"vocab_size": sizes["vocab_size"],
                                           "n_positions": sizes["n_positions"],
                                           "n_embd": width, "n_inner": inner},
                     {"n_layer": sizes["n_layer"]})
    name = config_value(config, "activation_function", "gelu_new")
    if name not in _ACTIVATIONS:
        keras_activation(name, "GPT-2")  # the house's message for an unknown activation
        raise UserError(f"{config_name(config)}: activation_function {name!r} is not "
                        f"supported; supported are {sorted(_ACTIVATIONS)}")
    for key in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if config_value(config, key, False):
            raise UserError(f"{config_name(config)}: {key} is not supported")
    if not config_value(config, "scale_attn_weights", True):
        raise UserError(f"{config_name(config)}: scale_attn_weights false is not supported")
    return dict(
        vocabulary_size=sizes["vocab_size"], num_layers=sizes["n_layer"],
        num_heads=sizes["n_head"], hidden_dim=width, intermediate_dim=inner,
        max_positions=sizes["n_positions"],
        dropout=config_float(config, "resid_pdrop", 0.1, below=1.0),
        attention_dropout=config_float(config, "attn_pdrop", 0.1, below=1.0),
        layer_norm_epsilon=config_float(config, "layer_norm_epsilon", 1e-5),
        activation=_ACTIVATIONS[name],
        cross_attention=bool(config_value(config, "add_cross_attention", False)))


def gpt2_checkpoint(state_dict_or_path: Any) -> Checkpoint:
    """A GPT-2 checkpoint's tensors under GPT2Model's names (no `transformer.`), without the
    mask buffers; `lm_head.weight` is kept (`assign_gpt2_weights` checks it is tied)."""
    tensors = {}
    for name, value in load_tensors(state_dict_or_path).items():
        name = name.removeprefix("transformer.")
        if not name.endswith(_BUFFERS):
            tensors[name] = value
    return Checkpoint(tensors, "Hugging Face GPT-2")


def _split(weight: np.ndarray, bias: np.ndarray, parts: int) -> list[tuple]:
    """A fused Conv1D `(d, parts * d)` into `parts` PyTorch-layout `(out, in)` projections."""
    width = weight.shape[1] // parts
    return [(weight[:, i * width:(i + 1) * width].T, bias[i * width:(i + 1) * width])
            for i in range(parts)]


def assign_gpt2_weights(backbone: Any, ckpt: Checkpoint) -> None:
    """Writes a GPT-2 checkpoint's tensors into a built `GPT2Backbone`; every tensor must be
    used.

    Raises:
        UserError: a missing, misshapen or unused tensor, or an untied `lm_head.weight`.
    """
    d, inner = backbone.hidden_dim, backbone.intermediate_dim
    assign(backbone.token_embedding.embeddings,
           ckpt.take("wte.weight", (backbone.vocabulary_size, d)), "wte.weight")
    assign(backbone.position_embedding.position_embeddings,
           ckpt.take("wpe.weight", (backbone.max_positions, d)), "wpe.weight")
    for i, block in enumerate(backbone.decoder_blocks):
        p = f"h.{i}."

        def conv(name: str, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
            return ckpt.take(p + name + ".weight", shape), ckpt.take(p + name + ".bias",
                                                                     (shape[1],))

        def norm(layer: Any, name: str) -> None:
            set_layer_norm(layer, ckpt.take(p + name + ".weight", (d,)),
                           ckpt.take(p + name + ".bias", (d,)), p + name)

        norm(block.self_attention_norm, "ln_1")
        q, k, v = _split(*conv("attn.c_attn", (d, 3 * d)), 3)
        out_w, out_b = conv("attn.c_proj", (d, d))
        set_attention(block.self_attention, {"query": q, "key": k, "value": v,
                                             "output": (out_w.T, out_b)}, p + "attn")
        if backbone.cross_attention:
            norm(block.cross_attention_norm, "ln_cross_attn")
            (q,) = _split(*conv("crossattention.q_attn", (d, d)), 1)
            k, v = _split(*conv("crossattention.c_attn", (d, 2 * d)), 2)
            out_w, out_b = conv("crossattention.c_proj", (d, d))
            set_attention(block.cross_attention, {"query": q, "key": k, "value": v,
                                                  "output": (out_w.T, out_b)},
                          p + "crossattention")
        norm(block.feed_forward_norm, "ln_2")
        ffn = block.feed_forward
        fc_w, fc_b = conv("mlp.c_fc", (d, inner))
        set_linear(ffn.intermediate_dense, fc_w.T, fc_b, p + "mlp.c_fc")
        proj_w, proj_b = conv("mlp.c_proj", (inner, d))
        set_linear(ffn.output_dense, proj_w.T, proj_b, p + "mlp.c_proj")
    set_layer_norm(backbone.final_norm, ckpt.take("ln_f.weight", (d,)),
                   ckpt.take("ln_f.bias", (d,)), "ln_f")
    if "lm_head.weight" in ckpt:
        head = ckpt.take("lm_head.weight", (backbone.vocabulary_size, d))
        if not np.array_equal(head, ckpt.tensors["wte.weight"]):
            raise UserError("lm_head.weight differs from wte.weight: only GPT-2's tied head "
                            "is supported")
    ckpt.check_all_used()


def gpt2_backbone_from_hf(state_dict_or_path: Any, config: Any = None,
                          **overrides: Any) -> Any:
    """A `GPT2Backbone` holding a Hugging Face GPT-2 checkpoint (with cross-attention when
    its config has `add_cross_attention`: a `VisionEncoderDecoderModel`'s decoder).

    Args:
        state_dict_or_path: the tensors (a state dict, a `.safetensors` file or a folder).
        config: a `transformers.GPT2Config` or the dict of its `config.json`; read from the
            folder when None.
        **overrides: other `GPT2Backbone` arguments (`name`, `dtype`, `dropout`).
    """
    from zoo.models.causal_lm.backbone import GPT2Backbone

    config = load_config(config, state_dict_or_path)
    ckpt = gpt2_checkpoint(state_dict_or_path)
    backbone = GPT2Backbone(**{**gpt2_backbone_config(config, ckpt), **overrides})
    backbone.build()
    assign_gpt2_weights(backbone, ckpt)
    return backbone


def causal_lm_from_hf(state_dict_or_path: Any, config: Any = None, tokenizer: Any = None,
                      sequence_length: int | None = None, **overrides: Any) -> Any:
    """A `CausalLM` holding a Hugging Face `GPT2LMHeadModel` checkpoint, whose logits equal
    the reference model's.

    Args:
        state_dict_or_path: as `gpt2_backbone_from_hf`.
        config: as `gpt2_backbone_from_hf`.
        tokenizer: a `zoo.text.byte_pair.BytePairTokenizer`; read from the folder's
            `vocab.json` and `merges.txt` when None and they are there.
        sequence_length: the preprocessor's length for `fit` (the model's positions).
        **overrides: other `GPT2Backbone` arguments.

    Raises:
        UserError: as `assign_gpt2_weights`, or a cross-attention checkpoint (a decoder
            for an encoder, not a language model).
    """
    import os

    from zoo.models.causal_lm.causal_lm import CausalLM
    from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor
    from zoo.text.byte_pair import BytePairTokenizer

    name = overrides.pop("name", None)
    backbone = gpt2_backbone_from_hf(state_dict_or_path, config, **overrides)
    if backbone.cross_attention:
        raise UserError("this GPT-2 attends to an encoder (add_cross_attention): it is a "
                        "captioner's decoder, not a language model")
    if tokenizer is None and isinstance(state_dict_or_path, (str, os.PathLike)) and \
            os.path.isfile(os.path.join(state_dict_or_path, "vocab.json")):
        tokenizer = BytePairTokenizer.from_folder(state_dict_or_path)
    if tokenizer is not None and tokenizer.vocabulary_size > backbone.vocabulary_size:
        raise UserError(f"the tokenizer has {tokenizer.vocabulary_size} pieces, more than "
                        f"the model's {backbone.vocabulary_size} embeddings")
    preprocessor = None if tokenizer is None else CausalLMPreprocessor(
        tokenizer, sequence_length or backbone.max_positions)
    kwargs: Mapping[str, Any] = {} if name is None else {"name": name}
    model = CausalLM(backbone, preprocessor, **kwargs)
    model.ensure_built()
    return model
