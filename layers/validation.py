"""Argument checks shared by the layers, the training kit and the models.

One wording everywhere: "<what> must be <expected>; got <value>".
"""

from __future__ import annotations

from typing import Any, Literal, overload


def is_int(value: Any) -> bool:
    """True for an int (numpy ints included) that is not a bool."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _int_at_least(value: Any, what: str, error: type[ValueError], minimum: int,
                  optional: bool, expected: str) -> int | None:
    if value is None and optional:
        return None
    if not is_int(value) or value < minimum:
        raise error(f"{what} must be {expected}{' or None' if optional else ''}; got "
                    f"{value!r}")
    return int(value)


@overload
def positive_int(value: Any, what: str, error: type[ValueError] = ..., *, minimum: int = ...,
                 optional: Literal[False] = ...) -> int: ...


@overload
def positive_int(value: Any, what: str, error: type[ValueError] = ..., *, minimum: int = ...,
                 optional: bool) -> int | None: ...


def positive_int(value: Any, what: str, error: type[ValueError] = ValueError, *,
                 minimum: int = 1, optional: bool = False) -> int | None:
    """`value` as an int if it is an int (not a bool) of at least `minimum` (1 or more; a
    count that may be 0 is `non_negative_int`'s).

    Args:
        value: the argument to check.
        what: its name, for the message.
        error: the ValueError subclass to raise (the zoo passes its `UserError` for values
            a user gave).
        minimum: the smallest value accepted, at least 1.
        optional: accept None too (and return it): an argument whose None means "unset".

    Returns:
        `int(value)` (a NumPy int becomes a Python int, which configs serialize), or None
        for None when `optional`.

    Raises:
        ValueError: (or `error`) naming `what` and the value: "must be a positive int" when
            `minimum` is 1, else "must be an int >= minimum", with "or None" when `optional`.

    Example:
    >>> positive_int(3, "heads"), positive_int(None, "limit", optional=True)
    (3, None)
    >>> positive_int(4, "vocabulary_size", minimum=5)
    Traceback (most recent call last):
    ...
    ValueError: vocabulary_size must be an int >= 5; got 4
    """
    if minimum < 1:  # a bug of the caller's, not a user's mistake
        raise ValueError(f"positive_int takes a minimum of at least 1; got {minimum!r} "
                         "(non_negative_int accepts 0)")
    expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
    return _int_at_least(value, what, error, minimum, optional, expected)


@overload
def non_negative_int(value: Any, what: str, error: type[ValueError] = ..., *,
                     optional: Literal[False] = ...) -> int: ...


@overload
def non_negative_int(value: Any, what: str, error: type[ValueError] = ..., *,
                     optional: bool) -> int | None: ...


def non_negative_int(value: Any, what: str, error: type[ValueError] = ValueError, *,
                     optional: bool = False) -> int | None:
    """`value` as an int if it is an int (not a bool) of 0 or more: a count that may be
    empty (a window of 0, no prefix tokens). Args, returns and errors as `positive_int`'s,
    the refusal saying "must be a non-negative int".

    Example:
    >>> non_negative_int(0, "padding"), non_negative_int(None, "window", optional=True)
    (0, None)
    >>> non_negative_int(-1, "window", optional=True)
    Traceback (most recent call last):
    ...
    ValueError: window must be a non-negative int or None; got -1
    """
    return _int_at_least(value, what, error, 0, optional, "a non-negative int")


def image_size_pair(image_size: Any, what: str = "image_size",
                    error: type[ValueError] = ValueError) -> tuple[int, int]:
    """`(height, width)` from an int side or a pair of positive ints.

    Raises:
        ValueError: (or `error`, as in `positive_int`) naming `what` and the value.
    """
    if is_int(image_size):
        image_size = (image_size, image_size)
    if (not isinstance(image_size, (tuple, list)) or len(image_size) != 2
            or not all(is_int(s) and s > 0 for s in image_size)):
        raise error(
            f"{what} must be a positive int or a pair (height, width) of positive ints; got "
            f"{image_size!r}")
    return int(image_size[0]), int(image_size[1])
