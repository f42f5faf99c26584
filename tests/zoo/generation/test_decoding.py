"""Greedy and beam search on a model with hand-set weights, where the answers are known."""

import itertools

import keras
import numpy as np
import pytest
from keras import ops

from zoo.generation.beam import beam_search, length_penalty
from zoo.generation.greedy import greedy_search
from zoo.generation.loop import cache_lengths
from zoo.generation.top_k import blocked_top_k, first_index_of
from zoo.training.compilation import compile_for_backend

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
    # Reported scores are the sequences' log-probabilities (alpha = 0), for every hypothesis
    # that ended (the search stops once "B end" cannot be beaten: the others may be live).
    for k in range(3):
        if END in beam[0, k]:
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


def _reference_beam_search(log_p, batch, beam, max_length, alpha):
    """The one-stage search in NumPy: every hypothesis x every token scored, top `beam` kept;
    a sequence is done once its best ended hypothesis beats what any live one can reach."""
    vocab = log_p.shape[-1]
    tokens = np.full((batch, beam, max_length + 1), PAD)
    tokens[:, :, 0] = START
    scores = np.where(np.arange(beam) == 0, 0.0, -1e9)[None].repeat(batch, 0)
    lengths = np.zeros((batch, beam), int)
    finished = np.zeros((batch, beam), bool)
    for i in range(max_length):
        current = scores / ((5.0 + np.maximum(lengths, 1)) / 6.0) ** alpha
        best_ended = np.where(finished, current, -np.inf).max(1)
        best_reachable = np.where(finished, -np.inf,
                                  scores / ((5.0 + max_length) / 6.0) ** alpha).max(1)
        if (finished.all(1) | (best_ended > best_reachable)).all():
            break
        step = log_p[tokens[:, :, i]]  # (batch, beam, vocab)
        only_pad = np.where(np.arange(vocab) == PAD, 0.0, -1e9)
        step = np.where(finished[..., None], only_pad, step)
        candidates = scores[..., None] + step
        candidate_lengths = np.where(finished, lengths, i + 1)
        penalty = ((5.0 + candidate_lengths) / 6.0) ** alpha
        flat = (candidates / penalty[..., None]).reshape(batch, -1)
        chosen = np.argsort(-flat, axis=1, kind="stable")[:, :beam]
        source, token = chosen // vocab, chosen % vocab
        scores = np.take_along_axis(candidates.reshape(batch, -1), chosen, 1)
        tokens = np.take_along_axis(tokens, source[..., None], 1)
        tokens[:, :, i + 1] = token
        was_finished = np.take_along_axis(finished, source, 1)
        lengths = np.where(was_finished, np.take_along_axis(lengths, source, 1), i + 1)
        finished = was_finished | (token == END)
    final = scores / ((5.0 + np.maximum(lengths, 1)) / 6.0) ** alpha
    order = np.argsort(-final, axis=1, kind="stable")
    return (np.take_along_axis(tokens, order[..., None], 1)[:, :, 1:],
            np.take_along_axis(final, order, 1))


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("beam", [2, 3, 5])
def test_beam_search_equals_the_one_stage_search_on_random_bigrams(beam, large,
                                                                   monkeypatch):
    """The two-stage top-k (each hypothesis' best `beam` tokens, then the best of those)
    keeps exactly what scoring all hypothesis x token candidates keeps, ended beams and the
    length penalty included; as a small search runs (one step per loop iteration, the first
    on every row) and as a large one does (two per iteration, the first once per
    sentence)."""
    import zoo.generation.loop

    if large:
        monkeypatch.setattr(zoo.generation.loop, "GROW_CACHE_FROM", 0)
    vocab, batch, max_length = 9, 3, 6
    rng = np.random.default_rng(beam)
    logits = rng.normal(size=(vocab, vocab)) * 2.0
    logits[:, END] += 1.0  # hypotheses end at different steps
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    table = keras.layers.Embedding(vocab, vocab)
    table.build((None,))
    table.set_weights([logits.astype("float32")])

    def step(tokens, index, cache):
        return table(tokens)[:, 0, :], cache

    got_tokens, got_scores = beam_search(step, (ops.zeros((batch * beam, 1)),), batch, beam,
                                         max_length, START, END, alpha=0.6)
    want_tokens, want_scores = _reference_beam_search(log_p, batch, beam, max_length, 0.6)
    np.testing.assert_allclose(np.array(got_scores), want_scores, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(np.array(got_tokens), want_tokens)


@pytest.mark.parametrize("beam, vocab", [(3, 7), (6, 4)])
def test_the_first_step_once_per_sentence_finds_what_every_row_finds(beam, vocab,
                                                                     monkeypatch):
    """A large beam search takes its first step on one row per sentence and repeats the
    rows for the beam afterwards: the step sees `batch` rows once, and the tokens and scores
    are those of a small search, whose loop takes that step on all `batch * beam` rows; also
    with fewer tokens than hypotheses, where the others start at NEVER."""
    import zoo.generation.loop

    history_step, grow = _history_model(vocab=vocab, seed=3)
    rows_seen = []

    def step(tokens, index, cache):
        rows_seen.append(tokens.shape[0])
        return history_step(tokens, index, cache)

    batch, max_length = 2, 9

    def search():
        return beam_search(step, (ops.zeros((batch * beam, 0)),), batch, beam, max_length,
                           START, END, grow_cache=grow)

    want_tokens, want_scores = search()  # small: every step on every row
    assert set(rows_seen) == {batch * beam}
    monkeypatch.setattr(zoo.generation.loop, "GROW_CACHE_FROM", 0)
    rows_seen.clear()
    tokens, scores = search()
    assert rows_seen[0] == batch and set(rows_seen[1:]) == {batch * beam}
    np.testing.assert_array_equal(np.array(tokens), np.array(want_tokens))
    np.testing.assert_allclose(np.array(scores), np.array(want_scores), rtol=1e-5)


def test_search_stops_once_the_best_cannot_be_beaten():
    """"B end" (0.4) is found at step 2; A's continuations stay below 0.35 * 0.6 = 0.21, so
    no live hypothesis can beat it: the search stops, though A's hypotheses have not ended."""
    calls = []
    table, p = bigram_model(a_ends=0.01)

    def step(tokens, index, cache):
        calls.append(1)
        return table(tokens)[:, 0, :], cache

    # alpha = 0: a live hypothesis' log-probability bounds its score (with alpha > 0 the
    # bound is looser: the length penalty favours the longest).
    beam, scores = beam_search(step, (ops.zeros((3, 1)),), 1, 3, 50, START, END, alpha=0.0)
    assert list(np.array(beam)[0, 0][:2]) == [B, END]
    assert float(np.array(scores)[0, 0]) == pytest.approx(np.log(0.4), abs=1e-4)
    assert any(END not in row for row in np.array(beam)[0])  # a live one, cut short
    if keras.backend.backend() != "jax":  # jax traces the body once
        assert len(calls) <= 3


@pytest.mark.parametrize("n, k, block_size", [(8000, 4, 64), (1000, 3, 16), (999, 8, 8),
                                              (300, 1, 32), (40, 4, 64)])
@pytest.mark.parametrize("ties", [False, True])
def test_blocked_top_k_equals_a_stable_sort(n, k, block_size, ties):
    """Values and indices as NumPy's stable sort finds them (equal values: the lower index
    first), compiled as the searches are; with ties, whole blocks and rows repeat values."""
    rng = np.random.default_rng(n + k)
    values = rng.normal(size=(6, n)).astype("float32")
    if ties:
        values = np.round(values, 1)  # about 60 distinct values: many equal maxima
        values[1] = 2.5  # a whole row of one value
        values[2, :3 * block_size] = values[2].max() + 1  # the best blocks tie entirely
    top, indices = compile_for_backend(
        lambda v: blocked_top_k(v, k, block_size), keras.layers.Identity())(values)
    expected = np.argsort(-values, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(np.asarray(indices), expected)
    np.testing.assert_array_equal(np.asarray(top), np.take_along_axis(values, expected, 1))
    assert np.asarray(indices).dtype == np.int32


@pytest.mark.parametrize("n", [1, 7, 8000])
def test_first_index_of_the_maximum_equals_numpy_argmax(n):
    """The first index of each row's maximum, as NumPy's argmax finds it, compiled as the
    searches are: ties (the lower index wins), a row of one value, -inf logits (suppressed
    tokens), and a row of nothing but -inf."""
    rng = np.random.default_rng(n)
    values = np.round(rng.normal(size=(6, n)), 1).astype("float32")  # many equal maxima
    values[1] = 2.5
    values[2, n // 2:] = -np.inf
    values[3] = -np.inf
    first = compile_for_backend(lambda v: first_index_of(v, ops.max(v, axis=-1)),
                                keras.layers.Identity())(values)
    np.testing.assert_array_equal(np.asarray(first), np.argmax(values, axis=1))
    assert np.asarray(first).dtype == np.int32


@pytest.mark.parametrize("max_length", [1, 7, 15, 16, 17, 40, 129, 1024])
@pytest.mark.parametrize("first, growth", [(16, 2.0), (8, 1.5)])
def test_cache_lengths_grow_and_end_at_max_length(max_length, first, growth):
    lengths = cache_lengths(max_length, first, growth)
    assert lengths[-1] == max_length
    assert lengths[0] == min(first, max_length)
    # Each grows by at most `growth` (rounded up to a multiple of 8) and all but the last
    # are multiples of 8.
    assert all(a < b <= -(-growth * a // 8) * 8 for a, b in zip(lengths, lengths[1:]))
    assert all(length % 8 == 0 for length in lengths[:-1])


def _history_model(vocab: int = 7, seed: int = 0):
    """A step function whose logits depend on every token written so far, through a cache
    of `(rows, length)` token ids that it writes at `index`: a search that lost or misplaced
    any cached position when growing or reordering the cache would choose otherwise."""
    rng = np.random.default_rng(seed)
    table = ops.convert_to_tensor(rng.normal(size=(vocab, vocab)).astype("float32"))
    mix = ops.convert_to_tensor(rng.normal(size=(vocab, vocab)).astype("float32"))

    def step(tokens, index, cache):
        (history,) = cache
        history = ops.slice_update(history, [0, index], ops.cast(tokens, "float32"))
        seen = ops.one_hot(ops.cast(history, "int32"), vocab)  # (rows, length, vocab)
        written = ops.expand_dims(ops.arange(ops.shape(history)[1]) <= index, -1)
        counts = ops.sum(ops.where(written, seen, 0.0), axis=1)
        logits = ops.take(table, tokens[:, 0], axis=0) + 0.3 * ops.matmul(counts, mix)
        # END is unlikely, so that hypotheses outlive the first cache lengths.
        return logits - 4.0 * ops.one_hot(END, vocab), (history,)

    def grow(cache, length):
        (history,) = cache
        return (ops.pad(history, [[0, 0], [0, length - ops.shape(history)[1]]]),)

    return step, grow


@pytest.mark.parametrize("odd_lengths", [False, True])
@pytest.mark.parametrize("beam", [1, 3])
def test_a_growing_cache_finds_what_a_full_one_finds(beam, odd_lengths, monkeypatch):
    """Searches that grow the cache (16, 32, 40 positions; or 5, 21, 32, 40, where beam
    search's two steps per loop iteration straddle a length unless each loop's own condition
    guards the second) return exactly the tokens and scores of the same searches over a cache
    of all 40 positions from the start."""
    import zoo.generation.loop

    monkeypatch.setattr(zoo.generation.loop, "GROW_CACHE_FROM", 0)  # small as the search is
    if odd_lengths:
        monkeypatch.setattr(zoo.generation.loop, "cache_lengths",
                            lambda max_length, *growth: [5, 21, 32, max_length])
    step, grow = _history_model()
    batch, max_length = 2, 40
    rows = batch * beam
    if beam == 1:
        full = greedy_search(step, (ops.zeros((rows, max_length)),), batch, max_length,
                             START, END)
        grown = greedy_search(step, (ops.zeros((rows, 0)),), batch, max_length, START, END,
                              grow_cache=grow)
    else:
        full = beam_search(step, (ops.zeros((rows, max_length)),), batch, beam, max_length,
                           START, END)
        grown = beam_search(step, (ops.zeros((rows, 0)),), batch, beam, max_length, START,
                            END, grow_cache=grow)
    tokens = np.array(full[0])
    assert (tokens[..., 32:] != PAD).any()  # the last cache length was reached
    np.testing.assert_array_equal(np.array(grown[0]), tokens)
    np.testing.assert_allclose(np.array(grown[1]), np.array(full[1]), rtol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a graph's tensor length")
def test_a_growing_cache_with_a_tensor_max_length():
    """In a TensorFlow graph (an export's), `max_length` is a tensor: the cache lengths are
    those of the static `length_limit`, capped at it, and the search is the same."""
    import tensorflow as tf

    step, grow = _history_model(seed=1)
    batch, beam, max_length = 2, 2, 37

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def search(length):
        return beam_search(step, (ops.zeros((batch * beam, 0)),), batch, beam, length,
                           START, END, grow_cache=grow, length_limit=64)

    tokens, scores = search(tf.constant(max_length))
    want_tokens, want_scores = beam_search(step, (ops.zeros((batch * beam, max_length)),),
                                           batch, beam, max_length, START, END)
    np.testing.assert_array_equal(np.array(tokens), np.array(want_tokens))
    np.testing.assert_allclose(np.array(scores), np.array(want_scores), rtol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a graph's tensor batch")
@pytest.mark.parametrize("beam", [1, 3])
def test_finished_sequences_leave_a_graph_batch_and_keep_their_results(beam):
    """In a graph of unknown batch size the searches drop finished sequences between cache
    lengths (8, 16, 24, 40): every sequence's tokens and scores are those of the same search
    over the whole batch. Each sequence's context row holds its length, which the step reads
    (the end token is forced there), so a context row that followed the wrong sequence, or a
    result written back to the wrong place, changes the answer."""
    import tensorflow as tf

    history_step, grow = _history_model(seed=2)
    ends = np.array([5, 20, 40, 17, 33, 3], "float32")  # dropped at 8, 24, 40 or never
    batch, max_length = len(ends), 40

    def step(tokens, index, cache, context):
        (length,) = context
        logits, cache = history_step(tokens, index, cache)
        forced = ops.cast(ops.cast(index + 1, "float32") >= length, "float32") * 50.0 \
            * ops.one_hot(END, 7)
        return logits + forced, cache

    def search(lengths, rows):
        context = (ops.repeat(lengths, beam, axis=0),)
        cache = (ops.zeros((rows * beam, 0)),)
        if beam == 1:
            return greedy_search(step, cache, rows, max_length, START, END, grow_cache=grow,
                                 context=context)
        return beam_search(step, cache, rows, beam, max_length, START, END, grow_cache=grow,
                           context=context)

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def graph_search(lengths):
        return search(lengths, tf.shape(lengths)[0])

    lengths = ends[:, None]
    want_tokens, want_scores = search(ops.convert_to_tensor(lengths), batch)
    tokens, scores = graph_search(tf.constant(lengths))
    best = np.array(want_tokens) if beam == 1 else np.array(want_tokens)[:, 0]
    assert ((best == END).argmax(-1) + 1 == np.minimum(ends, max_length)).all()
    np.testing.assert_array_equal(np.array(tokens), np.array(want_tokens))
    np.testing.assert_allclose(np.array(scores), np.array(want_scores), rtol=1e-5)


@pytest.mark.parametrize("limit", [0, 1, 4, 5])
def test_two_steps_per_iteration_stop_where_one_step_would(limit):
    """The searches' loop body runs two steps per iteration (`_two_steps`); the second must
    not run once the condition fails, or an odd number of steps would take one too many."""
    from zoo.generation.loop import _two_steps

    def cond(i, total):
        return i < limit

    def body(i, total):
        return i + 1, total + 10 * (i + 1)

    i, total = ops.while_loop(cond, _two_steps(cond, body),
                              (ops.convert_to_tensor(0), ops.convert_to_tensor(0)))
    assert int(i) == limit
    assert int(total) == sum(10 * (k + 1) for k in range(limit))
