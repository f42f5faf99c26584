"""Model surgery on a Vision Transformer: a new model with this one's weights and a new head,
at another image size (the position grid interpolated), with other training options, or
without some heads; and frozen blocks for fine-tuning.

`VisionTransformer` takes these methods from `VisionTransformerSurgery`; they change its
backbone (`zoo.models.vit.backbone.ViTBackbone`) through the classifier's config. The
`with_*` methods, `reset_classifier` and `prune_heads` leave the model they are called on
unchanged and make the new one by `from_config`, so that it saves and loads; `freeze_blocks`
and `unfreeze` change which of its layers train, in place. What every model's surgery shares is in `zoo.models.surgery`.

    model = zoo.load("vit-cifar10")
    model = model.with_new_head(3, class_names=["cat", "dog", "ship"])  # or reset_classifier
    model = model.with_image_size(64)      # a higher resolution (the paper's section 3.2)
    model.freeze_blocks(2)                 # embeddings and blocks 0-1 stay fixed
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import keras
from keras import ops

from zoo.training.errors import UserError
from zoo.layers.position_embedding import interpolate_position_embedding_2d
from zoo.layers.validation import image_size_pair, is_int, positive_int
from zoo.models.surgery import (assign_weights, copy_weights, copy_weights_outside,
                                training_option_changes, weights_outside)

if TYPE_CHECKING:
    from zoo.models.vit.model import VisionTransformer


def _is_index(value: Any, size: int) -> bool:
    return is_int(value) and 0 <= value < size


def check_pruned_heads(pruned_heads: Mapping[Any, Sequence[Any]], num_layers: int,
                       num_heads: int) -> None:
    """Raises a UserError unless `pruned_heads` names blocks and heads that exist and leaves
    each block at least one head.

    Args:
        pruned_heads: `{block_index: [head, ...]}`, heads in the original numbering.
        num_layers: the model's number of encoder blocks.
        num_heads: the unpruned number of heads per block.
    """
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


class VisionTransformerSurgery:
    """`VisionTransformer`'s methods that make a new model from this one's weights, and those
    that choose which of its layers train."""

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

        Raises:
            ValueError: a size that is not a positive int or pair, or a side that is not a
                multiple of `patch_size`; an unknown `method`.
        """
        image_size_pair(image_size, error=UserError)  # checks it
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

    def with_new_head(self, num_classes: int | None = None,
                      class_names: Sequence[str] | None = None) -> "VisionTransformer":
        """A new model with a freshly initialised head for other classes (timm's
        `reset_classifier`, keras-hub's `from_preset(..., num_classes=)`); every other weight
        is copied, and the head starts as `head_initializer` says (zeros in the paper: uniform
        predictions).

        Args:
            num_classes: the new number of classes; `len(class_names)` when None.
            class_names: their names; "class_<i>" when None.

        Returns:
            A new `VisionTransformer` (it compiles itself on its first `fit`).

        Raises:
            UserError: neither argument, `num_classes` not a positive int, or names that do
                not number `num_classes`.
        """
        if num_classes is None and class_names is None:
            raise UserError("a new head needs num_classes or class_names; got neither")
        if num_classes is None:
            num_classes = len(class_names)  # type: ignore[arg-type]
        positive_int(num_classes, "num_classes", error=UserError)
        if class_names is not None and len(class_names) != num_classes:
            raise UserError(f"{len(class_names)} class names for num_classes={num_classes}")
        config = {**self.get_config(), "num_classes": num_classes,
                  "class_names": None if class_names is None else list(class_names)}
        config.pop("name", None)
        new = type(self).from_config(config)
        copy_weights_outside(self, new, [self.head], [new.head])
        return new

    def reset_classifier(self, num_classes: int | None = None,
                         class_names: Sequence[str] | None = None) -> "VisionTransformer":
        """timm's name for `with_new_head`: a new model with a fresh head for other classes.

        Unlike timm's method, which changes the model in place, this returns a new model
        (made by `from_config`, so that it saves and loads) and leaves the model it is
        called on as it was: write `model = model.reset_classifier(10)`.

        Args:
            num_classes: the new number of classes; `len(class_names)` when None.
            class_names: their names; "class_<i>" when None.

        Returns:
            A new `VisionTransformer` whose weights, but the head's, equal this one's.

        Raises:
            UserError: as `with_new_head`.
        """
        return self.with_new_head(num_classes, class_names)

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
        check_pruned_heads(merged, self.num_layers, self.num_heads)
        model = type(self).from_config({**self.get_config(), "pruned_heads": merged})
        sources = []  # per block, the attention layer whose weights the new block takes
        for block, old in enumerate(self.encoder_blocks):
            gone = set(self.pruned_heads.get(block, []))
            remaining = [h for h in range(self.num_heads) if h not in gone]
            new = sorted(set(merged.get(block, [])) - gone)
            attention = old.self_attention
            sources.append(attention.pruned([remaining.index(h) for h in new])
                           if new else attention)
        pairs = list(zip(
            weights_outside(self, [b.self_attention for b in self.encoder_blocks]),
            weights_outside(model, [b.self_attention for b in model.encoder_blocks]),
            strict=True))
        for source, block in zip(sources, model.encoder_blocks):
            pairs += zip(source.weights, block.self_attention.weights, strict=True)
        assign_weights(pairs)
        return model

    # ------------------------------------------------------------------ what trains
    def layers_by_depth(self) -> list[list[keras.layers.Layer]]:
        """The model's layers by depth: `[embeddings, block 0, ..., block L-1, top]`.

        The embeddings are the convolutional stem (if any), the patch projection, the class
        token (and DeiT's distillation token) and the position embeddings
        (`ViTBackbone.layers_by_depth`); the top is the final LayerNorm, the pre-logits layer
        (if any) and the head. `freeze_blocks` and
        layer-wise learning-rate decay (`zoo.recipes.finetune.layer_decay_multipliers`)
        count depth in these groups.

        Returns:
            `num_layers + 2` lists of layers, from the input side.
        """
        *groups, top = self.backbone.layers_by_depth()
        top = top + ([] if self.representation is None else [self.representation])
        return [*groups, top + [self.head]]

    def freeze_blocks(self, num_blocks: int) -> "VisionTransformer":
        """Freezes the embeddings and the first `num_blocks` encoder blocks; unfreezes the rest.

        Changes this model in place. `freeze_blocks(0)` makes every layer trainable again
        (full fine-tuning, as `unfreeze()`); `freeze_blocks(num_layers)` trains only the
        final norm, the pre-logits layer and the head (a linear probe). Compile the model
        after changing what is trainable.

        Args:
            num_blocks: how many blocks, from the input side, stay fixed (0 .. num_layers).

        Returns:
            This model, for chaining: `model.freeze_blocks(2).compile(...)`.

        Raises:
            UserError: `num_blocks` is not an int in 0 .. num_layers.
        """
        if not is_int(num_blocks) or not 0 <= num_blocks <= self.num_layers:
            raise UserError(f"num_blocks must be an int in 0..{self.num_layers} (the model's "
                            f"blocks); got {num_blocks!r}")
        for depth, group in enumerate(self.layers_by_depth()):
            # Depth 0 is the embeddings: frozen together with any block.
            frozen = num_blocks > 0 and depth <= num_blocks
            for layer in group:
                layer.trainable = not frozen
        # Compiled functions captured the old set of trainable variables.
        self.train_function = self.test_function = self.predict_function = None
        return self

    def unfreeze(self) -> "VisionTransformer":
        """Makes every layer trainable again (`freeze_blocks(0)`), in place.

        Returns:
            This model, for chaining.
        """
        return self.freeze_blocks(0)
