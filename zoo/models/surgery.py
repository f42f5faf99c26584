"""What every model's surgery shares: copying weights between two models whose shapes may
differ, the config changes of other training options, and a trained model readied for a run.

Each model's own surgery sits beside it, whose methods make a new model from this one's
weights (or change what trains) and call the pieces here:
`zoo.models.vit.surgery.VisionTransformerSurgery` (`with_new_head` / `reset_classifier`,
`with_image_size`, `with_training_options`, `prune_heads`, `freeze_blocks`, `unfreeze`) and
`zoo.models.translator.surgery.with_training_options`. A new model is
made by `from_config`, so that it saves and loads; the model a method is called on keeps its
weights.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from zoo.training.errors import UserError


def training_option_changes(dropout: float | None = None, attention_dropout: float | None = None,
                            dtype: Any = None) -> dict[str, Any]:
    """The config changes that give a trained model other dropout rates or another dtype
    policy (for `with_training_options`); `None` leaves a setting as it is.

    Args:
        dropout: the new dropout rate of the embeddings and blocks, in [0, 1).
        attention_dropout: the new dropout rate of the attention weights, in [0, 1).
        dtype: a dtype policy or its name, e.g. "mixed_bfloat16".

    Returns:
        The config entries to change (none for all-None arguments).

    Raises:
        UserError: a rate outside [0, 1), naming it.
    """
    import keras  # here, so that `zoo --help` reads the architectures without Keras

    changes: dict[str, Any] = {}
    for name, rate in (("dropout", dropout), ("attention_dropout", attention_dropout)):
        if rate is not None:
            if not 0.0 <= float(rate) < 1.0:
                raise UserError(f"{name} must lie in [0, 1); got {rate!r}")
            changes[name] = float(rate)
    if dtype is not None:
        changes["dtype"] = keras.dtype_policies.serialize(keras.dtype_policies.get(dtype))
    return changes


def assign_weights(pairs: Iterable[tuple[Any, Any]],
                   convert: Callable[[Any, Any], Any] | None = None) -> None:
    """Assigns each `old` weight to its `new` one, cast to the new one's dtype.

    Args:
        pairs: `(old, new)` variables.
        convert: optional `convert(old, new)`, returning the value for `new` to take instead
            of `old` (e.g. a position table interpolated to another grid), or None.

    Raises:
        ValueError: a weight's shape differs and `convert` gave no value for it.
    """
    from keras import ops

    for old, new in pairs:
        value = convert(old, new) if convert is not None else None
        if value is None:
            if tuple(old.shape) != tuple(new.shape):
                raise ValueError(f"cannot copy weight {old.path} of shape "
                                 f"{tuple(old.shape)} to {new.path} of shape {tuple(new.shape)}")
            value = old
        new.assign(ops.cast(value, new.dtype))


def copy_weights(source: Any, target: Any,
                 convert: Callable[[Any, Any], Any] | None = None) -> None:
    """Assigns every weight of `source` to the weight of `target` in the same position (two
    models of one architecture, built; for `with_training_options` and the like).

    Args:
        source: the model whose weights are read.
        target: the model whose weights are assigned, cast to their own dtype.
        convert: optional `convert(old, new)`, returning the value for `new` to take instead
            of `old` (e.g. a position table interpolated to another grid), or None.

    Raises:
        ValueError: the models have different numbers of weights, or a weight's shape
            differs and `convert` gave no value for it.
    """
    assign_weights(zip(source.weights, target.weights, strict=True), convert)


def weights_outside(model: Any, layers: Sequence[Any]) -> list[Any]:
    """The weights of `model` that belong to none of `layers`, in the model's order.

    With the same layers left out of two models of one architecture (a head, the attention
    of some blocks), the two lists pair up weight by weight.
    """
    inside = {id(w) for layer in layers for w in layer.weights}
    return [w for w in model.weights if id(w) not in inside]


def copy_weights_outside(source: Any, target: Any, source_layers: Sequence[Any],
                         target_layers: Sequence[Any]) -> None:
    """Assigns every weight of `source` outside `source_layers` to the weight of `target`
    outside `target_layers` in the same position (a new head: the rest is copied).

    Raises:
        ValueError: the models have different numbers of such weights, or a pair's shapes
            differ.
    """
    assign_weights(zip(weights_outside(source, source_layers),
                       weights_outside(target, target_layers), strict=True))


def in_run_options(model: Any, dropout: float | None = None) -> Any:
    """A trained model ready to train further in this run: `model` itself, or its copy
    (`with_training_options`) in the global dtype policy (a model is saved with its own,
    often float32) and with `dropout` where it is given.

    Args:
        model: a zoo model (it has `with_training_options`).
        dropout: the run's dropout rate; None keeps the model's.

    Returns:
        `model` when nothing changes, else a new model with its weights.
    """
    import keras

    policy = keras.config.dtype_policy()
    if dropout is None and model.dtype_policy.name == policy.name:
        return model
    return model.with_training_options(dropout=dropout, dtype=policy)


def in_dtype(model: Any, dtype: str) -> Any:
    """A trained model that runs under the dtype policy `dtype` (e.g. "mixed_bfloat16":
    float32 weights, bfloat16 products and key/value cache, float32 logits): `model` itself
    when it already does, else its copy (`with_training_options`), a ViT called once
    symbolically as `zoo.load` leaves it. Where the CPU lacks native bfloat16 it still runs,
    slower, and says so once (`zoo.training.precision.warn_once_if_slow_bfloat16`).

    Raises:
        UserError: `dtype` is no Keras dtype policy, or `model` has no
            `with_training_options` (not a Translator or VisionTransformer).
    """
    import keras

    from zoo.training.precision import warn_once_if_slow_bfloat16

    try:
        policy = keras.dtype_policies.get(dtype)
    except ValueError:
        raise UserError(f"unknown dtype {dtype!r}; expected a Keras dtype policy such as "
                        "'float32' or 'mixed_bfloat16'") from None
    if policy.name == model.dtype_policy.name:
        return model
    if not hasattr(model, "with_training_options"):
        raise UserError(f"dtype applies to a Translator or a VisionTransformer; got a "
                        f"{type(model).__name__}")
    warn_once_if_slow_bfloat16(policy.name)
    changed = model.with_training_options(dtype=policy)
    if hasattr(changed, "image_shape"):
        changed(keras.Input(tuple(changed.image_shape)))
    return changed
