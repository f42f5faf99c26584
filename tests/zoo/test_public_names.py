"""`zoo`'s public names: each resolves on first use to the class or function it names."""

from __future__ import annotations

import keras
import pytest

import zoo


@pytest.mark.parametrize("name", zoo.__all__)
def test_every_public_name_resolves_and_is_listed(name):
    value = getattr(zoo, name)
    assert callable(value)
    assert name in dir(zoo)


def test_model_classes_are_keras_models_from_zoo_models():
    for cls in (zoo.Translator, zoo.VisionTransformer, zoo.SentenceEncoder):
        assert issubclass(cls, keras.Model)
        assert cls.__module__.startswith("zoo.models.")
    from zoo.text.tokenizer import Tokenizer

    assert issubclass(zoo.MarianTokenizer, Tokenizer) and issubclass(zoo.SubwordTokenizer, Tokenizer)
    assert issubclass(zoo.UserError, ValueError)


def test_a_loaded_model_is_an_instance_of_the_public_class():
    assert isinstance(zoo.load("vit-cifar10"), zoo.VisionTransformer)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Transformer'"):
        zoo.Transformer  # noqa: B018
