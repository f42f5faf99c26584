"""The TF Serving messages an export writes without tensorflow-serving-api
(zoo/serving/server_messages.py), checked against that package's own declarations and parser:
an install of the core dependencies alone exports."""

import os
import subprocess
import sys

import keras
import pytest
from google.protobuf import descriptor, text_format

from zoo.serving.server_messages import MESSAGES, message_class

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


def _server_class(name):
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2
    from tensorflow_serving.config import model_server_config_pb2

    for module in (model_pb2, predict_pb2, prediction_log_pb2, model_server_config_pb2):
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"tensorflow-serving-api has no {name}")


def _shape(field):
    """What decides a field's encoding: number, wire type, repeated or not, and for a
    message its name (a map's entry by its key and value)."""
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        message = tuple(_shape(f) for f in message.fields)
    elif message is not None:
        message = message.full_name.split(".")[-1]
        if field.message_type.full_name.startswith("tensorflow.Tensor"):
            message = field.message_type.full_name
    repeated = field.label == descriptor.FieldDescriptor.LABEL_REPEATED
    return field.name, field.number, field.type, repeated, message


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_each_declared_field_is_the_servers(name):
    ours = message_class(name).DESCRIPTOR
    server = _server_class(name).DESCRIPTOR.fields_by_name
    for field in ours.fields:
        assert field.name in server, f"{name}.{field.name}"
        assert _shape(field) == _shape(server[field.name])


# A process where tensorflow-serving-api cannot be imported (as after `pip install .`):
# it exports a tiny ViT.
EXPORT_WITHOUT_SERVING_API = r"""
import sys
sys.modules["tensorflow_serving"] = None  # `import tensorflow_serving...` raises ImportError
import numpy as np
import zoo
from zoo.models.vit.model import VisionTransformer

model = VisionTransformer(image_size=16, patch_size=8, num_classes=2, hidden_dim=8,
                          num_layers=1, num_heads=1, intermediate_dim=8,
                          class_names=["ant", "bee"])
model(np.zeros((1, 16, 16, 3), "uint8"))
print(zoo.export(model, sys.argv[1], version=2, top_k=1, name="tiny"))
"""


def test_export_without_tensorflow_serving_api_writes_what_the_server_reads(tmp_path):
    import tensorflow as tf

    result = subprocess.run(
        [sys.executable, "-c", EXPORT_WITHOUT_SERVING_API, str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    version = tmp_path / "tiny" / "2"
    records = list(tf.data.TFRecordDataset(
        str(version / "assets.extra" / "tf_serving_warmup_requests")))
    assert len(records) == 1
    log = _server_class("PredictionLog").FromString(records[0].numpy())
    request = log.predict_log.request
    assert (request.model_spec.name, request.model_spec.signature_name) == (
        "tiny", "serving_default")
    images = tf.make_ndarray(request.inputs["images"])
    assert images.shape == (1,)
    assert tf.io.decode_png(images[0]).shape == (16, 16, 3)
    config = text_format.Parse((tmp_path / "models.config").read_text(),
                               _server_class("ModelServerConfig")())
    [entry] = config.model_config_list.config
    assert (entry.name, entry.base_path, entry.model_platform) == (
        "tiny", "/models/tiny", "tensorflow")
    # ServedModel replays what the server's parser reads.
    ours = message_class("PredictionLog").FromString(records[0].numpy())
    assert text_format.MessageToString(ours) == text_format.MessageToString(log)
