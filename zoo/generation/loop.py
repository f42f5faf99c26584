"""The searches' shared loop over a key/value cache, written once with `keras.ops`.

Greedy search (`zoo.generation.greedy`) and beam search (`zoo.generation.beam`) are each a
single `keras.ops.while_loop` (`_search_loop`) over preallocated buffers, so the same code runs
eagerly, inside `tf.function` (and hence in an exported SavedModel for TF Serving), and under
`jax.jit` with no host synchronisation per token.

The model side is one function:

    next_logits(token_ids, index, cache) -> (logits, cache)

`token_ids` is `(N, 1)` int32 (the token at position `index`), `logits` is `(N, vocab)`
scores for the token at `index + 1`, and `cache` is a tuple of tensors whose first axis is
`N` (beam search reorders it when beams change places); the tuple may nest (the
translator's is one `(keys, values)` pair per decoder block). A model whose steps also read
per-sequence inputs that never change (a translator's encoded source and its mask) passes them
to the search as `context`, and takes them as a fourth argument:
`next_logits(token_ids, index, cache, context)`; beam moves leave them alone.

A model whose cache can grow passes `grow_cache(cache, length) -> cache` too: the search then
runs as one loop per length of `cache_lengths(max_length)` (16 positions, doubling; one length
for small searches, `GROW_CACHE_FROM`), growing the cache between them, so that every step's
attention over the cache, and beam search's reorder of it, cost what the positions written so
far need rather than what `max_length` would (`grow_cache` alone knows the cache's layout).
In a TensorFlow graph of unknown batch size (an export's, which XLA does not compile, so that
shapes may change between loops), the sequences already finished also leave the batch between
lengths, with their cache and context rows: a batch's later steps compute only the sequences
still being searched, not every one until the longest has ended.
"""

from __future__ import annotations

from typing import Any, Callable

import keras
from keras import ops

from zoo.layers.validation import is_int

NextLogits = Callable[[Any, Any, tuple], tuple[Any, tuple]]
GrowCache = Callable[[tuple, Any], tuple]

# A growing cache's first length (`cache_lengths`).
FIRST_CACHE_LENGTH = 16
# A search of fewer rows x positions keeps one loop over a full cache: each more cache length
# is one more loop for XLA to compile and a small cache costs little. From the bench's 128
# rows x 32 tokens up, growing was faster (the figures: docs/performance-log.md, 2026-11-25).
GROW_CACHE_FROM = 4096

# A graph's cache lengths (`first`, `growth` of `cache_lengths`), where finished sequences
# leave the batch between lengths: the more often, the fewer steps spent on them, and a loop
# costs no compilation there, but each is one more copy of the step in the exported graph.
# These lengths were the fastest of those measured through the shipped translator's export
# (docs/performance-log.md).
GRAPH_CACHE_LENGTHS = (8, 1.5)


def cache_lengths(max_length: int, first: int = FIRST_CACHE_LENGTH, growth: float = 2.0
                  ) -> list[int]:
    """A growing cache's lengths, one per loop of a search: `first`, then each `growth` times
    the last (rounded up to a multiple of 8), ending at `max_length` (each step writes one
    position, so `max_length` steps need that many).

    Growing geometrically keeps the loops few (XLA compiles each on its own) and the cache at
    most `growth` times the positions written so far.

    >>> cache_lengths(40)
    [16, 32, 40]
    >>> cache_lengths(10)
    [10]
    >>> cache_lengths(64, first=8, growth=1.5)
    [8, 16, 24, 40, 64]
    """
    lengths = [min(first, max_length)]
    while lengths[-1] < max_length:
        grown = -(-int(growth * lengths[-1]) // 8) * 8
        lengths.append(min(max(grown, lengths[-1] + 1), max_length))
    return lengths


def _search_loop(cond: Callable, body: Callable, state: tuple, rows: Any, max_length: Any,
                 grow_cache: GrowCache | None, length_limit: int,
                 done: Callable[[tuple], Any] | None = None, beam_size: int = 1,
                 two_steps: bool = False, first: Callable | None = None) -> tuple:
    """The searches' while loop over `state`: `(i, *per_sentence, cache, context)`, where each
    per-sentence tensor has the batch as its first axis and the cache's and context's tensors
    `batch * beam_size` rows.

    With `grow_cache`, one loop per cache length, the cache grown before each; a loop ends when
    `cond` does or its cache is full. Fewer than `GROW_CACHE_FROM` rows x positions: one
    length, `max_length`. A tensor `max_length` or row count (a TensorFlow graph's, which XLA
    does not compile) always grows; a tensor `max_length` takes the lengths of its static bound
    `length_limit`, each capped at `max_length`.

    Where the row count is a tensor (a graph's shapes may change from one loop to the next),
    the sentences that `done(state)` (a `(batch,)` bool) says are finished also leave the
    batch between loops (`_drop_done`), so that later steps compute only the sentences still
    being searched, and the lengths are `GRAPH_CACHE_LENGTHS`'s; the per-sentence tensors
    returned are every sentence's, in order.

    `two_steps`: each iteration runs `body` twice (`_two_steps`), except in such a graph and
    in searches of fewer than `GROW_CACHE_FROM` rows x positions, where the second copy of the
    step would cost more compilation than it saves.

    `first`: a search's first step, `state -> state` (beam search's, once per sentence), run
    before the first loop, its cache grown to the loop's length; also not in small searches,
    which then take that step in the loop (`body` must handle it)."""
    small = is_int(rows) and is_int(max_length) and rows * max_length < GROW_CACHE_FROM
    unroll = two_steps and is_int(rows) and not small
    if small:
        first = None

    def loop(condition: Callable, state: tuple, iterations: Any) -> tuple:
        step = _two_steps(condition, body) if unroll else body  # 2nd step: `condition` holds
        return ops.while_loop(condition, step, state, maximum_iterations=iterations)

    if grow_cache is None:
        return loop(cond, first(*state) if first else state, max_length)
    shrink = done is not None and not is_int(rows)
    growth = GRAPH_CACHE_LENGTHS if shrink else ()
    if not is_int(max_length):
        lengths = [ops.minimum(length, max_length)
                   for length in cache_lengths(length_limit, *growth)]
    elif small:
        lengths = [max_length]
    else:
        lengths = cache_lengths(max_length, *growth)
    if shrink:
        results = state[1:-2]
        slots = ops.arange(ops.shape(results[0])[0], dtype="int32")
    for number, length in enumerate(lengths):
        if shrink and number:
            state, results, slots = _drop_done(state, done(state), results, slots, beam_size)
        state = (*state[:-2], grow_cache(state[-2], length), state[-1])
        if first and not number:
            state = first(*state)

        def within(i: Any, *rest: Any, length: Any = length) -> Any:
            return ops.logical_and(i < length, cond(i, *rest))

        state = loop(within, state, length)
    if shrink:
        results = _write_back(results, slots, state[1:-2])
        state = (state[0], *results, *state[-2:])
    return state


def _two_steps(cond: Callable, body: Callable) -> Callable:
    """A loop body that runs `body` twice, the second time only where `cond` still holds.

    Beam search reorders its cache with a gather, which cannot write in place; one step per
    iteration, XLA then copies the gathered cache back into the loop's buffer every step. With
    two, the steps alternate between two buffers, and beam 4 ran faster on TensorFlow (on JAX
    faster or the same within the noise). Not for greedy search, which has no reorder (there
    the condition cost more than it saved), nor in an export's graph, which XLA does not
    compile (batch 1 slower), nor for small searches (`_search_loop`): XLA compiles the step
    twice, which delays `zoo translate`'s first sentence. The figures:
    docs/performance-log.md, 2026-11-25, "Beam search runs two steps per iteration"."""
    def twice(*state: Any) -> tuple:
        state = body(*state)
        return ops.cond(cond(*state), lambda: body(*state), lambda: state)

    return twice


def _write_back(results: tuple, slots: Any, sentences: tuple) -> tuple:
    """`results` (every sentence's tensors) with rows `slots` replaced by `sentences`."""
    at = ops.expand_dims(slots, 1)
    return tuple(ops.scatter_update(r, at, s) for r, s in zip(results, sentences))


def _drop_done(state: tuple, done: Any, results: tuple, slots: Any, beam_size: int
               ) -> tuple[tuple, tuple, Any]:
    """Writes the searched sentences' per-sentence tensors into `results` (at `slots`, their
    places in the whole batch) and keeps in `state` only the sentences not `done`: their
    per-sentence tensors, and their `beam_size` rows of the cache and the context."""
    results = _write_back(results, slots, state[1:-2])
    (kept,) = ops.nonzero(ops.logical_not(done))
    kept = ops.cast(kept, "int32")
    kept_rows = ops.reshape(ops.expand_dims(kept * beam_size, 1)
                            + ops.arange(beam_size, dtype="int32"), (-1,))

    def take(tensors: Any, index: Any) -> Any:
        return keras.tree.map_structure(lambda t: ops.take(t, index, axis=0), tensors)

    state = (state[0], *take(state[1:-2], kept), take(state[-2], kept_rows),
             take(state[-1], kept_rows))
    return state, results, ops.take(slots, kept)


def with_own_lengths(next_logits: Callable, context: tuple | None, max_lengths: Any | None,
                     rows_per_sequence: int = 1) -> tuple[Callable, tuple | None]:
    """A search's step and context where every sequence has its own most tokens.

    A sequence's answer must not depend on what else is searched with it: a translation's
    budget follows its own source length, not the longest in its batch. The searches carry
    `max_lengths` (`(batch,)`, repeated for each of a sequence's `rows_per_sequence` rows) as
    the context's last tensor, so that it follows its sequence when finished ones leave the
    batch, and the step the model gave never sees it.

    Returns:
        `(next_logits, context)` for the search's loop: unchanged where `max_lengths` is
        None; otherwise a step taking `(tokens, index, cache, context)` that hands the
        model its own context (or none), and the context with the lengths appended.
    """
    if max_lengths is None:
        return next_logits, context
    lengths = ops.cast(max_lengths, "int32")
    if rows_per_sequence > 1:
        lengths = ops.repeat(lengths, rows_per_sequence, axis=0)
    if context is None:
        return (lambda tokens, index, cache, own: next_logits(tokens, index, cache)), (lengths,)
    return (lambda tokens, index, cache, own: next_logits(tokens, index, cache, own[:-1]),
            (*context, lengths))


def _with_context(next_logits: NextLogits, context: tuple | None) -> Callable:
    """`next_logits` as the loop calls it, `(tokens, index, cache, context)`."""
    if context is None:
        return lambda tokens, index, cache, _: next_logits(tokens, index, cache)
    return next_logits
