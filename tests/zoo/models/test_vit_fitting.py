"""A ViT is ready to fit: it compiles itself on its first fit (also after a new head), and
loading or building it takes the number of classes."""

import keras
import numpy as np
import pytest

import zoo
from zoo.training.errors import UserError
from zoo.models.vit.model import VisionTransformer

SMALL = {"num_layers": 1, "hidden_dim": 16, "num_heads": 2, "intermediate_dim": 16}


def _data(num_classes, n=8):
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (n, 32, 32, 3)).astype("uint8"),
            rng.integers(0, num_classes, n))


def _tiny(**kwargs):
    return VisionTransformer.from_architecture("vit-cifar-tiny", **SMALL, **kwargs)


def test_class_names_alone_set_the_number_of_classes():
    model = _tiny(class_names=["cat", "dog", "fox"])
    assert model.num_classes == 3 and model.class_names == ["cat", "dog", "fox"]
    with pytest.raises(UserError, match="class_names has 3 names but num_classes is 4"):
        _tiny(num_classes=4, class_names=["cat", "dog", "fox"])


def test_an_uncompiled_vit_compiles_itself_on_fit_with_the_recipe_loss():
    model = _tiny(class_names=["cat", "dog", "fox"])
    assert not model.compiled
    images, labels = _data(3)
    history = model.fit(images, labels, epochs=1, batch_size=4, verbose=0)
    assert model.compiled and np.isfinite(history.history["loss"][0])
    assert isinstance(model.loss, keras.losses.SparseCategoricalCrossentropy)
    assert model.loss.get_config()["from_logits"] is True
    assert isinstance(model.optimizer, keras.optimizers.AdamW)
    # top-5 of 3 classes says nothing: only accuracy
    assert "accuracy" in history.history and "top5" not in history.history


def test_top5_is_a_metric_only_above_five_classes():
    model = _tiny(num_classes=10)
    history = model.fit(*_data(10), epochs=1, batch_size=8, verbose=0)
    assert "top5" in history.history


def test_a_model_you_compiled_keeps_your_choice():
    model = _tiny(num_classes=3)
    optimizer = keras.optimizers.SGD(0.01)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    model.fit(*_data(3), epochs=1, batch_size=8, verbose=0)
    assert model.optimizer is optimizer


def test_a_new_head_fits_and_keeps_the_other_weights():
    model = _tiny(num_classes=10)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    new = model.with_new_head(2, ["yes", "no"])
    assert not new.compiled and new.num_classes == 2
    np.testing.assert_array_equal(new.patch_embedding.weights[0].numpy(),
                                  model.patch_embedding.weights[0].numpy())
    new.fit(*_data(2), epochs=1, batch_size=8, verbose=0)
    assert isinstance(new.optimizer, keras.optimizers.AdamW)
    assert new.evaluate(*_data(2), verbose=0, return_dict=True)["accuracy"] >= 0


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("vit") / "model.keras"
    _tiny(num_classes=10, class_names=[f"c{i}" for i in range(10)]).save(path)
    return path


@pytest.mark.parametrize("how", ["zoo.load", "from_preset"])
def test_loading_with_num_classes_gives_a_new_head(saved, how):
    load = zoo.load if how == "zoo.load" else VisionTransformer.from_preset
    original = load(str(saved))
    model = load(str(saved), num_classes=3)
    assert model.num_classes == 3 and model(np.zeros((1, 32, 32, 3))).shape == (1, 3)
    np.testing.assert_array_equal(model.encoder_blocks[0].weights[0].numpy(),
                                  original.encoder_blocks[0].weights[0].numpy())
    named = load(str(saved), class_names=["a", "b"])
    assert named.num_classes == 2 and named.class_names == ["a", "b"]
    same = load(str(saved), num_classes=10)  # its own number: the trained head is kept
    np.testing.assert_array_equal(same.head.weights[0].numpy(),
                                  original.head.weights[0].numpy())


@pytest.mark.parametrize("num_classes", [0, -1, 2.5])
def test_a_bad_num_classes_is_one_line(saved, num_classes):
    with pytest.raises(UserError, match="num_classes") as error:
        zoo.load(str(saved), num_classes=num_classes)
    assert "\n" not in str(error.value)
