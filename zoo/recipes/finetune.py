"""Fine-tuning a pretrained ViT: layer-wise learning-rate decay, beside the model's own surgery.

The surgery is the model's (`zoo.models.vit.surgery`): a new head, another image size, frozen
blocks. What stays here is an optimizer's concern, a learning rate per depth:

    model = zoo.load("vit-cifar10")
    model = model.with_new_head(10, class_names=FASHION_MNIST_CLASSES)
    model = model.with_image_size(64)              # optional: a higher resolution (sec. 3.2)
    model.freeze_blocks(2)                         # embeddings and blocks 0-1 stay fixed
    model.compile(optimizer=adamw_no_decay_on_norms(
        1e-4, learning_rate_multipliers=layer_decay_multipliers(model, 0.75)), ...)
    model.fit(images, labels)

`replace_head(model, ...)`, `freeze_blocks(model, n)` and `encoder_groups(model)` are the
model's methods as functions (`with_new_head`, `freeze_blocks`, `layers_by_depth`), as
`zoo.models.lora` has `enable_lora(model, ...)` beside the method.

`zoo finetune vit --model NAME --data DIR` does all of this from the command line (see
`zoo.recipes.vit`); `zoo finetune translator --model NAME ...` continues training a translator
on new pairs with its own tokenizer (see `zoo.recipes.translator`).
"""

from __future__ import annotations

from typing import Sequence

import keras

from zoo.training.optimizers import relative_variable_path
from zoo.training.errors import UserError
from zoo.models.vit.model import VisionTransformer


def _require_vit(model: object) -> VisionTransformer:
    if not isinstance(model, VisionTransformer):
        raise UserError(f"expected a VisionTransformer; got {type(model).__name__}")
    return model


def replace_head(model: VisionTransformer, num_classes: int,
                 class_names: Sequence[str] | None = None) -> VisionTransformer:
    """A copy of `model` with a new, freshly initialised classification head:
    `model.with_new_head(num_classes, class_names)` (also `reset_classifier`).

    Args:
        model: the pretrained `VisionTransformer`.
        num_classes: the new number of classes.
        class_names: their names (`num_classes` of them); "class_<i>" when None.

    Returns:
        A new `VisionTransformer`; it compiles itself on its first `fit`.

    Raises:
        ValueError: `model` is no `VisionTransformer`, `num_classes` is not a positive int,
            or the class names do not number `num_classes`.
    """
    return _require_vit(model).with_new_head(num_classes, class_names)


def encoder_groups(model: VisionTransformer) -> list[list[keras.layers.Layer]]:
    """The model's layers by depth, `[embeddings, block 0, ..., block L-1, top]`:
    `model.layers_by_depth()`.

    Raises:
        ValueError: `model` is no `VisionTransformer`.
    """
    return _require_vit(model).layers_by_depth()


def freeze_blocks(model: VisionTransformer, num_blocks: int) -> VisionTransformer:
    """Freezes the embeddings and the first `num_blocks` encoder blocks and unfreezes the
    rest, in place: `model.freeze_blocks(num_blocks)` (0 unfreezes every layer).

    Args:
        model: the `VisionTransformer`, changed in place.
        num_blocks: how many blocks, from the input side, stay fixed (0 .. num_layers).

    Returns:
        The same model, for chaining.

    Raises:
        ValueError: `model` is no `VisionTransformer`, or `num_blocks` is outside
            0 .. num_layers.
    """
    return _require_vit(model).freeze_blocks(num_blocks)


def layer_decay_multipliers(model: VisionTransformer, decay: float) -> dict[str, float]:
    """Layer-wise learning-rate decay: `{variable path: decay ** depth_from_top}`.

    The head and final norm learn at the full rate; block `L-1` at `decay`, block `i` at
    `decay ** (L - i)`, and the embeddings at `decay ** (L + 1)`: layers near the input,
    which hold the most general features, change the least (BEiT, Bao et al. 2022). The
    depths are the model's `layers_by_depth()`. Pass the result as
    `learning_rate_multipliers` to `adamw_no_decay_on_norms`. Frozen layers are left out
    (the optimizer never sees their variables).

    Args:
        model: the `VisionTransformer`.
        decay: the factor per block, in (0, 1]; 1 means no decay.

    Returns:
        The multiplier of every trainable variable, by its path without the model's name.

    Raises:
        ValueError: `model` is no `VisionTransformer`, or `decay` outside (0, 1].
    """
    model = _require_vit(model)
    if not 0.0 < float(decay) <= 1.0:
        raise UserError(f"layer decay must be in (0, 1]; got {decay!r}")
    groups = model.layers_by_depth()
    top = len(groups) - 1
    multipliers = {}
    for depth, group in enumerate(groups):
        for layer in group:
            for variable in layer.trainable_weights:
                multipliers[relative_variable_path(variable)] = float(decay) ** (top - depth)
    return multipliers
