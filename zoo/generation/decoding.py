"""Greedy and beam search over a key/value cache, written once with `keras.ops`.

Both searches are a single `keras.ops.while_loop` over preallocated buffers, so the same code
runs eagerly, inside `tf.function` (and hence in an exported SavedModel for TF Serving), and
under `jax.jit` with no host synchronisation per token.

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

import numbers
from typing import Any, Callable

import keras
import numpy as np
from keras import ops

# Re-exported: the searches' callers compile with it (`Translator.search`).
from zoo.layers.slice_update import update_slice
from zoo.training.compilation import compile_for_backend  # noqa: F401
from zoo.errors import UserError

NextLogits = Callable[[Any, Any, tuple], tuple[Any, tuple]]

# A log-probability that can never win but stays finite in float32 arithmetic.
NEVER = -1e9

# The widest beam accepted: the search's memory and time grow linearly with it, and beams
# beyond a few dozen no longer change translations (Koehn & Knowles 2017 find wide beams
# hurt).
MAX_BEAM_SIZE = 64
# The longest output accepted when the model states no limit of its own.
MAX_LENGTH = 1024
# A growing cache's first length (`cache_lengths`).
FIRST_CACHE_LENGTH = 16
# A search of fewer rows x positions keeps one loop over a full cache: each more cache length
# is one more loop for XLA to compile (about 1.7 s on two cores) and a small cache costs
# little. The bench's 128 rows x 32 tokens are 4,096, where growing was 1.08-1.12x faster;
# 1,000 real sentences at batch 64 and beam 4, 1.23-1.32x (docs/performance-log.md).
GROW_CACHE_FROM = 4096

# A graph's cache lengths (`first`, `growth` of `cache_lengths`), where finished sequences
# leave the batch between lengths: the more often, the fewer steps spent on them, and a loop
# costs no compilation there, but each is one more copy of the step in the exported graph. Beam
# 4 over 32 sentences through the shipped translator's export: 48-60 sentences/s with 16
# doubling; 55-68 alike with these, a length every 8 or every 4 (docs/performance-log.md).
GRAPH_CACHE_LENGTHS = (8, 1.5)

GrowCache = Callable[[tuple, Any], tuple]


def _is_int(value: Any) -> bool:
    """A Python or NumPy integer (not a bool, not a tensor)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_length_at_least_one(max_length: Any) -> None:
    """The searches' own check; the upper bound is the caller's (it knows the model)."""
    if _is_int(max_length) and max_length < 1:
        raise UserError(f"max_length must be at least 1; got {max_length!r}")


def check_beam_size(beam_size: Any) -> int:
    """`beam_size` as an int, checked before anything is traced or allocated.

    Raises:
        ValueError: not an integer from 1 to `MAX_BEAM_SIZE`; the message names the value.
    """
    if not _is_int(beam_size):
        raise UserError(f"beam_size must be an integer from 1 to {MAX_BEAM_SIZE}; got "
                        f"{beam_size!r}")
    if beam_size < 1:
        raise UserError(f"beam_size must be at least 1; got {beam_size!r}")
    if beam_size > MAX_BEAM_SIZE:
        raise UserError(f"beam_size must be at most {MAX_BEAM_SIZE}; got {beam_size!r}")
    return int(beam_size)


def check_max_length(max_length: Any, limit: int | None = None) -> int | None:
    """`max_length` as an int (None stays None: the caller's default), checked before
    anything is traced or allocated: the key/value cache holds `max_length` positions.

    Args:
        max_length: most tokens to generate, or None.
        limit: the most the model supports (a translator's `max_target_length`); at most
            `MAX_LENGTH` when None.

    Raises:
        ValueError: not an integer from 1 to the limit; the message names the value.
    """
    if max_length is None:
        return None
    limit = MAX_LENGTH if limit is None else int(limit)
    if not _is_int(max_length) or not 1 <= int(max_length) <= limit:
        raise UserError(f"max_length must be an integer from 1 to {limit} (the most this "
                        f"model generates); got {max_length!r}")
    return int(max_length)


def check_search_settings(beam_size: Any, max_length: Any = None, limit: int | None = None,
                          alpha: Any = 0.6) -> tuple[int, int | None, float]:
    """Checks a search's settings before anything is traced or allocated.

    `Translator.translate`/`search` and the export call this first, so that a bad value is a
    one-line error (and `max_length=100000` never allocates a cache of 100000 positions).

    Args:
        beam_size: hypotheses per sentence, 1 to `MAX_BEAM_SIZE` (1 is greedy search).
        max_length: most output tokens (None: the model's default), 1 to `limit`.
        limit: the model's `max_target_length`, or None for `MAX_LENGTH`.
        alpha: the length-penalty exponent, a finite number from 0 to 10.

    Returns:
        `(beam_size, max_length, alpha)` as int, int or None, float.

    Raises:
        ValueError: a bad value; the message names it.
    """
    beam_size = check_beam_size(beam_size)
    max_length = check_max_length(max_length, limit)
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(alpha, bool) or not 0.0 <= value <= 10.0:
        raise UserError(f"alpha (the length penalty) must be a number from 0 to 10; got "
                        f"{alpha!r}")
    return beam_size, max_length, value


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
    small = _is_int(rows) and _is_int(max_length) and rows * max_length < GROW_CACHE_FROM
    unroll = two_steps and _is_int(rows) and not small
    if small:
        first = None

    def loop(condition: Callable, state: tuple, iterations: Any) -> tuple:
        step = _two_steps(condition, body) if unroll else body  # 2nd step: `condition` holds
        return ops.while_loop(condition, step, state, maximum_iterations=iterations)

    if grow_cache is None:
        return loop(cond, first(*state) if first else state, max_length)
    shrink = done is not None and not _is_int(rows)
    growth = GRAPH_CACHE_LENGTHS if shrink else ()
    if not _is_int(max_length):
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
    two, the steps alternate between two buffers: beam 4 1.09x faster on TensorFlow, and on
    JAX 1.09x or the same within the noise (docs/performance-log.md). Not for greedy search,
    which has no reorder (there the condition cost more than it saved), nor in an export's
    graph, which XLA does not compile (batch 1 slower), nor for small searches
    (`_search_loop`): XLA compiles the step twice, 1.3 s more before `zoo translate`'s first
    sentence."""
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


def _with_context(next_logits: NextLogits, context: tuple | None) -> Callable:
    """`next_logits` as the loop calls it, `(tokens, index, cache, context)`."""
    if context is None:
        return lambda tokens, index, cache, _: next_logits(tokens, index, cache)
    return next_logits


def length_penalty(lengths: Any, alpha: float) -> Any:
    """GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def blocked_top_k(values: Any, k: int, block_size: int = 64) -> tuple[Any, Any]:
    """`keras.ops.top_k` over the last axis, found through blocks: the same values and
    indices (equal values: the lower index first), in a fraction of the time where rows are
    long and `k` small (a beam search's vocabulary: 0.46 against 1.64 ms for 128 rows of
    8,000 and k 4, XLA on a CPU, whose top_k sorts; `benchmarks/beam_step.py`).

    Each row is cut into blocks of `block_size`; only the `k` blocks with the largest
    maxima can hold the row's `k` largest entries (were one of them elsewhere, `k` other
    blocks would each hold a larger entry), so the exact top_k runs on those `k` blocks.
    Equal values are ordered by index throughout, so ties resolve as in one top_k.

    Args:
        values: `(rows, n)` scores, `n` static.
        k: entries per row (static), at most `n`.
        block_size: entries per block.

    Returns:
        `(top_values (rows, k), top_indices (rows, k) int32)`, largest first.
    """
    n = values.shape[-1]
    if n < 4 * k * block_size:  # too short to gain: the plain top_k
        top, indices = ops.top_k(values, k=k)
        return top, ops.cast(indices, "int32")
    blocks = -(-n // block_size)
    if blocks * block_size != n:
        values = ops.pad(values, [[0, 0], [0, blocks * block_size - n]],
                         constant_values=float("-inf"))
    rows = ops.shape(values)[0]
    blocked = ops.reshape(values, (rows, blocks, block_size))
    _, best_blocks = ops.top_k(ops.max(blocked, axis=-1), k=k)
    # In index order, so that equal candidates keep their order of the whole row.
    best_blocks = ops.sort(ops.cast(best_blocks, "int32"), axis=-1)
    candidates = ops.take_along_axis(blocked, best_blocks[:, :, None], axis=1)
    top, within = ops.top_k(ops.reshape(candidates, (rows, k * block_size)), k=k)
    within = ops.cast(within, "int32")
    block = ops.take_along_axis(best_blocks, within // block_size, axis=1)
    return top, block * block_size + within % block_size


def first_index_of(values: Any, top: Any) -> Any:
    """`argmax(values, axis=-1)` as int32, given `top = max(values, axis=-1)`: the first index
    where the last axis reaches its maximum.

    Written as a min-reduction over the indices where `values == top`. XLA compiles `argmax`
    to a reduction over (value, index) pairs that its CPU backend does not vectorize: in the
    greedy search at `zoo bench`'s shapes (32 rows of 8,000 logits) it took about 1 ms of
    each 8 ms step on a 2-core CPU. A row without its maximum (NaN) gives the last index.
    """
    width = ops.shape(values)[-1]
    indices = ops.arange(width, dtype="int32")
    first = ops.min(ops.where(values == ops.expand_dims(top, -1), indices, width), axis=-1)
    return ops.minimum(first, width - 1)


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
) -> tuple[Any, Any]:
    """Picks the most probable token at every step until every sequence has ended.

    Args:
        next_logits: the model's step function (see the module docstring).
        cache: initial cache, each tensor with `batch_size` as its first axis.
        batch_size: number of sequences (an int; a scalar tensor inside a TensorFlow graph
            of unknown batch size).
        max_length: most tokens to generate (static), the end token included.
        start_id: the token that starts every sequence.
        end_id: the token that ends a sequence.
        pad_id: the token written after a sequence has ended.
        grow_cache: `grow_cache(cache, length)`, the cache with room for `length` positions
            (see the module docstring); None: `cache` holds `max_length` positions already.
        length_limit: the most `max_length` can be, where it is a tensor and `grow_cache`
            is given (the model's limit).
        context: tensors of `batch_size` rows that the steps read and never change (a
            translator's encoded source); `next_logits` then takes them as a fourth argument.
            Where `batch_size` is a tensor (a TensorFlow graph, not compiled by XLA) and
            `grow_cache` is given, finished sequences leave the batch between cache lengths,
            with their cache and context rows.

    Returns:
        `(tokens, scores)`: `(batch, max_length)` int32 generated tokens (without the start
        token; `pad_id` after the end), and `(batch,)` float32 sums of token log-probabilities.
    """
    _check_length_at_least_one(max_length)
    tokens = ops.concatenate(
        [ops.full((batch_size, 1), start_id, "int32"),
         ops.full((batch_size, max_length), pad_id, "int32")], axis=1)
    finished = ops.zeros((batch_size,), "bool")
    scores = ops.zeros((batch_size,), "float32")

    step = _with_context(next_logits, context)

    def cond(i, tokens, finished, scores, cache, context):
        return ops.logical_and(i < max_length, ops.logical_not(ops.all(finished)))

    def body(i, tokens, finished, scores, cache, context):
        current = ops.slice(tokens, [0, i], [ops.shape(tokens)[0], 1])
        logits, cache = step(current, i, cache, context)
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
        return i + 1, tokens, finished, scores, tuple(cache), context

    loop = (ops.convert_to_tensor(0, "int32"), tokens, finished, scores, tuple(cache),
            tuple(context or ()))
    _, tokens, _, scores, _, _ = _search_loop(cond, body, loop, batch_size, max_length,
                                              grow_cache, length_limit,
                                              done=lambda state: state[2])
    return tokens[:, 1:], scores


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
            in a large search (`_search_loop`), the first step on `batch_size` rows, each
            sentence's first row of `cache` and `context` (every hypothesis is the start
            token then), whose rows are repeated for the beam afterwards.
        cache: initial cache for `batch_size * beam_size` rows (beam-major within a sequence:
            row `b * beam_size + k`).
        batch_size: number of sequences (an int; a scalar tensor inside a TensorFlow graph
            of unknown batch size).
        beam_size: hypotheses kept per sequence (static).
        max_length: most tokens to generate (static).
        start_id, end_id, pad_id: special tokens.
        alpha: length-penalty exponent; 0 ranks by plain log-probability.
        grow_cache, length_limit: as in `greedy_search`.
        context: as in `greedy_search`, `batch_size * beam_size` rows; beam moves leave it
            as it is (a sequence's beams share it).

    Returns:
        `(tokens, scores)`: `(batch, beam, max_length)` int32 hypotheses, best first, and
        their `(batch, beam)` float32 length-normalised scores.
    """
    check_beam_size(beam_size)
    _check_length_at_least_one(max_length)
    rows = batch_size * beam_size
    tokens = ops.concatenate(
        [ops.full((batch_size, beam_size, 1), start_id, "int32"),
         ops.full((batch_size, beam_size, max_length), pad_id, "int32")], axis=2)
    # Only the first hypothesis is alive at the start, so the first step expands one beam.
    first = ops.concatenate(
        [ops.zeros((batch_size, 1)), ops.full((batch_size, beam_size - 1), NEVER)], axis=1)
    log_probs = ops.cast(first, "float32")
    lengths = ops.zeros((batch_size, beam_size), "int32")
    finished = ops.zeros((batch_size, beam_size), "bool")

    # Below every reachable score, even a hypothesis that starts with NEVER.
    nothing = 2.0 * NEVER
    most_penalty = length_penalty(max_length, alpha)

    def done(log_probs, lengths, finished):  # (batch,): the best hypothesis is final
        scores = log_probs / length_penalty(ops.maximum(lengths, 1), alpha)
        best_ended = ops.max(ops.where(finished, scores, nothing), axis=1)
        best_reachable = ops.max(ops.where(finished, nothing, log_probs / most_penalty), axis=1)
        return ops.logical_or(ops.all(finished, axis=1), best_ended > best_reachable)

    def cond(i, tokens, log_probs, lengths, finished, cache, context):
        return ops.logical_and(i < max_length,
                               ops.logical_not(ops.all(done(log_probs, lengths, finished))))

    step = _with_context(next_logits, context)

    def first(i, tokens, log_probs, lengths, finished, cache, context):
        # Every hypothesis of a sentence is the start token alone, so its first step runs on
        # one row per sentence, whose `beam_size` best tokens start the beam; the rows are
        # repeated for the beam only afterwards (the tokens, scores and cache the loop's
        # first step would give, for 1 / beam_size of its work; CTranslate2 does the same).
        batch = ops.shape(tokens)[0]
        once = ops.arange(batch, dtype="int32") * beam_size  # each sentence's first row
        logits, cache = step(ops.full((batch, 1), start_id, "int32"), i,
                             *keras.tree.map_structure(lambda t: ops.take(t, once, axis=0),
                                                       (cache, context)))
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
        return (i + 1, tokens, log_probs, ops.ones_like(lengths), ops.equal(token, end_id),
                cache, context)

    def body(i, tokens, log_probs, lengths, finished, cache, context):
        # The sequences still searched: all of them, or fewer once done ones leave the batch.
        batch = ops.shape(tokens)[0]
        current = ops.reshape(ops.slice(tokens, [0, 0, i], [batch, beam_size, 1]), (-1, 1))
        logits, cache = step(current, i, cache, context)
        logits = ops.cast(logits, "float32")
        # Two-stage selection, exactly the top `beam_size` of all beam x vocabulary
        # candidates: the length penalty is the same for every token of a hypothesis, so a
        # hypothesis' best continuations are its best logits, and only those `beam_size`
        # per hypothesis compete in the second stage. Nothing of size (rows, vocabulary) is
        # written but the logits; log-probabilities are logits less their log-normaliser.
        per = min(beam_size, logits.shape[-1])  # continuations kept per hypothesis
        row_logits, row_tokens = blocked_top_k(logits, per)  # (rows, per)
        row_log_probs = row_logits - ops.logsumexp(logits, axis=-1, keepdims=True)
        row_log_probs = ops.reshape(row_log_probs, (batch, beam_size, per))
        row_tokens = ops.reshape(row_tokens, (batch, beam_size, per))
        # An ended hypothesis may only continue with padding, at no cost.
        ended = ops.expand_dims(finished, -1)
        first = ops.expand_dims(ops.arange(per) == 0, 0)  # (1, per)
        row_log_probs = ops.where(ended, ops.where(first, 0.0, NEVER), row_log_probs)
        row_tokens = ops.where(ended, pad_id, row_tokens)
        candidate_log_probs = ops.expand_dims(log_probs, -1) + row_log_probs  # (b, beam, per)
        candidate_lengths = ops.where(finished, lengths, i + 1)
        candidate_scores = candidate_log_probs / ops.expand_dims(
            length_penalty(candidate_lengths, alpha), -1)
        flat_scores = ops.reshape(candidate_scores, (batch, beam_size * per))
        _, chosen = blocked_top_k(flat_scores, beam_size)  # (batch, beam), best first
        source_beam = chosen // per
        token = ops.take_along_axis(
            ops.reshape(row_tokens, (batch, beam_size * per)), chosen, axis=1)
        log_probs = ops.take_along_axis(
            ops.reshape(candidate_log_probs, (batch, beam_size * per)), chosen, axis=1)
        tokens = ops.take_along_axis(tokens, ops.expand_dims(source_beam, -1), axis=1)
        tokens = update_slice(tokens, [0, 0, i + 1], ops.expand_dims(token, -1))
        was_finished = ops.take_along_axis(finished, source_beam, axis=1)
        lengths = ops.where(
            was_finished, ops.take_along_axis(lengths, source_beam, axis=1), i + 1)
        finished = ops.logical_or(was_finished, ops.equal(token, end_id))
        # Reorder the cache rows to follow their hypotheses.
        rows_taken = ops.reshape(
            ops.expand_dims(ops.arange(batch, dtype="int32") * beam_size, 1) + source_beam,
            (-1,))
        cache = keras.tree.map_structure(lambda c: ops.take(c, rows_taken, axis=0), cache)
        return i + 1, tokens, log_probs, lengths, finished, cache, context

    loop = (ops.convert_to_tensor(0, "int32"), tokens, log_probs, lengths, finished,
            tuple(cache), tuple(context or ()))
    _, tokens, log_probs, lengths, _, _, _ = _search_loop(
        cond, body, loop, rows, max_length, grow_cache, length_limit,
        done=lambda state: done(*state[2:5]), beam_size=beam_size, two_steps=True,
        first=first if beam_size > 1 else None)
    scores = log_probs / length_penalty(ops.maximum(lengths, 1), alpha)
    # Sort once more: the last step ranked candidates, but an early stop keeps that order.
    order = ops.cast(ops.argsort(-scores, axis=1), "int32")
    tokens = ops.take_along_axis(tokens, ops.expand_dims(order, -1), axis=1)
    scores = ops.take_along_axis(scores, order, axis=1)
    return tokens[:, :, 1:], scores
