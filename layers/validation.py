"""Argument checks shared by the layers, the training kit and the models.

One wording everywhere: "<what> must be <expected>; got <value>".
"""

from __future__ import annotations

from typing import Any


def is_int(value: Any) -> bool:
    """True for an int (numpy ints included) that is not a bool."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(value: Any, what: str, error: type[ValueError] = ValueError) -> int:
    """`value` as an int if it is a positive int (not a bool).

    Args:
        value: the argument to check.
        what: its name, for the message.
        error: the ValueError subclass to raise (the zoo passes its `UserError` for values
            a user gave).

    Raises:
        ValueError: (or `error`) naming `what` and the value.
    """
    if not is_int(value) or value <= 0:
        raise error(f"{what} must be a positive int; got {value!r}")
    return int(value)


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
