"""`model.build(input_shape)` on a Vision Transformer, as Keras users write it before
`summary()`: the constructor has built every variable already, so a later build creates
nothing (Keras forbids new state on a built model), checks the shape, and leaves the model
as a call alone would: the same output and the same weights, for every registered
architecture (the hybrids with a convolutional stem among them)."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.models.architectures import architecture_config
from zoo.models.vit.model import VisionTransformer

from .conftest import copy_of, images, numpy


def _small(name: str) -> dict:
    """The architecture's own structure (stem, window, pooling) at a small size: one block of
    width 16, two patches a side."""
    patch = architecture_config(VisionTransformer, name, {})["patch_size"]
    return dict(image_size=2 * patch, num_layers=1, hidden_dim=16, num_heads=2,
                intermediate_dim=16, head_initializer="glorot_uniform")


def _weights(model: VisionTransformer) -> list[tuple[str, tuple]]:
    return sorted((w.path, tuple(w.shape)) for w in model.weights)


@pytest.mark.parametrize("name", VisionTransformer.architectures())
def test_build_then_call_equals_call_alone_for_every_architecture(name):
    small = _small(name)
    side = small["image_size"]
    batch = images(2, side)
    built = VisionTransformer.from_architecture(name, **small)
    called = copy_of(built)
    built.build((None, side, side, 3))
    after_build = built(batch)
    alone = called(batch)
    assert tuple(after_build.shape) == tuple(alone.shape) == (2, built.num_classes)
    assert _weights(built) == _weights(called)
    np.testing.assert_allclose(numpy(after_build), numpy(alone), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(None, 16, 16, 3), (None, None, None, 3), (4, 48, 24, 3),
                                   [None, 16, 16, 3]])
def test_build_takes_any_image_batch_shape_and_adds_no_weights(shape):
    """Images of another size are resized inside the model, so any height and width build."""
    model = VisionTransformer.from_architecture("vit-cifar-vgg", **_small("vit-cifar-vgg"))
    before = _weights(model)
    model.build(shape)
    model.build(shape)  # as often as asked
    assert _weights(model) == before
    assert tuple(model(images(1, 16)).shape) == (1, 10)


@pytest.mark.parametrize("shape", [(None, 16, 16, 1), (None, 16, 16), (16, 16, 3)])
def test_build_refuses_a_shape_that_is_no_image_batch(shape):
    model = VisionTransformer.from_architecture("vit-cifar-tiny", **_small("vit-cifar-tiny"))
    with pytest.raises(UserError) as error:
        model.build(shape)
    assert str(error.value) == ("VisionTransformer expects images of shape (batch, height, "
                                f"width, 3); got shape {tuple(shape)}")
