"""The shared argument checks: which values pass, and the one wording of a refusal
("<what> must be <expected>; got <value>")."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.layers.validation import image_size_pair, non_negative_int, positive_int


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.int32(1)])
def test_positive_int_passes_ints_as_python_ints(value):
    checked = positive_int(value, "n")
    assert checked == int(value) and type(checked) is int


@pytest.mark.parametrize("value", [0, -2, True, False, 2.0, "3", None])
def test_positive_int_refuses_in_one_wording(value):
    with pytest.raises(ValueError) as error:
        positive_int(value, "n")
    assert str(error.value) == f"n must be a positive int; got {value!r}"


def test_minimum():
    assert [positive_int(v, "n", minimum=5) for v in (5, 6)] == [5, 6]
    for value in (4, 0, True):
        with pytest.raises(ValueError, match=r"^n must be an int >= 5; got "):
            positive_int(value, "n", minimum=5)


def test_a_positive_int_has_a_positive_minimum():
    with pytest.raises(ValueError, match="non_negative_int"):
        positive_int(3, "n", minimum=0)


def test_non_negative_int_passes_zero_and_refuses_in_one_wording():
    passes = [0, 1, np.int64(0)]
    assert [non_negative_int(v, "n") for v in passes] == [0, 1, 0]
    assert type(non_negative_int(np.int64(0), "n")) is int
    for value in (-1, True, 0.0, None):
        with pytest.raises(ValueError) as error:
            non_negative_int(value, "n")
        assert str(error.value) == f"n must be a non-negative int; got {value!r}"


def test_optional_passes_none_and_names_it_in_the_message():
    assert positive_int(None, "limit", optional=True) is None
    assert non_negative_int(None, "window", optional=True) is None
    assert non_negative_int(0, "window", optional=True) == 0
    with pytest.raises(ValueError, match=r"^limit must be a positive int or None; got 0$"):
        positive_int(0, "limit", optional=True)
    with pytest.raises(ValueError, match=r"^window must be a non-negative int or None; got -1$"):
        non_negative_int(-1, "window", optional=True)
    with pytest.raises(ValueError, match=r"^limit must be a positive int or None; got 'x'$"):
        positive_int("x", "limit", optional=True)


def test_error_class_is_the_callers():
    with pytest.raises(UserError, match=r"^epochs must be an int >= 2 or None; got 1$"):
        positive_int(1, "epochs", error=UserError, minimum=2, optional=True)


def test_image_size_pair():
    assert image_size_pair(32) == (32, 32) and image_size_pair((24, np.int64(16))) == (24, 16)
    with pytest.raises(ValueError, match=r"image_size must be .*; got \(0, 3\)$"):
        image_size_pair((0, 3))
