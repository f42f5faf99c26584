"""Work on a served request a slice of rows at a time, so that its memory is that of one
slice, whatever the request's size (`in_chunks`), and the request checks every signature
shares (`check_batch_size`, `check_width`).

A request of 1,024 sentences to a sentence encoder, encoded at once, holds 1,024 rows of
attention scores in each layer (about 3 GB at 256 tokens and 12 heads); in slices of
`CHUNK_ROWS` (the batch `SentenceEncoder.embed` and `VisionTransformer.classify` use) it
holds 32. The slices run one after another (a `while_loop` with one iteration in flight), as
TensorFlow Serving runs them without XLA; an empty request runs no slice and answers outputs
of no rows.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

# Rows computed together: the batch of the Python APIs (`embed`, `classify`), and the most
# rows the written batching configuration hands a signature at once
# (`zoo.serving.model_server.MAX_EXECUTION_BATCH`).
CHUNK_ROWS = 32


def in_chunks(function: Callable[..., dict], inputs: Sequence[Any], outputs: dict[str, Any],
              rows: int = CHUNK_ROWS) -> dict[str, Any]:
    """`function` run on consecutive slices of at most `rows` rows of `inputs`, one slice at
    a time, its outputs concatenated along the first axis.

    Args:
        function: called as `function(start, *slices)` (`start` the index in the request of
            the slice's first row) inside a `tf.function`; returns a dict of tensors whose
            first axis has one entry a row of the slice.
        inputs: tensors whose first axes are the request's rows.
        outputs: `{key: tf.TensorSpec}` of what `function` returns, the first axis `None`.
        rows: the most rows of one slice.

    Returns:
        `{key: tensor}`, each with the request's rows (none for an empty request, where
        `function` never runs).

    Example (inside a `tf.function`):
        in_chunks(lambda start, ids: {"y": model(ids)}, [ids],
                  {"y": tf.TensorSpec([None, 8], tf.float32)})
    """
    import tensorflow as tf

    count = tf.shape(inputs[0])[0]
    chunks = (count + rows - 1) // rows
    arrays = {key: tf.TensorArray(spec.dtype, size=chunks, infer_shape=False,
                                  element_shape=spec.shape)
              for key, spec in outputs.items()}

    def body(index: Any, arrays: dict) -> tuple:
        start = index * rows
        slices = [tensor[start:start + rows] for tensor in inputs]
        results = function(start, *slices)
        return index + 1, {key: arrays[key].write(index, results[key]) for key in arrays}

    _, arrays = tf.while_loop(lambda index, _: index < chunks, body, [0, arrays],
                              parallel_iterations=1)
    concatenated = {}
    for key, spec in outputs.items():
        concatenated[key] = tf.ensure_shape(arrays[key].concat(), spec.shape)
    return concatenated


def check_batch_size(batch: Any, cap: int, what: str = "sentences") -> Any:
    """A `tf.debugging.Assert` op that fails when `batch` (its first axis: one row an item)
    holds more than `cap` rows; the message gives the count and names the cap.

    Example (inside a `tf.function`):
        with tf.control_dependencies([check_batch_size(sentences, 1024)]):
            sentences = tf.identity(sentences)
    """
    import tensorflow as tf

    count = tf.shape(batch, out_type=tf.int64)[0]
    return tf.debugging.Assert(count <= cap, [
        "a request of", count, f"{what} is more than the limit of", cap,
        f"{what} a request; send them in smaller requests"])


def check_width(ids: Any, cap: int, name: str) -> Any:
    """A `tf.debugging.Assert` op that fails when the rows of `ids` (`[batch, width]`) are
    wider than `cap` (the tokens the model reads); the message names the input and the cap."""
    import tensorflow as tf

    width = tf.shape(ids, out_type=tf.int64)[1]
    return tf.debugging.Assert(width <= cap, [
        f"{name} has rows of", width, "tokens, more than the limit of", cap,
        "tokens the model reads"])
