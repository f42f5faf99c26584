"""Vision Transformer checkpoints from Hugging Face and timm into `zoo.models.vit.model.VisionTransformer`.

Both layouts are the paper's pre-norm ViT with a class token, so every tensor has a place in
our model; only the memory layout changes:

    PyTorch Linear (out, in)                  -> Dense kernel (in, out)
    attention q/k/v (heads * head_dim, d)     -> query kernel (d, heads, head_dim)
    attention output (d, heads * head_dim)    -> output kernel (heads, head_dim, d)
    patch Conv2d (D, C, p, p), NCHW images    -> Conv2D kernel (p, p, C, D), NHWC images
    position table (1, 1 + N, D)              -> (1 + N, D)
    timm's fused qkv (3 * d, d)               -> q, k, v rows in that order

Inputs: the reference models take normalised `pixel_values` in NCHW. The converted model takes
NHWC images; with `include_rescaling=False` (the default here) they are the same normalised
values (`np.transpose(pixel_values, (0, 2, 3, 1))`). Checkpoints whose image processor
normalises with mean = std = 0.5 (the original Google ViTs, timm's augreg ViTs) can instead be
built with `include_rescaling=True` and fed 0..255 images, which our model maps to [-1, 1]
exactly as such a processor does.

Example (a folder with `model.safetensors` and `config.json`, downloaded beforehand, e.g.
with `huggingface-cli download`):

    >>> from zoo.converters.hf_vit import vit_from_hf
    >>> model = vit_from_hf("vit-base-patch16-224/")         # doctest: +SKIP
    >>> model.classify(image_uint8)                          # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from zoo.converters._config import (check_heads, config_float, config_int, config_name,
                                    config_value, load_config)
from zoo.converters._tensors import (Checkpoint, assign, keras_activation, load_tensors,
                                     set_attention, set_layer_norm, set_linear)
from zoo.training.errors import UserError
from zoo.layers.validation import is_int
from zoo.models.argument_bounds import check_vit_size, distinct_class_names
from zoo.models.vit.model import VisionTransformer

# Each role of an encoder block: the Transformers 5 (in-memory) name, then the name in
# checkpoint files (and in Transformers 4), under "vit.layers.{i}." / "vit.encoder.layer.{i}.".
_HF_BLOCK_NAMES = {
    "norm1": ("layernorm_before", "layernorm_before"),
    "query": ("attention.q_proj", "attention.attention.query"),
    "key": ("attention.k_proj", "attention.attention.key"),
    "value": ("attention.v_proj", "attention.attention.value"),
    "output": ("attention.o_proj", "attention.output.dense"),
    "norm2": ("layernorm_after", "layernorm_after"),
    "fc1": ("mlp.fc1", "intermediate.dense"),
    "fc2": ("mlp.fc2", "output.dense"),
}


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _hf_sizes(config: Any) -> dict[str, int]:
    """The sizes of a Hugging Face ViT or DeiT configuration, each checked: positive
    integers, heads that divide the width, an image that is a whole number of patches.

    Raises:
        UserError: naming the file (`zoo.converters._config`), the key and the value.
    """
    sizes = {key: config_int(config, key) for key in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "patch_size")}
    sizes["num_channels"] = config_int(config, "num_channels", 3)
    check_heads(config, sizes["hidden_size"], sizes["num_attention_heads"], "hidden_size",
                "num_attention_heads")
    image_size = config_value(config, "image_size")
    sides = list(image_size) if isinstance(image_size, (list, tuple)) else [image_size] * 2
    if len(sides) != 2 or not all(isinstance(side, int) and not isinstance(side, bool)
                                  and side > 0 for side in sides):
        raise UserError(f"{config_name(config)}: image_size must be a positive integer or "
                        f"two; got {image_size!r}")
    patch = sizes["patch_size"]
    if sides[0] % patch or sides[1] % patch:
        raise UserError(f"{config_name(config)}: image_size {image_size!r} is not a whole "
                        f"number of patches of patch_size {patch}")
    sizes["height"], sizes["width"] = sides
    try:  # the head's size is its tensor's, which the file holds
        check_vit_size(tuple(sides), patch, 1, sizes["hidden_size"], sizes["num_hidden_layers"],
                       sizes["intermediate_size"], sizes["num_channels"])
    except UserError as error:
        raise UserError(f"{config_name(config)}: {error}") from None
    return sizes


def _class_names(config: Any, num_classes: int) -> list[str] | None:
    """The head's class names from `id2label`, or None (labels `class_N`) with a warning that
    names the labels dropped when the file has labels that do not fit the head's
    `num_classes` outputs (ids 0 .. num_classes - 1)."""
    id2label = config_value(config, "id2label") or {}
    if not isinstance(id2label, Mapping):
        id2label = {"?": id2label}
    names: dict[Any, str] = {}
    for key, label in id2label.items():
        try:
            names[int(key)] = str(label)
        except (TypeError, ValueError):
            names[key] = str(label)
    if set(names) == set(range(num_classes)):  # ImageNet names "crane" twice
        return distinct_class_names([names[i] for i in range(num_classes)])
    if names:
        warn_labels_dropped(f"{config_name(config)}'s id2label", names, num_classes)
    return None


def warn_labels_dropped(what: str, labels: Mapping[Any, str], num_classes: int) -> None:
    """Warns that `labels` (id -> name) do not fit a head of `num_classes` outputs: which
    ids do not fit, and every label dropped (the first ten, and how many in all)."""
    def named(keys: list) -> str:
        return ", ".join(f"{k!r}: {labels[k]!r}" for k in keys)

    misfits = [k for k in labels if not (isinstance(k, int) and 0 <= k < num_classes)]
    if misfits:
        why = (f"{named(misfits[:5])}{' ...' if len(misfits) > 5 else ''} not among ids "
               f"0..{num_classes - 1}")
    else:
        why = f"{num_classes - len(labels)} of the head's ids have no label"
    more = f", ... ({len(labels)} in all)" if len(labels) > 10 else ""
    warnings.warn(f"{what} does not fit the head's {num_classes} classes ({why}); all its "
                  f"labels are dropped ({named(list(labels)[:10])}{more}) and the classes "
                  f"are named class_0 ... class_{num_classes - 1}", stacklevel=3)


def _load_block(block: Any, get: Any, hidden: int, intermediate: int, qkv_bias: bool,
                name: str) -> None:
    """Writes one encoder block from `get(role, suffix, shape)` tensors."""
    set_layer_norm(block.self_attention_norm, get("norm1", "weight", (hidden,)),
                   get("norm1", "bias", (hidden,)), f"{name}.norm1")
    projections = {}
    for role in ("query", "key", "value"):
        weight = get(role, "weight", (hidden, hidden))
        bias = get(role, "bias", (hidden,)) if qkv_bias else None
        projections[role] = (weight, bias)
    projections["output"] = (get("output", "weight", (hidden, hidden)),
                             get("output", "bias", (hidden,)))
    set_attention(block.self_attention, projections, f"{name}.attention")
    set_layer_norm(block.feed_forward_norm, get("norm2", "weight", (hidden,)),
                   get("norm2", "bias", (hidden,)), f"{name}.norm2")
    ffn = block.feed_forward
    set_linear(ffn.intermediate_dense, get("fc1", "weight", (intermediate, hidden)),
               get("fc1", "bias", (intermediate,)), f"{name}.fc1")
    set_linear(ffn.output_dense, get("fc2", "weight", (hidden, intermediate)),
               get("fc2", "bias", (hidden,)), f"{name}.fc2")


def _load_stem(model: VisionTransformer, cls_token: np.ndarray, positions: np.ndarray,
               patch_weight: np.ndarray, patch_bias: np.ndarray, names: Sequence[str]) -> None:
    assign(model.backbone.class_token_layer.class_token, cls_token, names[0])
    assign(model.backbone.position_embedding.position_embeddings, positions[0], names[1])
    projection = model.backbone.patch_embedding.projection
    assign(projection.kernel, patch_weight.transpose(2, 3, 1, 0), names[2])
    assign(projection.bias, patch_bias, names[3])


def _load_head(model: VisionTransformer, ckpt: Checkpoint, norm: str, head: str, hidden: int,
               num_classes: int) -> None:
    """Writes the final LayerNorm (`{norm}.weight`, `.bias`) and the classifier (`{head}.*`),
    then refuses any tensor of the checkpoint that no weight took."""
    set_layer_norm(model.backbone.encoder_norm, ckpt.take(f"{norm}.weight", (hidden,)),
                   ckpt.take(f"{norm}.bias", (hidden,)), norm)
    set_linear(model.head, ckpt.take(f"{head}.weight", (num_classes, hidden)),
               ckpt.take(f"{head}.bias", (num_classes,)), head)
    ckpt.check_all_used()


def _hf_encoder(state_dict_or_path: Any, config: Any, prefix: str, *, head: str,
                classifier: str, include_rescaling: bool, overrides: Mapping[str, Any],
                distillation_head: bool | None = None,
                ) -> tuple[VisionTransformer, Checkpoint, int, int]:
    """What a Hugging Face ViT and DeiT checkpoint share: the configuration read, the model
    built, and its patch projection, class token, position table and encoder blocks written
    from the tensors under `{prefix}.` (the embeddings under `{prefix}.embeddings.`, the
    blocks under `{prefix}.layers.N.` or `{prefix}.encoder.layer.N.`).

    Args:
        prefix: "vit" or "deit", the checkpoint's name for its encoder.
        head: the classifier whose rows count the classes (`{head}.weight`).
        classifier: the checkpoint classes that have that head, for the message when the
            checkpoint has none.
        include_rescaling, overrides: as for `vit_from_hf`.
        distillation_head: None for a ViT; for a DeiT (a distillation token too, so the
            position table has one row more), whether that token has its own head.

    Returns:
        `(model, checkpoint, hidden, num_classes)`: the final LayerNorm, the head(s) and
        the check that every tensor was used are the caller's.
    """
    family = "ViT" if prefix == "vit" else "DeiT"
    sizes = _hf_sizes(config)
    ckpt = Checkpoint(load_tensors(state_dict_or_path), f"Hugging Face {family}")
    distilled = distillation_head is not None
    hidden, intermediate = sizes["hidden_size"], sizes["intermediate_size"]
    channels, patch = sizes["num_channels"], sizes["patch_size"]
    height, width = sizes["height"], sizes["width"]
    qkv_bias = bool(config_value(config, "qkv_bias", True))
    hidden_act = config_value(config, "hidden_act", "gelu")
    if keras_activation(hidden_act, family) != "gelu":
        raise UserError(f"our ViT uses GELU; this checkpoint uses {hidden_act!r}")
    if f"{head}.weight" not in ckpt:
        raise UserError(f"the checkpoint has no {head}.weight: convert a {classifier} "
                        f"checkpoint ({family}Model has no head)")
    num_classes = int(ckpt.tensors[f"{head}.weight"].shape[0])
    ckpt.check_sizes(config_name(config), {k: sizes[k] for k in (
        "hidden_size", "intermediate_size", "patch_size", "num_channels")},
        {"num_hidden_layers": sizes["num_hidden_layers"]})
    kwargs = dict(
        image_size=height if height == width else (height, width), patch_size=patch,
        num_classes=num_classes, hidden_dim=hidden, num_layers=sizes["num_hidden_layers"],
        num_heads=sizes["num_attention_heads"], intermediate_dim=intermediate,
        dropout=config_float(config, "hidden_dropout_prob", 0.0, below=1.0),
        attention_dropout=config_float(config, "attention_probs_dropout_prob", 0.0, below=1.0),
        layer_norm_epsilon=config_float(config, "layer_norm_eps", 1e-12),
        class_names=_class_names(config, num_classes), include_rescaling=include_rescaling,
        num_channels=channels)
    if distilled:
        kwargs.update(distillation_token=True, distillation_head=distillation_head)
    model = VisionTransformer(**{**kwargs, **overrides})

    tokens = (2 if distilled else 1) + (height // patch) * (width // patch)
    names = (f"{prefix}.embeddings.cls_token", f"{prefix}.embeddings.position_embeddings",
             f"{prefix}.embeddings.patch_embeddings.projection.weight",
             f"{prefix}.embeddings.patch_embeddings.projection.bias")
    _load_stem(model, ckpt.take(names[0], (1, 1, hidden)),
               ckpt.take(names[1], (1, tokens, hidden)),
               ckpt.take(names[2], (hidden, channels, patch, patch)),
               ckpt.take(names[3], (hidden,)), names)
    if distilled:
        assign(model.backbone.distillation_token_layer.class_token,
               ckpt.take(f"{prefix}.embeddings.distillation_token", (1, 1, hidden)),
               f"{prefix}.embeddings.distillation_token")
    for i, block in enumerate(model.backbone.encoder_blocks):
        prefixes = (f"{prefix}.layers.{i}.", f"{prefix}.encoder.layer.{i}.")

        def get(role: str, suffix: str, shape: tuple) -> np.ndarray:
            return ckpt.take_any(
                [p + n + "." + suffix for p, n in zip(prefixes, _HF_BLOCK_NAMES[role])], shape)

        _load_block(block, get, hidden, intermediate, qkv_bias, f"{prefix}.layers.{i}")
    return model, ckpt, hidden, num_classes


def vit_from_hf(state_dict_or_path: Any, config: Any = None, *,
                include_rescaling: bool = False, **overrides: Any) -> VisionTransformer:
    """A `VisionTransformer` holding a Hugging Face `ViTForImageClassification` checkpoint.

    Args:
        state_dict_or_path: the model's tensors (`model.state_dict()`, or any dict of NumPy
            arrays, in the Transformers 5 names or the names of checkpoint files), a
            `.safetensors` file, or a directory with `model.safetensors` and `config.json`.
        config: a `transformers.ViTConfig` or the dict of its `config.json`; read from the
            checkpoint's directory when None.
        include_rescaling: build the model to take 0..255 images (mapped to [-1, 1]); False
            (the default) for inputs normalised as the reference model's `pixel_values`.
        **overrides: other `VisionTransformer` arguments (e.g. `name`, `dtype`,
            `class_names`).

    Returns:
        A built `VisionTransformer` whose logits for NHWC images equal the reference
        model's for the same NCHW `pixel_values`.

    Raises:
        ValueError: for a tensor whose shape does not fit the configuration (the message
            names the tensor and both shapes), a missing tensor, a tensor left unused (an
            unsupported variant), or an unsupported configuration.
    """
    config = load_config(config, state_dict_or_path)
    model, ckpt, hidden, num_classes = _hf_encoder(
        state_dict_or_path, config, "vit", head="classifier",
        classifier="ViTForImageClassification", include_rescaling=include_rescaling,
        overrides=overrides)
    _load_head(model, ckpt, "vit.layernorm", "classifier", hidden, num_classes)
    return model


def vit_from_timm(state_dict_or_path: Any, num_heads: int, *,
                  image_size: int | tuple[int, int] | None = None,
                  layer_norm_epsilon: float = 1e-6, class_names: Sequence[str] | None = None,
                  include_rescaling: bool = False, **overrides: Any) -> VisionTransformer:
    """A `VisionTransformer` holding a timm `VisionTransformer` checkpoint.

    Supported: the classic ViT/DeiT layout with a class token, "token" pooling and a head
    (`cls_token`, `pos_embed`, `patch_embed.proj`, `blocks.N.{norm1, attn.qkv, attn.proj,
    norm2, mlp.fc1, mlp.fc2}`, `norm`, `head`). Variants with other tensors (layer scale,
    register tokens, `fc_norm` for average pooling, distillation tokens) are refused.

    The sizes are read from the tensors' shapes; a timm state dict does not record the
    number of heads, so it must be given.

    Args:
        state_dict_or_path: `model.state_dict()` (or a dict of NumPy arrays) or a
            `.safetensors` file / directory.
        num_heads: attention heads per block (e.g. 3 for ViT-Ti, 6 for ViT-S, 12 for ViT-B).
        image_size: the image side or `(height, width)`; by default the square the position
            table fits.
        layer_norm_epsilon: timm's ViTs use 1e-6.
        class_names: one name per class, if known.
        include_rescaling: as for `vit_from_hf`.
        **overrides: other `VisionTransformer` arguments.

    Returns:
        A built `VisionTransformer`.

    Raises:
        ValueError: as `vit_from_hf`.
    """
    ckpt = Checkpoint(load_tensors(state_dict_or_path), "timm ViT")
    for name in ("cls_token", "pos_embed", "patch_embed.proj.weight", "head.weight"):
        if name not in ckpt:
            raise UserError(f"the timm ViT checkpoint has no tensor {name!r} (only ViTs with "
                            "a class token and a classification head are supported)")
    if ckpt.tensors["patch_embed.proj.weight"].ndim != 4:
        raise UserError(f"the timm ViT checkpoint's patch_embed.proj.weight has shape "
                        f"{ckpt.tensors['patch_embed.proj.weight'].shape}, not (width, "
                        "channels, patch, patch)")
    hidden, channels, patch, patch_w = ckpt.tensors["patch_embed.proj.weight"].shape
    if patch != patch_w or not patch:
        raise UserError(f"patch_embed.proj.weight has patches {patch}x{patch_w}; only square "
                        "ones are supported")
    if not is_int(num_heads) or num_heads < 1 or hidden % num_heads:
        raise UserError(f"num_heads {num_heads!r} does not divide the timm ViT's width "
                        f"{hidden} (patch_embed.proj.weight): each head takes an equal part")
    layers = 1 + max([int(m.group(1)) for m in
                      (re.match(r"blocks\.(\d+)\.", n) for n in ckpt.names()) if m],
                     default=-1)
    if layers < 1:
        raise UserError("the timm ViT checkpoint has no blocks.N tensors")
    if "blocks.0.mlp.fc1.weight" not in ckpt:
        raise UserError("the timm ViT checkpoint has no tensor 'blocks.0.mlp.fc1.weight'")
    intermediate = int(ckpt.tensors["blocks.0.mlp.fc1.weight"].shape[0])
    num_classes = int(ckpt.tensors["head.weight"].shape[0])
    if image_size is None:
        cells = int(ckpt.tensors["pos_embed"].shape[1]) - 1
        side = math.isqrt(max(cells, 0))
        if side * side != cells:
            raise UserError(f"pos_embed has {cells + 1} rows, not a class token and a square "
                            "grid; pass image_size=(height, width)")
        image_size = side * patch
    height, width = _pair(image_size)
    tokens = 1 + (height // patch) * (width // patch)
    kwargs = dict(
        image_size=image_size, patch_size=int(patch), num_classes=num_classes,
        hidden_dim=int(hidden), num_layers=layers, num_heads=int(num_heads),
        intermediate_dim=intermediate, dropout=0.0, attention_dropout=0.0,
        layer_norm_epsilon=layer_norm_epsilon, class_names=class_names,
        include_rescaling=include_rescaling, num_channels=int(channels))
    model = VisionTransformer(**{**kwargs, **overrides})

    names = ("cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias")
    _load_stem(model, ckpt.take(names[0], (1, 1, hidden)),
               ckpt.take(names[1], (1, tokens, hidden)),
               ckpt.take(names[2], (hidden, channels, patch, patch)),
               ckpt.take(names[3], (hidden,)), names)
    timm_names = {"norm1": "norm1", "output": "attn.proj", "norm2": "norm2",
                  "fc1": "mlp.fc1", "fc2": "mlp.fc2"}
    for i, block in enumerate(model.backbone.encoder_blocks):
        prefix = f"blocks.{i}."
        qkv_weight = ckpt.take(prefix + "attn.qkv.weight", (3 * hidden, hidden))
        qkv_bias = (ckpt.take(prefix + "attn.qkv.bias", (3 * hidden,))
                    if prefix + "attn.qkv.bias" in ckpt else None)
        split = {"query": 0, "key": 1, "value": 2}

        def get(role: str, suffix: str, shape: tuple) -> np.ndarray:
            if role in split:  # rows [q; k; v] of the fused projection
                rows = slice(split[role] * hidden, (split[role] + 1) * hidden)
                return (qkv_weight if suffix == "weight" else qkv_bias)[rows]
            return ckpt.take(prefix + timm_names[role] + "." + suffix, shape)

        _load_block(block, get, int(hidden), intermediate, qkv_bias is not None,
                    f"blocks.{i}")
    _load_head(model, ckpt, "norm", "head", hidden, num_classes)
    return model


def deit_from_hf(state_dict_or_path: Any, config: Mapping[str, Any], *,
                 include_rescaling: bool = False, **overrides: Any) -> VisionTransformer:
    """A `VisionTransformer` with a distillation token holding a Hugging Face DeiT.

    A DeiT checkpoint is a ViT checkpoint (`zoo.converters.hf_vit.vit_from_hf`) under
    "deit." instead of "vit.", with `deit.embeddings.distillation_token`, a position table
    over [class, distillation, patches], and its heads: `classifier` on the class token
    (DeiTForImageClassification), or `cls_classifier` and `distillation_classifier`, whose
    logits are averaged (DeiTForImageClassificationWithTeacher), which `config.json`'s
    architecture says.

    Args:
        state_dict_or_path: the tensors (in the names of checkpoint files or Transformers
            5's), or a `.safetensors` file or folder.
        config: the parsed `config.json`.
        include_rescaling: as for `vit_from_hf`.
        **overrides: other `VisionTransformer` arguments.

    Raises:
        ValueError: a missing, misshapen or unused tensor, or an unsupported configuration.
    """
    teacher = "DeiTForImageClassificationWithTeacher" in (
        config_value(config, "architectures") or [])
    heads = ("cls_classifier", "distillation_classifier") if teacher else ("classifier",)
    model, ckpt, hidden, num_classes = _hf_encoder(
        state_dict_or_path, config, "deit", head=heads[0],
        classifier="DeiTForImageClassification[WithTeacher]",
        include_rescaling=include_rescaling, overrides=overrides, distillation_head=teacher)
    set_layer_norm(model.backbone.encoder_norm, ckpt.take("deit.layernorm.weight", (hidden,)),
                   ckpt.take("deit.layernorm.bias", (hidden,)), "deit.layernorm")
    weights = [ckpt.take(f"{head}.weight", (num_classes, hidden)) for head in heads]
    biases = [ckpt.take(f"{head}.bias", (num_classes,)) for head in heads]
    if teacher:  # one kernel (2, hidden, classes): the class token's head, then the other
        assign(model.head.kernel, np.stack([w.T for w in weights]), " and ".join(heads))
        assign(model.head.bias, np.stack(biases), " and ".join(heads))
    else:
        set_linear(model.head, weights[0], biases[0], heads[0])
    ckpt.check_all_used()
    return model
