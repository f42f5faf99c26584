"""Continuing prompts with a sampler, over the searches' shared loop (`zoo.generation.loop`,
whose docstring describes the model's step function `next_logits(tokens, index, cache)`).

The prompts are right-padded into one `(batch, width + max_new_tokens)` buffer, and the model's
cache already holds their keys and values (one forward pass over the padded prompts, the
"prefill"). The loop starts at the shortest prompt's last token: each step feeds the token at
`i`, which rewrites the cache at `i` (so padding written by the prefill is replaced before any
later query sees it: attention over the cache is causal), and writes position `i + 1`: the
prompt's own token while the row is still inside its prompt, else the sampler's choice. A row
ends at the end token or after `max_new_tokens` new tokens of its own; the loop ends when every
row has. Greedy choices are those of the same prompt alone: a row never reads another.

`sampling_step` is one step of that loop, which `zoo.models.causal_lm` also runs from Python to
stream tokens as they come.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from keras import ops

from zoo.generation.loop import NextLogits, _search_loop
from zoo.generation.samplers import Sampler, penalize_repetition, uniform_noise
from zoo.layers.slice_update import update_slice


def seen_tokens(tokens: Any, lengths: Any, vocabulary_size: int) -> Any:
    """`(batch, vocab)` bool: the tokens among each row's first `lengths` tokens."""
    batch, width = ops.shape(tokens)[0], tokens.shape[1]
    valid = ops.arange(width, dtype="int32")[None, :] < ops.expand_dims(lengths, 1)
    rows = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None], ops.shape(tokens))
    at = ops.stack([ops.reshape(rows, (-1,)), ops.reshape(tokens, (-1,))], axis=1)
    counts = ops.scatter(at, ops.reshape(ops.cast(valid, "float32"), (-1,)),
                         (batch, vocabulary_size))
    return counts > 0


def initial_state(tokens: Any, lengths: Any, cache: tuple, vocabulary_size: int,
                  track_seen: bool) -> tuple:
    """The loop's first state `(i, tokens, finished, seen, cache, context)`: `i` the
    shortest prompt's last position, `context` the prompt lengths."""
    lengths = ops.cast(lengths, "int32")
    batch = ops.shape(tokens)[0]
    seen = (seen_tokens(tokens, lengths, vocabulary_size) if track_seen
            else ops.zeros((batch, 1), "bool"))
    start = ops.min(lengths) - 1
    return (start, tokens, ops.zeros((batch,), "bool"), seen, tuple(cache), (lengths,))


def sampling_step(next_logits: NextLogits, sampler: Sampler, end_id: int,
                  max_new_tokens: int, seed: Any, repetition_penalty: float, i: Any,
                  tokens: Any, finished: Any, seen: Any, cache: tuple, context: tuple
                  ) -> tuple:
    """One step: the token at `i + 1` of every row (its prompt's, the sampler's, or
    `end_id` after the row ended)."""
    (lengths,) = context
    batch = ops.shape(tokens)[0]
    logits, cache = next_logits(ops.slice(tokens, [0, i], [batch, 1]), i, cache)
    logits = ops.cast(logits, "float32")
    if repetition_penalty != 1.0:
        logits = penalize_repetition(logits, seen, repetition_penalty)
    vocabulary_size = logits.shape[-1]
    noise = (uniform_noise(seed, i, batch, vocabulary_size) if sampler.uses_noise
             else None)
    chosen = ops.cast(sampler.choose(logits, noise), "int32")
    given = ops.reshape(ops.slice(tokens, [0, i + 1], [batch, 1]), (-1,))
    in_prompt = i + 1 < lengths
    token = ops.where(in_prompt, given, ops.where(finished, end_id, chosen))
    tokens = update_slice(tokens, [0, i + 1], ops.expand_dims(token, 1))
    new = ops.logical_not(ops.logical_or(in_prompt, finished))
    finished = ops.logical_or(finished, ops.logical_and(new, ops.equal(token, end_id)))
    finished = ops.logical_or(finished, i + 2 >= lengths + max_new_tokens)
    if repetition_penalty != 1.0:
        seen = ops.logical_or(seen, ops.logical_and(
            ops.expand_dims(new, 1),
            ops.arange(vocabulary_size, dtype="int32")[None, :] == token[:, None]))
    return i + 1, tokens, finished, seen, cache, context


def sample(next_logits: NextLogits, tokens: Any, lengths: Any, cache: tuple,
           max_new_tokens: int, sampler: Sampler, end_id: int, vocabulary_size: int,
           seed: Any = 0, repetition_penalty: float = 1.0) -> Any:
    """Continues every prompt with `sampler` until its end token or `max_new_tokens`.

    Args:
        next_logits: the model's step, `(tokens (N, 1), index, cache) -> (logits, cache)`.
        tokens: `(batch, width + max_new_tokens)` int32, the right-padded prompts first.
        lengths: `(batch,)` int32 prompt lengths, each at least 1.
        cache: the model's cache after the prefill of the prompts (`width` positions or
            more, room for `width + max_new_tokens`).
        max_new_tokens: most tokens generated per row (static).
        sampler: a `Sampler` (greedy, random, top-k, top-p; beam is `beam_search`'s).
        end_id: the token that ends a row; it pads the rows that ended.
        vocabulary_size: the logits' width.
        seed: an int (or int32 scalar tensor): the same seed, the same draws.
        repetition_penalty: 1 for none (`penalize_repetition`).

    Returns:
        `(batch, width + max_new_tokens)` int32: each row's prompt, its new tokens (the end
        token last when it came) and `end_id` after them.
    """
    state = initial_state(tokens, lengths, cache, vocabulary_size, repetition_penalty != 1.0)
    total = tokens.shape[1]
    step = functools.partial(sampling_step, next_logits, sampler, end_id, max_new_tokens,
                             seed, repetition_penalty)
    rows = ops.shape(tokens)[0]
    _, tokens, _, _, _, _ = _search_loop(_running(total), step, state, rows, total, None,
                                         total)
    return tokens


def _running(total: int) -> Callable:
    def running(i: Any, tokens: Any, finished: Any, *rest: Any) -> Any:
        return ops.logical_and(i < total - 1, ops.logical_not(ops.all(finished)))

    return running
