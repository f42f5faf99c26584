"""The Vision Transformer's network (Dosovitskiy et al., 2021), eq. (1)-(3): pixels to tokens.

    z_0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos          patches, class token, positions
    z'_l = MSA(LN(z_{l-1})) + z_{l-1}                        pre-norm encoder blocks
    z_l = MLP(LN(z'_l)) + z'_l                               (l = 1 .. L)
    features = LN(z_L)                                       every token, normalised

One network for every family that looks at images: the image classifier
(`zoo.models.vit.model.VisionTransformer`) reads the class token of `features` into its head;
CLIP's image tower (with `embedding_norm=True` and `activation="quick_gelu"`) and a captioner's
encoder take the same class. No head and no pixel normalisation: the family's image converter
(`zoo.models.image_converter.ImageConverter`) resizes and normalises the pixels first.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import keras

from zoo.layers.class_token import ClassToken
from zoo.layers.convolutional_stem import ConvolutionalStem
from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.patch_embedding import PatchEmbedding
from zoo.layers.position_embedding import PositionEmbedding
from zoo.layers.transformer_encoder import TransformerEncoderBlock, head_size
from zoo.layers.validation import image_size_pair, positive_int
from zoo.training.errors import UserError
from zoo.models.task import Backbone
from zoo.models.vit.surgery import check_pruned_heads


def check_sizes(**sizes: int) -> None:
    """Raises a ValueError naming the first of `sizes` (`ViTBackbone` arguments: patch_size,
    hidden_dim, num_layers, num_heads, intermediate_dim, num_channels) that is not a positive
    int; the `VisionTransformer` calls it too, before it estimates its weights' bytes."""
    for what, value in sizes.items():
        positive_int(value, what)


@keras.saving.register_keras_serializable(package="zoo")
class ViTBackbone(Backbone):
    """Patches (after an optional convolutional stem), a class token, learned positions, a
    pre-norm Transformer encoder and a final LayerNorm.

    Args:
        image_size: side (or `(height, width)`) of the images; a multiple of `patch_size`.
        patch_size: side of the square patches, in image pixels.
        hidden_dim: token size D.
        num_layers: number of encoder blocks L.
        num_heads: attention heads per block.
        intermediate_dim: hidden width of each block's MLP.
        dropout: dropout on the embeddings and on each block's residual branches.
        attention_dropout: dropout on the attention weights.
        class_token: whether a learned class token leads the sequence (False: the patches
            alone, for mean pooling).
        distillation_token: DeiT's distillation token after the class token (needs one).
        layer_norm_epsilon: epsilon of every LayerNorm.
        activation: the MLP's activation: "gelu" (ViT), "quick_gelu" (OpenAI CLIP).
        embedding_norm: a LayerNorm on the embeddings before the first block (CLIP's
            `pre_layrnorm`).
        num_channels: channels of the input images.
        pruned_heads: `{block_index: [head, ...]}` removed by `VisionTransformer.prune_heads`,
            in the original head numbering.
        stem_filters: channels of the hybrid model's convolutional stem
            (`zoo.layers.ConvolutionalStem`); None for the plain ViT.
        stem_style: the stem's "strided", "pooled" or "vgg" style.
        attention_window: sliding-window self-attention over this many positions; None for
            full attention.
        global_tokens: with a window, how many leading tokens attend to all.
        attention_block_size: queries/keys per block of the chunked attention; None for the
            fused dense path.
        query_key_norm: LayerNorm on every head's queries and keys (ViT-22B).
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        images: `(batch, height, width, num_channels)` float pixels at `image_size`,
            normalised as the checkpoint expects (the image converter's output).
        training: whether dropout is active.
        return_attention_scores: also return each block's attention weights.

    Returns:
        `(batch, tokens, hidden_dim)` features in the compute dtype: the class token (if
        any), the distillation token (if any), then the patches in row-major order; with
        `return_attention_scores`, `(features, [(batch, heads, tokens, tokens)] * num_layers)`.

    Attributes (besides the arguments): `image_shape` `(height, width, channels)`,
    `grid_size` `(rows, cols)` of patches, `num_prefix_tokens` (the tokens before the
    patches), `num_tokens`.

    Example:
    >>> import numpy as np
    >>> backbone = ViTBackbone(32, 8, hidden_dim=16, num_layers=1, num_heads=2,
    ...                        intermediate_dim=32)
    >>> tuple(backbone(np.zeros((2, 32, 32, 3), "float32")).shape)
    (2, 17, 16)
    """

    def __init__(
        self,
        image_size: int | tuple[int, int],
        patch_size: int,
        hidden_dim: int,
        num_layers: int,
        num_heads: int,
        intermediate_dim: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        class_token: bool = True,
        distillation_token: bool = False,
        layer_norm_epsilon: float = 1e-6,
        activation: str = "gelu",
        embedding_norm: bool = False,
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
        self.image_size = image_size if isinstance(image_size, int) else (height, width)
        self.image_shape = (height, width, num_channels)
        check_sizes(patch_size=patch_size, hidden_dim=hidden_dim, num_layers=num_layers,
                    num_heads=num_heads, intermediate_dim=intermediate_dim,
                    num_channels=num_channels)
        if distillation_token and not class_token:
            raise UserError("a distillation token needs a class token; got class_token=False")
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.class_token = bool(class_token)
        self.distillation_token = bool(distillation_token)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.activation = activation
        self.embedding_norm = bool(embedding_norm)
        self.num_channels = num_channels
        self.pruned_heads = {int(b): sorted({int(h) for h in heads})
                             for b, heads in (pruned_heads or {}).items() if heads}
        check_pruned_heads(self.pruned_heads, num_layers, num_heads)
        self.num_prefix_tokens = int(self.class_token) + int(self.distillation_token)
        self._create_embeddings(self._create_stem(stem_filters, stem_style))
        self._create_encoder(attention_window, global_tokens, attention_block_size,
                             query_key_norm)
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
        self.num_tokens = self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]
        self.class_token_layer = (ClassToken(dtype=policy, name="class_token")
                                  if self.class_token else None)
        # Initialised as in DeiT's code (truncated normal, 0.02).
        self.distillation_token_layer = ClassToken(
            initializer=keras.initializers.TruncatedNormal(stddev=0.02), dtype=policy,
            name="distillation_token") if self.distillation_token else None
        self.position_embedding = PositionEmbedding(
            self.num_tokens, dtype=policy, name="position_embedding")
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, dtype=policy, name="embedding_dropout")
        self.embedding_norm_layer = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy,
            name="embedding_norm") if self.embedding_norm else None

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
                activation=self.activation, normalize_first=True,
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

    def build(self, input_shape: tuple) -> None:
        # Built by the constructor: a later `build(shape)` only checks the shape.
        self.check_image_shape(tuple(input_shape))
        if self.built:
            return
        sequence = (None, self.num_tokens, self.hidden_dim)
        image = (None, *self.image_shape)
        if self.stem is not None:
            self.stem.build(image)
            image = self.stem.compute_output_shape(image)
        self.patch_embedding.build(image)
        if self.distillation_token_layer is not None:
            self.distillation_token_layer.build((None, self.num_tokens - 2, self.hidden_dim))
        if self.class_token_layer is not None:
            self.class_token_layer.build((None, self.num_tokens - 1, self.hidden_dim))
        self.position_embedding.build(sequence)
        if self.embedding_norm_layer is not None:
            self.embedding_norm_layer.build(sequence)
        for block in self.encoder_blocks:
            block.build(sequence)
        self.encoder_norm.build(sequence)
        self.built = True

    def check_image_shape(self, shape: tuple, owner: str = "ViTBackbone") -> None:
        """Raises a UserError naming `owner` unless `shape` is `(batch, height, width,
        num_channels)`."""
        if len(shape) != 4 or shape[-1] != self.num_channels:
            raise UserError(f"{owner} expects images of shape (batch, height, width, "
                            f"{self.num_channels}); got shape {shape}")

    def call(self, images: Any, training: bool | None = None,
             return_attention_scores: bool = False) -> Any:
        x = images
        if self.stem is not None:
            x = self.stem(x, training=training)  # (batch, height / 2**k, width / 2**k, c)
        x = self.patch_embedding(x)  # (batch, patches, hidden)
        if self.distillation_token_layer is not None:
            x = self.distillation_token_layer(x)  # (batch, 1 + patches, hidden)
        if self.class_token_layer is not None:
            x = self.class_token_layer(x)  # (batch, prefix tokens + patches, hidden)
        x = x + self.position_embedding(x)
        x = self.embedding_dropout(x, training=training)
        if self.embedding_norm_layer is not None:
            x = self.embedding_norm_layer(x)
        scores = []
        for block in self.encoder_blocks:
            if return_attention_scores:
                x, weights = block(x, return_attention_scores=True, training=training)
                scores.append(weights)
            else:
                x = block(x, training=training)
        x = self.encoder_norm(x)  # (batch, tokens, hidden)
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.num_tokens, self.hidden_dim)

    def layers_by_depth(self) -> list[list[keras.layers.Layer]]:
        """`[embeddings, block 0, ..., block L-1, [final norm]]`: the groups that freezing
        and layer-wise learning-rate decay count depth in."""
        embeddings = [self.patch_embedding, self.position_embedding]
        for layer in (self.stem, self.class_token_layer, self.distillation_token_layer,
                      self.embedding_norm_layer):
            if layer is not None:
                embeddings.append(layer)
        return [embeddings, *[[block] for block in self.encoder_blocks], [self.encoder_norm]]

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "class_token": self.class_token,
            "distillation_token": self.distillation_token,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "activation": self.activation,
            "embedding_norm": self.embedding_norm,
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
