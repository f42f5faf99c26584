"""Marian / OPUS-MT checkpoints (Hugging Face `MarianMTModel`) into `zoo.models.translator.model.Translator`.

Marian is the paper's post-norm encoder-decoder, so each tensor has a place in `Translator`;
the differences from our defaults become `Translator` options:

    sinusoids: all sines, then all cosines            position_layout="concatenated"
    embeddings scaled by sqrt(d) (scale_embedding)     scale_embedding=...
    feed-forward activation "swish" (OPUS-MT)          activation="silu"
    final_logits_bias added to the tied projection     output_bias=True
    pad id = vocab - 1 = decoder start id, eos id 0    pad_id, start_id, end_id
    generation never emits the pad id (bad_words_ids)  suppressed_token_ids=[pad_id]
    forced_eos_token_id at the length limit            force_end_at_max_length=True

One matrix serves as encoder and decoder embeddings and as the output projection
(`model.shared.weight`; the tied copies `model.encoder.embed_tokens.weight`,
`model.decoder.embed_tokens.weight` and `lm_head.weight`, where a checkpoint holds them, must
equal it). The sinusoid tables (`model.*.embed_positions.weight`) are not weights of ours:
where present they are checked against our table.

Tokens: without a tokenizer the converted model works on token ids (`Translator.search` /
`generate`; sources end with the eos id 0 and are padded with `pad_id`). Pass
`tokenizer=zoo.text.marian.MarianTokenizer.from_folder(folder)` (OPUS-MT's
`source.spm`, `target.spm` and `vocab.json`) to make it translate text; a checkpoint folder
holding those files gets it by itself, and so do hub handles
(`zoo.load("hf://Helsinki-NLP/...")`).

Example (a folder with `model.safetensors` and `config.json`, downloaded beforehand):

    >>> from zoo.converters.marian import translator_from_marian
    >>> model = translator_from_marian("opus-mt-en-de/")   # doctest: +SKIP
    >>> tokens, _ = model.search(source_ids, beam_size=1)   # doctest: +SKIP
    >>> from zoo.text.marian import MarianTokenizer
    >>> model = translator_from_marian(                     # doctest: +SKIP
    ...     "opus-mt-en-de/", tokenizer=MarianTokenizer.from_folder("opus-mt-en-de/"))
    >>> model.translate(["A dog runs."], beam_size=1)       # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from zoo.layers.sinusoidal_position_encoding import sinusoidal_position_encoding
from zoo.converters._config import (check_heads, config_float, config_int, config_name,
                                    config_value, load_config)
from zoo.converters._tensors import (Checkpoint, assign, keras_activation, load_tensors,
                                     set_attention, set_layer_norm, set_linear)
from zoo.training.errors import UserError
from zoo.layers.validation import is_int
from zoo.text.marian import MarianTokenizer
from zoo.models.translator.model import Translator

_EMBEDDING_NAMES = ("model.shared.weight", "model.encoder.embed_tokens.weight",
                    "model.decoder.embed_tokens.weight", "lm_head.weight")
# Sinusoid tables are computed in float64 by Transformers and in float32 by us.
_POSITION_TOLERANCE = 1e-3


def _attention(ckpt: Checkpoint, prefix: str, d: int) -> dict:
    projections = {}
    for role, name in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj"),
                       ("output", "out_proj")):
        projections[role] = (ckpt.take(f"{prefix}.{name}.weight", (d, d)),
                             ckpt.take(f"{prefix}.{name}.bias", (d,)))
    return projections


def _norm(ckpt: Checkpoint, norm: Any, prefix: str, d: int) -> None:
    set_layer_norm(norm, ckpt.take(f"{prefix}.weight", (d,)), ckpt.take(f"{prefix}.bias", (d,)),
                   prefix)


def _feed_forward(ckpt: Checkpoint, block: Any, prefix: str, d: int, ffn: int) -> None:
    set_linear(block.feed_forward.intermediate_dense,
               ckpt.take(f"{prefix}.fc1.weight", (ffn, d)),
               ckpt.take(f"{prefix}.fc1.bias", (ffn,)), f"{prefix}.fc1")
    set_linear(block.feed_forward.output_dense,
               ckpt.take(f"{prefix}.fc2.weight", (d, ffn)),
               ckpt.take(f"{prefix}.fc2.bias", (d,)), f"{prefix}.fc2")
    _norm(ckpt, block.feed_forward_norm, f"{prefix}.final_layer_norm", d)


def _same(config: Any, encoder_key: str, decoder_key: str) -> int:
    encoder, decoder = config_int(config, encoder_key), config_int(config, decoder_key)
    if encoder != decoder:
        raise UserError(f"Translator has one {encoder_key.split('_', 1)[1]} for encoder and "
                        f"decoder; this checkpoint has {encoder_key}={encoder} and "
                        f"{decoder_key}={decoder}")
    return encoder


def _token_ids(config: Any, vocabulary: int) -> dict[str, Any]:
    """The `Translator` arguments given by a Marian configuration's special ids, each checked
    to be a token of the vocabulary: pad, start and end ids, the tokens generation never
    picks, and whether the end is forced at the length limit."""
    def token(key: str, value: Any) -> int:
        if not is_int(value) or not 0 <= value < vocabulary:
            raise UserError(f"{config_name(config)}: {key} must be a token id from 0 to "
                            f"{vocabulary - 1}; got {value!r}")
        return value

    pad_id = token("pad_token_id", config_value(config, "pad_token_id"))
    start = config_value(config, "decoder_start_token_id")
    start_id = pad_id if start is None else token("decoder_start_token_id", start)
    end = config_value(config, "eos_token_id")
    end_id = token("eos_token_id", end[0] if isinstance(end, (list, tuple)) and end else end)
    forced_eos = config_value(config, "forced_eos_token_id", end_id)
    if forced_eos is not None and token("forced_eos_token_id", forced_eos) != end_id:
        raise UserError(f"forced_eos_token_id {forced_eos} differs from eos_token_id {end_id}")
    # Single-token bad_words_ids (OPUS-MT: [[pad]]) are tokens generation never picks.
    bad_words = config_value(config, "bad_words_ids") or [[pad_id]]
    if not (isinstance(bad_words, (list, tuple))
            and all(isinstance(w, (list, tuple)) for w in bad_words)):
        raise UserError(f"{config_name(config)}: bad_words_ids must be a list of lists of "
                        f"token ids; got {bad_words!r}")
    suppressed = sorted({token("bad_words_ids", w[0]) for w in bad_words if len(w) == 1})
    return dict(pad_id=pad_id, start_id=start_id, end_id=end_id,
                suppressed_token_ids=suppressed, force_end_at_max_length=forced_eos is not None)


def _folder_tokenizer(path: Path) -> MarianTokenizer | None:
    """The `MarianTokenizer` of the checkpoint's folder (`path` itself, or the folder of a
    file), if it holds OPUS-MT's `source.spm`, `target.spm` and `vocab.json`; else None."""
    folder = path if path.is_dir() else path.parent
    if all((folder / name).exists() for name in ("source.spm", "target.spm", "vocab.json")):
        return MarianTokenizer.from_folder(folder)
    return None


def _translator_arguments(config: Any) -> dict[str, Any]:
    """The `Translator` arguments of a Marian configuration; a UserError naming the file for
    what `Translator` cannot hold (separate vocabularies, encoder and decoder of different
    shapes, a forced end id other than the end id) and for a value out of range (a size that
    is not a positive integer, heads that do not divide `d_model`, an odd `d_model`, a token
    id outside the vocabulary)."""
    if not config_value(config, "share_encoder_decoder_embeddings", True):
        raise UserError("Translator shares one vocabulary between source and target; this "
                        "checkpoint has separate encoder and decoder embeddings")
    vocabulary = config_int(config, "vocab_size")
    decoder_vocabulary = config_int(config, "decoder_vocab_size", vocabulary)
    if decoder_vocabulary != vocabulary:
        raise UserError(f"decoder_vocab_size {decoder_vocabulary} differs from vocab_size "
                        f"{vocabulary}; Translator needs one shared vocabulary")
    d = config_int(config, "d_model")
    if d % 2:
        raise UserError(f"{config_name(config)}: d_model {d} is odd; the sinusoidal position "
                        "encoding needs an even width")
    heads = _same(config, "encoder_attention_heads", "decoder_attention_heads")
    check_heads(config, d, heads, "d_model", "encoder_attention_heads")
    ffn = _same(config, "encoder_ffn_dim", "decoder_ffn_dim")
    max_positions = config_int(config, "max_position_embeddings", 512)
    return dict(
        vocabulary_size=vocabulary, hidden_dim=d,
        num_encoder_layers=config_int(config, "encoder_layers"),
        num_decoder_layers=config_int(config, "decoder_layers"), num_heads=heads,
        intermediate_dim=ffn, dropout=config_float(config, "dropout", 0.1, below=1.0),
        attention_dropout=config_float(config, "attention_dropout", 0.0, below=1.0),
        activation=keras_activation(config_value(config, "activation_function", "gelu"),
                                    "Marian"),
        normalize_first=False, max_source_length=max_positions,
        max_target_length=max_positions,
        scale_embedding=bool(config_value(config, "scale_embedding", False)),
        position_layout="concatenated", output_bias=True, **_token_ids(config, vocabulary))


def _set_embeddings(ckpt: Checkpoint, model: Translator, vocabulary: int, d: int) -> None:
    """Assigns the one embedding matrix (its tied copies must equal it) and the logits bias."""
    present = [n for n in _EMBEDDING_NAMES if n in ckpt]
    if not present:
        raise UserError(f"the Marian checkpoint has none of the embeddings {_EMBEDDING_NAMES}")
    embedding = ckpt.take(present[0], (vocabulary, d))
    for name in present[1:]:
        copy = ckpt.take(name, (vocabulary, d))
        if not np.array_equal(copy, embedding):
            raise UserError(f"{name} differs from {present[0]}: untied embeddings are not "
                            "supported (Translator ties source, target and output)")
    assign(model.backbone.token_embedding.embeddings, embedding, present[0])
    bias = (ckpt.take("final_logits_bias", (1, vocabulary))[0]
            if "final_logits_bias" in ckpt else np.zeros((vocabulary,), "float32"))
    assign(model.logits_bias, bias, "final_logits_bias")


def _check_position_tables(ckpt: Checkpoint, model: Translator, d: int) -> None:
    """Takes the checkpoint's sinusoid tables, if any, after checking them against ours."""
    for side in ("encoder", "decoder"):
        name = f"model.{side}.embed_positions.weight"
        if name in ckpt:
            table = ckpt.tensors[name]
            if table.ndim != 2 or table.shape[1] != d:
                raise UserError(f"checkpoint tensor {name!r} has shape {tuple(table.shape)}, "
                                f"but the Marian configuration expects (positions, {d})")
            ours = np.asarray(sinusoidal_position_encoding(
                table.shape[0], d, layout=model.position_layout))
            error = float(np.max(np.abs(ours - table)))
            if error > _POSITION_TOLERANCE:
                raise UserError(f"{name} is not the concatenated sinusoid table of our "
                                f"position encoding (max difference {error:.3g})")
            ckpt.take(name)


def _set_blocks(ckpt: Checkpoint, model: Translator, d: int, ffn: int) -> None:
    """Assigns every encoder and decoder block's attention, norms and feed-forward network."""
    for i, block in enumerate(model.backbone.encoder_blocks):
        prefix = f"model.encoder.layers.{i}"
        set_attention(block.self_attention, _attention(ckpt, f"{prefix}.self_attn", d),
                      f"{prefix}.self_attn")
        _norm(ckpt, block.self_attention_norm, f"{prefix}.self_attn_layer_norm", d)
        _feed_forward(ckpt, block, prefix, d, ffn)
    for i, block in enumerate(model.backbone.decoder_blocks):
        prefix = f"model.decoder.layers.{i}"
        set_attention(block.self_attention, _attention(ckpt, f"{prefix}.self_attn", d),
                      f"{prefix}.self_attn")
        _norm(ckpt, block.self_attention_norm, f"{prefix}.self_attn_layer_norm", d)
        set_attention(block.cross_attention, _attention(ckpt, f"{prefix}.encoder_attn", d),
                      f"{prefix}.encoder_attn")
        _norm(ckpt, block.cross_attention_norm, f"{prefix}.encoder_attn_layer_norm", d)
        _feed_forward(ckpt, block, prefix, d, ffn)


def translator_from_marian(state_dict_or_path: Any, config: Any = None,
                           **overrides: Any) -> Translator:
    """A `Translator` holding a Hugging Face `MarianMTModel` (OPUS-MT) checkpoint.

    Args:
        state_dict_or_path: the model's tensors (`model.state_dict()` or a dict of NumPy
            arrays), a `.safetensors` file, or a directory with `model.safetensors` and
            `config.json`. A directory that also holds OPUS-MT's `source.spm`, `target.spm`
            and `vocab.json` gives the model its `MarianTokenizer`.
        config: a `transformers.MarianConfig` or the dict of its `config.json`; read from
            the checkpoint's directory when None.
        **overrides: other `Translator` arguments (`tokenizer`, `max_target_length`,
            `name`, `dtype`, `suppressed_token_ids`, `force_end_at_max_length`, ...).

    Returns:
        A built `Translator` (without a tokenizer unless `tokenizer=` is given). Its
        teacher-forced logits equal the reference model's (`final_logits_bias` included), and
        greedy search (`search(ids, beam_size=1, max_length=n)`) gives the ids of
        `generate(ids, attention_mask=ids != pad, num_beams=1, do_sample=False,
        max_new_tokens=n, bad_words_ids=[[pad]])` without the leading start id (beam search
        scores hypotheses as our `beam_search` does, which differs from Transformers'
        length penalty).

    Raises:
        ValueError: for a tensor whose shape does not fit the configuration (naming the
            tensor and both shapes), a missing or unused tensor, tied embeddings that
            differ, or an unsupported configuration (separate encoder and decoder
            vocabularies, encoder and decoder of different widths, odd `d_model`).
    """
    config = load_config(config, state_dict_or_path)
    if "tokenizer" not in overrides and isinstance(state_dict_or_path, (str, os.PathLike)):
        tokenizer = _folder_tokenizer(Path(state_dict_or_path))
        if tokenizer is not None:
            overrides["tokenizer"] = tokenizer
    ckpt = Checkpoint(load_tensors(state_dict_or_path), "Marian")
    arguments = _translator_arguments(config)
    ckpt.check_sizes(config_name(config), {
        "vocab_size": arguments["vocabulary_size"], "d_model": arguments["hidden_dim"],
        "encoder_ffn_dim": arguments["intermediate_dim"]}, {
        "encoder_layers": arguments["num_encoder_layers"],
        "decoder_layers": arguments["num_decoder_layers"]})
    model = Translator(**{**arguments, **overrides})
    model.ensure_built()
    d, ffn = arguments["hidden_dim"], arguments["intermediate_dim"]
    _set_embeddings(ckpt, model, arguments["vocabulary_size"], d)
    _check_position_tables(ckpt, model, d)
    _set_blocks(ckpt, model, d, ffn)
    ckpt.check_all_used()
    return model
