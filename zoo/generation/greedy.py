"""Greedy search: the most probable token at every step, over the searches' shared loop
(`zoo.generation.loop`, whose docstring describes the model's step function)."""

from __future__ import annotations

import functools
from typing import Any, Callable

from keras import ops

from zoo.generation.loop import (
    GrowCache,
    NextLogits,
    _search_loop,
    _with_context,
    with_own_lengths,
)
from zoo.generation.settings import MAX_LENGTH, _check_length_at_least_one
from zoo.generation.top_k import first_index_of
from zoo.layers.slice_update import update_slice


def greedy_search(
    next_logits: NextLogits,
    cache: tuple,
    batch_size: int,
    max_length: int,
    start_id: int,
    end_id: int,
    pad_id: int = 0,
    grow_cache: GrowCache | None = None,
    length_limit: int = MAX_LENGTH,
    context: tuple | None = None,
    max_lengths: Any | None = None,
) -> tuple[Any, Any]:
    """Picks the most probable token at every step until every sequence has ended.

    Args:
        next_logits: the model's step function (see `zoo.generation.loop`).
        cache: initial cache, each tensor with `batch_size` as its first axis.
        batch_size: number of sequences (an int; a scalar tensor inside a TensorFlow graph
            of unknown batch size).
        max_length: most tokens to generate (static), the end token included.
        start_id: the token that starts every sequence.
        end_id: the token that ends a sequence.
        pad_id: the token written after a sequence has ended.
        grow_cache: `grow_cache(cache, length)`, the cache with room for `length` positions
            (see `zoo.generation.loop`); None: `cache` holds `max_length` positions already.
        length_limit: the most `max_length` can be, where it is a tensor and `grow_cache`
            is given (the model's limit).
        context: tensors of `batch_size` rows that the steps read and never change (a
            translator's encoded source); `next_logits` then takes them as a fourth argument.
            Where `batch_size` is a tensor (a TensorFlow graph, not compiled by XLA) and
            `grow_cache` is given, finished sequences leave the batch between cache lengths,
            with their cache and context rows.
        max_lengths: `(batch_size,)` int32, each sequence's own most tokens, each at most
            `max_length` (`zoo.generation.loop.with_own_lengths`): a sequence ends at its own
            length as a search of that `max_length` would, whatever the others' are. None:
            `max_length` for every sequence.

    Returns:
        `(tokens, scores)`: `(batch, max_length)` int32 generated tokens (without the start
        token; `pad_id` after the end), and `(batch,)` float32 sums of token log-probabilities.
    """
    _check_length_at_least_one(max_length)
    next_logits, context = with_own_lengths(next_logits, context, max_lengths)
    tokens = ops.concatenate(
        [ops.full((batch_size, 1), start_id, "int32"),
         ops.full((batch_size, max_length), pad_id, "int32")], axis=1)
    finished = ops.zeros((batch_size,), "bool")
    scores = ops.zeros((batch_size,), "float32")

    step = _with_context(next_logits, context)
    # The loop's state: (i, tokens, finished, scores, cache, context).
    loop = (ops.convert_to_tensor(0, "int32"), tokens, finished, scores, tuple(cache),
            tuple(context or ()))
    _, tokens, _, scores, _, _ = _search_loop(
        functools.partial(_running, max_length),
        functools.partial(_step, step, pad_id, end_id, max_lengths is not None), loop,
        batch_size, max_length,
        grow_cache, length_limit, done=_finished)
    return tokens[:, 1:], scores


def _running(max_length: Any, i: Any, tokens: Any, finished: Any, scores: Any, cache: tuple,
             context: tuple) -> Any:
    """The loop's condition: a token left to generate and a sequence not ended."""
    return ops.logical_and(i < max_length, ops.logical_not(ops.all(finished)))


def _finished(state: tuple) -> Any:
    """The `(batch,)` sequences that have ended, from the loop's state."""
    return state[2]


def _step(next_logits: Callable, pad_id: int, end_id: int, own_lengths: bool, i: Any,
          tokens: Any, finished: Any, scores: Any, cache: tuple, context: tuple) -> tuple:
    """One token for every sequence: the model's best, or `pad_id` after the end (or after
    the sequence's own most tokens, the context's last tensor where `own_lengths`)."""
    current = ops.slice(tokens, [0, i], [ops.shape(tokens)[0], 1])
    logits, cache = next_logits(current, i, cache, context)
    logits = ops.cast(logits, "float32")
    # log_softmax's argmax is the logits' argmax, and the best log-probability is the best
    # logit less the log-normaliser: no (batch, vocab) log-probabilities are written.
    top = ops.max(logits, axis=-1)
    best = first_index_of(logits, top)
    best_log_prob = top - ops.logsumexp(logits, axis=-1)
    best = ops.where(finished, pad_id, best)
    scores = scores + ops.where(finished, 0.0, best_log_prob)
    tokens = update_slice(tokens, [0, i + 1], ops.expand_dims(best, 1))
    finished = ops.logical_or(finished, ops.equal(best, end_id))
    if own_lengths:
        finished = ops.logical_or(finished, i + 1 >= context[-1])
    return i + 1, tokens, finished, scores, tuple(cache), context
