"""Learning-rate schedules: the Transformer's inverse square root warm-up, and warm-up + cosine.

Both are `keras.optimizers.schedules.LearningRateSchedule`s: pass one as an optimizer's
`learning_rate`. The optimizer calls it with its `iterations` counter, which is 0 before the
first update; the schedules count steps from 1 (`step = iterations + 1`), as the paper does, so
that the first update never gets a learning rate of exactly zero.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class InverseSqrtWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then decay with the inverse square root of the step.

    Section 5.3 of "Attention Is All You Need":

        lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

    The rate grows linearly for `warmup_steps` steps, peaks at
    `scale * (d_model * warmup_steps)^-0.5` on step `warmup_steps`, and then decays as
    `step^-0.5`.

    Args:
        d_model: The model width; the rate scales as `d_model^-0.5`.
        warmup_steps: Steps of linear warm-up (the paper uses 4000).
        scale: A constant factor on the whole schedule (1.0 in the paper; 2.0 is common for
            small batches).

    Example:
        >>> schedule = InverseSqrtWarmup(d_model=512, warmup_steps=4000)
        >>> optimizer = keras.optimizers.Adam(learning_rate=schedule)
    """

    def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0) -> None:
        if int(d_model) <= 0:
            raise ValueError(f"d_model must be a positive integer; got {d_model!r}")
        if int(warmup_steps) <= 0:
            raise ValueError(f"warmup_steps must be a positive integer; got {warmup_steps!r}")
        if float(scale) <= 0:
            raise ValueError(f"scale must be positive; got {scale!r}")
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step: Any) -> Any:
        step = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        rate = ops.minimum(ops.rsqrt(step), step * warmup**-1.5)
        return self.scale * self.d_model**-0.5 * rate

    def get_config(self) -> dict:
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


@keras.saving.register_keras_serializable(package="zoo")
class WarmupCosine(keras.optimizers.schedules.CosineDecay):
    """Linear warm-up to a peak, then half a cosine down to a final rate: Keras's own
    `CosineDecay` (`warmup_target`, `warmup_steps`), counting steps from 1.

    The schedule used to train Vision Transformers:

        lrate = peak * step / warmup_steps                                 step <= warmup_steps
        lrate = final + (peak - final) * (1 + cos(pi * progress)) / 2     afterwards

    where `progress = (step - warmup_steps) / (total_steps - warmup_steps)`, clipped to
    [0, 1], so the rate stays at `final_learning_rate` after `total_steps`.

    Why a subclass and not `CosineDecay` itself: Keras's warm-up starts at
    `initial_learning_rate` on the optimizer's step 0, so the first update of a run would have
    a rate of 0 (a run of one warm-up step would learn nothing); as this module's schedules
    do, this one calls `CosineDecay` at `iterations + 1` (tests/training/test_schedules.py
    checks it equals `CosineDecay` one step on). It also keeps the recipe's arguments
    (peak, total, warm-up, final) and their checks.

    Args:
        peak_learning_rate: The rate reached at the end of the warm-up.
        total_steps: The step at which the cosine reaches `final_learning_rate`.
        warmup_steps: Steps of linear warm-up; 0 starts at the peak.
        final_learning_rate: The rate at and after `total_steps`.

    Example:
        >>> schedule = WarmupCosine(3e-3, total_steps=10_000, warmup_steps=500)
        >>> optimizer = keras.optimizers.AdamW(learning_rate=schedule)
    """

    def __init__(
        self,
        peak_learning_rate: float,
        total_steps: int,
        warmup_steps: int,
        final_learning_rate: float = 0.0,
    ) -> None:
        if float(peak_learning_rate) <= 0:
            raise ValueError(f"peak_learning_rate must be positive; got {peak_learning_rate!r}")
        if int(warmup_steps) < 0:
            raise ValueError(f"warmup_steps must be >= 0; got {warmup_steps!r}")
        if int(total_steps) <= int(warmup_steps):
            raise ValueError(
                f"total_steps must be larger than warmup_steps; got total_steps={total_steps!r} "
                f"and warmup_steps={warmup_steps!r}"
            )
        if not 0 <= float(final_learning_rate) <= float(peak_learning_rate):
            raise ValueError(
                "final_learning_rate must lie in [0, peak_learning_rate]; got "
                f"final_learning_rate={final_learning_rate!r} and "
                f"peak_learning_rate={peak_learning_rate!r}"
            )
        peak, warmup = float(peak_learning_rate), int(warmup_steps)
        super().__init__(initial_learning_rate=0.0 if warmup else peak,
                         decay_steps=int(total_steps) - warmup,
                         alpha=float(final_learning_rate) / peak,
                         warmup_target=peak if warmup else None, warmup_steps=warmup)
        self.peak_learning_rate = peak
        self.total_steps = int(total_steps)
        self.final_learning_rate = float(final_learning_rate)

    def __call__(self, step: Any) -> Any:
        return super().__call__(ops.cast(step, "float32") + 1.0)

    def get_config(self) -> dict:
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "final_learning_rate": self.final_learning_rate,
        }
