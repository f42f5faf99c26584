"""The translator model: cached decoding, search, saving with its tokenizer, bad input."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo.models.architectures import ARCHITECTURES
from zoo.models.translator.model import Translator

SMALL = dict(hidden_dim=32, intermediate_dim=64, num_heads=4, num_encoder_layers=2,
             num_decoder_layers=2, max_source_length=32, max_target_length=24)


@pytest.fixture(scope="module")
def model(small_tokenizer):
    keras.utils.set_random_seed(0)
    return Translator.from_architecture("transformer-tiny", small_tokenizer, **SMALL)


def _batch(tokenizer, pairs):
    source = tokenizer.encode_batch_padded([s for s, _ in pairs])
    target = tokenizer.encode_batch_padded([t for _, t in pairs], add_start=True, add_end=False)
    return source, target


@pytest.mark.parametrize("normalize_first", [False, True])
def test_cached_decoding_equals_full_pass(small_tokenizer, multi30k_pairs, normalize_first):
    m = Translator.from_architecture("transformer-tiny", small_tokenizer, **SMALL,
                               normalize_first=normalize_first)
    source, target = _batch(small_tokenizer, multi30k_pairs[:3])
    full = np.array(m({"source_ids": source, "target_ids": target}))
    memory, mask = m.encode(source)
    self_cache, cross_cache = m.initial_cache(memory, target.shape[1])
    steps = []
    for i in range(target.shape[1]):
        logits, self_cache = m.decode_step(target[:, i:i + 1], i, self_cache, cross_cache, mask)
        steps.append(np.array(logits))
    real = target != 0  # padded target positions have no defined output
    np.testing.assert_allclose(np.stack(steps, 1)[real], full[real], atol=1e-4)


def test_beam_one_equals_greedy(model, multi30k_pairs):
    source = model.encode_texts([s for s, _ in multi30k_pairs[:4]])
    greedy, greedy_scores = model.search(source, beam_size=1, max_length=10)
    beam, beam_scores = model.generate(source, beam_size=1, max_length=10)
    np.testing.assert_array_equal(np.array(beam), greedy)
    np.testing.assert_allclose(np.array(beam_scores), greedy_scores, atol=1e-4)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_grown_cache_translates_as_a_full_one(model, multi30k_pairs, monkeypatch,
                                               beam_size):
    """A search that grows its cache (16 then 20 positions) returns what the same search
    over a cache of all 20 positions returns."""
    import zoo.generation.loop

    source, _ = _batch(model.tokenizer, multi30k_pairs[:4])
    model.ensure_built()
    monkeypatch.setattr(zoo.generation.loop, "GROW_CACHE_FROM", 10**9)
    full = model.generate(source, beam_size=beam_size, max_length=20)
    monkeypatch.setattr(zoo.generation.loop, "GROW_CACHE_FROM", 0)
    grown = model.generate(source, beam_size=beam_size, max_length=20)
    assert (np.array(full[0])[..., 16:] != model.pad_id).any()  # the second length was used
    np.testing.assert_array_equal(np.array(grown[0]), np.array(full[0]))
    np.testing.assert_allclose(np.array(grown[1]), np.array(full[1]), rtol=1e-5, atol=1e-5)


def test_beam_scores_are_sorted_and_best_is_returned(model, multi30k_pairs):
    source = model.encode_texts([s for s, _ in multi30k_pairs[:3]])
    tokens, scores = model.search(source, beam_size=3, max_length=8)
    assert tokens.shape == (3, 3, 8)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    texts, text_scores = model.translate([s for s, _ in multi30k_pairs[:3]], beam_size=3,
                                         max_length=8, return_scores=True)
    np.testing.assert_allclose(text_scores, scores[:, 0], atol=1e-5)
    assert texts == model.tokenizer.decode(tokens[:, 0])


def test_search_compiles_once_per_shape(model, multi30k_pairs):
    source = model.encode_texts([s for s, _ in multi30k_pairs[:2]])
    model._search_functions.clear()
    model.search(source, beam_size=2, max_length=6)
    model.search(source + 0, beam_size=2, max_length=6)
    assert len(model._search_functions) == 1
    if keras.backend.backend() == "tensorflow":
        (fn,) = model._search_functions.values()
        assert fn.experimental_get_tracing_count() == 1


def test_save_and_load_keeps_tokenizer_and_outputs(model, multi30k_pairs, tmp_path):
    path = tmp_path / "translator.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)  # safe mode: no pickles, no lambdas
    texts = [s for s, _ in multi30k_pairs[:3]]
    assert loaded.tokenizer.proto == model.tokenizer.proto
    assert loaded.translate(texts, beam_size=2, max_length=8) == model.translate(
        texts, beam_size=2, max_length=8)


def test_empty_and_blank_inputs_give_empty_translations(model):
    assert model.translate(["", "   "], beam_size=2, max_length=5) == ["", ""]
    assert model.translate("", max_length=5) == [""]


def test_long_input_is_truncated_with_a_warning(model):
    with pytest.warns(UserWarning, match="truncated to 32"):
        (out,) = model.translate(["word " * 2000], beam_size=1, max_length=5)
    assert isinstance(out, str)


def test_invalid_utf8_is_a_clear_error(model):
    with pytest.raises(ValueError, match="UTF-8"):
        model.translate([b"\xff\xfe broken"], max_length=5)


def test_bad_call_inputs(model):
    with pytest.raises(ValueError, match="source_ids.*target_ids"):
        model(np.zeros((1, 3), "int32"))
    with pytest.raises(ValueError, match="unknown Translator architecture 'nope'"):
        Translator.from_architecture("nope", model.tokenizer)


def test_paper_base_preset_size(small_tokenizer):
    """transformer-base: 6+6 layers, d 512, 8 heads, d_ff 2048; with a 37,000-token shared
    vocabulary the paper's Table 3 lists 65M parameters."""
    import zoo.text.tokenizer as tokenizer_module  # noqa: F401  (the fixture's class)

    config = {**ARCHITECTURES["transformer-base"].config, "vocabulary_size": 37000}
    base = Translator(**config)
    base({"source_ids": np.ones((1, 2), "int32"), "target_ids": np.ones((1, 2), "int32")})
    assert 60e6 < base.count_params() < 66e6
    assert len(base.encoder_blocks) == 6 and len(base.decoder_blocks) == 6


@pytest.mark.slow
def test_same_translation_on_tensorflow_and_jax(model, multi30k_pairs, tmp_path):
    pytest.importorskip("jax")
    path = tmp_path / "translator.keras"
    model.save(path)
    texts = [s for s, _ in multi30k_pairs[:3]]
    code = (
        "import sys, json, keras\n"
        "import zoo.models.translator.model\n"
        f"m = keras.saving.load_model({str(path)!r})\n"
        f"print(json.dumps(m.translate({texts!r}, beam_size=3, max_length=8)))\n"
    )
    outputs = {}
    for backend in ("tensorflow", "jax"):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env={**os.environ, "KERAS_BACKEND": backend}, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[backend] = result.stdout.strip().splitlines()[-1]
    assert outputs["tensorflow"] == outputs["jax"]


def test_translate_batches_by_length_and_answers_in_order(model, monkeypatch):
    """Sentences go to the search in batches of similar source length (each batch padded to
    its own longest), and each translation comes back at its sentence's place: the same as
    translating it alone."""
    texts = ["A dog.", "Two men in blue shirts are talking outside a big old red building.",
             "", "A cat sleeps.", "Many people walk along a busy street in a large city at night."]
    alone = [model.translate([t], beam_size=2)[0] for t in texts]
    widths = []
    search = model.search

    def recording(ids, *args, **kwargs):
        widths.append(ids.shape)
        return search(ids, *args, **kwargs)

    monkeypatch.setattr(model, "search", recording)
    assert model.translate(texts, beam_size=2, batch_size=2) == alone
    lengths = sorted(len(ids) for ids in model.tokenizer.encode(
        [t for t in texts if t], max_length=model.max_source_length))
    assert [shape[0] for shape in widths] == [2, 2]
    assert widths[0][1] == -(-lengths[1] // 8) * 8 < widths[1][1] == -(-lengths[3] // 8) * 8


@pytest.mark.parametrize("force_end", [False, True])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_sentence_keeps_its_own_budget_beside_a_longer_one(model, beam_size, force_end):
    """A sentence's output budget is its own source's (`source_budgets`), not that of the
    batch's padded width: searched beside a longer sentence, it gives the tokens and score it
    gives alone (issue 52). A forced end token comes at each sentence's own last position."""
    if force_end:
        forced = Translator.from_architecture("transformer-tiny", model.tokenizer,
                                              force_end_at_max_length=True, **SMALL)
        model.ensure_built()
        forced.ensure_built()
        forced.set_weights(model.get_weights())
        model = forced
    texts = ["A dog.", "Two men in blue shirts are talking outside a big old red building."]
    ids = model.encode_texts(texts)
    budgets = np.asarray(model.source_budgets(ids))
    assert budgets[0] < budgets[1] == model.default_max_length(ids.shape[1])
    tokens, scores = model.search(ids, beam_size)
    alone = model.encode_texts(texts[:1])
    alone_tokens, alone_scores = model.search(alone, beam_size)
    # Its ids not padded at all (a width that is no multiple of 8): the same budget.
    unpadded_tokens, _ = model.search(alone[:, :int((alone != model.pad_id).sum())], beam_size)
    if beam_size > 1:
        tokens, alone_tokens = tokens[:, 0], alone_tokens[:, 0]
        scores, alone_scores = scores[:, 0], alone_scores[:, 0]
        unpadded_tokens = unpadded_tokens[:, 0]
    assert alone_tokens.shape[-1] == budgets[0]
    np.testing.assert_array_equal(tokens[0, :budgets[0]], alone_tokens[0])
    np.testing.assert_array_equal(unpadded_tokens, alone_tokens)
    assert (tokens[0, budgets[0]:] == model.pad_id).all()
    np.testing.assert_allclose(scores[0], alone_scores[0], rtol=1e-5)
    if force_end:
        end = model.special_ids()[1]
        for row, budget in zip(tokens, budgets):
            assert end in row[:budget].tolist()
        # Lengths past the default budget are held to it, and end there too.
        tokens, _ = model.generate(ids, beam_size, max_lengths=np.full(2, 10_000, "int32"))
        for row in np.asarray(tokens).reshape(-1, tokens.shape[-1]):
            assert end in row.tolist()
