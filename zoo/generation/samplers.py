"""How a language model picks its next token: the samplers, as small objects (keras-hub's
`GreedySampler`, `TopKSampler`, `TopPSampler`, ...), that share one loop
(`zoo.generation.sampling.sample`).

A sampler is the last of a few steps over a row's next-token logits, in the order of Hugging
Face's logits processors: the repetition penalty (`penalize_repetition`), the temperature, the
top-k and top-p filters, then the choice: the best token (greedy) or a draw from the softmax
of what is left (`keras.ops` only, so that it runs in the searches' `while_loop` on every
backend and in an exported graph).

Draws are repeatable: the noise of a draw is a hash of `(seed, step, row, token)`
(`uniform_noise`), not a random generator's state, so that one seed gives the same tokens on
every call, on every backend, inside `jax.jit` and `tf.function` alike; the draw itself is
the Gumbel-max trick (`argmax(logits + Gumbel noise)` is a draw from `softmax(logits)`).
Beam search (`BeamSampler`) is `zoo.generation.beam.beam_search`, the translator's.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from keras import ops

from zoo.generation.top_k import first_index_of
from zoo.layers.validation import is_int
from zoo.training.errors import UserError

# Finite, and below any logit a model gives: a filtered token's logit.
FILTERED = -1e9
# The widest beam of a language model's beam search (as the translator's, settings.py).
_MAX_BEAMS = 64


def _finite_positive(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise UserError(f"{name} must be a finite number > 0; got {value!r}")
    return number


@dataclasses.dataclass(frozen=True)
class Sampler:
    """The base of the samplers: `temperature` divides the logits before a draw."""

    temperature: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature",
                           _finite_positive(self.temperature, "temperature"))

    def filter(self, logits: Any) -> Any:
        """The `(rows, vocab)` float32 logits with the tokens this sampler never picks at
        `FILTERED` (none here)."""
        return logits

    def choose(self, logits: Any, noise: Any) -> Any:
        """`(rows,)` int32 tokens: a draw from the softmax of the filtered logits divided
        by the temperature; `noise` is `(rows, vocab)` uniform in (0, 1)."""
        return draw(self.filter(logits / self.temperature), noise)

    uses_noise = True


@dataclasses.dataclass(frozen=True)
class GreedySampler(Sampler):
    """The most probable token (the first, on a tie), as Hugging Face's `do_sample=False`."""

    uses_noise = False

    def choose(self, logits: Any, noise: Any) -> Any:
        return first_index_of(logits, ops.max(logits, axis=-1))


@dataclasses.dataclass(frozen=True)
class RandomSampler(Sampler):
    """A draw from the whole softmax (divided by `temperature`)."""


@dataclasses.dataclass(frozen=True)
class TopKSampler(Sampler):
    """A draw among the `k` most probable tokens (Fan et al. 2018)."""

    k: int = 50

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_int(self.k) or self.k < 1:
            raise UserError(f"top_k must be an integer >= 1; got {self.k!r}")

    def filter(self, logits: Any) -> Any:
        k = min(int(self.k), logits.shape[-1])
        kth = ops.top_k(logits, k=k)[0][:, -1:]
        return ops.where(logits < kth, FILTERED, logits)


@dataclasses.dataclass(frozen=True)
class TopPSampler(Sampler):
    """Nucleus sampling (Holtzman et al. 2020): a draw among the fewest most probable tokens
    whose probabilities sum to at least `p` (after `temperature`), and among the `k` most
    probable only when `k` is given."""

    p: float = 0.9
    k: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            p = float(self.p)
        except (TypeError, ValueError):
            p = float("nan")
        if isinstance(self.p, bool) or not 0.0 < p <= 1.0:
            raise UserError(f"top_p must be a number in (0, 1]; got {self.p!r}")
        object.__setattr__(self, "p", p)
        if self.k is not None and (not is_int(self.k) or self.k < 1):
            raise UserError(f"top_k must be an integer >= 1; got {self.k!r}")

    def filter(self, logits: Any) -> Any:
        if self.k is not None:
            logits = TopKSampler(k=self.k).filter(logits)
        return top_p_filter(logits, self.p)


def draw(logits: Any, noise: Any) -> Any:
    """`(rows,)` int32 tokens drawn from the softmax of `(rows, vocab)` logits, by the
    Gumbel-max trick over `noise` (uniform in (0, 1), `uniform_noise`)."""
    scores = logits - ops.log(-ops.log(noise))
    return first_index_of(scores, ops.max(scores, axis=-1))


def _order_keys(x: Any) -> Any:
    """int32 keys of float32 `x` in the floats' order (`a < b` exactly when `key(a) <
    key(b)`, for finite numbers): a negative float's bits, read as int32, are flipped below
    the sign bit, so that a larger magnitude is a smaller key."""
    bits = ops.view(ops.cast(x, "float32"), "int32")
    return ops.where(bits < 0, ops.bitwise_xor(bits, np.int32(0x7FFFFFFF)), bits)


def _midpoint(low: Any, high: Any) -> Any:
    """`floor((low + high) / 2)` of int32 tensors, without overflowing int32."""
    both_odd = ops.bitwise_and(ops.bitwise_and(low, high), np.int32(1))
    return ops.right_shift(low, 1) + ops.right_shift(high, 1) + both_odd


def top_p_filter(logits: Any, p: Any) -> Any:
    """The `(rows, vocab)` logits with every token outside the nucleus of probability `p`
    (a float or a scalar tensor in (0, 1]; 1 keeps every token) at `FILTERED`.

    A token is in the nucleus when the tokens more probable than it hold less than `p`
    (the most probable always; tied tokens alike). Found without sorting the vocabulary:
    the mass above a threshold falls as the threshold rises, so 32 halvings of the int32
    keys of the logits (`_order_keys`) find the lowest kept logit exactly, each one masked
    sum over the row. A sort of 50,257 logits a step was the samplers' cost on a CPU (about
    ten times this search on JAX; figures: docs/performance-log.md, 2026-11-29)."""
    probabilities = ops.softmax(logits, axis=-1)
    keys = _order_keys(logits)
    # Invariant: the mass above `low` is at least p, the mass above `high` below it.
    low = ops.min(keys, axis=-1, keepdims=True) - 1
    high = ops.max(keys, axis=-1, keepdims=True)

    def halve(_: Any, bounds: tuple) -> tuple:
        low, high = bounds
        middle = _midpoint(low, high)
        above = ops.sum(ops.where(keys > middle, probabilities, 0.0), axis=-1, keepdims=True)
        kept = above < p
        return ops.where(kept, low, middle), ops.where(kept, middle, high)

    _, lowest_kept = ops.fori_loop(0, 32, halve, (low, high))
    # p = 1 keeps every token: the float32 masses of a long tail can round to 1 before it.
    return ops.where((keys < lowest_kept) & (p < 1.0), FILTERED, logits)


@dataclasses.dataclass(frozen=True)
class BeamSampler(Sampler):
    """Beam search of `num_beams` hypotheses with the GNMT length penalty `alpha`
    (`zoo.generation.beam.beam_search`); the best hypothesis is returned. No draw."""

    num_beams: int = 4
    alpha: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_int(self.num_beams) or not 1 <= self.num_beams <= _MAX_BEAMS:
            raise UserError(f"num_beams must be an integer from 1 to {_MAX_BEAMS}; got "
                            f"{self.num_beams!r}")

    uses_noise = False


SAMPLERS = {"greedy": GreedySampler, "random": RandomSampler, "top_k": TopKSampler,
            "top_p": TopPSampler, "beam": BeamSampler}


def get_sampler(sampler: str | Sampler) -> Sampler:
    """A sampler object from itself or its name ("greedy", "random", "top_k", "top_p",
    "beam", with their defaults), as keras-hub's `samplers.get`.

    >>> get_sampler("top_p")
    TopPSampler(temperature=1.0, p=0.9, k=None)
    """
    if isinstance(sampler, Sampler):
        return sampler
    if isinstance(sampler, str) and sampler in SAMPLERS:
        return SAMPLERS[sampler]()
    raise UserError(f"sampler must be one of {', '.join(SAMPLERS)} or a Sampler; got "
                    f"{sampler!r}")


def check_repetition_penalty(value: Any) -> float:
    """The repetition penalty as a float: finite and > 0 (1 is none)."""
    return _finite_positive(value, "repetition_penalty")


def penalize_repetition(logits: Any, seen: Any, penalty: float) -> Any:
    """CTRL's repetition penalty (Keskar et al. 2019), as Hugging Face applies it: the
    logit of every token already in the sequence (`seen`, `(rows, vocab)` bool) divided by
    `penalty` where positive, multiplied where negative."""
    penalized = ops.where(logits > 0, logits / penalty, logits * penalty)
    return ops.where(seen, penalized, logits)


# ------------------------------------------------------------------ repeatable noise
_GOLDEN = np.int32(-1640531527)  # 0x9E3779B9, the golden-ratio increment, as int32


def _logical_shift(x: Any, bits: int) -> Any:
    """`x >> bits` of int32 `x` read as unsigned (zeros shifted in)."""
    return ops.bitwise_and(ops.right_shift(x, bits), np.int32((1 << (32 - bits)) - 1))


def _mix(x: Any) -> Any:
    """A 32-bit integer hash (Wellons' "lowbias32"); int32 products wrap on every backend."""
    x = ops.bitwise_xor(x, _logical_shift(x, 16))
    x = ops.multiply(x, np.int32(0x7FEB352D))
    x = ops.bitwise_xor(x, _logical_shift(x, 15))
    x = ops.multiply(x, np.int32(0x846CA68B - (1 << 32)))
    return ops.bitwise_xor(x, _logical_shift(x, 16))


def uniform_noise(seed: Any, step: Any, rows: Any, vocabulary_size: int) -> Any:
    """`(rows, vocabulary_size)` float32 numbers in (0, 1), a function of `(seed, step, row,
    token)` alone: the same on every backend and in every call."""
    row = ops.arange(rows, dtype="int32")[:, None]
    token = ops.arange(vocabulary_size, dtype="int32")[None, :]
    key = _mix(ops.cast(seed, "int32") + _mix(ops.cast(step, "int32") * _GOLDEN))
    bits = _mix(_mix(key + row * _GOLDEN) + token * _GOLDEN)
    top24 = ops.cast(_logical_shift(bits, 8), "float32")
    return (top24 + 0.5) / float(1 << 24)
