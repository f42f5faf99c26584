"""Hugging Face `CLIPModel` checkpoints into `zoo.models.clip.model.CLIP`.

Every tensor has a place in the zoo's towers (the memory layouts change as for the ViT,
`zoo.converters.hf_vit`):

    vision_model.embeddings.class_embedding (D,)        -> vision class token (1, 1, D)
    vision_model.embeddings.patch_embedding (D, C, p, p) -> patch kernel (p, p, C, D); CLIP's
                                                           convolution has no bias: zeros
    vision_model.embeddings.position_embedding (1+N, D) -> vision position table
    vision_model.pre_layrnorm                           -> the backbone's embedding norm
    vision_model.encoder.layers.i.*                     -> vision encoder block i
    vision_model.post_layernorm                         -> the final norm (read at the class
                                                           token, where CLIP applies it)
    text_model.embeddings.{token,position}_embedding    -> the GPT-2 backbone's embeddings
    text_model.encoder.layers.i.*                       -> text decoder block i (causal)
    text_model.final_layer_norm                         -> its final norm
    visual_projection, text_projection (E, D)           -> projection kernels (D, E)
    logit_scale ()                                      -> logit_scale

Example (a folder with `model.safetensors`, `config.json` and the tokenizer's files,
downloaded beforehand; `zoo.load("hf://openai/clip-vit-base-patch32")` does all of it):

    >>> from zoo.converters.clip import clip_from_hf
    >>> clip = clip_from_hf("clip-vit-base-patch32/")             # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zoo.converters._config import (check_heads, config_float, config_int, config_name,
                                    config_value, load_config)
from zoo.converters._tensors import (Checkpoint, assign, load_tensors, set_layer_norm,
                                     set_linear)
from zoo.converters.hf_vit import _load_block
from zoo.models.clip.backbone import CLIPBackbone
from zoo.models.clip.model import CLIP
from zoo.models.clip.preprocessor import OPENAI_MEAN, OPENAI_STD, CLIPPreprocessor
from zoo.text.clip_tokenizer import CLIPTokenizer
from zoo.training.errors import UserError

# Each role of a block -> its name under "{tower}.encoder.layers.{i}.".
_BLOCK_NAMES = {"norm1": "layer_norm1", "query": "self_attn.q_proj", "key": "self_attn.k_proj",
                "value": "self_attn.v_proj", "output": "self_attn.out_proj",
                "norm2": "layer_norm2", "fc1": "mlp.fc1", "fc2": "mlp.fc2"}
_ACTIVATIONS = ("quick_gelu", "gelu")
# Transformers before 4.31 saved these index buffers with the weights; they hold 0 .. n-1.
_POSITION_IDS = ("text_model.embeddings.position_ids", "vision_model.embeddings.position_ids")


def _tower_sizes(config: Any, keys: Sequence[str]) -> dict[str, int]:
    sizes = {key: config_int(config, key) for key in keys}
    check_heads(config, sizes["hidden_size"], sizes["num_attention_heads"], "hidden_size",
                "num_attention_heads")
    return sizes


def _sizes(config: Any) -> tuple[dict, dict, dict]:
    """The text tower's, the image tower's and the shared sizes, each checked."""
    text_config = config_value(config, "text_config") or {}
    vision_config = config_value(config, "vision_config") or {}
    common = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    text = _tower_sizes(text_config, (*common, "vocab_size", "max_position_embeddings"))
    vision = _tower_sizes(vision_config, (*common, "image_size", "patch_size"))
    vision["num_channels"] = config_int(vision_config, "num_channels", 3)
    if vision["image_size"] % vision["patch_size"]:
        raise UserError(f"{config_name(config)}: vision image_size {vision['image_size']} is "
                        f"not a whole number of patches of {vision['patch_size']}")
    shared = {"projection_dim": config_int(config, "projection_dim", 512)}
    activations = {config_value(c, "hidden_act", "quick_gelu")
                   for c in (text_config, vision_config)}
    epsilons = {config_float(c, "layer_norm_eps", 1e-5) for c in (text_config, vision_config)}
    if len(activations) != 1 or not activations <= set(_ACTIVATIONS):
        raise UserError(f"{config_name(config)}: the towers' hidden_act must be one of "
                        f"{_ACTIVATIONS}, the same in both; got {sorted(map(str, activations))}")
    if len(epsilons) != 1:
        raise UserError(f"{config_name(config)}: the towers' layer_norm_eps differ "
                        f"({sorted(epsilons)}); the zoo's CLIP has one")
    shared["activation"], shared["epsilon"] = activations.pop(), epsilons.pop()
    return text, vision, shared


def _end_token_id(config: Any, vocabulary_size: int, tokenizer: CLIPTokenizer | None) -> int:
    """The `<|endoftext|>` id: the tokenizer's, else the config's, else the vocabulary's
    last. An `eos_token_id` of 2 is the placeholder of older configs, where the reference
    reads the highest id of each text: the vocabulary's last."""
    eos = config_value(config_value(config, "text_config") or {}, "eos_token_id")
    if tokenizer is not None:
        if eos not in (None, 2, tokenizer.end_id):
            raise UserError(f"{config_name(config)}: text eos_token_id {eos} is not the "
                            f"tokenizer's <|endoftext|> id {tokenizer.end_id}")
        return tokenizer.end_id
    return vocabulary_size - 1 if eos in (None, 2) else int(eos)


def _load_tower_blocks(blocks: Sequence[Any], ckpt: Checkpoint, tower: str,
                       sizes: dict[str, int]) -> None:
    hidden, intermediate = sizes["hidden_size"], sizes["intermediate_size"]
    for i, block in enumerate(blocks):
        prefix = f"{tower}.encoder.layers.{i}."

        def get(role: str, suffix: str, shape: tuple) -> np.ndarray:
            return ckpt.take(f"{prefix}{_BLOCK_NAMES[role]}.{suffix}", shape)

        _load_block(block, get, hidden, intermediate, True, prefix.rstrip("."))


def _load_vision(backbone: CLIPBackbone, ckpt: Checkpoint, sizes: dict[str, int]) -> None:
    vision, hidden = backbone.vision, sizes["hidden_size"]
    patch, channels = sizes["patch_size"], sizes["num_channels"]
    tokens = 1 + (sizes["image_size"] // patch) ** 2
    name = "vision_model.embeddings.class_embedding"
    assign(vision.class_token_layer.class_token,
           ckpt.take(name, (hidden,)).reshape(1, 1, hidden), name)
    name = "vision_model.embeddings.patch_embedding.weight"
    projection = vision.patch_embedding.projection
    assign(projection.kernel,
           ckpt.take(name, (hidden, channels, patch, patch)).transpose(2, 3, 1, 0), name)
    assign(projection.bias, np.zeros((hidden,), "float32"), name + " (no bias: zeros)")
    name = "vision_model.embeddings.position_embedding.weight"
    assign(vision.position_embedding.position_embeddings, ckpt.take(name, (tokens, hidden)),
           name)
    for norm, layer in (("pre_layrnorm", vision.embedding_norm_layer),
                        ("post_layernorm", vision.encoder_norm)):
        set_layer_norm(layer, ckpt.take(f"vision_model.{norm}.weight", (hidden,)),
                       ckpt.take(f"vision_model.{norm}.bias", (hidden,)), f"vision_model.{norm}")
    _load_tower_blocks(vision.encoder_blocks, ckpt, "vision_model", sizes)


def _load_text(backbone: CLIPBackbone, ckpt: Checkpoint, sizes: dict[str, int]) -> None:
    text, hidden = backbone.text, sizes["hidden_size"]
    name = "text_model.embeddings.token_embedding.weight"
    assign(text.token_embedding.embeddings, ckpt.take(name, (sizes["vocab_size"], hidden)),
           name)
    name = "text_model.embeddings.position_embedding.weight"
    assign(text.position_embedding.position_embeddings,
           ckpt.take(name, (sizes["max_position_embeddings"], hidden)), name)
    _load_tower_blocks(text.decoder_blocks, ckpt, "text_model", sizes)
    set_layer_norm(text.final_norm, ckpt.take("text_model.final_layer_norm.weight", (hidden,)),
                   ckpt.take("text_model.final_layer_norm.bias", (hidden,)),
                   "text_model.final_layer_norm")


def clip_from_hf(state_dict_or_path: Any, config: Any = None, *,
                 tokenizer: CLIPTokenizer | None = None, mean: Sequence[float] = OPENAI_MEAN,
                 std: Sequence[float] = OPENAI_STD, **overrides: Any) -> CLIP:
    """A `CLIP` holding a Hugging Face `CLIPModel` checkpoint.

    Args:
        state_dict_or_path: the model's tensors (`model.state_dict()` or a dict of NumPy
            arrays), a `.safetensors` file, or a folder with `model.safetensors` and
            `config.json`.
        config: a `transformers.CLIPConfig` or the dict of its `config.json`; read from the
            checkpoint's folder when None.
        tokenizer: the checkpoint's `CLIPTokenizer` (`CLIPTokenizer.from_folder`), for
            texts; None for a model given token ids only.
        mean, std: the image processor's per-channel normalisation.
        **overrides: other `CLIPBackbone` arguments (`name`, `dtype`, `dropout`).

    Returns:
        A `CLIP` whose image and text embeddings and logits for 0..255 images at the
        model's size and packed ids equal the reference's for the same `pixel_values`
        (normalised, NCHW) and `input_ids`.

    Raises:
        UserError: a tensor whose shape does not fit the configuration (the message names
            it and both shapes), a missing tensor, a tensor left unused (an unsupported
            variant), or an unsupported configuration.
    """
    config = load_config(config, state_dict_or_path)
    text, vision, shared = _sizes(config)
    ckpt = Checkpoint(load_tensors(state_dict_or_path), "Hugging Face CLIP")
    for name in _POSITION_IDS:
        if name in ckpt:
            ckpt.take(name)
    ckpt.check_sizes(config_name(config), {
        "text_config.hidden_size": text["hidden_size"],
        "vision_config.hidden_size": vision["hidden_size"],
        "projection_dim": shared["projection_dim"]},
        {"num_hidden_layers": text["num_hidden_layers"] + vision["num_hidden_layers"]})
    if tokenizer is not None and tokenizer.vocabulary_size != text["vocab_size"]:
        raise UserError(f"the tokenizer has {tokenizer.vocabulary_size} pieces but "
                        f"{config_name(config)}'s text vocab_size is {text['vocab_size']}")
    arguments = dict(
        image_size=vision["image_size"], patch_size=vision["patch_size"],
        vision_hidden_dim=vision["hidden_size"], vision_num_layers=vision["num_hidden_layers"],
        vision_num_heads=vision["num_attention_heads"],
        vision_intermediate_dim=vision["intermediate_size"], vocabulary_size=text["vocab_size"],
        text_hidden_dim=text["hidden_size"], text_num_layers=text["num_hidden_layers"],
        text_num_heads=text["num_attention_heads"],
        text_intermediate_dim=text["intermediate_size"],
        embedding_dim=shared["projection_dim"], context_length=text["max_position_embeddings"],
        end_token_id=_end_token_id(config, text["vocab_size"], tokenizer),
        activation=shared["activation"], layer_norm_epsilon=shared["epsilon"],
        num_channels=vision["num_channels"])
    backbone = CLIPBackbone(**{**arguments, **overrides})
    _load_vision(backbone, ckpt, vision)
    _load_text(backbone, ckpt, text)
    embedding = shared["projection_dim"]
    for name, layer, width in (("visual_projection", backbone.image_projection, vision),
                               ("text_projection", backbone.text_projection, text)):
        set_linear(layer, ckpt.take(f"{name}.weight", (embedding, width["hidden_size"])), None,
                   name)
    assign(backbone.logit_scale, ckpt.take("logit_scale", ()), "logit_scale")
    ckpt.check_all_used()
    preprocessor = CLIPPreprocessor(
        vision["image_size"], mean, std, sequence_length=text["max_position_embeddings"],
        num_channels=vision["num_channels"], tokenizer=tokenizer)
    return CLIP(backbone, preprocessor)
