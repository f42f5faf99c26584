"""Each sequence's own most tokens (`max_lengths`): a sequence searched beside others ends
where a search of it alone, with its own `max_length`, ends (issue 52: a translation's
budget follows its own source, not the longest source in its batch)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.zoo.generation.test_decoding import END, PAD, START, _history_model
from zoo.generation.beam import beam_search
from zoo.generation.greedy import greedy_search

# Own lengths: one token, a few, one past a cache length, the whole search.
OWN = np.array([1, 4, 17, 40, 9], "int32")
MAX_LENGTH = 40


def _search(step, grow, beam, rows, max_length, max_lengths=None, context=None):
    cache = (ops.zeros((rows * beam, 0)),)
    settings = dict(grow_cache=grow, context=context, max_lengths=max_lengths,
                    length_limit=64)
    if beam == 1:
        return greedy_search(step, cache, rows, max_length, START, END, **settings)
    return beam_search(step, cache, rows, beam, max_length, START, END, **settings)


def _alone(step, grow, beam):
    """Each sequence searched on its own, `max_length` its own length, padded to MAX_LENGTH."""
    tokens, scores = [], []
    for own in OWN:
        t, s = _search(step, grow, beam, 1, int(own))
        t = np.array(t)[0]
        pad = [(0, 0)] * (t.ndim - 1) + [(0, MAX_LENGTH - int(own))]
        tokens.append(np.pad(t, pad, constant_values=PAD))
        scores.append(np.array(s)[0])
    return np.stack(tokens), np.stack(scores)


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("beam", [1, 3])
def test_each_sequence_ends_at_its_own_length_as_it_would_alone(beam, large, monkeypatch):
    """Small searches run one loop and take beam search's first step inside it; large ones
    grow the cache, take two steps per iteration and the first step once per sentence."""
    import zoo.generation.loop

    if large:
        monkeypatch.setattr(zoo.generation.loop, "GROW_CACHE_FROM", 0)
    step, grow = _history_model(seed=3)
    want_tokens, want_scores = _alone(step, grow, beam)
    best = want_tokens if beam == 1 else want_tokens[:, 0]
    # The model rarely ends: most sequences run to their own length.
    assert [(row != PAD).sum() for row in best] == OWN.tolist()
    tokens, scores = _search(step, grow, beam, len(OWN), MAX_LENGTH, ops.convert_to_tensor(OWN))
    np.testing.assert_array_equal(np.array(tokens), want_tokens)
    np.testing.assert_allclose(np.array(scores), want_scores, rtol=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_without_own_lengths_a_sequence_runs_to_the_batch_length(beam):
    """What `max_lengths` is for: without it, every sequence runs to `max_length`."""
    step, grow = _history_model(seed=3)
    tokens, _ = _search(step, grow, beam, len(OWN), MAX_LENGTH)
    best = np.array(tokens) if beam == 1 else np.array(tokens)[:, 0]
    assert ((best != PAD).sum(-1) > OWN).any()


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a graph's tensor batch")
@pytest.mark.parametrize("beam", [1, 3])
def test_own_lengths_follow_their_sequences_when_finished_ones_leave_a_graph_batch(beam):
    """In a graph of unknown batch size, finished sequences leave the batch between cache
    lengths with their context rows; the own lengths are such rows. The model's context
    (here each row's id, added to its logits) still reaches the model without them."""
    import tensorflow as tf

    history_step, grow = _history_model(seed=3)

    def step(tokens, index, cache, context):
        (bias,) = context
        logits, cache = history_step(tokens, index, cache)
        return logits + 0.0 * bias, cache

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def graph_search(own):
        rows = tf.shape(own)[0]
        context = (tf.zeros([rows * beam, 1]),)
        return _search(step, grow, beam, rows, tf.reduce_max(own), own, context)

    want_tokens, want_scores = _alone(history_step, grow, beam)
    tokens, scores = graph_search(tf.constant(OWN))
    tokens = np.array(tokens)
    width = tokens.shape[-1]
    np.testing.assert_array_equal(tokens, want_tokens[..., :width])
    assert (want_tokens[..., width:] == PAD).all()
    np.testing.assert_allclose(np.array(scores), want_scores, rtol=1e-5)
