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
import numpy as np
from keras import ops

from zoo.layers.class_token import ClassToken
from zoo.layers.convolutional_stem import ConvolutionalStem
from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.patch_embedding import PatchEmbedding
from zoo.layers.position_embedding import PositionEmbedding, interpolate_position_embedding_2d
from zoo.layers.transformer_encoder import TransformerEncoderBlock, head_size
from zoo.layers.validation import image_size_pair, is_int, positive_int
from zoo.models.vit.attention_rollout import attention_rollout as rollout_attention_maps
from zoo.errors import UserError
from zoo.models.vit.image_batch import as_image_batch
from zoo.models.vit import architectures  # noqa: F401  (registers the architectures)
from zoo.models.architectures import (
    architecture_config, architectures, copy_weights, load_preset, training_option_changes)

POOLINGS = ("cls", "gap")


def _is_index(value: Any, size: int) -> bool:
    return is_int(value) and 0 <= value < size


def _check_pruned_heads(pruned_heads: Mapping[Any, Sequence[Any]], num_layers: int,
                        num_heads: int) -> None:
    """Raises a UserError unless `pruned_heads` names blocks and heads that exist and leaves
    each block at least one head."""
    for block, heads in pruned_heads.items():
        if not _is_index(block, num_layers):
            raise UserError(
                f"block index {block!r} is out of range for {num_layers} blocks")
        bad = [h for h in heads if not _is_index(h, num_heads)]
        if bad:
            raise UserError(f"heads {bad} of block {block} are out of range for "
                            f"{num_heads} heads")
        if len(set(heads)) >= num_heads:
            raise UserError(f"cannot remove all {num_heads} heads of block {block}")


@keras.saving.register_keras_serializable(package="zoo")
class VisionTransformer(keras.Model):
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
            without batch norm (`zoo.layers.ConvolutionalStem`).
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
    so that `replace_head`, `freeze_blocks` and layer-wise decay treat them as one head.

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
        stem_filters: Sequence[int] | None = None,
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
        for what, value in (("patch_size", patch_size), ("num_classes", num_classes),
                            ("hidden_dim", hidden_dim), ("num_layers", num_layers),
                            ("num_heads", num_heads), ("intermediate_dim", intermediate_dim),
                            ("num_channels", num_channels)):
            positive_int(value, what)
        if pooling not in POOLINGS:
            raise UserError(f"pooling must be one of {POOLINGS}; got {pooling!r}")
        if distillation_head is None:
            distillation_head = distillation_token
        if distillation_token and pooling != "cls":
            raise UserError(f"a distillation token needs pooling='cls'; got {pooling!r}")
        if distillation_head and not distillation_token:
            raise UserError("distillation_head=True needs distillation_token=True")
        if class_names is not None and len(class_names) != num_classes:
            raise UserError(
                f"class_names has {len(class_names)} names but num_classes is {num_classes}")
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
        _check_pruned_heads(self.pruned_heads, num_layers, num_heads)
        self.num_prefix_tokens = (1 if pooling == "cls" else 0) + int(self.distillation_token)

        # Preprocessing in float32 whatever the policy: pixel values need the precision.
        self.resizing = keras.layers.Resizing(
            height, width, interpolation="bilinear", antialias=True, dtype="float32",
            name="resizing")
        self.rescaling = keras.layers.Rescaling(
            scale=1.0 / 127.5, offset=-1.0, dtype="float32", name="rescaling")
        policy = self.dtype_policy
        self.stem = self.stem_filters = None
        self.stem_style = stem_style
        map_patch = patch_size
        if stem_filters is not None:
            self.stem = ConvolutionalStem(stem_filters, style=stem_style, dtype=policy,
                                          name="stem")
            self.stem_filters = list(self.stem.filters)
            if patch_size % self.stem.stride:
                raise UserError(
                    f"patch_size {patch_size} is not a multiple of the stem's stride "
                    f"{self.stem.stride} (2 ** len(stem_filters), stem_filters "
                    f"{self.stem_filters})")
            map_patch = patch_size // self.stem.stride
        self.patch_embedding = PatchEmbedding(
            map_patch, hidden_dim, dtype=policy, name="patch_embedding")
        # The grid in image pixels; PatchEmbedding checks that the sides divide.
        self.grid_size = PatchEmbedding(patch_size, hidden_dim).grid_size((height, width))
        self.class_token = None  # "gap" pooling has no class token (as in big_vision)
        if pooling == "cls":
            self.class_token = ClassToken(dtype=policy, name="class_token")
        self.distillation_token_layer = None
        if self.distillation_token:
            # Initialised as in DeiT's code (truncated normal, 0.02).
            self.distillation_token_layer = ClassToken(
                initializer=keras.initializers.TruncatedNormal(stddev=0.02), dtype=policy,
                name="distillation_token")
        self.position_embedding = PositionEmbedding(
            self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1],
            dtype=policy, name="position_embedding")
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, dtype=policy, name="embedding_dropout")
        self.encoder_blocks = []
        for i in range(num_layers):
            # A block with pruned heads has fewer heads of the unpruned size.
            pruned = len(self.pruned_heads.get(i, ()))
            self.encoder_blocks.append(TransformerEncoderBlock(
                num_heads=num_heads - pruned, intermediate_dim=intermediate_dim,
                key_dim=head_size(hidden_dim, num_heads, None) if pruned else None,
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
        self.representation = None
        if representation_size is not None:
            self.representation = keras.layers.Dense(
                representation_size, activation="tanh", dtype=policy, name="representation")
        # Logits in float32 under mixed precision (softmax and loss need the range).
        if self.distillation_head:
            # Both heads in one layer: kernel[0] reads the class token, kernel[1] the
            # distillation token.
            self.head = keras.layers.EinsumDense(
                "btd,tdc->btc", output_shape=(2, num_classes), bias_axes="tc",
                kernel_initializer=self.head_initializer, dtype="float32", name="head")
        else:
            self.head = keras.layers.Dense(
                num_classes, kernel_initializer=self.head_initializer, dtype="float32",
                name="head")
        self.build((None, *self.image_shape))

    def build(self, input_shape: tuple) -> None:
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
    def _preprocess(self, images: Any) -> Any:
        shape = tuple(images.shape)
        if len(shape) != 4 or shape[-1] != self.num_channels:
            raise UserError(
                f"VisionTransformer expects images of shape (batch, height, width, "
                f"{self.num_channels}); got shape {shape}")
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

    # ------------------------------------------------------------------ inference helpers
    def classify(self, images: Any, top_k: int = 5,
                 batch_size: int = 32) -> list[list[tuple[str, float]]]:
        """The `top_k` most probable classes of each image, most probable first.

        Args:
            images: one image `(height, width, channels)` or a batch of them, uint8 or
                float, values 0..255; any size (they are resized to `image_size`).
            top_k: how many classes per image (at most `num_classes` are returned).
            batch_size: images per forward pass.

        Returns:
            One list per image (a single image gives a list of one list) of
            `(class_name, probability)` pairs.

        Raises:
            ValueError: for images of the wrong rank, channel count or dtype, or a `top_k`
                below 1.

        Example:
        >>> import numpy as np
        >>> model = VisionTransformer.from_architecture("vit-cifar-tiny", num_layers=1)
        >>> len(model.classify(np.zeros((32, 32, 3), "uint8"), top_k=3)[0])
        3
        """
        positive_int(top_k, "top_k", error=UserError)
        batch = as_image_batch(images, self.num_channels)
        logits = np.asarray(self.predict(batch, batch_size=batch_size, verbose=0), "float64")
        probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        best = np.argsort(-probabilities, axis=-1, kind="stable")[:, :top_k]
        names = self.class_names or [f"class_{i}" for i in range(self.num_classes)]
        return [[(names[i], float(row[i])) for i in order]
                for row, order in zip(probabilities, best)]

    def attention_maps(self, images: Any, batch_size: int = 32) -> list[np.ndarray]:
        """The attention weights of every encoder block.

        Args:
            images: as for `classify`.
            batch_size: images per forward pass.

        Returns:
            One float32 array per block, `(batch, heads, tokens, tokens)`, where tokens are
            the class token (with "cls" pooling), the distillation token (if any), then the
            patches in row-major order.
        """
        batch = as_image_batch(images, self.num_channels)
        chunks = [self._forward(batch[start:start + batch_size], training=False,
                                return_attention_scores=True)[1]
                  for start in range(0, len(batch), batch_size)]
        return [np.concatenate([ops.convert_to_numpy(ops.cast(chunk[layer], "float32"))
                                for chunk in chunks])
                for layer in range(self.num_layers)]

    def attention_rollout(self, images: Any, discard_ratio: float = 0.0,
                          head_fusion: str = "mean") -> np.ndarray:
        """Which patches the prediction draws on: attention rollout over all blocks.

        See `zoo.models.vit.attention_rollout.attention_rollout` (Abnar & Zuidema, 2020). With "cls"
        pooling the class token's row is read out (with a distillation token too: its own
        row is not used), with "gap" the mean of all rows.

        Args:
            images: as for `classify`.
            discard_ratio: fraction in [0, 1) of each layer's weakest fused weights to zero.
            head_fusion: "mean", "max" or "min" over heads.

        Returns:
            `(batch, grid_height, grid_width)` float32; each map is non-negative and sums
            to 1 over the patch grid.
        """
        relevance = rollout_attention_maps(
            self.attention_maps(images), num_prefix_tokens=self.num_prefix_tokens,
            discard_ratio=discard_ratio, head_fusion=head_fusion)
        return relevance.reshape(-1, *self.grid_size)

    # ------------------------------------------------------------------ model surgery
    def with_image_size(self, image_size: int | tuple[int, int],
                        method: str = "bicubic") -> "VisionTransformer":
        """A new model for another image size, with this one's weights.

        The position embeddings of the patch grid are interpolated on the 2-D grid
        (bicubic by default, as in the paper's fine-tuning at higher resolution, section
        3.2); the rows of the class and distillation tokens are kept. All other weights are
        copied unchanged.

        Args:
            image_size: the new side, or `(height, width)`; a multiple of `patch_size`.
            method: the `keras.ops.image.resize` interpolation of the position grid.

        Returns:
            A new `VisionTransformer` (not compiled).
        """
        image_size_pair(image_size)  # checks it
        return self._rebuilt({"image_size": image_size}, method)

    def with_training_options(self, *, dropout: float | None = None,
                              attention_dropout: float | None = None,
                              dtype: str | keras.DTypePolicy | None = None
                              ) -> "VisionTransformer":
        """A new model with this one's weights and other dropout rates or compute dtype.

        For fine-tuning: a model saved with dropout 0 in float32 can go on training with
        dropout and in mixed precision (`dtype="mixed_bfloat16"`: float32 variables, bfloat16
        compute). The weights are copied unchanged (as float32 variables they stay exact).

        Args:
            dropout: the new dropout rate of the embeddings and blocks (`None`: kept).
            attention_dropout: the new dropout rate of the attention weights (`None`: kept).
            dtype: the new dtype policy, e.g. `keras.config.dtype_policy()` (`None`: kept).

        Returns:
            A new `VisionTransformer` (not compiled).
        """
        return self._rebuilt(training_option_changes(dropout, attention_dropout, dtype))

    def _rebuilt(self, changes: dict[str, Any], method: str = "bicubic"
                 ) -> "VisionTransformer":
        """`from_config` with `changes`, given this model's weights (the position grid
        interpolated with `method` where the image size changed)."""
        model = type(self).from_config({**self.get_config(), **changes})
        old_table = self.position_embedding.position_embeddings

        def positions(old: Any, new: Any) -> Any:
            if old is not old_table or model.grid_size == self.grid_size:
                return None
            return interpolate_position_embedding_2d(
                ops.convert_to_tensor(old), self.grid_size, model.grid_size,
                num_prefix_tokens=self.num_prefix_tokens, method=method)

        copy_weights(self, model, positions)
        return model

    def prune_heads(self, heads_to_prune: Mapping[int, Sequence[int]]) -> "VisionTransformer":
        """A new model without the given attention heads; this one is left unchanged.

        The new model is made by `from_config` with the merged `pruned_heads` (so that it
        saves and loads), and given this model's weights: each pruned block's attention
        takes the kept heads' weights (`MultiHeadAttention.pruned`), whose outputs stay as
        they were; all other weights are copied. Heads are numbered as in the unpruned
        model; heads already pruned are skipped. Like `with_image_size`, the new model is
        not compiled: compile it before training it further.

        Args:
            heads_to_prune: `{block_index: [head, ...]}`.

        Returns:
            A new `VisionTransformer`: `model = model.prune_heads({0: [2, 5]})`.

        Raises:
            ValueError: for a block index or head out of range, or pruning every head of a
                block.
        """
        merged = {b: list(h) for b, h in self.pruned_heads.items()}
        for block, heads in heads_to_prune.items():
            merged[block] = list(heads) + merged.get(block, [])
        _check_pruned_heads(merged, self.num_layers, self.num_heads)
        model = type(self).from_config({**self.get_config(), "pruned_heads": merged})
        sources = []  # per block, the attention layer whose weights the new block takes
        for block, old in enumerate(self.encoder_blocks):
            gone = set(self.pruned_heads.get(block, []))
            remaining = [h for h in range(self.num_heads) if h not in gone]
            new = sorted(set(merged.get(block, [])) - gone)
            attention = old.self_attention
            sources.append(attention.pruned([remaining.index(h) for h in new])
                           if new else attention)
        old_attention = {id(w) for b in self.encoder_blocks for w in b.self_attention.weights}
        new_attention = {id(w) for b in model.encoder_blocks for w in b.self_attention.weights}
        pairs = list(zip([w for w in self.weights if id(w) not in old_attention],
                         [w for w in model.weights if id(w) not in new_attention]))
        for source, block in zip(sources, model.encoder_blocks):
            pairs += zip(source.weights, block.self_attention.weights)
        for old, new in pairs:
            if tuple(old.shape) != tuple(new.shape):
                raise ValueError(
                    f"cannot copy weight {old.path} of shape {tuple(old.shape)} to "
                    f"{new.path} of shape {tuple(new.shape)}")
            new.assign(ops.cast(old, new.dtype))
        return model

    # ------------------------------------------------------------------ config, presets
    @classmethod
    def from_architecture(cls, name: str, num_classes: int | None = None,
                          **overrides: Any) -> "VisionTransformer":
        """A freshly initialised (untrained) model of a named shape (see `zoo.models.vit.architectures`).

        Args:
            name: an architecture name, e.g. "vit-b16-224" or "vit-cifar-tiny".
            num_classes: number of classes; the architecture's (1000 or 10) when None.
            **overrides: other constructor arguments that replace the architecture's.

        Returns:
            A built `VisionTransformer`.

        Raises:
            ValueError: for an unknown name (the message lists the names) or an override
                that is not a constructor argument.
        """
        if num_classes is not None:
            overrides["num_classes"] = num_classes
        return cls(**architecture_config(cls, name, overrides))

    @classmethod
    def from_preset(cls, name: str) -> "VisionTransformer":
        """A trained model: a shipped name ("vit-cifar10"), a model file or folder, a URL or
        a hub handle ("hf://google/vit-base-patch16-224"). As in keras-hub, a preset means
        trained weights; untrained shapes come from `from_architecture`."""
        return load_preset(cls, name)

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
