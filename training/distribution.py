"""Data-parallel training over all local accelerators, on JAX and on TensorFlow.

Data parallelism keeps a copy of the weights on every device, splits each batch between the
devices and averages the gradients, so one step on N devices gives the same weights as the
same step on one device (up to the order of floating-point additions).

- JAX: `keras.distribution.DataParallel` over the local devices; set globally with
  `setup_data_parallel()`, or for a block of code with `data_parallel_scope()`.
- TensorFlow: a `tf.distribute.MirroredStrategy`; variables must be created inside its
  scope, so build and compile the model inside `data_parallel_scope()`.

The batch size given to `fit` is the global batch size; it must be divisible by the number of
devices. Typical use, the same on both backends:

    with data_parallel_scope():
        model = build_model()
        model.compile(optimizer=..., loss=...)
        model.fit(dataset, epochs=...)
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator, Sequence

import keras


def _tf_devices() -> list[str]:
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def describe_devices() -> str:
    """A one-line description of the backend and the devices data parallelism would use.

    Returns:
        For example "jax: 2 devices (cpu:0, cpu:1)".
    """
    backend = keras.backend.backend()
    if backend == "jax":
        devices = keras.distribution.list_devices()
    elif backend == "tensorflow":
        devices = _tf_devices()
    else:
        try:
            devices = [str(d) for d in keras.distribution.list_devices()]
        except Exception:  # a backend without Keras' distribution support
            devices = []
    noun = "device" if len(devices) == 1 else "devices"
    return f"{backend}: {len(devices)} {noun} ({', '.join(devices)})"


def setup_data_parallel(devices: Sequence[str] | None = None) -> Any:
    """Sets up data parallelism over `devices` (all local accelerators by default).

    On JAX this sets Keras' global distribution, which every model created and trained
    afterwards uses. On TensorFlow it returns a `tf.distribute.MirroredStrategy`: create and
    compile the model inside `strategy.scope()`. Other backends get a warning and None.

    Args:
        devices: Device names, e.g. ["gpu:0", "gpu:1"] on JAX or ["/gpu:0", "/gpu:1"] on
            TensorFlow; None takes every GPU (or every CPU device when there is no GPU).

    Returns:
        The `keras.distribution.DataParallel` (JAX), the `MirroredStrategy` (TensorFlow),
        or None.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        distribution = _jax_data_parallel(devices)
        keras.distribution.set_distribution(distribution)
        return distribution
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.distribute.MirroredStrategy(devices=list(devices or _tf_devices()))
    warnings.warn(
        f"data parallelism is not set up on the {backend!r} backend; training uses one device",
        stacklevel=2,
    )
    return None


def _jax_data_parallel(devices: Sequence[str] | None) -> Any:
    devices = list(devices or keras.distribution.list_devices())
    if not devices:
        raise ValueError("no devices to distribute over; got an empty device list")
    return keras.distribution.DataParallel(devices=devices)


@contextlib.contextmanager
def data_parallel_scope(devices: Sequence[str] | None = None) -> Iterator[Any]:
    """A `with` block in which models are created, compiled and trained data-parallel.

    Unlike `setup_data_parallel` on JAX, the distribution is only in force inside the block
    (and restored on exit). On JAX, `fit` and `predict` shard their batches according to the
    distribution in force when they run, so call them inside the block too.

    Args:
        devices: As for `setup_data_parallel`.

    Yields:
        The `keras.distribution.DataParallel` (JAX), the `MirroredStrategy` (TensorFlow), or
        None on other backends.

    Example (on every device this machine has; one CPU is a "distribution" of one):
        >>> import numpy as np
        >>> with data_parallel_scope() as strategy:
        ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        ...     model.compile(optimizer="adam", loss="mse")
        ...     history = model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=4, verbose=0)
        >>> len(history.history["loss"])
        1
    """
    backend = keras.backend.backend()
    if backend == "jax":
        distribution = _jax_data_parallel(devices)
        with distribution.scope():
            yield distribution
    elif backend == "tensorflow":
        strategy = setup_data_parallel(devices)
        with strategy.scope():
            yield strategy
    else:
        yield setup_data_parallel(devices)
