"""Hugging Face `VisionEncoderDecoderModel` checkpoints (a ViT encoder, a GPT-2 decoder with
cross-attention: nlpconnect's vit-gpt2 captioner) into `ImageCaptioner`.

`config.json` holds the two halves' configs (`encoder`, `decoder`) and the generation's
tokens; the tensors are the halves' own under three prefixes:

    encoder.embeddings.*, encoder.encoder.layer.N.*, encoder.layernorm.*   -> ViTBackbone
        (as `zoo.converters.hf_vit`; `encoder.pooler.*` is not read by the decoder: dropped)
    decoder.transformer.*, decoder.lm_head.weight (tied)                   -> GPT2Backbone
        (as `zoo.converters.gpt2`, with the cross-attention of `add_cross_attention`)
    enc_to_dec_proj.weight, .bias   where the encoder's width is not the decoder's
                                    -> the captioner's encoder_projection

Both halves' configs are checked against the tensors' shapes before anything is built.

Example (a folder with `model.safetensors`, `config.json`, `vocab.json`, `merges.txt`):

    >>> from zoo.converters.vision_encoder_decoder import captioner_from_hf
    >>> captioner = captioner_from_hf("vit-gpt2-image-captioning/")     # doctest: +SKIP
    >>> captioner.caption(image_uint8, beam_size=4)                        # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from zoo.converters._config import (ConfigFile, config_float, config_name, config_value,
                                    load_config)
from zoo.converters._tensors import (Checkpoint, assign, keras_activation, load_tensors,
                                     set_layer_norm, set_linear)
from zoo.converters.gpt2 import assign_gpt2_weights, gpt2_backbone_config, gpt2_checkpoint
from zoo.converters.hf_vit import _HF_BLOCK_NAMES, _hf_sizes, _load_block
from zoo.training.errors import UserError

_HALVES = ("encoder.", "decoder.", "enc_to_dec_proj.")


def _half_config(config: Any, half: str, model_type: str) -> Any:
    """The `encoder` or `decoder` sub-config, checked to be of `model_type`; a file's
    sub-config keeps its path for messages."""
    sub = config_value(config, half)
    if sub is None:
        raise UserError(f"{config_name(config)} has no {half} config: not a "
                        "VisionEncoderDecoderModel")
    found = config_value(sub, "model_type")
    if found != model_type:
        raise UserError(f"{config_name(config)}: the {half} is {found!r}; only a ViT encoder "
                        "with a GPT-2 decoder (vit, gpt2) is supported")
    if isinstance(sub, Mapping):
        label = f"{config_name(config)} ({half})"
        sub = ConfigFile(sub, label)
    return sub


def _split_halves(tensors: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    halves: dict[str, dict[str, Any]] = {prefix: {} for prefix in _HALVES}
    for name, value in tensors.items():
        prefix = next((p for p in _HALVES if name.startswith(p)), None)
        if prefix is None:
            raise UserError(f"the VisionEncoderDecoderModel checkpoint holds tensor {name!r}, "
                            "of neither its encoder nor its decoder")
        halves[prefix][name[len(prefix):]] = value
    return halves


def vit_backbone_from_hf(tensors: Mapping[str, Any], config: Any, **overrides: Any) -> Any:
    """A `ViTBackbone` holding a Hugging Face `ViTModel`'s tensors (names without `vit.`:
    `embeddings.*`, `encoder.layer.N.*` or `layers.N.*`, `layernorm.*`; the pooler's are
    dropped, unused).

    Raises:
        UserError: a bad config, a missing, misshapen or unused tensor.
    """
    from zoo.models.vit.backbone import ViTBackbone

    sizes = _hf_sizes(config)
    ckpt = Checkpoint(tensors, "Hugging Face ViT encoder")
    hidden, intermediate = sizes["hidden_size"], sizes["intermediate_size"]
    channels, patch = sizes["num_channels"], sizes["patch_size"]
    height, width = sizes["height"], sizes["width"]
    ckpt.check_sizes(config_name(config), {k: sizes[k] for k in (
        "hidden_size", "intermediate_size", "patch_size", "num_channels")},
        {"num_hidden_layers": sizes["num_hidden_layers"]})
    hidden_act = config_value(config, "hidden_act", "gelu")
    if keras_activation(hidden_act, "ViT") != "gelu":
        raise UserError(f"our ViT uses GELU; this encoder uses {hidden_act!r}")
    encoder = ViTBackbone(**{**dict(
        image_size=height if height == width else (height, width), patch_size=patch,
        hidden_dim=hidden, num_layers=sizes["num_hidden_layers"],
        num_heads=sizes["num_attention_heads"], intermediate_dim=intermediate,
        layer_norm_epsilon=config_float(config, "layer_norm_eps", 1e-12),
        num_channels=channels), **overrides})
    tokens = 1 + (height // patch) * (width // patch)
    assign(encoder.class_token_layer.class_token,
           ckpt.take("embeddings.cls_token", (1, 1, hidden)), "embeddings.cls_token")
    assign(encoder.position_embedding.position_embeddings,
           ckpt.take("embeddings.position_embeddings", (1, tokens, hidden))[0],
           "embeddings.position_embeddings")
    projection = encoder.patch_embedding.projection
    name = "embeddings.patch_embeddings.projection"
    assign(projection.kernel, ckpt.take(f"{name}.weight", (hidden, channels, patch, patch))
           .transpose(2, 3, 1, 0), f"{name}.weight")
    assign(projection.bias, ckpt.take(f"{name}.bias", (hidden,)), f"{name}.bias")
    qkv_bias = bool(config_value(config, "qkv_bias", True))
    for i, block in enumerate(encoder.encoder_blocks):
        prefixes = (f"layers.{i}.", f"encoder.layer.{i}.")

        def get(role: str, suffix: str, shape: tuple) -> Any:
            return ckpt.take_any(
                [p + n + "." + suffix for p, n in zip(prefixes, _HF_BLOCK_NAMES[role])], shape)

        _load_block(block, get, hidden, intermediate, qkv_bias, f"encoder.layer.{i}")
    set_layer_norm(encoder.encoder_norm, ckpt.take("layernorm.weight", (hidden,)),
                   ckpt.take("layernorm.bias", (hidden,)), "layernorm")
    for pooler in ("pooler.dense.weight", "pooler.dense.bias"):
        if pooler in ckpt:  # ViTModel's pooler: the decoder reads every token, not it
            ckpt.take(pooler)
    ckpt.check_all_used()
    return encoder


def _check_tokens(config: Any, tokenizer: Any, vocabulary_size: int) -> None:
    """The captioner starts and ends captions with GPT-2's end-of-text token: refuses a
    config whose `decoder_start_token_id` is another, and a tokenizer that is not the
    decoder's."""
    start = config_value(config, "decoder_start_token_id")
    end = config_value(config, "eos_token_id", config_value(config_value(config, "decoder"),
                                                            "eos_token_id"))
    if tokenizer is not None:
        if tokenizer.vocabulary_size > vocabulary_size:
            raise UserError(f"the tokenizer has {tokenizer.vocabulary_size} pieces, more than "
                            f"the decoder's {vocabulary_size} embeddings")
        if isinstance(end, int) and end != tokenizer.end_id:
            raise UserError(f"{config_name(config)}: eos_token_id {end} is not the "
                            f"tokenizer's {tokenizer.end_token} id {tokenizer.end_id}")
        end = tokenizer.end_id
    elif end is None:
        end = vocabulary_size - 1
    if start is not None and start != end:
        raise UserError(f"{config_name(config)}: decoder_start_token_id {start!r} is not the "
                        f"end-of-text token {end!r}; only GPT-2's start (its end-of-text "
                        "token) is supported")


def captioner_from_hf(state_dict_or_path: Any, config: Any = None, tokenizer: Any = None,
                      image_scale: float | Sequence[float] = 1 / 127.5,
                      image_offset: float | Sequence[float] = -1.0,
                      sequence_length: int = 32, name: str | None = None) -> Any:
    """An `ImageCaptioner` holding a Hugging Face `VisionEncoderDecoderModel` (ViT + GPT-2),
    whose logits equal the reference model's.

    Args:
        state_dict_or_path: the tensors (a state dict, a `.safetensors` file or a folder).
        config: a `transformers.VisionEncoderDecoderConfig` or the dict of its
            `config.json`; read from the folder when None.
        tokenizer: a `zoo.text.byte_pair.BytePairTokenizer`; read from the folder's
            `vocab.json` and `merges.txt` when None and they are there.
        image_scale, image_offset: the image processor's normalisation as `x * scale +
            offset` of 0..255 pixels (a number or one per channel); by default ViT's
            mean = std = 0.5, to [-1, 1].
        sequence_length: the caption tokens `fit` reads.
        name: the model's name.

    Raises:
        UserError: a bad or contradicted config, a missing, misshapen or unused tensor.
    """
    from zoo.models.captioner.captioner import ImageCaptioner
    from zoo.models.captioner.preprocessor import CaptionerPreprocessor
    from zoo.models.causal_lm.backbone import GPT2Backbone
    from zoo.models.image_converter import ImageConverter
    from zoo.text.byte_pair import BytePairTokenizer

    config = load_config(config, state_dict_or_path)
    encoder_config = _half_config(config, "encoder", "vit")
    decoder_config = _half_config(config, "decoder", "gpt2")
    halves = _split_halves(load_tensors(state_dict_or_path))
    decoder_ckpt = gpt2_checkpoint(halves["decoder."])
    decoder_arguments = gpt2_backbone_config(decoder_config, decoder_ckpt)
    if not decoder_arguments["cross_attention"]:
        raise UserError(f"{config_name(decoder_config)}: add_cross_attention is false: the "
                        "decoder cannot read the image")
    if tokenizer is None and isinstance(state_dict_or_path, (str, os.PathLike)) and \
            os.path.isfile(os.path.join(state_dict_or_path, "vocab.json")):
        tokenizer = BytePairTokenizer.from_folder(state_dict_or_path)
    _check_tokens(config, tokenizer, decoder_arguments["vocabulary_size"])
    encoder = vit_backbone_from_hf(halves["encoder."], encoder_config)
    decoder = GPT2Backbone(**decoder_arguments)
    decoder.build()
    assign_gpt2_weights(decoder, decoder_ckpt)
    converter = ImageConverter(encoder.image_size, scale=image_scale, offset=image_offset,
                               num_channels=encoder.num_channels, owner="ImageCaptioner")
    preprocessor = CaptionerPreprocessor(converter, tokenizer, sequence_length)
    model = ImageCaptioner(encoder, decoder, preprocessor,
                           **({} if name is None else {"name": name}))
    projection = Checkpoint(halves["enc_to_dec_proj."], "Hugging Face enc_to_dec_proj")
    if model.encoder_projection is not None:
        set_linear(model.encoder_projection,
                   projection.take("weight", (decoder.hidden_dim, encoder.hidden_dim)),
                   projection.take("bias", (decoder.hidden_dim,)), "enc_to_dec_proj")
    projection.check_all_used()
    model.ensure_built()
    return model
