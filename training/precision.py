"""Mixed-precision set-up: the global dtype policy, and loss scaling for float16.

Call `set_precision` before building a model: Keras layers take the global policy when they
are created. Under "mixed_bfloat16" and "mixed_float16" variables stay float32 and
computations run in 16 bits.

float16 has a narrow exponent range, so small gradients underflow to zero unless the loss is
scaled up before differentiation and the gradients scaled back down: that is what
`keras.optimizers.LossScaleOptimizer` does. Keras 3's `Model.compile` already wraps the
optimizer in one when the *model's* dtype policy is "mixed_float16" (its `auto_scale_loss`
argument, True by default), and it does not wrap an optimizer that is already a
`LossScaleOptimizer`. So with `compile`/`fit`, `wrap_optimizer_for_precision` is not needed
(calling it anyway is harmless: there is no double wrapping). It is for custom training loops,
and for a model built under another policy than the one it is trained with. bfloat16 has
float32's exponent range and needs no loss scaling.

On a CPU, bfloat16 pays only where the processor computes it natively (AVX512_BF16 or AMX):
there `mixed_bfloat16` trained a CIFAR ViT faster than float32; on a 2-core AVX2 host
without either it trained `vit-cifar-small` slower than float32 (TensorFlow with oneDNN,
batch 128, benchmarks/train_step_speed.py; far slower before the attention's einsums and the
erfc GELU were replaced), since each bfloat16 product is then converted and emulated. The
figures: docs/benchmarks.md, "Training precision and oneDNN". On JAX the CPU's flags are not
enough: XLA's CPU backend (JAX 0.10) widens every bfloat16 product to float32 whatever the CPU
(`xla_widens_bfloat16` reads its compiled program), so there bfloat16 costs conversions and
gains nothing. `start_run` and the bfloat16 exports and copies warn in both cases
(`bfloat16_warning`).
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

import keras

from zoo.training.cpu_features import NATIVE_BFLOAT16_FLAGS, has_native_bfloat16, hlo_dots
from zoo.training.errors import UserError

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
_WARNED: set[str] = set()


def set_precision(name: str) -> keras.DTypePolicy:
    """Sets Keras' global dtype policy for the layers created afterwards.

    Args:
        name: "float32", "mixed_bfloat16" (TPUs, Ampere and newer GPUs) or "mixed_float16"
            (older GPUs; needs loss scaling, which `compile` adds).

    Returns:
        The new global `keras.DTypePolicy`.

    Raises:
        ValueError: If `name` is not one of the three.

    Example:
        >>> set_precision("mixed_bfloat16")
        <DTypePolicy "mixed_bfloat16">
        >>> layer = keras.layers.Dense(4)  # computes in bfloat16, its variables stay float32
        >>> layer.compute_dtype, layer.variable_dtype
        ('bfloat16', 'float32')
        >>> set_precision("float32")       # back to the default, for what is built next
        <DTypePolicy "float32">
    """
    if name not in PRECISIONS:
        raise UserError(f"unknown precision {name!r}; expected one of {', '.join(PRECISIONS)}")
    keras.mixed_precision.set_global_policy(name)
    return keras.mixed_precision.global_policy()


def wrap_optimizer_for_precision(
    optimizer: keras.optimizers.Optimizer, policy: Any = None
) -> keras.optimizers.Optimizer:
    """Wraps `optimizer` in a `LossScaleOptimizer` when `policy` is "mixed_float16".

    Args:
        optimizer: A Keras optimizer (already wrapped ones are returned as they are).
        policy: A policy name or `keras.DTypePolicy`; None means the global policy.

    Returns:
        A `keras.optimizers.LossScaleOptimizer` around `optimizer` for "mixed_float16",
        otherwise `optimizer` itself.
    """
    if policy is None:
        policy = keras.mixed_precision.global_policy()
    if isinstance(policy, str):
        policy = keras.DTypePolicy(policy)  # a ValueError naming the policy if unknown
    if not isinstance(policy, keras.DTypePolicy):
        raise UserError(f"policy must be a policy name or a keras.DTypePolicy; got {policy!r}")
    if policy.name != "mixed_float16" or isinstance(
        optimizer, keras.optimizers.LossScaleOptimizer
    ):
        return optimizer
    return keras.optimizers.LossScaleOptimizer(optimizer)


def cpu_has_native_bfloat16(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU computes bfloat16 natively: `NATIVE_BFLOAT16_FLAGS` among the flags of
    `cpuinfo` (Linux's `/proc/cpuinfo`); None where there is no such file to tell
    (`zoo.training.cpu_features.has_native_bfloat16`)."""
    return has_native_bfloat16(cpuinfo)


@functools.cache
def xla_widens_bfloat16() -> bool:
    """Whether JAX's XLA computes a bfloat16 matrix product in float32 on the default device:
    compiles one small bfloat16 product and reads the dtype of the `dot` XLA kept
    (`zoo.training.cpu_features.hlo_dots`). XLA's CPU backend does (JAX 0.10, every flag
    tried: docs/benchmarks.md), so `mixed_bfloat16` on JAX on a CPU converts and gains nothing.
    One compile a process."""
    import jax
    import jax.numpy as jnp

    operand = jnp.ones((16, 16), jnp.bfloat16)
    compiled = jax.jit(jnp.matmul).lower(operand, operand).compile().as_text()
    return not any(dtype == "bf16" for _, dtype in hlo_dots(compiled))


def bfloat16_warning(precision: str, devices: list[str] | None = None,
                     cpuinfo: str | os.PathLike = "/proc/cpuinfo",
                     backend: str | None = None) -> str | None:
    """The one-line warning for `mixed_bfloat16` on a machine with only a CPU where it trains
    slower than float32: a CPU that lacks native bfloat16, or JAX, whose XLA widens bfloat16
    products to float32 on a CPU (`xla_widens_bfloat16`); None otherwise.

    Args:
        precision: the run's precision name.
        devices: Keras' device names (`keras.distribution.list_devices()` when None); any
            that is not a CPU (a GPU, a TPU) means the run computes there.
        cpuinfo: the file whose flags tell the CPU's features.
        backend: the Keras backend's name (`keras.backend.backend()` when None).
    """
    if precision not in ("mixed_bfloat16", "bfloat16"):
        return None
    if devices is None:
        devices = keras.distribution.list_devices()
    if any(not device.lower().startswith("cpu") for device in devices):
        return None
    if cpu_has_native_bfloat16(cpuinfo) is False:
        return ("mixed_bfloat16 on a CPU without native bfloat16 (none of "
                f"{', '.join(NATIVE_BFLOAT16_FLAGS)} in {cpuinfo}) trains slower than "
                "float32 here; --precision float32 is faster on this machine")
    if (backend or keras.backend.backend()) == "jax" and xla_widens_bfloat16():
        return ("mixed_bfloat16 on JAX on a CPU trains slower than float32: XLA's CPU "
                "backend computes bfloat16 products in float32, with conversions around "
                "them; --precision float32 is faster, or KERAS_BACKEND=tensorflow, whose "
                "oneDNN products run in bfloat16 on CPUs with AVX-512 BF16 or AMX")
    return None


def warn_once_if_slow_bfloat16(precision: str, doing: str = "runs") -> bool:
    """Warns (a `UserWarning`, which the `zoo` command prints as one `zoo: warning:` line on
    stderr) the first time in a process that `precision` asks for bfloat16 where the CPU
    lacks it (`bfloat16_warning`): it still runs, slower. Returns whether it warned now.

    Args:
        precision: "mixed_bfloat16" or "bfloat16" (others never warn).
        doing: the verb the line uses ("runs", "trains", "exports").
    """
    if precision in _WARNED:
        return False
    warning = bfloat16_warning(precision)
    if not warning:
        return False
    _WARNED.add(precision)
    warnings.warn(warning.replace("trains slower", f"{doing} slower"), stacklevel=2)
    return True
