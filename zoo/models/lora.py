"""Low-rank adaptation (LoRA) of the zoo's Transformers: train a few small factors, not every
weight (Hu et al., 2022, "LoRA: Low-Rank Adaptation of Large Language Models", eq. 3 and
section 4.1):

    h = x W  ->  h = x (W + (alpha / r) A B)      W frozen; A (in, r) and B (r, out) trained

B starts at zero, so an adapted model computes exactly what the model did before. Keras
implements the factors in `Dense.enable_lora` and `EinsumDense.enable_lora` (its `kernel`
property returns the sum above); this module chooses the layers, freezes everything else and
folds the factors back in:

    model = zoo.load("vit-cifar10")
    model = model.with_new_head(10, class_names)   # a new head first
    model.enable_lora(8)                           # query and value projections of every block
    model.compile(...); model.fit(images, labels)  # compile after enabling
    model = model.merge_lora()                     # an ordinary model: W + (alpha / r) A B

An attention projection's kernel is `(d_model, heads, head_dim)` (query, key, value) or
`(heads, head_dim, d_model)` (output); Keras factors it along its last axis: A holds
`kernel.shape[:-1] + (r,)`, B `(r, kernel.shape[-1])`. That is LoRA on the kernel as a
`(prod(shape[:-1]), shape[-1])` matrix, as keras-hub's `enable_lora` has it on the same
layers. For query, key and value that is `r * (d_model * heads + head_dim)` numbers, more than
the `r * 2 * d_model` of LoRA on a `(d_model, d_model)` matrix (PEFT's on Hugging Face's
`q_proj`): 4.1x for vit-cifar10 (d_model 384, 8 heads), 6x for ViT-B (768, 12 heads).

Every `zoo.models.task.Task` takes `enable_lora` and `merge_lora` from `LoraAdaptation`;
`VisionTransformer` and `Translator` name their blocks in `_lora_blocks`.
`enable_lora(model, ...)` and `merge_lora(model)` are the same as functions. Saving an adapted
model without merging it writes the merged model too: Keras' `Dense` and `EinsumDense` save the kernel with the
factors added (and not the factors), and the zoo's model configs do not mention LoRA. Training
checkpoints keep the factors (`zoo.training.checkpointing.lora_variables`).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import keras
from keras import ops

from zoo.layers.keras_internals import nested_layers
from zoo.training.errors import UserError
from zoo.layers.validation import positive_int

# `targets` names -> the attribute of `zoo.layers.MultiHeadAttention` that holds the projection.
PROJECTIONS = {"query": "query_dense", "key": "key_dense", "value": "value_dense",
               "output": "output_dense"}
DEFAULT_TARGETS = ("query", "value")  # the paper's choice (section 7.1) and keras-hub's


# The largest alpha taken. Common settings are alpha = r to 4 r (r up to a few hundred); an
# alpha of millions multiplies the factors' updates as much and trains to NaN.
MAX_ALPHA = 10_000.0


def _check_alpha(alpha: Any) -> float | None:
    if alpha is None:
        return None
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) \
            or not 0 < float(alpha) <= MAX_ALPHA:
        raise UserError(f"LoRA alpha must be a positive number up to {MAX_ALPHA:g} or None; "
                        f"got {alpha!r}")
    return float(alpha)


def _check_rank(rank: int, layers: Sequence[keras.layers.Layer]) -> None:
    """Refuses a rank above the smaller side of an adapted kernel seen as a matrix
    `(prod(shape[:-1]), shape[-1])`: a larger rank adds memory and no expressiveness (the
    product A B has rank at most that side)."""
    for layer in layers:
        shape = tuple(_base_kernel(layer).shape)
        limit = min(math.prod(shape[:-1]), shape[-1])
        if rank > limit:
            raise UserError(f"LoRA rank must be at most {limit} for this model (the smaller "
                            f"side of {layer.path}'s kernel {shape}); got {rank}")


def _check_targets(targets: Sequence[str]) -> tuple[str, ...]:
    names = (targets,) if isinstance(targets, str) else tuple(targets)
    unknown = [t for t in names if t not in PROJECTIONS]
    if not names or unknown:
        raise UserError(f"LoRA targets must be some of {', '.join(PROJECTIONS)}; got "
                        f"{targets!r}")
    return tuple(dict.fromkeys(names))


def _set_trainable(layer: keras.layers.Layer, value: bool) -> None:
    """`layer.trainable = value`, carried to its weights and sub-layers even where the flag
    already holds `value` (on TensorFlow, Keras skips assigning an attribute its own value)."""
    layer.trainable = not value
    layer.trainable = value


def _outside_blocks(layer: keras.layers.Layer, blocks: set[int]) -> list[keras.layers.Layer]:
    """The sub-layers of `layer` that hold none of the `blocks` (ids), descending into those
    that hold some (a task's backbone), so that freezing them leaves the blocks alone."""
    outside = []
    inside = nested_layers(layer)
    deeper = {id(x) for sub in inside for x in nested_layers(sub)}
    for sub in (sub for sub in inside if id(sub) not in deeper):  # the direct sub-layers
        if id(sub) in blocks:
            continue
        if blocks.intersection(id(x) for x in nested_layers(sub)):
            outside += _outside_blocks(sub, blocks)
        else:
            outside.append(sub)
    return outside


def _base_kernel(layer: keras.layers.Layer) -> keras.Variable:
    """The adapted layer's own kernel variable (its `kernel` property adds the factors)."""
    [kernel] = [v for v in layer.weights if v.name == "kernel"]
    return kernel


def effective_kernel(layer: keras.layers.Layer) -> Any:
    """`W + (alpha / r) A B` of a `Dense` or `EinsumDense` with LoRA enabled, computed as
    Keras' `kernel` property computes it, in the kernel variable's dtype.

    Args:
        layer: a layer whose `lora_enabled` is True.

    Returns:
        A tensor of the kernel's shape.
    """
    scale = layer.lora_alpha / layer.lora_rank
    return ops.add(_base_kernel(layer),
                   scale * ops.matmul(layer.lora_kernel_a, layer.lora_kernel_b))


class LoraAdaptation:
    """The `enable_lora` and `merge_lora` methods of a zoo model made of Transformer blocks.

    A model class that takes them says which blocks hold the projections (`_lora_blocks`),
    which layers outside them train with the factors (`_lora_trained_layers`), and how a
    blank model of its config is made (`_lora_blank_copy`).
    """

    def _lora_blocks(self) -> list[keras.layers.Layer]:
        raise UserError("LoRA adapts a VisionTransformer or a Translator; got "
                        f"{type(self).__name__}")

    def _lora_trained_layers(self) -> list[keras.layers.Layer]:
        return []

    def _lora_prepare(self) -> None:
        """Called before the factors are added (the model must be built by then)."""

    def _lora_blank_copy(self) -> keras.Model:
        return type(self).from_config(self.get_config())

    def _lora_projections(self, targets: Sequence[str], include_mlp: bool
                          ) -> list[keras.layers.Layer]:
        """The `EinsumDense` attention projections named by `targets` (of the self- and the
        cross-attention of every block), then the feed-forward `Dense` layers if asked."""
        found = []
        for block in self._lora_blocks():
            for attention in (block.self_attention, getattr(block, "cross_attention", None)):
                if attention is not None:
                    found += [getattr(attention, PROJECTIONS[t]) for t in targets]
            if include_mlp:
                found += [block.feed_forward.intermediate_dense, block.feed_forward.output_dense]
        return found

    def lora_layers(self) -> list[keras.layers.Layer]:
        """The layers of this model that hold LoRA factors (none before `enable_lora`)."""
        return [layer for layer in self._lora_projections(tuple(PROJECTIONS), True)
                if layer.lora_enabled]

    def enable_lora(self, rank: int, alpha: float | None = None,
                    targets: Sequence[str] = DEFAULT_TARGETS,
                    include_mlp: bool = False) -> keras.Model:
        """Adds trainable low-rank factors to the attention projections and freezes every
        other weight, in place (Keras' `Dense.enable_lora` / `EinsumDense.enable_lora`).

        What trains afterwards: the factors A and B of each adapted projection and, in a
        `VisionTransformer`, the classification head (a replaced head starts at zero and must
        learn; the final LayerNorm stays frozen, since a trained head absorbs any change of
        its scale and offset). In a `Translator` only the factors train: its output
        projection is its embedding matrix (tied), the largest weight of the model. The
        projections' kernels and biases, norms, embeddings and all else are frozen (layers
        outside the blocks with `trainable=False`, so that a batch norm keeps its
        statistics). Compile the model afterwards; `merge_lora` folds the factors in.

        Args:
            rank: r, the factors' inner size: a positive int.
            alpha: the factors' scale is `alpha / rank`; None (the default) means `rank`
                (a scale of 1, Keras' default).
            targets: which projections of every attention layer: some of "query", "key",
                "value", "output".
            include_mlp: also adapt both `Dense` layers of every feed-forward network.

        Returns:
            This model, for chaining.

        Raises:
            zoo.UserError: a rank that is not a positive int or exceeds a kernel's smaller
                side, an alpha that is not a positive number up to `MAX_ALPHA`, an unknown
                target, a quantized model, or a model whose LoRA is already enabled.

        Example:
        >>> import numpy as np
        >>> from zoo.models.vit.model import VisionTransformer
        >>> model = VisionTransformer.from_architecture("vit-cifar-tiny", num_layers=1)
        >>> _ = model.enable_lora(4)
        >>> sorted(v.name for v in model.trainable_weights)[:3]
        ['bias', 'kernel', 'lora_kernel_a']
        """
        rank = positive_int(rank, "LoRA rank", error=UserError)
        alpha = _check_alpha(alpha)
        targets = _check_targets(targets)
        self._lora_prepare()
        if self.lora_layers():
            raise UserError(f"LoRA is already enabled on this {type(self).__name__}; "
                            "merge_lora() it first, or start from the original model")
        adapted = self._lora_projections(targets, bool(include_mlp))
        quantized = [layer for layer in adapted if layer.quantization_mode is not None]
        if quantized:  # merge_lora adds float factors to float kernels only
            raise UserError(f"LoRA here needs float kernels; {quantized[0].path} is quantized "
                            f"({quantized[0].quantization_mode}): adapt the model before "
                            "quantizing it")
        _check_rank(rank, adapted)
        blocks = {id(block) for block in self._lora_blocks()}
        trained = self._lora_trained_layers()
        _set_trainable(self, True)  # every layer and weight, as freeze_blocks may have left them
        for layer in _outside_blocks(self, blocks):
            if all(layer is not t for t in trained):
                _set_trainable(layer, False)
        for variable in self.weights:
            variable.trainable = False
        for layer in adapted:
            layer.enable_lora(rank, lora_alpha=alpha)  # A and B trainable, the kernel not
        for layer in trained:
            _set_trainable(layer, True)
        # Compiled functions captured the old set of trainable variables.
        self.train_function = self.test_function = self.predict_function = None
        return self

    def merge_lora(self) -> keras.Model:
        """A new, ordinary model whose kernels hold the factors: `W + (alpha / r) A B`.

        The new model is made from this one's config, which names no LoRA, and given this
        model's weights, each adapted kernel replaced by the sum Keras computes. It has no
        factor variables, everything trainable, and saves, loads and exports as any model
        of its class. This model is left as it is. Not compiled.

        Returns:
            The merged model.

        Raises:
            zoo.UserError: this model has no LoRA factors.
        """
        adapted = self.lora_layers()
        if not adapted:
            raise UserError(f"this {type(self).__name__} has no LoRA factors to merge; "
                            "enable_lora(rank) adds them")
        kernels = {id(_base_kernel(layer)): effective_kernel(layer) for layer in adapted}
        factors = {id(v) for layer in adapted for v in (layer.lora_kernel_a,
                                                        layer.lora_kernel_b)}
        model = self._lora_blank_copy()
        sources = [v for v in self.weights if id(v) not in factors]
        for old, new in zip(sources, model.weights, strict=True):
            # Names, not paths: a loaded model's paths may lack the model's name.
            if old.name != new.name or tuple(old.shape) != tuple(new.shape):
                raise ValueError(f"cannot merge weight {old.path} {tuple(old.shape)} into "
                                 f"{new.path} {tuple(new.shape)}")
            new.assign(ops.cast(kernels.get(id(old), old), new.dtype))
        return model


def _require_adaptable(model: Any) -> LoraAdaptation:
    if not isinstance(model, LoraAdaptation):
        raise UserError("LoRA adapts a VisionTransformer or a Translator; got "
                        f"{type(model).__name__}")
    return model


def enable_lora(model: keras.Model, rank: int, alpha: float | None = None,
                targets: Sequence[str] = DEFAULT_TARGETS,
                include_mlp: bool = False) -> keras.Model:
    """`model.enable_lora(...)` for a `VisionTransformer` or a `Translator`: low-rank factors
    on the attention projections, every other weight frozen (the ViT's head excepted).

    Args:
        model: the model, changed in place.
        rank: the factors' inner size, a positive int.
        alpha: the factors' scale is `alpha / rank`; None means `rank`.
        targets: some of "query", "key", "value", "output".
        include_mlp: also adapt the feed-forward layers.

    Returns:
        The same model.

    Raises:
        zoo.UserError: another kind of model, or a bad value (see `LoraAdaptation.enable_lora`).
    """
    return _require_adaptable(model).enable_lora(rank, alpha, targets, include_mlp)


def merge_lora(model: keras.Model) -> keras.Model:
    """`model.merge_lora()`: a new, ordinary model with the factors folded into the kernels.

    Args:
        model: a `VisionTransformer` or `Translator` with LoRA enabled.

    Returns:
        A new model of the same class, without LoRA (not compiled).

    Raises:
        zoo.UserError: another kind of model, or one without LoRA factors.
    """
    return _require_adaptable(model).merge_lora()


def lora_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The layers of `model` that hold LoRA factors; empty for a model without LoRA or of a
    kind that the zoo does not adapt."""
    return model.lora_layers() if isinstance(model, LoraAdaptation) else []
