"""The Vision Transformer (Dosovitskiy et al., 2021, "An Image is Worth 16x16 Words").

Eq. (1)-(4) of the paper, top to bottom in `VisionTransformer._forward`:

    z_0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos          patches, class token, positions
    z'_l = MSA(LN(z_{l-1})) + z_{l-1}                        pre-norm encoder blocks
    z_l = MLP(LN(z'_l)) + z'_l                               (l = 1 .. L)
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

Preprocessing is inside the model: images of any size with values 0..255 (uint8 or float)
are resized to `image_size` (bilinear, antialiased; skipped when they already have that size)
and rescaled to [-1, 1] (x / 127.5 - 1, the value range of the original ViT checkpoints).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import keras
from keras import ops

from zoo.layers.class_token import ClassToken
from zoo.layers.convolutional_stem import ConvolutionalStem
from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.patch_embedding import PatchEmbedding
from zoo.layers.position_embedding import PositionEmbedding
from zoo.layers.transformer_encoder import TransformerEncoderBlock, head_size
from zoo.layers.validation import image_size_pair, positive_int
from zoo.training.errors import UserError
from zoo.models.vit import architectures as _vit_architectures  # noqa: F401  (registers them)
from zoo.models.architectures import architecture_config, architectures, load_preset
from zoo.models.lora import VisionTransformerLora
from zoo.models.argument_bounds import check_class_names, check_vit_size
from zoo.models.vit.fitting import VisionTransformerFitting
from zoo.models.vit.inference import VisionTransformerInference
from zoo.models.vit.surgery import VisionTransformerSurgery, check_pruned_heads

POOLINGS = ("cls", "gap")


def _check_arguments(pooling: str, distillation_token: bool, distillation_head: bool,
                     class_names: Sequence[str] | None, **positive: int) -> None:
    """Raises a UserError for `VisionTransformer` arguments out of range or at odds with each
    other; `positive` holds those that must be positive ints (`num_classes` among them)."""
    for what, value in positive.items():
        positive_int(value, what)
    if pooling not in POOLINGS:
        raise UserError(f"pooling must be one of {POOLINGS}; got {pooling!r}")
    if distillation_token and pooling != "cls":
        raise UserError(f"a distillation token needs pooling='cls'; got {pooling!r}")
    if distillation_head and not distillation_token:
        raise UserError("distillation_head=True needs distillation_token=True")
    check_class_names(class_names, positive["num_classes"])


@keras.saving.register_keras_serializable(package="zoo")
class VisionTransformer(VisionTransformerFitting, VisionTransformerSurgery,
                        VisionTransformerInference, VisionTransformerLora, keras.Model):
    """An image classifier: patches, a class token, a pre-norm Transformer encoder, a head.

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

    Attributes (besides the arguments): `image_shape` `(height, width, channels)`,
    `grid_size` `(rows, cols)` of patches, `num_prefix_tokens` (1 with a class token, 2 with
    a distillation token too). With a distillation head, `head` holds both heads in one
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
        _check_arguments(
            pooling, distillation_token, distillation_head, class_names,
            patch_size=patch_size, num_classes=num_classes, hidden_dim=hidden_dim,
            num_layers=num_layers, num_heads=num_heads, intermediate_dim=intermediate_dim,
            num_channels=num_channels)
        check_vit_size((height, width), patch_size, num_classes, hidden_dim, num_layers,
                       intermediate_dim, num_channels, distillation_token, representation_size)
        self.patch_size = patch_size
        self.num_classes = num_classes
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.pooling = pooling
        self.distillation_token = bool(distillation_token)
        self.distillation_head = bool(distillation_head)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.class_names = None if class_names is None else [str(c) for c in class_names]
        self.representation_size = representation_size
        self.head_initializer = keras.initializers.get(head_initializer)
        self.include_rescaling = bool(include_rescaling)
        self.num_channels = num_channels
        self.pruned_heads = {int(b): sorted({int(h) for h in heads})
                             for b, heads in (pruned_heads or {}).items() if heads}
        check_pruned_heads(self.pruned_heads, num_layers, num_heads)
        self.num_prefix_tokens = (1 if pooling == "cls" else 0) + int(self.distillation_token)

        # Preprocessing in float32 whatever the policy: pixel values need the precision.
        self.resizing = keras.layers.Resizing(
            height, width, interpolation="bilinear", antialias=True, dtype="float32",
            name="resizing")
        self.rescaling = keras.layers.Rescaling(
            scale=1.0 / 127.5, offset=-1.0, dtype="float32", name="rescaling")
        self._create_embeddings(self._create_stem(stem_filters, stem_style))
        self._create_encoder(attention_window, global_tokens, attention_block_size,
                             query_key_norm)
        self._create_head()
        self.build((None, *self.image_shape))

    def _create_stem(self, stem_filters: Sequence[int | Sequence[int]] | None,
                     stem_style: str) -> int:
        """Creates the hybrid model's convolutional stem (or none); returns the side of the
        patches that the patch embedding cuts from the stem's feature map."""
        self.stem = self.stem_filters = None
        self.stem_style = stem_style
        if stem_filters is None:
            return self.patch_size
        self.stem = ConvolutionalStem(stem_filters, style=stem_style, dtype=self.dtype_policy,
                                      name="stem")
        self.stem_filters = list(self.stem.filters)
        if self.patch_size % self.stem.stride:
            raise UserError(
                f"patch_size {self.patch_size} is not a multiple of the stem's stride "
                f"{self.stem.stride} (2 ** len(stem_filters), stem_filters "
                f"{self.stem_filters})")
        return self.patch_size // self.stem.stride

    def _create_embeddings(self, map_patch: int) -> None:
        """Creates the patch embedding (patches of side `map_patch` on the stem's map, or on
        the image), the class and distillation tokens, and the position embedding."""
        policy = self.dtype_policy
        self.patch_embedding = PatchEmbedding(
            map_patch, self.hidden_dim, dtype=policy, name="patch_embedding")
        # The grid in image pixels; PatchEmbedding checks that the sides divide.
        self.grid_size = PatchEmbedding(self.patch_size, self.hidden_dim).grid_size(
            self.image_shape[:2])
        self.class_token = (ClassToken(dtype=policy, name="class_token")
                            if self.pooling == "cls" else None)  # "gap": none (big_vision)
        # Initialised as in DeiT's code (truncated normal, 0.02).
        self.distillation_token_layer = ClassToken(
            initializer=keras.initializers.TruncatedNormal(stddev=0.02), dtype=policy,
            name="distillation_token") if self.distillation_token else None
        self.position_embedding = PositionEmbedding(
            self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1],
            dtype=policy, name="position_embedding")
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, dtype=policy, name="embedding_dropout")

    def _create_encoder(self, attention_window: int | None, global_tokens: int,
                        attention_block_size: int | None, query_key_norm: bool) -> None:
        """Creates the encoder blocks (with the heads that pruning left) and the final norm."""
        policy = self.dtype_policy
        self.encoder_blocks = []
        for i in range(self.num_layers):
            # A block with pruned heads has fewer heads of the unpruned size.
            pruned = len(self.pruned_heads.get(i, ()))
            self.encoder_blocks.append(TransformerEncoderBlock(
                num_heads=self.num_heads - pruned, intermediate_dim=self.intermediate_dim,
                key_dim=head_size(self.hidden_dim, self.num_heads, None) if pruned else None,
                dropout=self.dropout, attention_dropout=self.attention_dropout,
                activation="gelu", normalize_first=True,
                layer_norm_epsilon=self.layer_norm_epsilon, attention_window=attention_window,
                global_tokens=global_tokens, attention_block_size=attention_block_size,
                query_key_norm=query_key_norm, dtype=policy, name=f"encoder_block_{i}"))
        # As the blocks checked and stored them.
        self.attention_window = self.encoder_blocks[0].attention_window
        self.global_tokens = self.encoder_blocks[0].global_tokens
        self.attention_block_size = self.encoder_blocks[0].attention_block_size
        self.query_key_norm = self.encoder_blocks[0].query_key_norm
        self.encoder_norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="encoder_norm")

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
        self._check_image_shape(tuple(input_shape))
        if self.built:
            return
        tokens = self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]
        sequence = (None, tokens, self.hidden_dim)
        image = (None, *self.image_shape)
        self.resizing.build((None, None, None, self.num_channels))
        self.rescaling.build(image)
        if self.stem is not None:
            self.stem.build(image)
            image = self.stem.compute_output_shape(image)
        self.patch_embedding.build(image)
        if self.distillation_token:
            self.distillation_token_layer.build((None, tokens - 2, self.hidden_dim))
        if self.class_token is not None:
            self.class_token.build((None, tokens - 1, self.hidden_dim))
        self.position_embedding.build(sequence)
        for block in self.encoder_blocks:
            block.build(sequence)
        self.encoder_norm.build(sequence)
        pooled = (None, 2) if self.distillation_head else (None,)
        features = self.hidden_dim
        if self.representation is not None:
            self.representation.build((*pooled, features))
            features = self.representation_size
        self.head.build((*pooled, features))
        self.built = True

    # ------------------------------------------------------------------ forward pass
    def _check_image_shape(self, shape: tuple) -> None:
        if len(shape) != 4 or shape[-1] != self.num_channels:
            raise UserError(f"VisionTransformer expects images of shape (batch, height, width, "
                            f"{self.num_channels}); got shape {shape}")

    def _preprocess(self, images: Any) -> Any:
        shape = tuple(images.shape)
        self._check_image_shape(shape)
        x = ops.cast(images, "float32")
        if tuple(shape[1:3]) != self.image_shape[:2]:
            x = self.resizing(x)
        return self.rescaling(x) if self.include_rescaling else x

    def _forward(self, images: Any, training: bool | None = None,
                 return_attention_scores: bool = False) -> tuple[Any, list]:
        """Logits, and each block's `(batch, heads, tokens, tokens)` weights when asked."""
        x = self._preprocess(images)
        if self.stem is not None:
            x = self.stem(x, training=training)  # (batch, height / 2**k, width / 2**k, c)
        x = self.patch_embedding(x)  # (batch, patches, hidden)
        if self.distillation_token:
            x = self.distillation_token_layer(x)  # (batch, 1 + patches, hidden)
        if self.class_token is not None:
            x = self.class_token(x)  # (batch, prefix tokens + patches, hidden)
        x = x + self.position_embedding(x)
        x = self.embedding_dropout(x, training=training)
        scores = []
        for block in self.encoder_blocks:
            if return_attention_scores:
                x, weights = block(x, return_attention_scores=True, training=training)
                scores.append(weights)
            else:
                x = block(x, training=training)
        x = self.encoder_norm(x)
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

    @staticmethod
    def architectures() -> list[str]:
        """The names `from_architecture` accepts."""
        return list(architectures("VisionTransformer"))

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
