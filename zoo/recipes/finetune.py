"""Fine-tuning a pretrained ViT: a new head, frozen blocks, layer-wise learning-rate decay.

    model = zoo.load("vit-cifar10")
    model = replace_head(model, num_classes=10, class_names=FASHION_MNIST_CLASSES)
    model = model.with_image_size(64)              # optional: a higher resolution (sec. 3.2)
    freeze_blocks(model, 2)                        # embeddings and blocks 0-1 stay fixed
    model.compile(optimizer=adamw_no_decay_on_norms(
        1e-4, learning_rate_multipliers=layer_decay_multipliers(model, 0.75)), ...)
    model.fit(images, labels)

`zoo finetune vit --model NAME --data DIR` does all of this from the command line (see
`zoo.recipes.vit`); `zoo finetune translator --model NAME ...` continues training a translator
on new pairs with its own tokenizer (see `zoo.recipes.translator`).
"""

from __future__ import annotations

from typing import Sequence

import keras

from zoo.training.optimizers import relative_variable_path
from zoo.errors import UserError
from zoo.models.vit.model import VisionTransformer


def _require_vit(model: object) -> VisionTransformer:
    if not isinstance(model, VisionTransformer):
        raise UserError(f"expected a VisionTransformer; got {type(model).__name__}")
    return model


def replace_head(model: VisionTransformer, num_classes: int,
                 class_names: Sequence[str] | None = None) -> VisionTransformer:
    """A copy of `model` with a new, freshly initialised classification head.

    Every other weight (embeddings, encoder blocks, the final norm and the pre-logits layer
    if any) is copied; the head is initialised as the model's `head_initializer` says (zeros
    in the paper, so the new model starts from uniform predictions).

    Args:
        model: the pretrained `VisionTransformer`.
        num_classes: the new number of classes.
        class_names: their names (`num_classes` of them); "class_<i>" when None.

    Returns:
        A new `VisionTransformer` (`VisionTransformer.with_new_head`); it compiles itself
        on its first `fit`.

    Raises:
        ValueError: `num_classes` is not a positive int, or the class names do not number
            `num_classes`.
    """
    return _require_vit(model).with_new_head(num_classes, class_names)


def encoder_groups(model: VisionTransformer) -> list[list[keras.layers.Layer]]:
    """The model's layers by depth: `[embeddings, block 0, ..., block L-1, top]`.

    The embeddings are the patch projection, the class token (and DeiT's distillation
    token) and the position embeddings;
    the top is the final LayerNorm, the pre-logits layer (if any) and the head.
    """
    model = _require_vit(model)
    embeddings = [model.patch_embedding, model.position_embedding]
    if model.stem is not None:
        embeddings.append(model.stem)
    if model.class_token is not None:
        embeddings.append(model.class_token)
    if model.distillation_token_layer is not None:
        embeddings.append(model.distillation_token_layer)
    top = [model.encoder_norm, model.head]
    if model.representation is not None:
        top.insert(1, model.representation)
    return [embeddings, *[[block] for block in model.encoder_blocks], top]


def freeze_blocks(model: VisionTransformer, num_blocks: int) -> VisionTransformer:
    """Freezes the embeddings and the first `num_blocks` encoder blocks; unfreezes the rest.

    `freeze_blocks(model, 0)` makes every layer trainable again (full fine-tuning);
    `freeze_blocks(model, model.num_layers)` trains only the final norm and the head (a
    linear probe). Compile the model after changing what is trainable.

    Args:
        model: the `VisionTransformer`, changed in place.
        num_blocks: how many blocks, from the input side, stay fixed (0 .. num_layers).

    Returns:
        The same model, for chaining.

    Raises:
        ValueError: `num_blocks` outside 0 .. num_layers.
    """
    model = _require_vit(model)
    if (isinstance(num_blocks, bool) or not isinstance(num_blocks, int)
            or not 0 <= num_blocks <= model.num_layers):
        raise UserError(f"num_blocks must be an int in 0..{model.num_layers} (the model's "
                        f"blocks); got {num_blocks!r}")
    groups = encoder_groups(model)
    for depth, group in enumerate(groups):
        # Depth 0 is the embeddings: frozen together with any block.
        frozen = num_blocks > 0 and depth <= num_blocks
        for layer in group:
            layer.trainable = not frozen
    # Compiled functions captured the old set of trainable variables.
    model.train_function = model.test_function = model.predict_function = None
    return model


def layer_decay_multipliers(model: VisionTransformer, decay: float) -> dict[str, float]:
    """Layer-wise learning-rate decay: `{variable path: decay ** depth_from_top}`.

    The head and final norm learn at the full rate; block `L-1` at `decay`, block `i` at
    `decay ** (L - i)`, and the embeddings at `decay ** (L + 1)`: layers near the input,
    which hold the most general features, change the least (BEiT, Bao et al. 2022).
    Pass the result as `learning_rate_multipliers` to `adamw_no_decay_on_norms`. Frozen
    layers are left out (the optimizer never sees their variables).

    Args:
        model: the `VisionTransformer`.
        decay: the factor per block, in (0, 1]; 1 means no decay.

    Raises:
        ValueError: `decay` outside (0, 1].
    """
    model = _require_vit(model)
    if not 0.0 < float(decay) <= 1.0:
        raise UserError(f"layer decay must be in (0, 1]; got {decay!r}")
    groups = encoder_groups(model)
    top = len(groups) - 1
    multipliers = {}
    for depth, group in enumerate(groups):
        for layer in group:
            for variable in layer.trainable_weights:
                multipliers[relative_variable_path(variable)] = float(decay) ** (top - depth)
    return multipliers
