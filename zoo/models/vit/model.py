"""The Vision Transformer image classifier (Dosovitskiy et al., 2021, "An Image is Worth 16x16
Words"): the task of the ViT family, as keras-hub's `models/<family>/`:

    images 0..255 --ImageConverter--> pixels --ViTBackbone--> tokens --head--> logits

Eq. (1)-(3) are the backbone's (`zoo.models.vit.backbone.ViTBackbone`); eq. (4) and the head
are here, in `VisionTransformer._forward`:

    y = LN(z_L^0)                                            the class token's output
    logits = y W_head                                        (zero-initialised head)

DeiT's distillation token (Touvron et al., 2021, "Training data-efficient image transformers
& distillation through attention", section 4), with `distillation_token=True`:

    z_0 = [x_class; x_distil; x_p^1 E; ...; x_p^N E] + E_pos    a second learned token
    logits = (LN(z_L^0) W_head + LN(z_L^1) W_distil) / 2         late fusion of two heads

The paper fuses the two heads' softmax outputs; its released code (timm's
VisionTransformerDistilled) and Hugging Face's DeiTForImageClassificationWithTeacher return
the mean of their logits, as here. Hugging Face's DeiTForImageClassification has the token but
classifies from the class token alone: `distillation_head=False`.

Preprocessing is inside the model, in its `preprocessor` (`zoo.models.image_converter`):
images of any size with values 0..255 (uint8 or float) are resized to `image_size` (bilinear,
antialiased; skipped when they already have that size) and rescaled to [-1, 1] (x / 127.5 - 1,
the value range of the original ViT checkpoints).

The classifier keeps the names its backbone's layers had before the split as read-only views
(`model.encoder_blocks` is `model.backbone.encoder_blocks`); a file saved before the split
loads with `zoo.load` (`zoo.models.pre_split_files`, through `pre_split_layers`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import keras
from keras import ops

from zoo.layers.validation import image_size_pair, positive_int
from zoo.training.errors import UserError
from zoo.models.vit import architectures as _vit_architectures  # noqa: F401  (registers them)
from zoo.models.architectures import architecture_config, load_preset
from zoo.models.image_converter import ImageConverter
from zoo.models.part_views import add_part_views
from zoo.models.task import Task
from zoo.models.vit.backbone import ViTBackbone, check_sizes
from zoo.models.vit.fitting import classifier_compile_arguments
from zoo.models.argument_bounds import check_class_names, check_vit_size
from zoo.models.vit.inference import VisionTransformerInference
from zoo.models.vit.surgery import VisionTransformerSurgery

# The classifier's attribute names of its backbone's layers before the split (the paths of the
# weights in older files) -> the backbone's names; read-only views on the classifier.
_BACKBONE_LAYERS = {"patch_embedding": "patch_embedding", "stem": "stem",
                    "class_token": "class_token_layer",
                    "distillation_token_layer": "distillation_token_layer",
                    "position_embedding": "position_embedding",
                    "embedding_dropout": "embedding_dropout",
                    "encoder_blocks": "encoder_blocks", "encoder_norm": "encoder_norm"}
# The backbone's settings that the classifier shows as its own (read-only).
_BACKBONE_SETTINGS = ("patch_size", "hidden_dim", "num_layers", "num_heads", "intermediate_dim",
                      "dropout", "attention_dropout", "distillation_token",
                      "layer_norm_epsilon", "num_channels", "pruned_heads", "stem_filters",
                      "stem_style", "attention_window", "global_tokens",
                      "attention_block_size", "query_key_norm", "grid_size",
                      "num_prefix_tokens")

POOLINGS = ("cls", "gap")


def _check_arguments(pooling: str, distillation_token: bool, distillation_head: bool,
                     class_names: Sequence[str] | None, num_classes: int) -> None:
    """Raises a UserError for `VisionTransformer` arguments of the head out of range or at
    odds with each other (the backbone's sizes are `check_sizes`')."""
    positive_int(num_classes, "num_classes")
    if pooling not in POOLINGS:
        raise UserError(f"pooling must be one of {POOLINGS}; got {pooling!r}")
    if distillation_token and pooling != "cls":
        raise UserError(f"a distillation token needs pooling='cls'; got {pooling!r}")
    if distillation_head and not distillation_token:
        raise UserError("distillation_head=True needs distillation_token=True")
    check_class_names(class_names, num_classes)


@keras.saving.register_keras_serializable(package="zoo")
class VisionTransformer(VisionTransformerSurgery, VisionTransformerInference, Task):
    """An image classifier: a `ViTBackbone` (patches, a class token, a pre-norm Transformer
    encoder) under a linear head, with its `ImageConverter` as `preprocessor`.

    Args:
        image_size: side (or `(height, width)`) of the images the model computes on; inputs
            of another size are resized to it. Must be a multiple of `patch_size`.
        patch_size: side of the square patches.
        num_classes: number of logits.
        hidden_dim: token size D.
        num_layers: number of encoder blocks L.
        num_heads: attention heads per block.
        intermediate_dim: hidden width of each block's MLP.
        dropout: dropout on the embeddings and on each block's residual branches.
        attention_dropout: dropout on the attention weights.
        pooling: "cls" (the class token's output) or "gap" (the mean of the patch tokens;
            no class token is used then).
        distillation_token: DeiT's distillation token, a second learned token placed after
            the class token (needs "cls" pooling); False (the default) for the plain ViT.
        distillation_head: with a distillation token, whether a second head classifies its
            output, the logits then being the mean of both heads' (DeiT's inference);
            False: the class token alone classifies (Hugging Face's
            DeiTForImageClassification). None (the default) means `distillation_token`.
        layer_norm_epsilon: epsilon of every LayerNorm.
        class_names: one name per class for `classify`; "class_<i>" when None.
        representation_size: width of the tanh "pre-logits" layer used in the paper's
            pre-training; None (the default, and fine-tuning practice) for none.
        head_initializer: the head kernel's initializer; zeros, as in the paper.
        include_rescaling: map inputs from 0..255 to [-1, 1]; False for inputs already
            normalised.
        num_channels: channels of the input images.
        pruned_heads: `{block_index: [head, ...]}` of heads removed (by `prune_heads`), in the
            original head numbering: the attention of each listed block is built with the
            heads left (`num_heads` minus those, each of size `hidden_dim / num_heads`).
            Written by `prune_heads`, so that a pruned model saves and loads.
        stem_filters: the hybrid ViT of the paper's section 3.1: channels of stride-2 3 x 3
            convolutions (batch norm, ReLU) that run before the patch embedding (Xiao et al.,
            2021). `patch_size` stays the patch side in image pixels, so the token grid is
            the same; the patch embedding cuts the stem's feature map into
            `patch_size / 2 ** len(stem_filters)` squares (1 x 1 when they are equal).
            None (the default) for the plain ViT.
        stem_style: "strided" (the above) or "pooled": CCT's tokenizer (Hassani et al.,
            2021), stride-1 convolutions each followed by ReLU and a stride-2 max pooling,
            without batch norm; or "vgg": stages of stride-1 convolutions with batch norm and
            ReLU, each stage ended by a 2 x 2 max pooling, where a stage may be a list of
            channels (`zoo.layers.ConvolutionalStem`).
        attention_window: sliding-window self-attention (`zoo.layers.sliding_window_attention`):
            each token attends to the tokens within this many positions of it; None (the
            default) for full attention. For many patches at high resolution.
        global_tokens: with a window, how many leading tokens (the class token: 1; with a
            distillation token: 2) attend to and are attended by every token.
        attention_block_size: keys (or, with a window, queries) per block of the chunked
            attention (`zoo.layers.chunked_attention`); None for the fused dense path.
        query_key_norm: LayerNorm on every head's queries and keys (ViT-22B), against the
            attention collapse of a high learning rate (see `MultiHeadAttention`).
        **kwargs: base model arguments (`name`, `dtype`, e.g. `dtype="mixed_bfloat16"`).

    Call arguments:
        images: `(batch, height, width, num_channels)`, values 0..255 (see
            `include_rescaling`).
        training: whether dropout is active.

    Returns:
        `(batch, num_classes)` float32 logits (also under mixed precision).

    Attributes (besides the arguments): `backbone` (the `ViTBackbone`), `preprocessor` (the
    `ImageConverter`), `image_shape` `(height, width, channels)`, `grid_size` `(rows, cols)`
    of patches, `num_prefix_tokens` (1 with a class token, 2 with a distillation token too).
    With a distillation head, `head` holds both heads in one
    kernel `(2, features, num_classes)` (the class token's, then the distillation token's),
    so that `with_new_head`, `freeze_blocks` and layer-wise decay treat them as one head.

    Example:
    >>> import numpy as np
    >>> model = VisionTransformer.from_architecture("vit-cifar-tiny", num_layers=1)
    >>> tuple(model(np.zeros((2, 32, 32, 3), "uint8")).shape)
    (2, 10)
    """

    def __init__(
        self,
        image_size: int | tuple[int, int],
        patch_size: int,
        num_classes: int,
        hidden_dim: int,
        num_layers: int,
        num_heads: int,
        intermediate_dim: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        pooling: str = "cls",
        distillation_token: bool = False,
        distillation_head: bool | None = None,
        layer_norm_epsilon: float = 1e-6,
        class_names: Sequence[str] | None = None,
        representation_size: int | None = None,
        head_initializer: Any = "zeros",
        include_rescaling: bool = True,
        num_channels: int = 3,
        pruned_heads: Mapping[int | str, Sequence[int]] | None = None,
        stem_filters: Sequence[int | Sequence[int]] | None = None,
        stem_style: str = "strided",
        attention_window: int | None = None,
        global_tokens: int = 0,
        attention_block_size: int | None = None,
        query_key_norm: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        height, width = image_size_pair(image_size)
        # As given: an int for square images (what most callers pass on), else a pair.
        self.image_size = image_size if isinstance(image_size, int) else (height, width)
        self.image_shape = (height, width, num_channels)
        if distillation_head is None:
            distillation_head = distillation_token
        # The backbone's own checks, before the sizes are multiplied (`check_vit_size`).
        check_sizes(patch_size=patch_size, hidden_dim=hidden_dim, num_layers=num_layers,
                    num_heads=num_heads, intermediate_dim=intermediate_dim,
                    num_channels=num_channels)
        _check_arguments(pooling, distillation_token, distillation_head, class_names,
                         num_classes)
        check_vit_size((height, width), patch_size, num_classes, hidden_dim, num_layers,
                       intermediate_dim, num_channels, distillation_token, representation_size)
        self.num_classes = num_classes
        self.pooling = pooling
        self.distillation_head = bool(distillation_head)
        self.class_names = None if class_names is None else [str(c) for c in class_names]
        self.representation_size = representation_size
        self.head_initializer = keras.initializers.get(head_initializer)
        self.include_rescaling = bool(include_rescaling)
        self.preprocessor = ImageConverter(
            image_size, scale=1.0 / 127.5 if include_rescaling else None,
            offset=-1.0 if include_rescaling else None, num_channels=num_channels,
            owner="VisionTransformer", name="preprocessor")
        with keras.name_scope(self.name, caller=self):  # its weights' paths start with ours
            self.backbone = ViTBackbone(
                image_size, patch_size, hidden_dim, num_layers, num_heads, intermediate_dim,
                dropout=dropout, attention_dropout=attention_dropout, class_token=pooling == "cls",
                distillation_token=distillation_token, layer_norm_epsilon=layer_norm_epsilon,
                num_channels=num_channels, pruned_heads=pruned_heads, stem_filters=stem_filters,
                stem_style=stem_style, attention_window=attention_window,
                global_tokens=global_tokens, attention_block_size=attention_block_size,
                query_key_norm=query_key_norm, dtype=self.dtype_policy, name="backbone")
        self._create_head()
        self.build((None, *self.image_shape))

    def _create_head(self) -> None:
        """Creates the optional tanh pre-logits layer and the head (or both heads)."""
        self.representation = None if self.representation_size is None else keras.layers.Dense(
            self.representation_size, activation="tanh", dtype=self.dtype_policy,
            name="representation")
        # Logits in float32 under mixed precision (softmax and loss need the range).
        if self.distillation_head:
            # Both heads in one layer: kernel[0] reads the class token, kernel[1] the
            # distillation token.
            self.head = keras.layers.EinsumDense(
                "btd,tdc->btc", output_shape=(2, self.num_classes), bias_axes="tc",
                kernel_initializer=self.head_initializer, dtype="float32", name="head")
        else:
            self.head = keras.layers.Dense(
                self.num_classes, kernel_initializer=self.head_initializer, dtype="float32",
                name="head")

    def build(self, input_shape: tuple) -> None:
        # Built by the constructor: a later `build(shape)` only checks the shape (no new state).
        self.preprocessor.check_shape(tuple(input_shape))
        if self.built:
            return
        pooled = (None, 2) if self.distillation_head else (None,)
        features = self.hidden_dim
        if self.representation is not None:
            self.representation.build((*pooled, features))
            features = self.representation_size
        self.head.build((*pooled, features))
        self.built = True

    # ------------------------------------------------------------------ forward pass
    def _forward(self, images: Any, training: bool | None = None,
                 return_attention_scores: bool = False) -> tuple[Any, list]:
        """Logits, and each block's `(batch, heads, tokens, tokens)` weights when asked."""
        pixels = self.preprocessor(images)
        x, scores = self.backbone(pixels, training=training, return_attention_scores=True) \
            if return_attention_scores else (self.backbone(pixels, training=training), [])
        if self.distillation_head:
            pooled = x[:, :2]  # (batch, 2, hidden): the class and distillation tokens
        else:
            pooled = x[:, 0] if self.pooling == "cls" else ops.mean(x, axis=1)
        if self.representation is not None:
            pooled = self.representation(pooled)
        logits = self.head(pooled)
        if self.distillation_head:
            logits = ops.mean(logits, axis=1)  # DeiT's late fusion (see the module's doc)
        return logits, scores

    def call(self, images: Any, training: bool | None = None) -> Any:
        return self._forward(images, training=training)[0]

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.num_classes)

    def default_compile_arguments(self) -> dict:
        """What the classifier is compiled with on its first `fit` or `evaluate` if it was
        never compiled (`zoo.models.vit.fitting.classifier_compile_arguments`)."""
        return classifier_compile_arguments(self.num_classes)

    def pre_split_layers(self) -> list[tuple[str, Any]]:
        """The layers under their attribute names before the split, in the order the old
        constructor set them (`zoo.models.pre_split_files`)."""
        names = ["stem", "patch_embedding", "class_token", "distillation_token_layer",
                 "position_embedding", "embedding_dropout", "encoder_blocks", "encoder_norm"]
        layers = [(name, getattr(self, name)) for name in names]
        layers += [("representation", self.representation), ("head", self.head)]
        return [(name, layer) for name, layer in layers if layer is not None]

    # LoRA (zoo.models.lora): the encoder blocks' attention; the head trains too.
    def _lora_blocks(self) -> list[keras.layers.Layer]:
        return list(self.backbone.encoder_blocks)

    def _lora_trained_layers(self) -> list[keras.layers.Layer]:
        return [self.head]

    # ------------------------------------------------------------------ config, presets
    @classmethod
    def from_architecture(cls, name: str, num_classes: int | None = None,
                          **overrides: Any) -> "VisionTransformer":
        """A freshly initialised (untrained) model of a named shape (`zoo models` lists them).

        Args:
            name: an architecture name, e.g. "vit-b16-224" or "vit-cifar-tiny".
            num_classes: number of classes; `len(class_names)` when only those are given,
                else the architecture's (1000 or 10).
            **overrides: other constructor arguments that replace the architecture's (an
                unknown name or argument is a ValueError that lists the known ones).
        """
        if num_classes is None and overrides.get("class_names") is not None:
            num_classes = len(overrides["class_names"])
        if num_classes is not None:
            overrides["num_classes"] = num_classes
        model = cls(**architecture_config(cls, name, overrides))
        model.preset_name = name  # what `zoo.export(model)` names it
        return model

    @classmethod
    def from_preset(cls, name: str, num_classes: int | None = None,
                    class_names: Sequence[str] | None = None) -> "VisionTransformer":
        """A trained model: a shipped name ("vit-cifar10"), a model file or folder, a URL or
        a hub handle ("hf://google/vit-base-patch16-224"); with `num_classes` or
        `class_names` other than its own, a new head for them (`with_new_head`). As in
        keras-hub, a preset means trained weights; untrained shapes: `from_architecture`."""
        return load_preset(cls, name, num_classes=num_classes, class_names=class_names)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "num_classes": self.num_classes,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "pooling": self.pooling,
            "distillation_token": self.distillation_token,
            "distillation_head": self.distillation_head,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "class_names": None if self.class_names is None else list(self.class_names),
            "representation_size": self.representation_size,
            "head_initializer": keras.initializers.serialize(self.head_initializer),
            "include_rescaling": self.include_rescaling,
            "num_channels": self.num_channels,
            "pruned_heads": {b: list(h) for b, h in self.pruned_heads.items()},
            "stem_filters": self.stem_filters,
            "stem_style": self.stem_style,
            "attention_window": self.attention_window,
            "global_tokens": self.global_tokens,
            "attention_block_size": self.attention_block_size,
            "query_key_norm": self.query_key_norm,
        })
        return config


add_part_views(VisionTransformer, "backbone", _BACKBONE_LAYERS)
add_part_views(VisionTransformer, "backbone", _BACKBONE_SETTINGS)
