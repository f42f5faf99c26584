"""The samplers' filters against Hugging Face's logits processors on the same logits (top-k,
top-p, temperature, repetition penalty), and their draws: repeatable by seed, a draw from the
filtered softmax (Gumbel-max over the hashed noise), greedy where only one token is left."""

from __future__ import annotations

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
