"""The samplers' filters against Hugging Face's logits processors on the same logits (top-k,
top-p, temperature, repetition penalty), and their draws: repeatable by seed, a draw from the
filtered softmax (Gumbel-max over the hashed noise), greedy where only one token is left."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.generation.samplers import (
    FILTERED,
    GreedySampler,
    RandomSampler,
    TopKSampler,
    TopPSampler,
    get_sampler,
    top_p_filter,
    penalize_repetition,
    uniform_noise,
)
from zoo.training.errors import UserError

torch = pytest.importorskip("torch")
generation = pytest.importorskip("transformers.generation.logits_process")

LOGITS = np.random.default_rng(0).normal(size=(3, 50)).astype("float32") * 3


def _kept(logits):
    return np.asarray(ops.convert_to_numpy(logits)) > FILTERED / 2


def _hf_kept(warper, logits):
    out = warper(torch.zeros((logits.shape[0], 1), dtype=torch.long), torch.tensor(logits))
    return np.isfinite(out.numpy())


@pytest.mark.parametrize("k", [1, 5, 50])
def test_top_k_keeps_what_hugging_face_keeps(k):
    ours = _kept(TopKSampler(k=k).filter(ops.convert_to_tensor(LOGITS)))
    np.testing.assert_array_equal(ours, _hf_kept(generation.TopKLogitsWarper(k), LOGITS))


@pytest.mark.parametrize("p,temperature", [(0.1, 1.0), (0.5, 0.7), (0.9, 1.3), (1.0, 1.0)])
def test_top_p_keeps_what_hugging_face_keeps(p, temperature):
    scaled = LOGITS / temperature
    ours = _kept(TopPSampler(p=p).filter(ops.convert_to_tensor(scaled)))
    np.testing.assert_array_equal(ours, _hf_kept(generation.TopPLogitsWarper(p), scaled))


def jit(function):
    """`function` compiled as the searches compile it, on the backend in use."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(function)
    import tensorflow as tf

    return tf.function(function)


def _nucleus(logits, p):
    """Float64 reference: sort, cumulate, keep while the mass before a token is below p."""
    logits = logits.astype(np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    kept, margins = np.zeros(logits.shape, bool), []
    for row, (values, mass) in enumerate(zip(logits, probabilities)):
        order = np.argsort(-values, kind="stable")
        before = np.cumsum(mass[order]) - mass[order]
        kept[row] = values >= values[order][before < p].min()
        margins.append(np.abs(before - p).min())  # how near p the cut falls
    return kept, np.array(margins)


def test_top_p_on_a_whole_vocabulary_keeps_the_exact_nucleus():
    # GPT-2's 50,257 logits, heavy-tailed at several spreads, 100 tied best tokens in a row:
    # the nucleus found without a sort is the sorted float64 one wherever the float32 mass
    # is not within rounding of p; inside a compiled function (its halvings are a loop), and
    # with p a tensor.
    rng = np.random.default_rng(1)
    logits = np.concatenate([rng.standard_t(3, size=(4, 50257)) * scale
                             for scale in (0.5, 1.0, 3.0, 8.0)]).astype("float32")
    logits[0, :100] = logits[0, 0]
    logits[5, :100] = logits[5].max()
    filtered = jit(lambda x, p: top_p_filter(x, p))
    sizes = []
    for p in (0.05, 0.5, 0.9, 0.99):
        ours = _kept(filtered(ops.convert_to_tensor(logits), ops.convert_to_tensor(p)))
        expected, margins = _nucleus(logits, p)
        clear = margins > 1e-5
        assert clear.sum() >= 14
        np.testing.assert_array_equal(ours[clear], expected[clear])
        assert ours[5, :100].all()  # the tied best tokens, all of them
        sizes.extend(ours.sum(-1))
    assert min(sizes) == 1 and 10_000 < max(sizes) < 50257  # nuclei of every size
    # p = 1 keeps everything, though float32 masses of a long tail round to 1 before its end.
    assert _kept(top_p_filter(ops.convert_to_tensor(logits), 1.0)).all()


def test_repetition_penalty_equals_hugging_faces():
    seen_ids = torch.tensor([[1, 2, 3], [4, 4, 40], [0, 49, 7]])
    seen = np.zeros(LOGITS.shape, bool)
    np.put_along_axis(seen, seen_ids.numpy(), True, axis=1)
    expected = generation.RepetitionPenaltyLogitsProcessor(1.3)(seen_ids, torch.tensor(LOGITS))
    np.testing.assert_allclose(np.asarray(penalize_repetition(LOGITS, seen, 1.3)),
                               expected.numpy(), rtol=1e-6)


def test_draws_are_repeatable_and_follow_the_softmax():
    logits = ops.convert_to_tensor(np.log(np.array([[0.5, 0.3, 0.15, 0.05]] * 4000,
                                                   "float32")))
    sampler = RandomSampler()
    first = np.asarray(sampler.choose(logits, uniform_noise(7, 3, 4000, 4)))
    again = np.asarray(sampler.choose(logits, uniform_noise(7, 3, 4000, 4)))
    other = np.asarray(sampler.choose(logits, uniform_noise(8, 3, 4000, 4)))
    np.testing.assert_array_equal(first, again)
    assert (first != other).mean() > 0.3
    frequencies = np.bincount(first, minlength=4) / 4000
    np.testing.assert_allclose(frequencies, [0.5, 0.3, 0.15, 0.05], atol=0.03)
    one = TopKSampler(k=1).choose(ops.convert_to_tensor(LOGITS), uniform_noise(1, 0, 3, 50))
    np.testing.assert_array_equal(np.asarray(one), LOGITS.argmax(axis=1))
    np.testing.assert_array_equal(np.asarray(GreedySampler().choose(LOGITS, None)),
                                  LOGITS.argmax(axis=1))


@pytest.mark.parametrize("make,message", [
    (lambda: TopPSampler(p=0), "top_p must be a number in \\(0, 1\\]; got 0"),
    (lambda: TopPSampler(p=1.5), "top_p"),
    (lambda: TopKSampler(k=0), "top_k must be an integer >= 1; got 0"),
    (lambda: RandomSampler(temperature=float("inf")), "temperature must be a finite"),
    (lambda: RandomSampler(temperature=0), "temperature"),
    (lambda: get_sampler("nucleus"), "sampler must be one of"),
])
def test_bad_settings_are_one_line(make, message):
    with pytest.raises(UserError, match=message):
        make()
