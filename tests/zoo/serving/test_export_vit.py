"""The ViT's SavedModel checked the way TF Serving uses it: image bytes and pixels answer as
the Python API, and bad images (corrupt, huge, non-finite) fail only their request, named.
"""

import keras
import numpy as np
import pytest

from tests.zoo.conftest import run_like_a_server, serve
from zoo.serving.export import export_model

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
    from zoo.training.archives import extract_archive
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
def test_vit_refuses_huge_images_from_their_header_and_names_the_index(exported_vit):
    """A PNG whose header says 10000 x 10000 is refused before decoding (the pixels are
    never read), and a bad image's error names its index in the batch."""
    import io
    import struct
    import zlib

    from PIL import Image

    from zoo.serving.export import MAX_PIXELS

    _, version = exported_vit
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(buffer, format="PNG")
    small = buffer.getvalue()
    ihdr = struct.pack(">II", 10000, 10000) + small[24:29]
    huge = small[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + small[33:]
    assert 10000 * 10000 > MAX_PIXELS
    (result,) = run_like_a_server(
        f"f = tf.saved_model.load({str(version)!r}).signatures['serving_default']\n"
        "outcome = {}\n"
        f"for key, batch in (('huge', [{small!r}, {huge!r}]), ('junk', [{small!r}, b'junk']),"
        f" ('good', [{small!r}])):\n"
        "    try:\n"
        "        outcome[key] = int(f(images=tf.constant(batch))['labels'].shape[0])\n"
        "    except tf.errors.InvalidArgumentError as error:\n"
        "        outcome[key] = error.message\n"
        "print(json.dumps(outcome))\n")
    assert result["good"] == 1
    assert "[image] [1] [has] [10000] [x] [10000]" in result["huge"]
    assert str(MAX_PIXELS) in result["huge"]
    assert "[image] [1] [is not a JPEG, PNG, GIF or BMP]" in result["junk"]


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
    from zoo.errors import UserError

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
