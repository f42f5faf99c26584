"""The captioner's SavedModel checked the way TF Serving runs it (XLA off, a TF1 session, no
code of ours loaded): image bytes in, the captions `ImageCaptioner.caption` writes out, the same
for an image alone or in a batch; too many images, or bytes that are no image, fail only their
request, named."""

from __future__ import annotations

import io

import keras
import numpy as np
import pytest

from tests.zoo.conftest import run_like_a_server, serve
from tests.zoo.models._tiny_captioner import caption_images, tiny_captioner
from zoo.serving.caption_endpoints import MAX_CAPTION_IMAGES
from zoo.serving.export import export_model

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


@pytest.fixture(scope="module")
def exported_captioner(tmp_path_factory):
    folder = tmp_path_factory.mktemp("captioner")
    model = tiny_captioner(folder / "bpe", seed=8)
    version = export_model(model, folder / "repository", beam_size=2, name="captioner-test")
    return model, version


def _pngs(images: np.ndarray) -> list[bytes]:
    from PIL import Image

    out = []
    for image in images:
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        out.append(buffer.getvalue())
    return out


def _three() -> tuple[np.ndarray, list[bytes]]:
    images = caption_images(3, seed=1)
    return images, _pngs(images)


def test_served_captions_equal_the_python_api(exported_captioner):
    model, version = exported_captioner
    images, pngs = _three()
    expected = model.caption(images, beam_size=2, max_length=20)
    assert len(set(expected)) == 3  # the images are told apart
    assert serve(version, {"images": pngs})["captions"] == expected


def test_alone_empty_and_bad_requests(exported_captioner):
    """Each image alone has its caption of the batch; an empty request has no rows; bytes
    that are no image, or one image too many, fail their request, named."""
    model, version = exported_captioner
    images, pngs = _three()
    (result,) = run_like_a_server(
        f"f = tf.saved_model.load({str(version)!r}).signatures['serving_default']\n"
        f"pngs = {pngs!r}\n"
        "outcome = {'alone': [f(images=tf.constant([p]))['captions'].numpy()[0].decode()\n"
        "                     for p in pngs],\n"
        "           'empty': f(images=tf.constant([], tf.string))['captions'].shape[0]}\n"
        f"bad = {{'corrupt': [pngs[0], b'not an image'], 'many': pngs[:1] * {MAX_CAPTION_IMAGES + 1}}}\n"
        "for name, request in bad.items():\n"
        "    try:\n"
        "        f(images=tf.constant(request))\n"
        "        outcome[name] = None\n"
        "    except tf.errors.InvalidArgumentError as error:\n"
        "        outcome[name] = error.message\n"
        "print(json.dumps(outcome))\n")
    assert result["alone"] == model.caption(images, beam_size=2, max_length=20)
    assert result["empty"] == 0
    assert "image 1 of 2: bytes in no known image format" in result["corrupt"]
    cap = MAX_CAPTION_IMAGES
    assert f"[a request of] [{cap + 1}] [images is more than the limit of] [{cap}]" in \
        result["many"]
