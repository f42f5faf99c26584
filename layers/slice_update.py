"""Writes into a preallocated buffer at a position, in every graph TensorFlow Serving runs.

The key/value cache (`MultiHeadAttention`) and the searches' token buffers (`zoo.generation.greedy`, `.beam`)
write each step's values at a position that changes from step to step. Keras' own
`ops.slice_update` is XLA's dynamic-update-slice on TensorFlow (the `XlaDynamicUpdateSlice`
op), which runs only through XLA: in a function XLA compiles it updates the buffer in place,
but a SavedModel that holds it fails in the stock model server, which runs graphs with XLA's
CPU JIT off (tensorflow/serving issues 2214 and 2217). TensorFlow's own
`TensorStridedSliceUpdate` runs anywhere, yet XLA compiles it only where the start is a
constant, never the changing index of a loop. So `update_slice` takes the one that fits where
it is traced.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from .keras_internals import in_xla_compiled_graph


def update_slice(inputs: Any, start_indices: Sequence[Any], updates: Any) -> Any:
    """`inputs` with `updates` written at `start_indices`, as `keras.ops.slice_update`.

    On TensorFlow outside a function that XLA compiles (eagerly, in a `tf.function` without
    `jit_compile`, and so in every exported SavedModel), the write is TensorFlow's
    `TensorStridedSliceUpdate`; everywhere else (XLA, JAX, PyTorch) it is
    `keras.ops.slice_update`.

    Args:
        inputs: the buffer.
        start_indices: one start per axis of `inputs`: Python ints or scalar integer
            tensors.
        updates: the values, of `inputs`' rank and dtype; `start + updates.shape` must lie
            inside `inputs` on every axis.

    Returns:
        A tensor of `inputs`' shape and dtype.

    Example:

    >>> buffer = keras.ops.zeros((1, 4), "int32")
    >>> keras.ops.convert_to_numpy(update_slice(buffer, [0, 2], keras.ops.ones((1, 1), "int32")))
    array([[0, 0, 1, 0]], dtype=int32)
    """
    if keras.backend.backend() != "tensorflow" or in_xla_compiled_graph():
        return ops.slice_update(inputs, start_indices, updates)
    import tensorflow as tf

    begin = tf.stack([tf.cast(start, tf.int32) for start in start_indices])
    return tf.raw_ops.TensorStridedSliceUpdate(
        input=inputs, begin=begin, end=begin + tf.shape(updates, out_type=tf.int32),
        strides=tf.ones_like(begin), value=updates)
