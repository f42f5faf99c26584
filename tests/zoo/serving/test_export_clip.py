"""CLIP's SavedModel checked the way TF Serving runs it (a fresh process with only TensorFlow
and TF Text, XLA off, a TF1 session, warm-up replayed): served zero-shot probabilities and
embeddings equal the Python API's, an image's answer does not depend on its batch, and a
request of too many labels is refused."""

import io

import keras
import numpy as np
import pytest

from tests.zoo.clip_checkpoint import MERGES, vocabulary
from tests.zoo.conftest import run_like_a_server
from zoo.serving.clip_endpoints import MAX_LABELS

pytestmark = [pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                 reason="export runs on the TensorFlow backend"),
              pytest.mark.slow]

LABELS = ["red square", "blue circle", "the cat", "a dog's ship", "green"]


def _pngs(images) -> list[bytes]:
    from PIL import Image

    out = []
    for image in images:
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        out.append(buffer.getvalue())
    return out


@pytest.fixture(scope="module")
def exported_clip(tmp_path_factory):
    from zoo.models.clip.model import CLIP
    from zoo.serving.export import export_model
    from zoo.serving.model_server import xla_only_op_types
    from zoo.text.clip_tokenizer import CLIPTokenizer

    keras.utils.set_random_seed(7)
    model = CLIP.from_architecture("clip-tiny", CLIPTokenizer(vocabulary(), MERGES, 16),
                                   context_length=16)
    version = export_model(model, tmp_path_factory.mktemp("clip_repository"), name="clip")
    assert xla_only_op_types(version) == set()
    return model, version


# As the model server runs it: a TF1 session, the warm-up records replayed, each signature
# fed by its tensor names; prints every request's outputs (or its InvalidArgument message).
SERVER = r"""
import numpy as np
from tensorflow_serving.apis import prediction_log_pb2
session = tf.compat.v1.Session(graph=tf.Graph())
signatures = tf.compat.v1.saved_model.loader.load(session, ["serve"], VERSION).signature_def

def run(name, feeds):
    signature = signatures[name]
    fetches = {key: value.name for key, value in signature.outputs.items()}
    return session.run(fetches, {signature.inputs[key].name: np.array(value, dtype=object)
                                 for key, value in feeds.items()})

warmup = os.path.join(VERSION, "assets.extra", "tf_serving_warmup_requests")
for record in tf.compat.v1.io.tf_record_iterator(warmup):
    request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
    run(request.model_spec.signature_name, {key: tf.make_ndarray(value)
                                            for key, value in request.inputs.items()})
out = {}
for case, (name, feeds) in CASES.items():
    try:
        out[case] = {key: value.tolist() for key, value in run(name, feeds).items()}
    except tf.errors.InvalidArgumentError as error:
        out[case] = " ".join(error.message.split())
print(json.dumps(out))
"""


def test_served_clip_equals_the_python_api(exported_clip):
    """PNGs of exactly the model's size decode to the same pixels, so the served
    probabilities and embeddings equal the Python API's; an image alone answers as in a
    batch; a request of more than `MAX_LABELS` labels is refused."""
    model, version = exported_clip
    images = np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    pngs = _pngs(images)
    cases = {
        "batch": ("serving_default", {"images": pngs, "labels": LABELS}),
        "alone": ("serving_default", {"images": pngs[1:2], "labels": LABELS}),
        "images": ("encode_images", {"images": pngs}),
        "texts": ("encode_texts", {"texts": LABELS}),
        "too_many": ("serving_default", {"images": pngs[:1],
                                         "labels": ["cat"] * (MAX_LABELS + 1)}),
    }
    (result,) = run_like_a_server(f"VERSION = {str(version)!r}\nCASES = {cases!r}\n" + SERVER)
    probabilities = result["batch"]["probabilities"]
    assert np.asarray(probabilities).shape == (5, len(LABELS))
    np.testing.assert_allclose(probabilities, model.zero_shot(images, LABELS), atol=1e-4)
    np.testing.assert_allclose(result["alone"]["probabilities"][0], probabilities[1],
                               atol=1e-6)
    np.testing.assert_allclose(result["images"]["embeddings"],
                               model.encode_images(images, normalize=True), atol=1e-4)
    np.testing.assert_allclose(result["texts"]["embeddings"],
                               model.encode_texts(LABELS, normalize=True), atol=1e-4)
    assert "labels is more than the limit of" in result["too_many"], result["too_many"]
    assert str(MAX_LABELS + 1) in result["too_many"]
