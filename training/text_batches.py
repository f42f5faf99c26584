"""Teacher-forcing batches of token ids, bucketed by length, for sequence-to-sequence models.

Every batch is

    inputs = {"source_ids": (batch, S), "target_ids": (batch, T)},  labels: (batch, T)

where for a target sentence y the decoder input is [start] + y and the labels are y + [end]
(int32, padded with the pad id). Examples are grouped by length into buckets `bucket_width`
tokens wide and every padded length is rounded up to a multiple of `bucket_width`, so
padding stays small and compiled backends (XLA, JAX) see only a few distinct shapes; with
`one_shape_per_bucket` (the translator recipe's choice on JAX, which compiles the training step
once per distinct input shape) every batch of a bucket has one shape, so an epoch compiles at
most one step per bucket.
`TeacherForcingBatches` (a `keras.utils.PyDataset` of numpy arrays) needs no TensorFlow; its
`to_tf_dataset` builds the same batches with tf.data (TensorFlow is imported inside it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import keras
import numpy as np

from zoo.training.errors import UserError
from zoo.layers.validation import is_int, positive_int

# The special ids of the zoo's subword vocabularies (zoo.text.tokenizer.SubwordTokenizer trains
# with them): the defaults wherever an id is not given.
PAD_ID, UNKNOWN_ID, START_ID, END_ID = 0, 1, 2, 3
IdSequences = Sequence[Sequence[int]]


def filter_by_length(
    pairs_of_ids: Iterable[tuple[Sequence[int], Sequence[int]]],
    max_source_length: int,
    max_target_length: int,
    min_length: int = 1,
) -> list[tuple[Sequence[int], Sequence[int]]]:
    """Keeps the (source, target) id pairs whose lengths lie within the limits.

    Lengths are those of the sequences as given; note that teacher forcing adds one id
    (start or end) to the target.

    Args:
        pairs_of_ids: (source ids, target ids) pairs.
        max_source_length: longest source kept.
        max_target_length: longest target kept.
        min_length: shortest source and target kept (1 drops empty sentences).

    Returns:
        The kept pairs, in order.
    """
    for name, value in [
        ("max_source_length", max_source_length),
        ("max_target_length", max_target_length),
    ]:
        if not is_int(value) or value < max(min_length, 1):
            raise ValueError(f"{name} must be an int >= max(min_length, 1), got {value!r}")
    return [
        (source, target)
        for source, target in pairs_of_ids
        if min_length <= len(source) <= max_source_length
        and min_length <= len(target) <= max_target_length
    ]


def make_teacher_forcing_batch(
    source_ids: IdSequences,
    target_ids: IdSequences,
    start_id: int = START_ID,
    end_id: int = END_ID,
    pad_id: int = PAD_ID,
    pad_to_multiple_of: int = 1,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Pads one batch for teacher forcing.

    Args:
        source_ids: the source sequences (already ending with the end id if the model
            wants one there).
        target_ids: the target sequences y, without start or end ids.
        start_id: put before y in the decoder input.
        end_id: put after y in the labels.
        pad_id: fills the padding.
        pad_to_multiple_of: round both padded lengths up to a multiple of this.

    Returns:
        `({"source_ids": (B, S), "target_ids": (B, T)}, labels (B, T))`, all int32, with
        target_ids[i] = [start] + y_i and labels[i] = y_i + [end].

    Example:
    >>> inputs, labels = make_teacher_forcing_batch([[5, 6, 3]], [[7, 8]])
    >>> inputs["target_ids"].tolist(), labels.tolist()
    ([[2, 7, 8]], [[7, 8, 3]])
    """
    if len(source_ids) != len(target_ids):
        raise ValueError(
            f"source_ids has {len(source_ids)} sequences but target_ids has {len(target_ids)}"
        )
    width = pad_to_multiple_of
    source_length = -(-max((len(ids) for ids in source_ids), default=0) // width) * width
    target_length = -(-(max((len(ids) for ids in target_ids), default=0) + 1) // width) * width
    sources = np.full((len(source_ids), source_length), pad_id, dtype=np.int32)
    decoder_inputs = np.full((len(target_ids), target_length), pad_id, dtype=np.int32)
    labels = np.full((len(target_ids), target_length), pad_id, dtype=np.int32)
    for row, (source, target) in enumerate(zip(source_ids, target_ids)):
        sources[row, : len(source)] = source
        decoder_inputs[row, 0] = start_id
        decoder_inputs[row, 1 : len(target) + 1] = target
        labels[row, : len(target)] = target
        labels[row, len(target)] = end_id
    return {"source_ids": sources, "target_ids": decoder_inputs}, labels


class TeacherForcingBatches(keras.utils.PyDataset):
    """Teacher-forcing batches bucketed by length, as a `keras.utils.PyDataset` of numpy.

    Works on every backend without TensorFlow; pass it straight to `model.fit`, or take
    `to_tf_dataset()` for a tf.data pipeline of the same batches. Each epoch shuffles the
    examples within each length bucket and then the order of the batches, from a generator
    seeded by (seed, epoch); `on_epoch_end` moves to the next epoch, so `model.fit` sees a
    new, reproducible order every epoch.

    Args:
        source_ids: source id sequences.
        target_ids: target id sequences (without start/end ids), aligned with the sources.
        batch_size: sentence pairs per batch (the last batch of a bucket may be smaller,
            unless `one_shape_per_bucket`).
        bucket_width: examples whose length max(len(source), len(target) + 1) falls in
            the same `bucket_width`-wide range share batches; padded lengths are rounded up
            to a multiple of it.
        shuffle: shuffle within buckets and the batch order, anew each epoch.
        seed: seed of the shuffling.
        drop_remainder: drop the incomplete last batch of every bucket.
        start_id, end_id, pad_id: the tokenizer's special ids.
        one_shape_per_bucket: pad every batch of bucket k to `batch_size` rows (or to all
            the bucket's examples, where it has fewer) and to `k * bucket_width` source and
            target positions, the top of the bucket's range, so that the bucket gives one
            shape: at most ceil(longest / bucket_width) shapes in all, where on JAX each
            distinct shape is one more compilation of the training step. The rows that fill
            an incomplete batch are all padding: labels of pad only, which the zoo's loss and
            metrics (`MaskedSparseCrossEntropy`, `masked_accuracy`, `MaskedAccuracy`) weigh 0,
            so every step's loss, gradients and metrics are those of its real rows, and no
            example is dropped. (Keras' logged epoch loss, a mean over steps, weighs each step
            by its rows, so there a filled batch counts as a full one.) A loss or metric that
            does not mask the pad labels sees the rows: leave this off for it. It costs the
            padded positions' FLOPs, so it is off by default (TensorFlow's `fit` retraces with
            relaxed shapes, PyTorch runs eagerly); `to_tf_dataset` ignores it.
        **kwargs: `keras.utils.PyDataset` arguments (`workers`, ...).

    Example:
    >>> batches = TeacherForcingBatches([[5, 6, 3]] * 4, [[7, 8]] * 4, batch_size=2)
    >>> inputs, labels = batches[0]
    >>> labels.tolist()
    [[7, 8, 3, 0, 0, 0, 0, 0], [7, 8, 3, 0, 0, 0, 0, 0]]
    """

    def __init__(
        self,
        source_ids: IdSequences,
        target_ids: IdSequences,
        batch_size: int,
        bucket_width: int = 8,
        shuffle: bool = True,
        seed: int = 0,
        drop_remainder: bool = False,
        start_id: int = START_ID,
        end_id: int = END_ID,
        pad_id: int = PAD_ID,
        one_shape_per_bucket: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _check_examples(source_ids, target_ids, batch_size, bucket_width)
        self.source_ids, self.target_ids = source_ids, target_ids
        self.batch_size, self.bucket_width = batch_size, bucket_width
        self.shuffle, self.seed, self.drop_remainder = shuffle, seed, drop_remainder
        self.start_id, self.end_id, self.pad_id = start_id, end_id, pad_id
        self.one_shape_per_bucket = bool(one_shape_per_bucket)
        keys = _bucket_keys(source_ids, target_ids, bucket_width)
        self._keys = keys
        # Stable sort: examples keep file order within a bucket when not shuffled.
        order = np.argsort(keys, kind="stable")
        self._buckets = np.split(order, np.flatnonzero(np.diff(keys[order])) + 1)
        # Rows of every batch of a bucket under one_shape_per_bucket.
        self._rows = {int(keys[b[0]]): min(len(b), batch_size) for b in self._buckets}
        self.epoch = 0
        self._batches = self._plan_epoch()

    def _plan_epoch(self) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, self.epoch])
        batches = []
        for bucket in self._buckets:
            if self.shuffle:
                bucket = rng.permutation(bucket)
            for start in range(0, len(bucket), self.batch_size):
                chunk = bucket[start : start + self.batch_size]
                if len(chunk) == self.batch_size or not self.drop_remainder:
                    batches.append(chunk)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __len__(self) -> int:
        return len(self._batches)

    def __getitem__(self, index: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"batch index {index} out of range for {len(self)} batches")
        chosen = self._batches[index]
        inputs, labels = make_teacher_forcing_batch(
            [self.source_ids[i] for i in chosen],
            [self.target_ids[i] for i in chosen],
            start_id=self.start_id,
            end_id=self.end_id,
            pad_id=self.pad_id,
            pad_to_multiple_of=self.bucket_width,
        )
        if not self.one_shape_per_bucket:
            return inputs, labels
        bucket = int(self._keys[chosen[0]])
        rows, length = self._rows[bucket], bucket * self.bucket_width  # the bucket's top

        def fill(ids: np.ndarray) -> np.ndarray:
            return np.pad(ids, [(0, rows - len(ids)), (0, length - ids.shape[1])],
                          constant_values=self.pad_id)

        return {name: fill(ids) for name, ids in inputs.items()}, fill(labels)

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self._batches = self._plan_epoch()

    def to_tf_dataset(self, shuffle_buffer_size: int | None = None):
        """The same batches as a `tf.data.Dataset`, bucketed in the pipeline.

        Examples are shuffled when `shuffle` is set (buffer: the whole data set unless
        `shuffle_buffer_size` is given, reshuffled every epoch, seeded by `seed`), grouped
        with `bucket_by_sequence_length` into the same buckets, padded and prefetched.

        Args:
            shuffle_buffer_size: examples in the shuffle buffer (default: all).

        Returns:
            A `tf.data.Dataset` of `({"source_ids": (B, S), "target_ids": (B, T)}, labels)`,
            int32, with S and T multiples of `bucket_width`; its cardinality is known
            (`len(self)` batches).
        """
        import tensorflow as tf  # Lazy: the JAX machines have no TensorFlow.

        source_ids, target_ids = self.source_ids, self.target_ids
        bucket_width, pad_id = self.bucket_width, self.pad_id
        keys = _bucket_keys(source_ids, target_ids, bucket_width)

        def ragged(sequences):
            lengths = np.array([len(ids) for ids in sequences], dtype=np.int64)
            values = np.fromiter((token for ids in sequences for token in ids),
                                 dtype=np.int32, count=lengths.sum())
            return tf.RaggedTensor.from_row_lengths(values, lengths)

        dataset = tf.data.Dataset.from_tensor_slices((ragged(source_ids), ragged(target_ids)))
        if self.shuffle:
            dataset = dataset.shuffle(shuffle_buffer_size or len(source_ids), seed=self.seed,
                                      reshuffle_each_iteration=True)
        start = tf.constant([self.start_id], tf.int32)
        end = tf.constant([self.end_id], tf.int32)

        def teacher_forcing(source, target):
            inputs = {"source_ids": source, "target_ids": tf.concat([start, target], axis=0)}
            return inputs, tf.concat([target, end], axis=0)

        def length(inputs, labels):
            return tf.maximum(tf.shape(inputs["source_ids"])[0], tf.shape(labels)[0])

        # Bucket k holds lengths in ((k - 1) * width, k * width], like the numpy path.
        boundaries = [k * bucket_width + 1 for k in range(1, int(keys.max()))]
        pad = tf.constant(pad_id, tf.int32)

        def round_up(tensor):
            extra = -tf.shape(tensor)[1] % bucket_width
            return tf.pad(tensor, [[0, 0], [0, extra]], constant_values=pad_id)

        def round_up_batch(inputs, labels):
            return {name: round_up(value) for name, value in inputs.items()}, round_up(labels)

        dataset = dataset.map(teacher_forcing, num_parallel_calls=tf.data.AUTOTUNE)
        dataset = dataset.bucket_by_sequence_length(
            length,
            bucket_boundaries=boundaries,
            bucket_batch_sizes=[self.batch_size] * (len(boundaries) + 1),
            padding_values=({"source_ids": pad, "target_ids": pad}, pad),
            drop_remainder=self.drop_remainder,
        )
        dataset = dataset.map(round_up_batch, num_parallel_calls=tf.data.AUTOTUNE)
        # Every bucket gives ceil(examples / batch) batches whatever the order, as many as
        # the numpy path: said, `fit` shows the epoch's length and an ETA from the first
        # epoch, and does not warn that the input "ran out of data".
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(self)))
        return dataset.prefetch(tf.data.AUTOTUNE)


def _check_examples(
    source_ids: IdSequences, target_ids: IdSequences, batch_size: int, bucket_width: int
) -> None:
    if len(source_ids) != len(target_ids):
        raise ValueError(
            f"source_ids has {len(source_ids)} sequences but target_ids has {len(target_ids)}"
        )
    if len(source_ids) == 0:
        raise UserError("no examples: source_ids and target_ids are empty")
    positive_int(batch_size, "batch_size")
    positive_int(bucket_width, "bucket_width")


def _bucket_keys(source_ids: IdSequences, target_ids: IdSequences, width: int) -> np.ndarray:
    """Bucket number ceil(length / width) of each example; length counts the added id."""
    lengths = np.array(
        [max(len(source), len(target) + 1) for source, target in zip(source_ids, target_ids)]
    )
    return -(-lengths // width)
