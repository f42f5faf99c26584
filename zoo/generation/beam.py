"""Beam search with the GNMT length penalty, over the searches' shared loop
(`zoo.generation.loop`, whose docstring describes the model's step function).

The loop's state is `(i, tokens, log_probs, lengths, finished, cache, context)`: `tokens`
`(batch, beam, 1 + max_length)` int32, the start token first; `log_probs`, `lengths` and
`finished` `(batch, beam)`; `cache` and `context` `batch * beam` rows (row `b * beam + k`).
Each step is a module-level function of `_Beam`, what every step reads and none changes.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import keras
import numpy as np
from keras import ops

from zoo.generation.loop import (
    GrowCache,
    NextLogits,
    _search_loop,
    _with_context,
    with_own_lengths,
)
from zoo.generation.settings import (
    MAX_LENGTH,
    NEVER,
    _check_length_at_least_one,
    check_beam_size,
)
from zoo.generation.top_k import blocked_top_k
from zoo.layers.slice_update import update_slice

# Below every reachable score, even a hypothesis that starts with NEVER.
_NOTHING = 2.0 * NEVER


def length_penalty(lengths: Any, alpha: float) -> Any:
    """GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


class _Beam(NamedTuple):
    """One beam search's settings, which every step reads and none changes."""

    next_logits: Callable  # the model's step, `(tokens, index, cache, context)`
    beam_size: int
    max_length: Any
    start_id: int
    end_id: int
    pad_id: int
    alpha: float
    most_penalty: Any  # length_penalty(max_length, alpha), the largest a hypothesis meets
    own_lengths: bool  # each sequence's most tokens are the context's last tensor


def beam_search(
    next_logits: NextLogits,
    cache: tuple,
    batch_size: int,
    beam_size: int,
    max_length: int,
    start_id: int,
    end_id: int,
    pad_id: int = 0,
    alpha: float = 0.6,
    grow_cache: GrowCache | None = None,
    length_limit: int = MAX_LENGTH,
    context: tuple | None = None,
    max_lengths: Any | None = None,
) -> tuple[Any, Any]:
    """Keeps the `beam_size` best hypotheses per sequence, ranked by length-normalised score.

    Every hypothesis is scored by log P(y | x) / lp(|y|) with the GNMT penalty `lp`, at every
    step, so that ended hypotheses (whose score no longer changes) compete fairly with those
    still growing. An ended hypothesis is carried along unchanged. A sequence is done once
    every hypothesis has ended, or once its best ended hypothesis beats the best score any
    live one can still reach (its log-probability only falls, and the length penalty is
    largest at `max_length`): the best hypothesis is then final, as the same search run to the
    end would return it. The loop stops when every sequence is done, or after `max_length`
    tokens; the hypotheses after the best may then be unfinished (as at `max_length`), and so
    may those of a sequence that left the batch done (see `context`). With `beam_size=1` this
    is exactly greedy search.

    Args:
        next_logits: the model's step function, called on `batch_size * beam_size` rows;
            in a large search (`zoo.generation.loop._search_loop`), the first step on
            `batch_size` rows, each sentence's first row of `cache` and `context` (every
            hypothesis is the start token then), whose rows are repeated for the beam
            afterwards.
        cache: initial cache for `batch_size * beam_size` rows (beam-major within a sequence:
            row `b * beam_size + k`).
        batch_size: number of sequences (an int; a scalar tensor inside a TensorFlow graph
            of unknown batch size).
        beam_size: hypotheses kept per sequence (static).
        max_length: most tokens to generate (static).
        start_id, end_id, pad_id: special tokens.
        alpha: length-penalty exponent; 0 ranks by plain log-probability.
        grow_cache, length_limit: as in `zoo.generation.greedy.greedy_search`.
        context: as in `greedy_search`, `batch_size * beam_size` rows; beam moves leave it
            as it is (a sequence's beams share it).
        max_lengths: `(batch_size,)` int32, each sequence's own most tokens, as in
            `greedy_search`: at its own length every hypothesis of a sequence ends, as in a
            search of that `max_length`.

    Returns:
        `(tokens, scores)`: `(batch, beam, max_length)` int32 hypotheses, best first, and
        their `(batch, beam)` float32 length-normalised scores.
    """
    check_beam_size(beam_size)
    _check_length_at_least_one(max_length)
    next_logits, context = with_own_lengths(next_logits, context, max_lengths, beam_size)
    state = _start(batch_size, beam_size, max_length, start_id, pad_id, cache, context)
    beam = _Beam(_with_context(next_logits, context), beam_size, max_length, start_id, end_id,
                 pad_id, alpha, length_penalty(max_length, alpha), max_lengths is not None)
    _, tokens, log_probs, lengths, _, _, _ = _search_loop(
        functools.partial(_running, beam), functools.partial(_step, beam), state,
        batch_size * beam_size, max_length, grow_cache, length_limit,
        done=functools.partial(_done_in_state, beam), beam_size=beam_size, two_steps=True,
        first=functools.partial(_first_step, beam) if beam_size > 1 else None)
    return _ranked(tokens, log_probs, lengths, alpha)


def _start(batch_size: Any, beam_size: int, max_length: Any, start_id: int, pad_id: int,
           cache: tuple, context: tuple | None) -> tuple:
    """The loop's first state: every hypothesis the start token, only the first alive."""
    tokens = ops.concatenate(
        [ops.full((batch_size, beam_size, 1), start_id, "int32"),
         ops.full((batch_size, beam_size, max_length), pad_id, "int32")], axis=2)
    # Only the first hypothesis is alive at the start, so the first step expands one beam.
    first = ops.concatenate(
        [ops.zeros((batch_size, 1)), ops.full((batch_size, beam_size - 1), NEVER)], axis=1)
    log_probs = ops.cast(first, "float32")
    lengths = ops.zeros((batch_size, beam_size), "int32")
    finished = ops.zeros((batch_size, beam_size), "bool")
    return (ops.convert_to_tensor(0, "int32"), tokens, log_probs, lengths, finished,
            tuple(cache), tuple(context or ()))


def _done(beam: _Beam, log_probs: Any, lengths: Any, finished: Any) -> Any:
    """`(batch,)`: the sequences whose best hypothesis is final (every one ended, or the
    best ended one beats the best score a live one can still reach)."""
    scores = log_probs / length_penalty(ops.maximum(lengths, 1), beam.alpha)
    best_ended = ops.max(ops.where(finished, scores, _NOTHING), axis=1)
    best_reachable = ops.max(
        ops.where(finished, _NOTHING, log_probs / beam.most_penalty), axis=1)
    return ops.logical_or(ops.all(finished, axis=1), best_ended > best_reachable)


def _done_in_state(beam: _Beam, state: tuple) -> Any:
    """`_done` of the loop's state."""
    return _done(beam, *state[2:5])


def _running(beam: _Beam, i: Any, tokens: Any, log_probs: Any, lengths: Any, finished: Any,
             cache: tuple, context: tuple) -> Any:
    """The loop's condition: a token left to generate and a sequence not done."""
    return ops.logical_and(i < beam.max_length,
                           ops.logical_not(ops.all(_done(beam, log_probs, lengths, finished))))


def _first_step(beam: _Beam, i: Any, tokens: Any, log_probs: Any, lengths: Any,
                finished: Any, cache: tuple, context: tuple) -> tuple:
    """The first step, once per sentence: every hypothesis of a sentence is the start token
    alone, so the step runs on one row per sentence, whose `beam_size` best tokens start the
    beam; the rows are repeated for the beam only afterwards (the tokens, scores and cache the
    loop's first step would give, for 1 / beam_size of its work; CTranslate2 does the same)."""
    beam_size = beam.beam_size
    batch = ops.shape(tokens)[0]
    once = ops.arange(batch, dtype="int32") * beam_size  # each sentence's first row
    logits, cache = beam.next_logits(
        ops.full((batch, 1), beam.start_id, "int32"), i,
        *keras.tree.map_structure(lambda t: ops.take(t, once, axis=0), (cache, context)))
    logits = ops.cast(logits, "float32")
    per = min(beam_size, logits.shape[-1])
    top, token = blocked_top_k(logits, per)  # (batch, per), best first
    log_probs = top - ops.logsumexp(logits, axis=-1, keepdims=True)
    if per < beam_size:  # a vocabulary smaller than the beam: as the loop would, the
        # other hypotheses repeat those tokens from the start's NEVER (they never win)
        k = np.arange(beam_size)
        start = np.where(k < per, 0.0, NEVER).astype("float32")
        token = ops.take(token, k % per, axis=1)
        log_probs = ops.take(log_probs, k % per, axis=1) + start
    tokens = update_slice(tokens, [0, 0, 1], ops.expand_dims(token, -1))
    cache = keras.tree.map_structure(lambda t: ops.repeat(t, beam_size, axis=0), cache)
    finished = _at_own_length(beam, i, ops.equal(token, beam.end_id), context)
    return i + 1, tokens, log_probs, ops.ones_like(lengths), finished, cache, context


def _step(beam: _Beam, i: Any, tokens: Any, log_probs: Any, lengths: Any, finished: Any,
          cache: tuple, context: tuple) -> tuple:
    """One step of the loop: every hypothesis' best continuations, the best `beam_size` of
    those per sequence, and the tokens, lengths and cache rows that follow them."""
    # The sequences still searched: all of them, or fewer once done ones leave the batch.
    batch = ops.shape(tokens)[0]
    current = ops.reshape(ops.slice(tokens, [0, 0, i], [batch, beam.beam_size, 1]), (-1, 1))
    logits, cache = beam.next_logits(current, i, cache, context)
    logits = ops.cast(logits, "float32")
    row_log_probs, row_tokens = _continuations(beam, logits, finished, batch)
    source_beam, token, log_probs = _choose(beam, i, log_probs, lengths, finished,
                                            row_log_probs, row_tokens, batch)
    tokens, lengths, finished, cache = _follow(beam, i, source_beam, token, tokens, lengths,
                                               finished, cache, batch)
    finished = _at_own_length(beam, i, finished, context)
    return i + 1, tokens, log_probs, lengths, finished, cache, context


def _at_own_length(beam: _Beam, i: Any, finished: Any, context: tuple) -> Any:
    """`finished`, `(batch, beam)`, with every hypothesis of a sequence that has just taken
    its own most tokens (`max_lengths`, the context's last tensor) ended: from then on it
    is carried along unchanged, as a search of that `max_length` would have stopped."""
    if not beam.own_lengths:
        return finished
    own = ops.reshape(context[-1], (-1, beam.beam_size))
    return ops.logical_or(finished, i + 1 >= own)


def _continuations(beam: _Beam, logits: Any, finished: Any, batch: Any) -> tuple[Any, Any]:
    """The first stage of selecting exactly the top `beam_size` of all beam x vocabulary
    candidates: each hypothesis' best `per` tokens and their log-probabilities, both
    `(batch, beam, per)`. The length penalty is the same for every token of a hypothesis, so
    its best continuations are its best logits, and only those `beam_size` per hypothesis
    compete in the second stage (`_choose`). Nothing of size (rows, vocabulary) is written
    but the logits; log-probabilities are logits less their log-normaliser."""
    beam_size = beam.beam_size
    per = min(beam_size, logits.shape[-1])  # continuations kept per hypothesis
    row_logits, row_tokens = blocked_top_k(logits, per)  # (rows, per)
    row_log_probs = row_logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    row_log_probs = ops.reshape(row_log_probs, (batch, beam_size, per))
    row_tokens = ops.reshape(row_tokens, (batch, beam_size, per))
    # An ended hypothesis may only continue with padding, at no cost.
    ended = ops.expand_dims(finished, -1)
    first = ops.expand_dims(ops.arange(per) == 0, 0)  # (1, per)
    row_log_probs = ops.where(ended, ops.where(first, 0.0, NEVER), row_log_probs)
    row_tokens = ops.where(ended, beam.pad_id, row_tokens)
    return row_log_probs, row_tokens


def _choose(beam: _Beam, i: Any, log_probs: Any, lengths: Any, finished: Any,
            row_log_probs: Any, row_tokens: Any, batch: Any) -> tuple[Any, Any, Any]:
    """The second stage: the best `beam_size` continuations of each sequence by
    length-normalised score, as `(source_beam, token, log_probs)`, each `(batch, beam)`,
    best first."""
    beam_size = beam.beam_size
    per = row_tokens.shape[-1]
    candidate_log_probs = ops.expand_dims(log_probs, -1) + row_log_probs  # (b, beam, per)
    candidate_lengths = ops.where(finished, lengths, i + 1)
    candidate_scores = candidate_log_probs / ops.expand_dims(
        length_penalty(candidate_lengths, beam.alpha), -1)
    flat_scores = ops.reshape(candidate_scores, (batch, beam_size * per))
    _, chosen = blocked_top_k(flat_scores, beam_size)  # (batch, beam), best first
    source_beam = chosen // per
    token = ops.take_along_axis(
        ops.reshape(row_tokens, (batch, beam_size * per)), chosen, axis=1)
    log_probs = ops.take_along_axis(
        ops.reshape(candidate_log_probs, (batch, beam_size * per)), chosen, axis=1)
    return source_beam, token, log_probs


def _follow(beam: _Beam, i: Any, source_beam: Any, token: Any, tokens: Any, lengths: Any,
            finished: Any, cache: tuple, batch: Any) -> tuple[Any, Any, Any, tuple]:
    """The chosen hypotheses' tokens (their source's, then `token`), lengths, ended flags
    and cache rows."""
    tokens = ops.take_along_axis(tokens, ops.expand_dims(source_beam, -1), axis=1)
    tokens = update_slice(tokens, [0, 0, i + 1], ops.expand_dims(token, -1))
    was_finished = ops.take_along_axis(finished, source_beam, axis=1)
    lengths = ops.where(
        was_finished, ops.take_along_axis(lengths, source_beam, axis=1), i + 1)
    finished = ops.logical_or(was_finished, ops.equal(token, beam.end_id))
    # Reorder the cache rows to follow their hypotheses.
    rows_taken = ops.reshape(
        ops.expand_dims(ops.arange(batch, dtype="int32") * beam.beam_size, 1) + source_beam,
        (-1,))
    cache = keras.tree.map_structure(lambda c: ops.take(c, rows_taken, axis=0), cache)
    return tokens, lengths, finished, cache


def _ranked(tokens: Any, log_probs: Any, lengths: Any, alpha: float) -> tuple[Any, Any]:
    """The final `(tokens, scores)`: hypotheses by length-normalised score, best first, the
    start token dropped."""
    scores = log_probs / length_penalty(ops.maximum(lengths, 1), alpha)
    # Sort once more: the last step ranked candidates, but an early stop keeps that order.
    order = ops.cast(ops.argsort(-scores, axis=1), "int32")
    tokens = ops.take_along_axis(tokens, ops.expand_dims(order, -1), axis=1)
    scores = ops.take_along_axis(scores, order, axis=1)
    return tokens[:, :, 1:], scores
