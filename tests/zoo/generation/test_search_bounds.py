"""Bounds on searches: beam size, output length and alpha are checked before any tracing."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from zoo.generation.beam import beam_search
from zoo.generation.greedy import greedy_search
from zoo.generation.settings import (
    MAX_BEAM_SIZE,
    MAX_LENGTH,
    check_beam_size,
    check_max_length,
    check_search_settings,
)


@pytest.mark.parametrize("beam_size", [0, -1, MAX_BEAM_SIZE + 1, 2.5, "4", True, None])
def test_bad_beam_sizes_are_refused_naming_the_value(beam_size):
    with pytest.raises(ValueError, match="^beam_size must be .*; got ") as error:
        check_beam_size(beam_size)
    assert repr(beam_size) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("beam_size", [1, 4, MAX_BEAM_SIZE, np.int64(3)])
def test_good_beam_sizes_pass(beam_size):
    assert check_beam_size(beam_size) == int(beam_size)


def test_max_length_is_bounded_by_the_model_or_the_cap():
    assert check_max_length(None, 24) is None
    assert check_max_length(24, 24) == 24 and check_max_length(MAX_LENGTH) == MAX_LENGTH
    with pytest.raises(ValueError, match="from 1 to 24 .*got 100000"):
        check_max_length(100000, 24)
    with pytest.raises(ValueError, match=f"from 1 to {MAX_LENGTH} .*got 100000"):
        check_max_length(100000)
    for bad in (0, -3, 1.5, "10"):
        with pytest.raises(ValueError, match="max_length"):
            check_max_length(bad, 24)


def test_check_search_settings():
    assert check_search_settings(4, 10, 24, 0.6) == (4, 10, 0.6)
    assert check_search_settings(1) == (1, None, 0.6)
    for alpha in (-0.1, float("nan"), 11, "x", True):
        with pytest.raises(ValueError, match="alpha"):
            check_search_settings(4, None, 24, alpha)


def _constant_logits(tokens, index, cache):
    logits = ops.tile(ops.convert_to_tensor([[0.0, 0.0, 0.0, 5.0]]), (tokens.shape[0], 1))
    return logits, cache


def test_the_searches_refuse_bad_settings_before_allocating():
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(_constant_logits, (), 1, 0, 5, 1, 3)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(_constant_logits, (), 1, MAX_BEAM_SIZE + 1, 5, 1, 3)
    with pytest.raises(ValueError, match="max_length"):
        beam_search(_constant_logits, (), 1, 2, 0, 1, 3)
    with pytest.raises(ValueError, match="max_length"):
        greedy_search(_constant_logits, (), 1, 0, 1, 3)
    tokens, _ = greedy_search(_constant_logits, (ops.zeros((1, 1)),), 1, 4, 1, 3)
    assert ops.convert_to_numpy(tokens).tolist() == [[3, 0, 0, 0]]
