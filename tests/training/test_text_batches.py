"""Tests of training.text_batches: teacher-forcing batches from real Multi30k token ids."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import keras
import numpy as np
import pytest

from tests.conftest import modules_imported_by
from zoo.training.text_batches import (
    TeacherForcingBatches,
    filter_by_length,
    make_teacher_forcing_batch,
)
from zoo.training.text_data import read_multi30k

REPO = Path(__file__).resolve().parents[2]
START, END, PAD = 2, 3, 0


@pytest.fixture(scope="module")
def id_pairs(shared_data):
    """Val split as word ids from a whitespace vocabulary (no tokenizer of ours involved)."""
    pairs = read_multi30k(shared_data / "multi30k", "val")
    vocabulary: dict[str, int] = {}
    sources, targets = [], []
    for source, target in pairs:
        sources.append([vocabulary.setdefault(w, len(vocabulary) + 4) for w in source.split()])
        sources[-1].append(END)
        targets.append([vocabulary.setdefault(w, len(vocabulary) + 4) for w in target.split()])
    return sources, targets


def _examples(batches):
    """The (source, target) id tuples held by batches, padding and added ids removed."""
    found = Counter()
    for inputs, labels in batches:
        sources, decoder_inputs, labels = (
            np.asarray(inputs["source_ids"]),
            np.asarray(inputs["target_ids"]),
            np.asarray(labels),
        )
        for source, decoder_input, label in zip(sources, decoder_inputs, labels):
            if not (label.any() or source.any() or decoder_input.any()):
                continue  # a row that fills a batch up (one_shape_per_bucket)
            length = int(np.flatnonzero(label == END)[0])
            assert decoder_input[0] == START
            assert decoder_input[1 : length + 1].tolist() == label[:length].tolist()
            assert not label[length + 1 :].any() and not decoder_input[length + 1 :].any()
            source_length = len(np.trim_zeros(source, "b"))
            found[(tuple(source[:source_length].tolist()), tuple(label[:length].tolist()))] += 1
    return found


def test_teacher_forcing_batch_by_hand():
    inputs, labels = make_teacher_forcing_batch([[5, 6, 3], [7, 3]], [[8, 9], [10, 11, 12]])
    assert inputs["source_ids"].tolist() == [[5, 6, 3], [7, 3, 0]]
    assert inputs["target_ids"].tolist() == [[2, 8, 9, 0], [2, 10, 11, 12]]
    assert labels.tolist() == [[8, 9, 3, 0], [10, 11, 12, 3]]
    assert {a.dtype for a in [*inputs.values(), labels]} == {np.dtype(np.int32)}
    inputs, labels = make_teacher_forcing_batch([[5]], [[]], pad_to_multiple_of=8)
    assert inputs["source_ids"].shape == (1, 8) and labels.tolist() == [[3] + [0] * 7]
    with pytest.raises(ValueError, match="source_ids has 2 sequences but target_ids has 1"):
        make_teacher_forcing_batch([[5], [6]], [[7]])


def test_filter_by_length():
    pairs = [([1] * 3, [1] * 5), ([1] * 4, [1] * 5), ([1] * 3, [1] * 6), ([], [1]), ([1], [])]
    assert filter_by_length(pairs, 3, 5) == [pairs[0]]
    assert filter_by_length(pairs, 4, 6) == pairs[:3]
    assert filter_by_length(pairs, 4, 6, min_length=0) == pairs
    with pytest.raises(ValueError, match="max_target_length must be an int"):
        filter_by_length(pairs, 4, 0)


def test_numpy_batches_hold_every_example_once(id_pairs):
    sources, targets = id_pairs
    batches = TeacherForcingBatches(sources, targets, batch_size=32)
    expected = Counter(zip(map(tuple, sources), map(tuple, targets)))
    assert _examples(batches[i] for i in range(len(batches))) == expected
    batches.on_epoch_end()
    assert _examples(batches[i] for i in range(len(batches))) == expected


@pytest.mark.parametrize("bucket_width", [4, 8])
def test_numpy_batches_group_by_length(id_pairs, bucket_width):
    sources, targets = id_pairs
    batches = TeacherForcingBatches(sources, targets, batch_size=32, bucket_width=bucket_width)
    padding = 0
    for index in range(len(batches)):
        inputs, labels = batches[index]
        assert set(inputs) == {"source_ids", "target_ids"}
        assert inputs["source_ids"].dtype == inputs["target_ids"].dtype == labels.dtype == np.int32
        assert inputs["target_ids"].shape == labels.shape and labels.shape[0] <= 32
        assert inputs["source_ids"].shape[1] % bucket_width == 0
        assert labels.shape[1] % bucket_width == 0
        lengths = np.maximum(
            (inputs["source_ids"] != PAD).sum(axis=1), (labels != PAD).sum(axis=1)
        )
        # One bucket per batch: lengths lie in ((k - 1) * width, k * width].
        assert len(set((lengths - 1) // bucket_width)) == 1
        padding += (labels == PAD).sum()
    # Less than half the label padding of batches taken in file order (without rounding up).
    naive = 0
    for start in range(0, len(targets), 32):
        chunk = targets[start : start + 32]
        naive += sum(max(map(len, chunk)) - len(t) for t in chunk)
    assert padding < 0.5 * naive


def test_one_shape_per_bucket_gives_one_shape_a_bucket_and_the_same_loss(id_pairs):
    # JAX compiles the step once per input shape: the GPU loan of 2026-11-28 compiled one per
    # (rows, source width, target width) and never finished an epoch.
    sources, targets = id_pairs
    fixed = TeacherForcingBatches(sources, targets, batch_size=32, one_shape_per_bucket=True)
    free = TeacherForcingBatches(sources, targets, batch_size=32)  # off by default
    assert len(fixed) == len(free)
    fixed_batches = [fixed[i] for i in range(len(fixed))]
    shapes = {(*x["source_ids"].shape, *x["target_ids"].shape, *y.shape)
              for x, y in fixed_batches}
    longest = max(max(len(s), len(t) + 1) for s, t in zip(sources, targets))
    assert len(shapes) <= -(-longest // 8)
    assert all(width == target_width == label_width
               for _, width, _, target_width, _, label_width in shapes), shapes
    # Full batches, but for a bucket of fewer examples (one batch of them all).
    bucket_sizes = Counter(-(-max(len(s), len(t) + 1) // 8) for s, t in zip(sources, targets))
    assert all(rows == min(32, bucket_sizes[width // 8]) for rows, width, *_ in shapes)
    free_shapes = {(*x["source_ids"].shape, *x["target_ids"].shape) for x, _ in
                   (free[i] for i in range(len(free)))}
    assert len(free_shapes) > len(shapes)  # what the loan compiled
    expected = Counter(zip(map(tuple, sources), map(tuple, targets)))
    assert _examples(fixed_batches) == expected
    # The rows and columns added hold pad only: a per-token model's loss and accuracy on a
    # filled batch are those of its real rows.
    from zoo.training.losses import MaskedSparseCrossEntropy, masked_accuracy

    table = np.random.default_rng(0).normal(size=(50, 50)).astype("float32")

    def per_token(ids):  # a per-token model over ids folded into 50 (pad, start, end kept)
        return np.where(ids < 4, ids, 4 + ids % 46)

    loss = MaskedSparseCrossEntropy(label_smoothing=0.1, pad_id=PAD)
    index = next(i for i, (_, y) in enumerate(fixed_batches) if len(free[i][1]) < len(y))
    (x, y), (padded_x, padded_y) = free[index], fixed[index]  # an incomplete batch, filled
    assert len(y) < len(padded_y) == 32
    y, padded_y = per_token(y), per_token(padded_y)
    logits = table[per_token(x["target_ids"])]
    padded_logits = table[per_token(padded_x["target_ids"])]
    np.testing.assert_allclose(float(loss(padded_y, padded_logits)), float(loss(y, logits)),
                               rtol=1e-6)
    assert float(masked_accuracy(padded_y, padded_logits)) == float(masked_accuracy(y, logits))


def test_numpy_batches_shuffle_is_seeded(id_pairs):
    sources, targets = id_pairs

    def first_labels(batches):
        return [batches[i][1][:, 0].tolist() for i in range(len(batches))]

    one = TeacherForcingBatches(sources, targets, batch_size=32, seed=7)
    two = TeacherForcingBatches(sources, targets, batch_size=32, seed=7)
    other = TeacherForcingBatches(sources, targets, batch_size=32, seed=8)
    assert first_labels(one) == first_labels(two) != first_labels(other)
    epoch_zero = first_labels(one)
    one.on_epoch_end()
    assert len(first_labels(one)) == len(epoch_zero) and first_labels(one) != epoch_zero
    ordered = TeacherForcingBatches(sources, targets, batch_size=32, shuffle=False)
    widths = [ordered[i][1].shape[1] for i in range(len(ordered))]
    assert widths == sorted(widths)


def test_numpy_batches_drop_remainder_and_errors(id_pairs):
    sources, targets = id_pairs
    batches = TeacherForcingBatches(sources, targets, batch_size=32, drop_remainder=True)
    assert all(batches[i][1].shape[0] == 32 for i in range(len(batches)))
    with pytest.raises(IndexError, match="out of range"):
        batches[len(batches)]
    with pytest.raises(ValueError, match="1014 sequences but target_ids has 3"):
        TeacherForcingBatches(sources, targets[:3], batch_size=32)
    with pytest.raises(ValueError, match="no examples"):
        TeacherForcingBatches([], [], batch_size=32)
    with pytest.raises(ValueError, match="batch_size must be a positive int; got 0"):
        TeacherForcingBatches(sources, targets, batch_size=0)


def test_tf_dataset_matches_numpy_batches(id_pairs):
    tf = pytest.importorskip("tensorflow")
    sources, targets = id_pairs
    dataset = TeacherForcingBatches(sources, targets, batch_size=32, seed=3).to_tf_dataset()
    numpy_batches = TeacherForcingBatches(sources, targets, batch_size=32)
    spec_inputs, spec_labels = dataset.element_spec
    assert set(spec_inputs) == {"source_ids", "target_ids"}
    assert {s.dtype for s in [*spec_inputs.values(), spec_labels]} == {tf.int32}
    first_epoch = list(dataset)
    assert len(first_epoch) == len(numpy_batches) == int(dataset.cardinality())
    expected = Counter(zip(map(tuple, sources), map(tuple, targets)))
    assert _examples(first_epoch) == expected
    for inputs, labels in first_epoch:
        assert inputs["source_ids"].shape[1] % 8 == 0 and labels.shape[1] % 8 == 0
        lengths = np.maximum(
            (inputs["source_ids"].numpy() != PAD).sum(axis=1), (labels.numpy() != PAD).sum(axis=1)
        )
        assert len(set((lengths - 1) // 8)) == 1
    shapes = Counter((i["source_ids"].shape[1], i["target_ids"].shape[1]) for i, _ in first_epoch)
    assert shapes == Counter(
        (i["source_ids"].shape[1], i["target_ids"].shape[1])
        for i, _ in (numpy_batches[k] for k in range(len(numpy_batches)))
    )
    second_epoch = [labels[:, 0].numpy().tolist() for _, labels in dataset]
    assert second_epoch != [labels[:, 0].numpy().tolist() for _, labels in first_epoch]
    # The known cardinality holds for any batch size and with whole batches only.
    for batch_size, drop_remainder in ((7, False), (50, True)):
        batches = TeacherForcingBatches(sources, targets, batch_size=batch_size,
                                        drop_remainder=drop_remainder, seed=1)
        assert sum(1 for _ in batches.to_tf_dataset()) == len(batches)


def test_batches_feed_model_fit(id_pairs):
    sources, targets = id_pairs
    source_in = keras.Input((None,), dtype="int32", name="source_ids")
    target_in = keras.Input((None,), dtype="int32", name="target_ids")
    embed = keras.layers.Embedding(6000, 8)
    context = keras.ops.mean(embed(source_in), axis=1, keepdims=True)
    logits = keras.layers.Dense(6000)(embed(target_in) + context)
    model = keras.Model({"source_ids": source_in, "target_ids": target_in}, logits)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    batches = TeacherForcingBatches(sources[:256], targets[:256], batch_size=64)
    history = model.fit(batches, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert history.history["loss"][1] < history.history["loss"][0]


def test_numpy_path_needs_no_tensorflow():
    loaded = modules_imported_by(
        "from zoo.training.text_batches import TeacherForcingBatches\n"
        "b = TeacherForcingBatches([[5, 3]] * 5, [[6, 7]] * 5, batch_size=2)\n"
        "x, y = b[0]; assert y.dtype.name == 'int32'")
    assert "tensorflow" not in loaded
