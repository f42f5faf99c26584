"""Exported SavedModels, checked the way TF Serving would use them."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.zoo.conftest import read_gz, run_like_a_server, serve
from zoo.serving.export import export_model
from zoo.serving.model_server import xla_only_op_types
from zoo.models.translator.model import Translator

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")

@pytest.mark.slow
def test_translations_equal_the_python_api(exported_translator, shared_data):
    model, _, version = exported_translator
    texts = read_gz(shared_data / "multi30k" / "test_2016_flickr.en.gz", 100)
    texts += ["", "   ", "word " * 400]  # empty, blank and very long inputs
    expected = model.translate(texts, beam_size=3)
    out = serve(version, {"sentences": texts})
    served, scores = out["translations"], out["scores"]
    assert served == expected
    assert served[100] == served[101] == "" and scores[100] == 0.0
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


def test_existing_version_is_not_overwritten(exported_translator, tmp_path):
    model, repository, version = exported_translator
    model.save(tmp_path / "model.keras")
    model_file = str(tmp_path / "model.keras")
    with pytest.raises(FileExistsError, match="--force"):
        export_model(model_file, repository, version=3, name="translator-test")
    with pytest.raises(ValueError, match="positive integer"):
        export_model(model_file, repository, version=0, name="translator-test")


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


# ---------------------------------------------------------------------- atomic versions
def _vit_file(exported_vit, tmp_path) -> str:
    model, _ = exported_vit
    model.save(tmp_path / "vit.keras")
    return str(tmp_path / "vit.keras")


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_force_swaps_in_a_complete_new_version(exported_vit, tmp_path):
    model_file = _vit_file(exported_vit, tmp_path)
    repository = tmp_path / "repository"
    first = export_model(model_file, repository, version=2, top_k=3, name="v")
    (first / "marker").write_text("the old version")
    with pytest.raises(FileExistsError, match="--force"):
        export_model(model_file, repository, version=2, top_k=3, name="v")
    second = export_model(model_file, repository, version=2, top_k=2, name="v", force=True)
    assert second == first and (second / "saved_model.pb").exists()
    assert not (second / "marker").exists()
    assert _leftovers(repository / "v") == []
    assert 'name: "v"' in (repository / "models.config").read_text()


def test_a_failed_export_leaves_the_old_version_and_no_temporary(exported_vit, tmp_path,
                                                                monkeypatch):
    import zoo.serving.export

    model_file = _vit_file(exported_vit, tmp_path)
    repository = tmp_path / "repository"
    old = export_model(model_file, repository, version=1, top_k=3, name="v")
    (old / "marker").write_text("the old version")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # a kill while the new version is being written

    monkeypatch.setattr(zoo.serving.export, "write_warmup_requests", crash)
    with pytest.raises(KeyboardInterrupt):
        export_model(model_file, repository, version=1, top_k=3, name="v", force=True)
    assert (old / "marker").read_text() == "the old version"
    with pytest.raises(KeyboardInterrupt):
        export_model(model_file, repository, version=5, top_k=3, name="v")
    assert not (repository / "v" / "5").exists()
    assert _leftovers(repository / "v") == []


def test_two_exports_of_one_version_cannot_both_succeed(exported_vit, tmp_path, monkeypatch):
    import zoo.serving.export

    model_file = _vit_file(exported_vit, tmp_path)
    repository = tmp_path / "repository"
    real = zoo.serving.export.write_warmup_requests

    def other_export_finishes_first(folder, *args, **kwargs):
        other = repository / "v" / "1"
        other.mkdir()
        (other / "saved_model.pb").write_text("the other export's")
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(zoo.serving.export, "write_warmup_requests", other_export_finishes_first)
    with pytest.raises(FileExistsError, match="another export") as error:
        export_model(model_file, repository, version=1, top_k=3, name="v")
    assert "\n" not in str(error.value)
    assert (repository / "v" / "1" / "saved_model.pb").read_text() == "the other export's"
    assert _leftovers(repository / "v") == []


def test_put_in_place_refuses_an_existing_target_and_swaps_with_force(tmp_path):
    from zoo.serving.export import _put_in_place

    target, new = tmp_path / "1", tmp_path / ".1.tmp"
    for folder, text in ((target, "old"), (new, "new")):
        folder.mkdir()
        (folder / "f").write_text(text)
    with pytest.raises(FileExistsError, match="another export"):
        _put_in_place(new, target, force=False)
    assert (target / "f").read_text() == "old"
    _put_in_place(new, target, force=True)
    assert (target / "f").read_text() == "new" and sorted(os.listdir(tmp_path)) == ["1"]


@pytest.mark.parametrize("settings, message", [
    (dict(beam_size=0), "beam_size"),
    (dict(beam_size=1000), "beam_size"),
    (dict(top_k=0), "top_k"),
    (dict(alpha=-1.0), "alpha"),
    (dict(version=0), "positive integer"),
    (dict(version="x"), "positive integer"),
    (dict(name="../escape"), "plain folder name"),
])
def test_bad_export_settings_are_one_line_errors(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message) as error:
        export_model(str(tmp_path / "missing.keras"), tmp_path / "repository", **settings)
    assert "\n" not in str(error.value)


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


# ---------------------------------------------------------------------- size
def _saved_values(version) -> int:
    """How many numbers the SavedModel's variables/ checkpoint holds."""
    import tensorflow as tf

    entries = tf.train.list_variables(str(version / "variables" / "variables"))
    return sum(int(np.prod(shape)) for name, shape in entries if shape)


def test_exports_store_each_weight_once(exported_vit, exported_translator):
    translator, _, translator_version = exported_translator
    for model, version in (exported_vit, (translator, translator_version)):
        weights = sum(int(np.prod(w.shape)) for w in model.weights)
        # At most 1.2x the weights (the bound this test holds exports to); Keras' tracking of the model on top
        # of the endpoints' captures used to save every weight twice (2.0x).
        assert weights <= _saved_values(version) <= 1.2 * weights, version


# ---------------------------------------------------------------------- as the server runs it
def test_exports_hold_no_op_that_needs_xla(exported_translator, exported_vit):
    """The model server runs graphs with XLA off: an `Xla*` op (Keras' `slice_update` on
    TensorFlow is one) fails there, however well the export answers in Python."""
    for version in (exported_translator[2], exported_vit[1]):
        assert xla_only_op_types(version) == set(), version


def test_xla_only_op_types_finds_keras_slice_update_in_a_saved_model(tmp_path):
    import tensorflow as tf

    module = tf.Module()
    module.write = tf.function(
        lambda i: keras.ops.slice_update(tf.zeros([4]), [i], tf.ones([1])),
        input_signature=[tf.TensorSpec([], tf.int32)])
    tf.saved_model.save(module, str(tmp_path))
    assert xla_only_op_types(tmp_path) == {"XlaDynamicUpdateSlice"}


def test_greedy_export_of_a_model_object_answers_as_the_python_api(exported_translator,
                                                                    tmp_path):
    model, _, _ = exported_translator
    version = export_model(model, tmp_path / "repository", beam_size=1, name="greedy")
    assert xla_only_op_types(version) == set()
    texts = ["A dog runs on the beach.", "Two men are talking outside a shop.", "", "Hi"]
    assert serve(version, {"sentences": texts})["translations"] == model.translate(
        texts, beam_size=1)


def test_a_model_object_exports_under_its_name_and_other_objects_are_refused(exported_vit,
                                                                            tmp_path):
    import zoo

    model, _ = exported_vit
    version = zoo.export(model, tmp_path, version=2)
    assert version == tmp_path / model.name / "2" and (version / "saved_model.pb").exists()
    with pytest.raises(ValueError, match="got Dense"):
        zoo.export(keras.layers.Dense(2), tmp_path)


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


def test_server_config_files_parse_as_the_server_reads_them(tmp_path):
    """models.config is TF Serving's own ModelServerConfig in text form, whatever a folder is
    named; batching_parameters.txt names the flags that take it and sets a batch size."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    from zoo.serving.model_server import write_batching_parameters, write_models_config

    for name in ('say "hi"', "plain"):
        (tmp_path / name / "1").mkdir(parents=True)
    (tmp_path / "not-a-model").mkdir()
    config = text_format.Parse(write_models_config(tmp_path).read_text(),
                               model_server_config_pb2.ModelServerConfig())
    assert [(c.name, c.base_path) for c in config.model_config_list.config] == [
        ("plain", "/models/plain"), ('say "hi"', '/models/say "hi"')]
    text = write_batching_parameters(tmp_path).read_text()
    assert "--enable_batching=true --batching_parameters_file=" in text
    assert "max_batch_size { value: 32 }" in text


def test_stale_temporaries_of_killed_exports_are_removed_and_live_ones_kept(tmp_path):
    from zoo.serving.export import remove_stale_temporaries

    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid names no live process now
    stale = tmp_path / f".1.tmp-{finished.pid}-0123abcd"
    live = tmp_path / f".2.tmp-{os.getpid()}-4567ef01"
    version, unnamed = tmp_path / "1", tmp_path / ".3.tmp-nopid"
    for folder in (stale, live, version, unnamed):
        (folder / "variables").mkdir(parents=True)
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, version.name, unnamed.name])
    assert remove_stale_temporaries(tmp_path / "missing") == []


@pytest.mark.parametrize("progress", [True, False])
def test_export_says_what_it_does_only_when_asked(small_tokenizer, tmp_path, monkeypatch,
                                                  capsys, progress):
    """`zoo export` passes progress=True: a line as the minute of tracing starts and one as it
    ends; a Python caller who did not ask hears nothing."""
    import zoo.serving.export as export

    written = []
    monkeypatch.setattr(export, "_write_version", lambda *args: written.append(args[1]))
    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=32,
                                         intermediate_dim=64, num_heads=4)
    target = export_model(model, tmp_path, version=2, name="tiny", progress=progress)
    assert written == [target] == [tmp_path / "tiny" / "2"]
    lines = capsys.readouterr().err.splitlines()
    if progress:
        assert lines[0] == f"zoo: exporting tiny to {target} ..."
        assert lines[1].startswith(f"zoo: exporting tiny to {target}: done in ")
    else:
        assert lines == []
