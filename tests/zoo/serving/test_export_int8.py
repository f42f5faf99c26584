"""Exports of int8 models: the float export's signatures, the same answers as the Python
API when served as TF Serving serves them, and a smaller `variables/`."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.zoo.conftest import serve
from zoo.models.quantization import quantize_model
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer
from zoo.serving.export import export_model

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")

VIT = dict(image_size=16, patch_size=4, num_classes=10, hidden_dim=128, num_layers=2,
           num_heads=4, intermediate_dim=512, head_initializer="glorot_uniform", dropout=0.0,
           class_names=[f"class_{i}" for i in range(10)])


def _signatures(version) -> dict:
    """`{name: (input specs, output specs)}` of a SavedModel's signatures."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(version))
    found = {}
    for name, function in loaded.signatures.items():
        inputs = {k: (v.dtype.name, tuple(v.shape.as_list()))
                  for k, v in function.structured_input_signature[1].items()}
        outputs = {k: (v.dtype.name, tuple(v.shape.as_list()))
                   for k, v in function.structured_outputs.items()}
        found[name] = (inputs, outputs)
    return found


def _size(folder) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@pytest.fixture(scope="module")
def vit_exports(tmp_path_factory):
    keras.utils.set_random_seed(0)
    model = VisionTransformer(**VIT)
    model(np.zeros((1, 16, 16, 3), "uint8"))
    repository = tmp_path_factory.mktemp("repository")
    float_version = export_model(model, repository, name="vit-float")
    quantize_model(model)
    int8_version = export_model(model, repository, name="vit-int8")
    return model, float_version, int8_version


def test_int8_vit_export_has_the_float_export_s_signatures(vit_exports):
    _, float_version, int8_version = vit_exports
    assert _signatures(int8_version) == _signatures(float_version)


def test_int8_vit_served_labels_equal_the_python_api(vit_exports):
    import tensorflow as tf

    model, _, version = vit_exports
    pixels = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3)).astype("uint8")
    images = [tf.io.encode_png(p).numpy() for p in pixels]
    out = serve(version, {"images": images})
    expected = model.classify(pixels, top_k=5)
    assert [row[0] for row in out["labels"]] == [row[0][0] for row in expected]
    np.testing.assert_allclose([row[0] for row in out["probabilities"]],
                               [row[0][1] for row in expected], atol=1e-4)


def test_int8_vit_variables_are_at_most_035_of_the_float_ones(vit_exports):
    _, float_version, int8_version = vit_exports
    ratio = _size(int8_version / "variables") / _size(float_version / "variables")
    assert ratio <= 0.35


@pytest.fixture(scope="module")
def translator_exports(small_tokenizer, tmp_path_factory):
    """A translator exported in float32, then quantized and exported again (beam 2):
    `(int8 model, float version, int8 version)`."""
    keras.utils.set_random_seed(3)
    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=64,
                                         intermediate_dim=256, num_heads=4,
                                         max_source_length=32, max_target_length=16)
    model.ensure_built()
    repository = tmp_path_factory.mktemp("translators")
    float_version = export_model(model, repository, name="mt-float", beam_size=2)
    quantize_model(model)
    return model, float_version, export_model(model, repository, name="mt-int8", beam_size=2)


@pytest.mark.slow
def test_int8_translator_export_keeps_signatures_and_answers_as_the_python_api(
        translator_exports):
    model, float_version, version = translator_exports
    assert _signatures(version) == _signatures(float_version)
    # The served search widens the int8 weights as the Python search does (one route).
    texts = ["A dog runs on the beach.", "Two men talk about a red car."]
    assert serve(version, {"sentences": texts})["translations"] == model.translate(
        texts, beam_size=2)
    ratio = _size(version / "variables") / _size(float_version / "variables")
    assert ratio <= 0.35


@pytest.mark.slow
def test_int8_translator_export_takes_one_route_for_every_request_size(translator_exports):
    """A one-sentence request and a larger one both multiply floats against the widened
    weights: their scores are the Python search's, and not those of int8 products (which
    differ by the rounding of the inputs, ten times the tolerance)."""
    from zoo.layers.int8_route import int8_products

    model, _, version = translator_exports
    ids = model.encode_texts(["A dog runs on the beach.", "Two men talk about a red car."])
    ids = np.asarray(ids, "int32")
    budget = model.default_max_length(model.max_source_length)

    def python_scores(rows: np.ndarray) -> np.ndarray:
        _, scores = model.generate(rows, beam_size=2, max_length=budget)
        return keras.ops.convert_to_numpy(scores)[:, 0]

    with int8_products():
        int8_one = python_scores(ids[:1])
    widened_one, widened_two = python_scores(ids[:1]), python_scores(ids)
    # Float32 rounding of a sum of log-probabilities; the routes differ ten times more.
    tolerance = 1e-5
    assert abs(int8_one[0] - widened_one[0]) > 10 * tolerance, (int8_one, widened_one)

    one = serve(version, {"source_ids": ids[:1].tolist()}, signature="translate_ids")
    two = serve(version, {"source_ids": ids.tolist()}, signature="translate_ids")
    np.testing.assert_allclose(one["scores"], widened_one, rtol=0, atol=tolerance)
    np.testing.assert_allclose(two["scores"], widened_two, rtol=0, atol=tolerance)
