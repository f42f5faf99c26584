"""The translator's SavedModel checked the way TF Serving uses it: its signatures, warm-up
request and batching answer as the Python API.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.zoo.conftest import read_gz, serve
from zoo.serving.export import export_model
from zoo.serving.model_server import xla_only_op_types

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


@pytest.mark.slow
def test_translations_equal_the_python_api(exported_translator, shared_data):
    model, _, version = exported_translator
    # One request at the cap of 64 sentences (`MAX_TRANSLATOR_SENTENCES`).
    texts = read_gz(shared_data / "multi30k" / "test_2016_flickr.en.gz", 61)
    texts += ["", "   ", "word " * 400]  # empty, blank and very long inputs
    expected = model.translate(texts, beam_size=3)
    out = serve(version, {"sentences": texts})
    served, scores = out["translations"], out["scores"]
    assert served == expected
    assert served[61] == served[62] == "" and scores[61] == 0.0
    _, python_scores = model.translate(texts[:5], beam_size=3, return_scores=True)
    np.testing.assert_allclose(scores[:5], python_scores, atol=1e-4)


def test_layout_signatures_and_ids_signature(exported_translator):
    model, repository, version = exported_translator
    assert version == repository / "translator-test" / "3"
    assert (version / "saved_model.pb").exists()
    config = (repository / "models.config").read_text()
    assert 'name: "translator-test"' in config and 'base_path: "/models/translator-test"' in config
    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "saved_model_cli"), "show", "--dir",
         str(version), "--all"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "signature_def['serving_default']" in result.stdout
    assert "dtype: DT_STRING" in result.stdout and "sentences" in result.stdout
    assert "signature_def['translate_ids']" in result.stdout
    source = model.encode_texts(["A dog runs.", "Two men are talking outside."])
    expected, _ = model.search(source, beam_size=3,
                               max_length=model.default_max_length(model.max_source_length))
    served = serve(version, {"source_ids": source.tolist()}, "translate_ids")["target_ids"]
    best = expected[:, 0]
    for row, tokens in zip(served, best):  # equal up to the first end token
        end = list(tokens).index(3) + 1 if 3 in tokens else len(tokens)
        assert row[:end] == list(tokens[:end])


def test_warmup_request_is_a_valid_prediction_log(exported_translator):
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    _, _, version = exported_translator
    path = version / "assets.extra" / "tf_serving_warmup_requests"
    records = list(tf.data.TFRecordDataset(str(path)))
    assert len(records) == 1
    log = prediction_log_pb2.PredictionLog.FromString(records[0].numpy())
    request = log.predict_log.request
    assert request.model_spec.name == "translator-test"
    assert request.model_spec.signature_name == "serving_default"
    assert list(request.inputs) == ["sentences"]


def test_export_names_the_zoo_version_that_wrote_it(exported_translator):
    import importlib.metadata

    _, _, version = exported_translator
    written = (version / "assets.extra" / "zoo_version.txt").read_text().strip()
    assert written == importlib.metadata.version("attention-zoo")


def test_greedy_export_of_a_model_object_answers_as_the_python_api(exported_translator,
                                                                    tmp_path):
    model, _, _ = exported_translator
    version = export_model(model, tmp_path / "repository", beam_size=1, name="greedy")
    assert xla_only_op_types(version) == set()
    texts = ["A dog runs on the beach.", "Two men are talking outside a shop.", "", "Hi"]
    assert serve(version, {"sentences": texts})["translations"] == model.translate(
        texts, beam_size=1)


def test_a_translator_points_keras_export_to_zoo_export(exported_translator, tmp_path):
    model, _, _ = exported_translator
    with pytest.raises(ValueError, match="zoo.export"):
        model.export(str(tmp_path / "x"))


@pytest.mark.slow
def test_a_batch_the_server_concatenates_answers_as_each_request_alone(exported_translator,
                                                                      shared_data):
    """TF Serving's batching concatenates requests along the first axis: sentences of very
    different lengths in one batch translate as each did in its own request."""
    _, _, version = exported_translator
    texts = read_gz(shared_data / "multi30k" / "test_2016_flickr.en.gz", 40)
    requests = [texts[:3], [min(texts, key=len)], [max(texts, key=len), "A dog."]]
    alone = [serve(version, {"sentences": request})["translations"] for request in requests]
    together = serve(version, {"sentences": [t for request in requests for t in request]})
    assert together["translations"] == [t for answer in alone for t in answer]


def test_served_model_answers_as_the_server_script(exported_translator):
    """`zoo.serving.session.ServedModel`, which `zoo bench --work mt-served` times, runs an
    export as the reference server script of the tests does (in this process, XLA on: the
    export does not need it)."""
    from zoo.serving.session import ServedModel

    _, _, version = exported_translator
    texts = ["A dog runs on the beach.", "", "Two men are talking."]
    served = ServedModel(version)
    assert served.warmup_requests == 1
    out = served(sentences=texts)
    assert [t.decode() for t in out["translations"]] == serve(
        version, {"sentences": texts})["translations"]
