"""`Translator.fit` on text: sentence pairs in, the recipe's loss and metric, token batches
that the model's own tokenizer makes."""

from __future__ import annotations

import copy
import keras
import numpy as np
import pytest

from zoo.models.translator.model import Translator
from zoo.models.translator.text_training import sentence_pairs

SMALL = dict(hidden_dim=32, intermediate_dim=64, num_heads=2, num_encoder_layers=1,
             num_decoder_layers=1, max_source_length=64, max_target_length=64)


@pytest.fixture
def translator(small_tokenizer):
    keras.utils.set_random_seed(0)
    return Translator.from_architecture("transformer-tiny", small_tokenizer, **SMALL)


@pytest.fixture(scope="module")
def pairs(multi30k_pairs):
    return [(s, t) for s, t in multi30k_pairs[:64]]


def test_fit_on_sentence_lists_compiles_with_the_recipes_loss_and_learns(translator, pairs):
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    assert not translator.compiled
    history = translator.fit(sources, targets, batch_size=16, epochs=4, verbose=0,
                             validation_data=(sources[:16], targets[:16]))
    assert translator.compiled
    assert {"loss", "masked_accuracy", "val_loss"} <= set(history.history)
    losses = history.history["loss"]
    assert all(b < a for a, b in zip(losses, losses[1:])), losses  # it learns the pairs
    # The loss is the label-smoothed cross-entropy over the target tokens only: recomputed
    # here on one batch from the model's logits.
    batches = translator.text_batches(sources[:8], targets[:8], batch_size=8, shuffle=False)
    (inputs, labels) = batches[0]
    logits = keras.ops.convert_to_numpy(translator(inputs, training=False)).astype("float64")
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    vocabulary = logits.shape[-1]
    smooth = np.full_like(log_probs, 0.1 / vocabulary)
    np.put_along_axis(smooth, labels[..., None], 0.9 + 0.1 / vocabulary, axis=-1)
    token_loss = -(smooth * log_probs).sum(-1)
    mask = labels != translator.pad_id
    expected = token_loss[mask].mean()
    got = translator.evaluate(inputs, labels, verbose=0, return_dict=True)["loss"]
    assert got == pytest.approx(expected, rel=1e-3)


def test_fit_on_two_text_files_equals_fit_on_the_lists(small_tokenizer, pairs, tmp_path):
    sources, targets = [s for s, _ in pairs[:32]], [t for _, t in pairs[:32]]
    (tmp_path / "train.en").write_text("\n".join(sources) + "\n")
    (tmp_path / "train.de").write_text("\n".join(targets) + "\n")
    weights = []
    for x, y in ((sources, targets), (tmp_path / "train.en", str(tmp_path / "train.de"))):
        keras.utils.set_random_seed(0)
        model = Translator.from_architecture("transformer-tiny", small_tokenizer, **SMALL)
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
        weights.append([keras.ops.convert_to_numpy(w) for w in model.weights])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_a_dataset_of_string_pairs_reads_as_the_lists(pairs):
    tf = pytest.importorskip("tensorflow")
    sources, targets = [s for s, _ in pairs[:5]], [t for _, t in pairs[:5]]
    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
    assert sentence_pairs(dataset) == (sources, targets)
    with pytest.raises(ValueError, match=r"must yield \(source, target\) string pairs"):
        sentence_pairs(tf.data.Dataset.from_tensor_slices([1, 2]))


def test_a_dataset_of_token_batches_goes_to_keras_as_before(translator, pairs):
    """The recipe fits on `TeacherForcingBatches.to_tf_dataset()`: not text, Keras's."""
    pytest.importorskip("tensorflow")
    from zoo.training.losses import MaskedSparseCrossEntropy

    translator.compile(optimizer="adam", loss=MaskedSparseCrossEntropy())
    batches = translator.text_batches([s for s, _ in pairs[:16]], [t for _, t in pairs[:16]],
                                      batch_size=8)
    history = translator.fit(batches.to_tf_dataset(), epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1


@pytest.mark.parametrize("sources, targets, message", [
    (["A dog."], None, "needs the target sentences too"),
    (["A dog.", "A cat."], ["Ein Hund."], "2 source sentences but 1 targets"),
    (["A dog."], [3], "targets must be sentences"),
])
def test_bad_text_is_one_line(translator, sources, targets, message):
    with pytest.raises(ValueError, match=message):
        translator.fit(sources, targets, verbose=0)


def test_pairs_longer_than_the_model_are_left_out_with_a_count(translator, pairs):
    long = " ".join(["word"] * 200)
    with pytest.warns(UserWarning, match="1 of 3 sentence pairs are longer"):
        batches = translator.text_batches([pairs[0][0], long, pairs[1][0]],
                                          [pairs[0][1], "kurz", pairs[1][1]], shuffle=False)
    assert sum(len(batch[1]) for batch in (batches[i] for i in range(len(batches)))) == 2


def test_token_batches_still_fit_as_before(translator, small_tokenizer, pairs):
    from zoo.training.losses import MaskedSparseCrossEntropy

    translator.compile(optimizer="adam", loss=MaskedSparseCrossEntropy())
    batches = translator.text_batches([s for s, _ in pairs[:16]], [t for _, t in pairs[:16]],
                                      batch_size=8)
    history = translator.fit(*batches[0], epochs=1, verbose=0)
    assert list(history.history) == ["loss"]  # its own compile, not the default one


def test_targets_are_cut_by_the_tokenizers_target_side(small_tokenizer, pairs):
    """OPUS-MT cuts sources with source.spm and targets with target.spm: the decoder must
    learn target ids. A tokenizer whose target side differs (here: every target piece one
    id higher) shows which side `fit` used."""
    class TwoSided(type(small_tokenizer)):
        def _encode_target_texts(self, texts):
            return [[(i + 1) % self.vocabulary_size for i in row]
                    for row in self._encode_texts(texts)]

    tokenizer = copy.copy(small_tokenizer)
    tokenizer.__class__ = TwoSided
    model = Translator.from_architecture("transformer-tiny", tokenizer, **SMALL)
    sources, targets = [s for s, _ in pairs[:4]], [t for _, t in pairs[:4]]
    seen = []
    for inputs, labels in model.text_batches(sources, targets, batch_size=4, shuffle=False):
        decoded = tokenizer.decode([[i for i in row if i != tokenizer.pad_id]
                                    for row in inputs["source_ids"]])
        for row, source in zip(labels, decoded):
            target = targets[sources.index(source)]
            expected = tokenizer.encode([target], add_end=False, target=True)[0]
            assert expected != tokenizer.encode([target], add_end=False)[0]
            assert [int(i) for i in row[:len(expected) + 1]] == expected + [tokenizer.end_id]
            seen.append(source)
    assert sorted(seen) == sorted(sources)


@pytest.mark.parametrize("backend, loss, expected", [
    ("jax", None, True),  # uncompiled: fit compiles with the masked loss
    ("jax", "masked", True),
    ("jax", "sparse_categorical_crossentropy", False),  # pad rows would count
    ("tensorflow", None, False),  # fit retraces with relaxed shapes
])
def test_fit_pads_each_bucket_to_one_shape_where_jax_would_recompile(
        translator, pairs, monkeypatch, backend, loss, expected):
    from zoo.models.translator import text_training
    from zoo.training.losses import MaskedSparseCrossEntropy

    if loss is not None:
        translator.compile(optimizer="sgd", loss=MaskedSparseCrossEntropy()
                           if loss == "masked" else loss)
    monkeypatch.setattr(text_training.keras.backend, "backend", lambda: backend)
    monkeypatch.setattr(text_training, "_for_fit", lambda batches: batches)
    seen = {}
    monkeypatch.setattr(keras.Model, "fit", lambda self, x, y, **kw: seen.update(
        x=x, validation=kw["validation_data"]))
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    translator.fit(sources, targets, batch_size=16, validation_data=(sources, targets))
    assert seen["x"].one_shape_per_bucket is seen["validation"].one_shape_per_bucket is expected
    batches = seen["x"]
    shapes = {batches[i][1].shape for i in range(len(batches))}
    widths = {width for _, width in shapes}  # one a length bucket
    assert (len(shapes) == len(widths)) is expected, shapes
