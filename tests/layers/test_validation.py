"""The shared argument checks: which values pass, and the one wording of a refusal
("<what> must be <expected>; got <value>")."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.layers.validation import image_size_pair, positive_int


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.int32(1)])
def test_positive_int_passes_ints_as_python_ints(value):
    checked = positive_int(value, "n")
    assert checked == int(value) and type(checked) is int


@pytest.mark.parametrize("value", [0, -2, True, False, 2.0, "3", None])
def test_positive_int_refuses_in_one_wording(value):
    with pytest.raises(ValueError) as error:
        positive_int(value, "n")
    assert str(error.value) == f"n must be a positive int; got {value!r}"


@pytest.mark.parametrize("minimum, passes, refused", [
    (0, [0, 1, np.int64(0)], [-1, True, 0.0]),
    (5, [5, 6], [4, 0, True]),
])
def test_minimum(minimum, passes, refused):
    assert [positive_int(v, "n", minimum=minimum) for v in passes] == [int(v) for v in passes]
    for value in refused:
        with pytest.raises(ValueError, match=rf"^n must be an int >= {minimum}; got "):
            positive_int(value, "n", minimum=minimum)


def test_optional_passes_none_and_names_it_in_the_message():
    assert positive_int(None, "limit", optional=True) is None
    assert positive_int(None, "window", minimum=0, optional=True) is None
    assert positive_int(0, "window", minimum=0, optional=True) == 0
    with pytest.raises(ValueError, match=r"^limit must be a positive int or None; got 0$"):
        positive_int(0, "limit", optional=True)
    with pytest.raises(ValueError, match=r"^window must be an int >= 0 or None; got -1$"):
        positive_int(-1, "window", minimum=0, optional=True)
    with pytest.raises(ValueError, match=r"^limit must be a positive int or None; got 'x'$"):
        positive_int("x", "limit", optional=True)


def test_error_class_is_the_callers():
    with pytest.raises(UserError, match=r"^epochs must be an int >= 2 or None; got 1$"):
        positive_int(1, "epochs", error=UserError, minimum=2, optional=True)


def test_image_size_pair():
    assert image_size_pair(32) == (32, 32) and image_size_pair((24, np.int64(16))) == (24, 16)
    with pytest.raises(ValueError, match=r"image_size must be .*; got \(0, 3\)$"):
        image_size_pair((0, 3))
