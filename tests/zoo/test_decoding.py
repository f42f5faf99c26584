"""Greedy and beam search on a model with hand-set weights, where the answers are known."""

import itertools

import keras
import numpy as np
import pytest
from keras import ops

from zoo.decoding import beam_search, compile_for_backend, greedy_search, length_penalty

PAD, START, END, A, B = 0, 2, 3, 4, 5


def bigram_model(a_ends: float = 0.3):
    """A 'model' whose next-token distribution depends only on the previous token.

    From the start token, A (0.6) beats B (0.4), so greedy takes A; but A continues with
    probabilities of at most 0.35 while B ends at once with probability 1: the best whole
    sequence is "B end" (0.4), which only a search that looks past the first step finds.
    """
    p = np.full((6, 6), 1e-6)
    p[START, A], p[START, B] = 0.6, 0.4
    p[A, END], p[A, A], p[A, B] = a_ends, (1 - a_ends) / 2, (1 - a_ends) / 2
    p[B, END] = 1.0
    p[END, END] = p[PAD, PAD] = 1.0
    p /= p.sum(1, keepdims=True)
    table = keras.layers.Embedding(6, 6)
    table.build((None,))
    table.set_weights([np.log(p).astype("float32")])
    return table, p


def sequence_log_prob(p, tokens):
    total, previous = 0.0, START
    for t in tokens:
        total += np.log(p[previous, t])
        if t == END:
            break
        previous = t
    return total


def test_beam_search_beats_greedy_on_hand_set_weights():
    table, p = bigram_model()

    def step(tokens, index, cache):
        return table(tokens)[:, 0, :], cache

    greedy, greedy_scores = greedy_search(step, (ops.zeros((2, 1)),), 2, 6, START, END)
    beam, beam_scores = beam_search(step, (ops.zeros((6, 1)),), 2, 3, 6, START, END, alpha=0.0)
    greedy, beam = np.array(greedy), np.array(beam)
    assert list(greedy[0][:2]) == [A, A]
    assert list(beam[0, 0][:2]) == [B, END]
    assert float(np.array(beam_scores)[0, 0]) == pytest.approx(np.log(0.4), abs=1e-4)
    assert float(np.array(beam_scores)[0, 0]) > float(np.array(greedy_scores)[0]) + 1.0
    # The best beam is the best sequence of all (exhaustive check over length <= 3).
    best = max(sequence_log_prob(p, s + (END,)) for n in (0, 1, 2)
               for s in itertools.product(range(6), repeat=n))
    assert float(np.array(beam_scores)[0, 0]) == pytest.approx(best, abs=1e-4)
    # Reported scores are the sequences' log-probabilities (alpha = 0).
    for k in range(3):
        assert float(np.array(beam_scores)[0, k]) == pytest.approx(
            sequence_log_prob(p, beam[0, k]), abs=1e-3)
    # Padding after the end token.
    assert np.all(beam[0, 0][2:] == PAD)


def test_beam_one_equals_greedy():
    table, _ = bigram_model()
    noise = keras.layers.Embedding(6, 6)
    noise.build((None,))  # variables must exist before a compiled loop traces the step

    def step(tokens, index, cache):
        return table(tokens)[:, 0, :] + noise(tokens)[:, 0, :], cache

    greedy, g_scores = greedy_search(step, (ops.zeros((3, 1)),), 3, 7, START, END)
    beam, b_scores = beam_search(step, (ops.zeros((3, 1)),), 3, 1, 7, START, END, alpha=0.0)
    np.testing.assert_array_equal(np.array(beam)[:, 0], np.array(greedy))
    np.testing.assert_allclose(np.array(b_scores)[:, 0], np.array(g_scores), atol=1e-5)


def test_cache_is_reordered_with_its_beam():
    """A cache row that records each hypothesis' history must follow it when beams swap."""
    table, _ = bigram_model()

    def step(tokens, index, cache):
        history = ops.slice_update(cache[0], [0, index], ops.cast(tokens, "float32"))
        return table(tokens)[:, 0, :], (history,)

    beam, _ = beam_search(step, (ops.zeros((3, 8)),), 1, 3, 6, START, END, alpha=0.0)
    assert list(np.array(beam)[0, 0][:2]) == [B, END]


def test_early_stop_when_every_beam_has_ended():
    calls = []
    table, _ = bigram_model(a_ends=0.9)

    def step(tokens, index, cache):
        calls.append(1)
        return table(tokens)[:, 0, :], cache

    # Both kept hypotheses (A end, B end) have ended after two steps; eagerly the loop body
    # runs once per step, so it must stop long before the 50-token budget.
    beam_search(step, (ops.zeros((2, 1)),), 1, 2, 50, START, END, alpha=0.0)
    if keras.backend.backend() != "jax":  # jax traces the body once
        assert len(calls) <= 3


def test_length_penalty_gnmt():
    assert float(length_penalty(1, 0.0)) == pytest.approx(1.0)
    assert float(length_penalty(7, 1.0)) == pytest.approx(2.0)
    assert float(length_penalty(1, 0.6)) == pytest.approx(1.0)


def test_compiled_search_equals_eager():
    table, _ = bigram_model()

    def step(tokens, index, cache):
        return table(tokens)[:, 0, :], cache

    model = keras.Sequential([table])
    fn = compile_for_backend(
        lambda c: beam_search(step, (c,), 2, 2, 5, START, END, alpha=0.6), model)
    compiled = fn(ops.zeros((4, 1)))
    eager = beam_search(step, (ops.zeros((4, 1)),), 2, 2, 5, START, END, alpha=0.6)
    np.testing.assert_array_equal(np.array(compiled[0]), np.array(eager[0]))


def test_bad_beam_size():
    with pytest.raises(ValueError, match="beam_size must be at least 1; got 0"):
        beam_search(lambda t, i, c: (t, c), (), 1, 0, 3, START, END)
