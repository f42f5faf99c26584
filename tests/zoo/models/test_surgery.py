"""What every model's surgery shares (`zoo.models.surgery`): copying weights between models
whose shapes may differ, leaving some layers out, the changes of other training options, a
trained model readied for a run; and the translator's `with_training_options`."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.models.surgery import (
    copy_weights,
    copy_weights_outside,
    in_run_options,
    training_option_changes,
)
from zoo.models.translator.model import Translator
from zoo.text.tokenizer import SubwordTokenizer


def dense(units: int, dtype: str = "float32", use_bias: bool = True) -> keras.Model:
    return keras.Sequential([keras.Input((3,)),
                             keras.layers.Dense(units, dtype=dtype, use_bias=use_bias)])


def test_copy_weights_copies_casts_converts_and_names_a_shape_mismatch():
    source, target = dense(2), dense(2, dtype="mixed_bfloat16")
    copy_weights(source, target)
    for old, new in zip(source.weights, target.weights):
        np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
    assert target.weights[0].dtype == "float32"  # variables keep their own dtype
    wider = dense(4)
    with pytest.raises(ValueError, match=r"cannot copy weight .*kernel of shape \(3, 2\) to "
                                         r".*kernel of shape \(3, 4\)"):
        copy_weights(source, wider)
    # `convert` supplies a value where the shapes differ (here: the kernel and bias, tiled).
    copy_weights(source, wider, lambda old, new: np.tile(np.asarray(old), (1, 2)[-old.ndim:]))
    np.testing.assert_array_equal(np.asarray(wider.weights[0])[:, 2:],
                                  np.asarray(source.weights[0]))
    with pytest.raises(ValueError):  # a different number of weights
        copy_weights(source, dense(2, use_bias=False))


def test_copy_weights_outside_leaves_the_named_layers_alone():
    def two_layers(units: int) -> keras.Model:
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                 keras.layers.Dense(units)])

    source, target = two_layers(2), two_layers(5)  # the last layers differ in shape
    fresh = [np.asarray(w) for w in target.layers[1].weights]
    copy_weights_outside(source, target, [source.layers[1]], [target.layers[1]])
    for old, new in zip(source.layers[0].weights, target.layers[0].weights):
        np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
    for before, after in zip(fresh, target.layers[1].weights):
        np.testing.assert_array_equal(before, np.asarray(after))
    with pytest.raises(ValueError, match="of shape"):  # nothing left out: the shapes differ
        copy_weights_outside(source, target, [], [])


def test_training_option_changes_name_only_what_is_given():
    assert training_option_changes() == {}
    changes = training_option_changes(dropout=0.1, dtype="mixed_bfloat16")
    assert changes["dropout"] == 0.1 and "attention_dropout" not in changes
    assert keras.dtype_policies.deserialize(changes["dtype"]).name == "mixed_bfloat16"


@pytest.mark.parametrize("argument", ["dropout", "attention_dropout"])
@pytest.mark.parametrize("rate", [1.0, -0.1])
def test_a_rate_outside_the_unit_interval_is_one_line_naming_it(argument, rate):
    with pytest.raises(ValueError, match=rf"^{argument} must lie in \[0, 1\); got {rate}$"):
        training_option_changes(**{argument: rate})


@pytest.fixture(scope="module")
def translator() -> Translator:
    sentences = ["a dog runs on the beach", "ein hund rennt am strand", "a cat sleeps",
                 "eine katze schläft"] * 5
    tokenizer = SubwordTokenizer.train(sentences, vocabulary_size=60)
    keras.utils.set_random_seed(0)
    return Translator.from_architecture(
        "transformer-tiny", tokenizer, hidden_dim=16, intermediate_dim=32, num_heads=2,
        num_encoder_layers=1, num_decoder_layers=1, max_source_length=8, max_target_length=8)


def test_translator_with_training_options_keeps_weights_and_tokenizer(translator):
    changed = translator.with_training_options(dropout=0.2, dtype="mixed_bfloat16")
    assert changed is not translator and changed.tokenizer is translator.tokenizer
    assert changed.dropout == 0.2 and translator.dropout != 0.2
    assert changed.dtype_policy.name == "mixed_bfloat16"
    assert len(changed.weights) == len(translator.weights)
    for old, new in zip(translator.weights, changed.weights):
        assert new.dtype == "float32"  # float32 variables under mixed precision: exact
        np.testing.assert_array_equal(np.asarray(old), np.asarray(new))


def test_in_run_options_copies_only_when_the_run_differs(translator):
    assert keras.config.dtype_policy().name == "float32"
    assert translator.dtype_policy.name == "float32"
    assert in_run_options(translator) is translator
    changed = in_run_options(translator, dropout=0.3)
    assert changed is not translator and changed.dropout == 0.3
