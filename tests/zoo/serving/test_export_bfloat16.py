"""`export_model(..., precision="bfloat16")`: the graph's products in bfloat16 (its MatMuls
typed bfloat16, the translator's cached keys and values too), the float32 export's
signatures, and answers close to float32's when served as TF Serving serves them."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.zoo.conftest import serve
from tests.zoo.serving.test_export_int8 import VIT, _signatures
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer
from zoo.serving.export import export_model
from zoo.training.errors import UserError

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


def _product_dtypes(version) -> set[str]:
    """The dtypes (`T`) of every MatMul, BatchMatMul and Einsum in the SavedModel's graph,
    functions included."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import dtypes

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((version / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return {dtypes.as_dtype(n.attr["T"].type).name for n in nodes
            if n.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")}


def _while_loop_dtypes(version) -> set[str]:
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import dtypes

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((version / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return {dtypes.as_dtype(t).name for n in nodes if n.op in ("While", "StatelessWhile")
            for t in n.attr["T"].list.type}


@pytest.fixture(scope="module")
def vit_exports(tmp_path_factory):
    keras.utils.set_random_seed(0)
    model = VisionTransformer(**VIT)
    model(np.zeros((1, 16, 16, 3), "uint8"))
    repository = tmp_path_factory.mktemp("repository")
    return (model, export_model(model, repository, name="vit-float"),
            export_model(model, repository, name="vit-bf16", precision="bfloat16"))


@pytest.mark.slow
def test_a_bfloat16_vit_export_multiplies_in_bfloat16_behind_float32_signatures(vit_exports):
    model, float_version, bf16_version = vit_exports
    assert _signatures(bf16_version) == _signatures(float_version)
    assert "bfloat16" in _product_dtypes(bf16_version)
    assert "bfloat16" not in _product_dtypes(float_version)
    assert model.dtype_policy.name == "float32"  # the caller's model is left as it was


@pytest.mark.slow
def test_a_served_bfloat16_vit_answers_as_float32_within_bfloat16_rounding(vit_exports):
    model, _, version = vit_exports
    pixels = np.random.default_rng(0).uniform(0, 255, (4, 16, 16, 3)).astype("float32")
    out = serve(version, {"pixels": pixels.tolist()}, signature="classify_pixels")
    expected = model.classify(pixels, top_k=10)  # float32, every class
    for labels, probabilities, reference in zip(out["labels"], out["probabilities"],
                                                expected):
        reference = dict(reference)
        # bfloat16 keeps 8 bits of mantissa: each probability within 0.02 of float32's.
        for label, probability in zip(labels, probabilities):
            assert abs(probability - reference[label]) < 0.02, (label, probability, reference)


def test_an_unknown_export_precision_is_one_line_naming_it(tmp_path):
    with pytest.raises(UserError, match="^unknown precision 'float16'; expected one of "
                                        "float32, bfloat16$"):
        export_model(VisionTransformer(**VIT), tmp_path, precision="float16")


@pytest.mark.slow
def test_a_bfloat16_translator_export_caches_in_bfloat16_and_translates_as_float32(
        small_tokenizer, tmp_path):
    keras.utils.set_random_seed(3)
    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=64,
                                         intermediate_dim=256, num_heads=4,
                                         max_source_length=32, max_target_length=16)
    model.ensure_built()
    float_version = export_model(model, tmp_path, name="mt-float", beam_size=1)
    version = export_model(model, tmp_path, name="mt-bf16", beam_size=1, precision="bfloat16")
    assert _signatures(version) == _signatures(float_version)
    assert "bfloat16" in _product_dtypes(version)
    # The search's loop carries the key/value cache in the compute dtype.
    assert "bfloat16" in _while_loop_dtypes(version)
    assert "bfloat16" not in _while_loop_dtypes(float_version)
    texts = ["A dog runs on the beach.", "Two men talk about a red car."]
    served = serve(version, {"sentences": texts})
    assert served["translations"] == model.translate(texts, beam_size=1)
    # Sums of 16 log-probabilities, each product rounded to 8 bits of mantissa.
    np.testing.assert_allclose(served["scores"], serve(float_version, {"sentences": texts})
                               ["scores"], rtol=0.01)


@pytest.mark.slow
def test_predict_fuses_its_gelu_yet_no_export_carries_an_xla_call(vit_exports, monkeypatch):
    # Keras' predict step runs the GELU as one XLA call (zoo.layers.xla_fusion); an export
    # traces the model's call, where it stays plain ops: the stock model server runs a
    # SavedModel without XLA.
    import zoo.layers.xla_fusion as xla_fusion

    model, float_version, bf16_version = vit_exports
    answers = []
    fusing = xla_fusion.fusing
    monkeypatch.setattr(xla_fusion, "fusing", lambda: answers.append(fusing()) or answers[-1])
    images = np.random.default_rng(3).integers(0, 256, (3, 16, 16, 3)).astype("uint8")
    np.testing.assert_allclose(model.predict_on_batch(images), model(images), rtol=1e-5,
                               atol=1e-5)
    assert True in answers and False in answers  # fused in the step, plain in the call
    for version in (float_version, bf16_version):
        assert b"_XlaMustCompile" not in (version / "saved_model.pb").read_bytes()
