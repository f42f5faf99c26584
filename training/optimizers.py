"""The optimizers of the two papers: the Transformer's Adam, and AdamW for Vision Transformers.

`transformer_adam` is section 5.3 of "Attention Is All You Need": Adam with beta_1 = 0.9,
beta_2 = 0.98, epsilon = 1e-9 and the inverse square root warm-up schedule.

`adamw_no_decay_on_norms` is the usual recipe for ViTs: decoupled weight decay on the weight
matrices only. Normalisation scales and offsets, biases, position embeddings and the class
token are not decayed: shrinking them towards zero is a prior nobody wants.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import keras

from zoo.layers.keras_internals import (
    optimizer_variable_index,
    uses_weight_decay,
    weight_decay_hook,
)
from zoo.training.schedules import InverseSqrtWarmup

# Substrings of a variable's path (e.g. "vit/block_0/layer_norm_1/gamma") that exclude it
# from weight decay.
NO_DECAY_KEYWORDS = ("norm", "bias", "position_embeddings", "class_token")


def transformer_adam(
    d_model: int,
    warmup_steps: int = 4000,
    clipnorm: float | None = None,
    scale: float = 1.0,
    **kwargs: Any,
) -> keras.optimizers.Adam:
    """Adam with the Transformer paper's hyper-parameters and learning-rate schedule.

    Args:
        d_model: The model width, for the schedule's `d_model^-0.5` factor.
        warmup_steps: Steps of linear warm-up of the schedule.
        clipnorm: If set, gradients are clipped to this global norm (all gradients together).
        scale: A constant factor on the schedule.
        **kwargs: Further `keras.optimizers.Adam` arguments (e.g. `gradient_accumulation_steps`).

    Returns:
        A `keras.optimizers.Adam` whose learning rate is an `InverseSqrtWarmup`.

    Example:
        >>> optimizer = transformer_adam(d_model=512, warmup_steps=4000, clipnorm=1.0)
    """
    return keras.optimizers.Adam(
        learning_rate=InverseSqrtWarmup(d_model, warmup_steps=warmup_steps, scale=scale),
        beta_1=kwargs.pop("beta_1", 0.9),
        beta_2=kwargs.pop("beta_2", 0.98),
        epsilon=kwargs.pop("epsilon", 1e-9),
        global_clipnorm=clipnorm,
        **kwargs,
    )


@keras.saving.register_keras_serializable(package="zoo")
@weight_decay_hook("_decay_weights")
class SelectiveDecayAdamW(keras.optimizers.AdamW):
    """AdamW that skips weight decay on variables whose path contains a keyword, and can
    scale the learning rate per variable (layer-wise learning-rate decay for fine-tuning).

    Keras' own `exclude_from_weight_decay(var_names=...)` matches the variable's short name
    only ("gamma", "beta", "kernel"), which says nothing about the layer it belongs to; a
    LayerNormalization's "gamma" could not be told apart. This optimizer matches the full
    path ("encoder/layer_norm/gamma") and resolves it once, when the optimizer is built.

    Args:
        no_decay_keywords: Substrings of variable paths to leave undecayed.
        learning_rate_multipliers: `{path: factor}`: the learning rate (and the decoupled
            weight decay, which is proportional to it) of the variable with that path is
            multiplied by the factor; others use the learning rate as it is. A key names the
            variables whose `path` equals it or ends with "/" + key (the longest key wins), so
            "encoder_block_0/self_attention/query/kernel" matches that variable whatever the
            model's name; see `zoo.recipes.finetune.layer_decay_multipliers`.
        **kwargs: `keras.optimizers.AdamW` arguments.

    Raises:
        ValueError: for a negative multiplier, or (when the optimizer is built) a
            multiplier path that names no variable being trained.
    """

    def __init__(self, no_decay_keywords: Sequence[str] = NO_DECAY_KEYWORDS,
                 learning_rate_multipliers: Mapping[str, float] | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.no_decay_keywords = tuple(str(k) for k in no_decay_keywords)
        multipliers = dict(learning_rate_multipliers or {})
        negative = {k: v for k, v in multipliers.items() if float(v) < 0}
        if negative:
            raise ValueError(f"learning-rate multipliers must be >= 0; got {negative}")
        self.learning_rate_multipliers = {str(k): float(v) for k, v in multipliers.items()}
        self._multiplier_of_index: list[float] = []

    def build(self, var_list: list) -> None:
        if self.no_decay_keywords and not self.built:
            pattern = re.compile("|".join(re.escape(k) for k in self.no_decay_keywords))
            excluded = [v for v in var_list if pattern.search(getattr(v, "path", v.name))]
            # The variables themselves, not names: on TensorFlow the decay step sees
            # tf.Variables whose names lost the Keras path.
            self.exclude_from_weight_decay(var_list=excluded)
        if self.learning_rate_multipliers and not self.built:
            paths = [getattr(v, "path", v.name) for v in var_list]
            matched: set[str] = set()
            self._multiplier_of_index = []
            for path in paths:
                # The longest key that is the path or a "/"-separated tail of it.
                keys = [k for k in self.learning_rate_multipliers
                        if path == k or path.endswith("/" + k)]
                key = max(keys, key=len) if keys else None
                matched.update(keys)
                self._multiplier_of_index.append(
                    1.0 if key is None else self.learning_rate_multipliers[key])
            unknown = sorted(set(self.learning_rate_multipliers) - matched)
            if unknown:
                raise ValueError(
                    f"learning-rate multipliers name variables that are not trained: "
                    f"{unknown[:3]}{' ...' if len(unknown) > 3 else ''}")
            # `_multiplier_of_index` is indexed like the optimizer's slots:
            # `optimizer_variable_index` finds a variable's.
        super().build(var_list)

    def _multiplier(self, variable: Any) -> float:
        if not self._multiplier_of_index:
            return 1.0
        return self._multiplier_of_index[optimizer_variable_index(self, variable)]

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        if self._multiplier_of_index:
            # The decay is applied here, per variable, instead of in Keras' weight-decay
            # step (`_decay_weights`): this runs in the per-variable update context of every
            # backend (tf.distribute included), and the decay follows the variable's scaled
            # rate.
            learning_rate = keras.ops.multiply(
                keras.ops.cast(learning_rate, variable.dtype),
                keras.ops.cast(self._multiplier(variable), variable.dtype))
            if self.weight_decay is not None and uses_weight_decay(self, variable):
                decay = keras.ops.cast(self.weight_decay, variable.dtype) * learning_rate
                self.assign(variable, variable - variable * decay)
        super().update_step(gradient, variable, learning_rate)

    def _decay_weights(self, variables: list, keras_decay: Any) -> None:
        """Keras' per-step weight decay of all `variables` (routed here by
        `weight_decay_hook`); `keras_decay` is AdamW's own."""
        if not self._multiplier_of_index:  # otherwise `update_step` decays
            keras_decay(variables)

    def get_config(self) -> dict:
        config = super().get_config()
        config["no_decay_keywords"] = list(self.no_decay_keywords)
        config["learning_rate_multipliers"] = dict(self.learning_rate_multipliers)
        return config


def relative_variable_path(variable: Any) -> str:
    """A variable's path without the model's name: "encoder_block_0/self_attention/...".

    Keras numbers model names per process ("vision_transformer_3/..."); the rest of the path
    is the same for every instance of one architecture.
    """
    path = getattr(variable, "path", None) or variable.name
    return path.split("/", 1)[-1]


def adamw_no_decay_on_norms(
    learning_rate: Any,
    weight_decay: float = 0.05,
    clipnorm: float | None = None,
    no_decay_keywords: Sequence[str] = NO_DECAY_KEYWORDS,
    learning_rate_multipliers: Mapping[str, float] | None = None,
    **kwargs: Any,
) -> keras.optimizers.AdamW:
    """AdamW with decay on weight matrices only.

    Variables whose path contains "norm", "bias", "position_embeddings" or "class_token"
    (or the given `no_decay_keywords`) are not decayed; they are still updated by the
    gradient.

    Args:
        learning_rate: A float or a `LearningRateSchedule` (e.g. `WarmupCosine`).
        weight_decay: The decoupled weight decay factor (multiplied by the learning rate).
        clipnorm: If set, gradients are clipped to this global norm.
        no_decay_keywords: Substrings of variable paths to leave undecayed.
        learning_rate_multipliers: `{path: factor}` per-variable learning-rate factors (see
            `SelectiveDecayAdamW`), e.g. layer-wise decay for fine-tuning.
        **kwargs: Further `keras.optimizers.AdamW` arguments (`beta_1`, `beta_2`, ...).

    Returns:
        A `keras.optimizers.AdamW` (a `SelectiveDecayAdamW`).

    Example:
        >>> from zoo.training.schedules import WarmupCosine
        >>> schedule = WarmupCosine(1e-3, total_steps=10_000, warmup_steps=500)
        >>> optimizer = adamw_no_decay_on_norms(schedule, weight_decay=0.05, clipnorm=1.0)
        >>> optimizer.weight_decay, optimizer.global_clipnorm
        (0.05, 1.0)
    """
    if float(weight_decay) < 0:
        raise ValueError(f"weight_decay must be >= 0; got {weight_decay!r}")
    return SelectiveDecayAdamW(
        no_decay_keywords=no_decay_keywords,
        learning_rate_multipliers=learning_rate_multipliers,
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        global_clipnorm=clipnorm,
        **kwargs,
    )
