"""The ViT's SavedModel checked the way TF Serving uses it: image bytes and pixels answer as
the Python API, and bad images (corrupt, huge, non-finite) fail only their request, named.
"""

import keras
import numpy as np
import pytest

from tests.zoo.conftest import run_like_a_server, serve
from tests.zoo.serving.conftest import check_request_table, session_outcomes
from zoo.serving.export import export_model
from zoo.serving.image_endpoints import (MAX_IMAGE_BYTES, MAX_IMAGES, MAX_PIXELS,
                                         MAX_REQUEST_BYTES)

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


def test_vit_bytes_signature_equals_the_python_api(exported_vit, tmp_path):
    """PNG bytes decode losslessly, so the served top-k equals the Python API's on the
    same pixels; mixed sizes and grayscale are resized and converted in the graph."""
    import io

    from PIL import Image

    model, version = exported_vit
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
    pngs = []
    for image in images:
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        pngs.append(buffer.getvalue())
    gray = io.BytesIO()
    Image.fromarray(images[0].mean(-1).astype("uint8")).save(gray, format="PNG")
    expected = model.classify(images, top_k=3)
    paths = []
    for i, data in enumerate(pngs + [gray.getvalue()]):
        paths.append(str(tmp_path / f"{i}.png"))
        (tmp_path / f"{i}.png").write_bytes(data)
    served = serve(version, {"images": [open(p, "rb").read() for p in paths]})
    for row, labels, probabilities in zip(expected, served["labels"],
                                          served["probabilities"]):
        assert [label for label, _ in row] == labels
        np.testing.assert_allclose([p for _, p in row], probabilities, atol=1e-4)
    assert len(served["labels"]) == 7  # the grayscale PNG was converted and classified


def test_vit_corrupt_bytes_fail_only_that_request(exported_vit):
    _, version = exported_vit
    (result,) = run_like_a_server(
        f"f = tf.saved_model.load({str(version)!r}).signatures['serving_default']\n"
        "outcome = {}\n"
        "try:\n"
        "    f(images=tf.constant([b'not an image']))\n"
        "    outcome['error'] = None\n"
        "except tf.errors.InvalidArgumentError:\n"
        "    outcome['error'] = 'InvalidArgument'\n"
        "png = tf.io.encode_png(tf.zeros([40, 24, 3], tf.uint8))\n"
        "outcome['k'] = int(f(images=tf.stack([png]))['labels'].shape[1])\n"
        "print(json.dumps(outcome))\n")
    assert result == {"error": "InvalidArgument", "k": 3}


@pytest.mark.slow
def test_shipped_vit_top1_served_equals_python_on_real_images(shared_data, tmp_path):
    """100 real CIFAR-10 JPEGs: the served top-1 and its probability equal the Python
    API's (the graph decodes JPEGs to exactly PIL's pixels)."""
    import zoo
    from zoo.training.files.archives import extract_archive
    from zoo.training.image_files import load_image, scan_image_folder

    if "vit-cifar10" not in zoo.list_models():
        pytest.skip("vit-cifar10 is not shipped")
    version = export_model("vit-cifar10", tmp_path / "repository", top_k=1)
    folder = extract_archive(shared_data / "cifar10" / "cifar10-train-jpg.tar.gz",
                             tmp_path / "cifar", limit_per_class=10)
    paths, _, _ = scan_image_folder(folder / "train")
    model = zoo.load("vit-cifar10")
    top = [row[0] for row in model.classify(
        np.stack([load_image(p, image_size=32) for p in paths]), top_k=1)]
    out = serve(version, {"images": [p.read_bytes() for p in paths]})
    served = [row[0] for row in out["labels"]]
    probabilities = [row[0] for row in out["probabilities"]]
    assert len(paths) == 100
    assert served == [label for label, _ in top]
    # The same pixels: with the fast-DCT decoder probabilities moved by ~1e-2.
    np.testing.assert_allclose(probabilities, [p for _, p in top], atol=1e-5)


def test_keras_own_export_of_a_loaded_vit_serves_its_logits(exported_vit, tmp_path):
    """`zoo.load` leaves a ViT ready for Keras' `model.export` (pixels in, logits out)."""
    import zoo

    model, _ = exported_vit
    model.save(tmp_path / "vit.keras")
    loaded = zoo.load(str(tmp_path / "vit.keras"))
    loaded.export(str(tmp_path / "keras-export"), verbose=False)
    pixels = np.random.default_rng(1).uniform(0, 255, (3, 32, 32, 3)).astype("float32")
    served = serve(tmp_path / "keras-export", {"args_0": pixels.tolist()},
                   expect_warmup=False)["output_0"]
    np.testing.assert_allclose(served, model.predict(pixels, verbose=0), atol=1e-5)


# ---------------------------------------------------------------------- served image bounds
def _png(height: int = 8, width: int = 8) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((height, width, 3), 90, "uint8")).save(buffer, format="PNG")
    return buffer.getvalue()


def _huge_png() -> bytes:
    """A PNG whose header says 10000 x 10000 pixels (its pixels are never there)."""
    import struct
    import zlib

    small = _png()
    ihdr = struct.pack(">II", 10000, 10000) + small[24:29]
    return small[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + small[33:]


def _jpeg() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype="uint8")).save(
        buffer, format="JPEG")
    return buffer.getvalue()


def _batch_of_8(index: int, bad: bytes) -> str:
    """A NumPy expression: 7 good images (PNGs and a JPEG) and `bad` at `index`."""
    batch = [_png(), _jpeg(), _png(12, 20)] * 3
    batch[index] = bad
    return f"np.array({batch[:8]!r}, dtype=object)"


MIB = 2 ** 20


def _rows(count: int) -> dict:
    """The shapes of the answer to `count` images (top 3 labels each)."""
    return {key: [count, 3] for key in ("class_ids", "labels", "probabilities")}


# (case, signature, inputs as NumPy expressions, the answer's shapes or the refusal's message)
IMAGE_REQUESTS = [
    ("empty request", "serving_default", {"images": "np.array([], dtype=object)"}, _rows(0)),
    ("empty pixels", "classify_pixels", {"pixels": "np.zeros([0, 32, 32, 3], np.float32)"},
     _rows(0)),
    ("good images", "serving_default", {"images": _batch_of_8(3, _png())}, _rows(8)),
    ("a truncated JPEG", "serving_default", {"images": _batch_of_8(3, _jpeg()[:300])},
     "[image 3 of 8: the image data is truncated or corrupt]"),
    ("an empty PNG", "serving_default", {"images": _batch_of_8(5, _png()[:8])},
     "[image 5 of 8: the image data is truncated or corrupt]"),
    ("no bytes", "serving_default", {"images": _batch_of_8(2, b"")},
     "[image 2 of 8: bytes in no known image format (JPEG, PNG, GIF or BMP)]"),
    ("junk", "serving_default", {"images": _batch_of_8(7, b"junk")},
     "[image 7 of 8: bytes in no known image format (JPEG, PNG, GIF or BMP)]"),
    ("a huge header", "serving_default", {"images": _batch_of_8(1, _huge_png())},
     f"[image 1 of 8: 10000 x 10000 pixels, more than the limit of {MAX_PIXELS}]"),
    ("at the image cap", "serving_default",
     {"images": f"np.array([{_png()!r}] * {MAX_IMAGES}, dtype=object)"}, _rows(MAX_IMAGES)),
    ("over the image cap", "serving_default",
     {"images": f"np.array([{_png()!r}] * {MAX_IMAGES + 1}, dtype=object)"},
     f"[a request of] [{MAX_IMAGES + 1}] [images is more than the limit of] [{MAX_IMAGES}]"),
    ("pixels over the image cap", "classify_pixels",
     {"pixels": f"np.zeros([{MAX_IMAGES + 1}, 2, 2, 3], np.float32)"},
     f"[a request of] [{MAX_IMAGES + 1}] [images is more than the limit of] [{MAX_IMAGES}]"),
    ("an image over the byte cap", "serving_default",
     {"images": f"np.array([{_png()!r}, b'x' * {MAX_IMAGE_BYTES + 1}], dtype=object)"},
     f"[image 1 of 2: {MAX_IMAGE_BYTES + 1} bytes, more than the limit of {MAX_IMAGE_BYTES} "
     "bytes an image]"),
    ("a request over the byte cap", "serving_default",
     {"images": f"np.array([b'x' * {30 * MIB}] * 3, dtype=object)"},
     f"[a request of] [{90 * MIB}] [bytes of images is more than the limit of] "
     f"[{MAX_REQUEST_BYTES}]"),
    ("pixels over the byte cap", "classify_pixels",
     {"pixels": "np.zeros([2, 2048, 2048, 3], np.float32)"},
     f"[a request of] [{2 * 2048 * 2048 * 3 * 4}] [bytes of float32 pixels is more than the "
     f"limit of] [{MAX_REQUEST_BYTES}]"),
]


def test_vit_requests_within_the_caps_are_answered_and_others_refused_naming_them(
        exported_vit):
    """As the model server runs them: an empty request is answered with no rows, a request
    at the image cap in full (32 images at a time), and a refusal (InvalidArgument) names
    the cap, and the image ("image 3 of 8: ...") when one image is at fault: a truncated
    JPEG, an empty PNG, bytes in no format, a header above `MAX_PIXELS` (never decoded)."""
    _, version = exported_vit
    check_request_table(version, IMAGE_REQUESTS)


# (name, the non-finite values of a batch of 3 images: {(image, row, column, channel): value})
NON_FINITE = [
    ("all finite", {}),
    ("a NaN in image 1", {(1, 3, 5, 0): float("nan")}),
    ("infinities in images 2 and 0", {(2, 31, 31, 2): float("-inf"),
                                      (0, 0, 0, 1): float("inf")}),
]


def test_vit_pixels_signature_refuses_non_finite_pixels_naming_the_image(exported_vit):
    """`classify_pixels` refuses a batch with a NaN or infinite pixel, naming the image the
    Python API names (which refuses it too), as the model server runs it (no XLA); a finite
    batch is classified as the Python API classifies it."""
    from zoo.training.errors import UserError

    model, version = exported_vit
    pixels = np.random.default_rng(7).uniform(0, 255, (3, 32, 32, 3)).astype("float32")
    cases = [(name, [(index, str(value)) for index, value in bad.items()])
             for name, bad in NON_FINITE]  # "nan", "inf": floats in the server's process
    (served,) = run_like_a_server(
        "import numpy as np\n"
        f"f = tf.saved_model.load({str(version)!r}).signatures['classify_pixels']\n"
        f"pixels = np.random.default_rng(7).uniform(0, 255, (3, 32, 32, 3)).astype('float32')\n"
        "outcome = {}\n"
        f"for name, bad in {cases!r}:\n"
        "    batch = pixels.copy()\n"
        "    for index, value in bad:\n"
        "        batch[tuple(index)] = float(value)\n"
        "    try:\n"
        "        labels = f(pixels=tf.constant(batch))['labels'].numpy()\n"
        "        outcome[name] = [[label.decode() for label in row] for row in labels]\n"
        "    except tf.errors.InvalidArgumentError as error:\n"
        "        outcome[name] = error.message\n"
        "print(json.dumps(outcome))\n")
    for name, bad in NON_FINITE:
        batch = pixels.copy()
        for index, value in bad.items():
            batch[index] = value
        if not bad:
            assert served[name] == [[label for label, _ in row]
                                    for row in model.classify(batch, top_k=3)]
            continue
        with pytest.raises(UserError, match=r"image (\d+) of the batch") as error:
            model.classify(batch)
        first, count = error.value.args[0].split()[1], len({index[0] for index in bad})
        assert isinstance(served[name], str), name
        assert (f"[image] [{first}] [of the batch holds NaN or infinite pixel values (] "
                f"[{count}] [such images)]") in served[name]


def test_image_header_size_reads_every_format():
    import io

    import tensorflow as tf
    from PIL import Image

    from zoo.serving.export import image_header_size

    for format in ("JPEG", "PNG", "GIF", "BMP"):
        buffer = io.BytesIO()
        Image.fromarray(np.zeros((37, 53, 3), "uint8")).save(buffer, format=format)
        known, height, width = image_header_size(tf.constant(buffer.getvalue()))
        assert (bool(known), int(height), int(width)) == (True, 37, 53), format
    for data in (b"", b"GI", b"not an image"):
        assert [int(x) for x in image_header_size(tf.constant(data))] == [0, 0, 0]


def test_a_hybrid_vit_answers_an_empty_request_empty(tmp_path):
    """A VGG stem's batch norm fails on an empty batch: the served signatures never run the
    model on one, and answer both an empty request and images as the Python API does."""
    from zoo.models.vit.model import VisionTransformer

    keras.utils.set_random_seed(7)
    model = VisionTransformer(image_size=16, patch_size=8, num_classes=3, hidden_dim=16,
                              num_layers=1, num_heads=2, intermediate_dim=16,
                              stem_filters=[4, [8], 8], stem_style="vgg",
                              class_names=["ant", "bee", "cat"])
    model(np.zeros((1, 16, 16, 3), "uint8"))
    version = export_model(model, tmp_path, top_k=2, name="hybrid")
    outcome = session_outcomes(version, {
        "empty": ("serving_default", {"images": "np.array([], dtype=object)"}),
        "empty pixels": ("classify_pixels", {"pixels": "np.zeros([0, 16, 16, 3], np.float32)"}),
    })
    rows = {key: [0, 2] for key in ("class_ids", "labels", "probabilities")}
    assert outcome == {"empty": rows, "empty pixels": rows}
    image = np.random.default_rng(1).integers(0, 255, (16, 16, 3), dtype="uint8")
    served = serve(version, {"pixels": [image.astype("float32").tolist()]}, "classify_pixels")
    assert served["labels"][0] == [label for label, _ in model.classify(image[None], top_k=2)[0]]
