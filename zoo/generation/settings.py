"""A search's settings and their bounds, checked before anything is traced or allocated.

`Translator.translate`/`search`, the export and the recipes call `check_search_settings`
first, so that a bad value is a one-line error (and `max_length=100000` never allocates a cache
of 100000 positions). `NEVER` is the score the searches and their callers give a token that
must not be chosen.
"""

from __future__ import annotations

from typing import Any

from zoo.training.errors import UserError
from zoo.layers.validation import is_int

# A log-probability that can never win but stays finite in float32 arithmetic.
NEVER = -1e9

# The widest beam accepted: the search's memory and time grow linearly with it, and beams
# beyond a few dozen no longer change translations (Koehn & Knowles 2017 find wide beams
# hurt).
MAX_BEAM_SIZE = 64
# The longest output accepted when the model states no limit of its own.
MAX_LENGTH = 1024



def _check_length_at_least_one(max_length: Any) -> None:
    """The searches' own check; the upper bound is the caller's (it knows the model)."""
    if is_int(max_length) and max_length < 1:
        raise UserError(f"max_length must be at least 1; got {max_length!r}")


def check_beam_size(beam_size: Any) -> int:
    """`beam_size` as an int, checked before anything is traced or allocated.

    Raises:
        ValueError: not an integer from 1 to `MAX_BEAM_SIZE`; the message names the value.
    """
    if not is_int(beam_size):
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
    if not is_int(max_length) or not 1 <= int(max_length) <= limit:
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

    Example:

    >>> check_search_settings(4, 50, limit=128, alpha=1)
    (4, 50, 1.0)
    >>> try:
    ...     check_search_settings(4, 200, limit=128)
    ... except ValueError as error:
    ...     print(error)
    max_length must be an integer from 1 to 128 (the most this model generates); got 200
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


def check_max_new_tokens(max_new_tokens: Any, limit: int) -> int:
    """`max_new_tokens` as an int from 1 to `limit` (the positions a language model has left
    after its longest prompt), checked before anything is traced or allocated.

    Raises:
        UserError: another value; the message names it and the bound.

    >>> check_max_new_tokens(20, limit=100)
    20
    """
    if limit < 1:
        raise UserError("the prompt leaves no room for max_new_tokens: it fills every "
                        "position the model has; shorten it")
    if not is_int(max_new_tokens) or not 1 <= int(max_new_tokens) <= limit:
        raise UserError(f"max_new_tokens must be an integer from 1 to {limit} (the model's "
                        f"positions left after the prompt); got {max_new_tokens!r}")
    return int(max_new_tokens)
