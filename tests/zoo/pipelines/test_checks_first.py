"""A corpus run checks what it can before it starts (zoo/pipelines/checks.py), writes its
output as every other write of the zoo (never through a link, never over a file without
--force, whole, never onto its input), and a bad element fails alone.

The exports here are SavedModel protos written by hand with TensorFlow's own message classes:
the checks read the graph's signature, never run it, so no model is built."""

from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys

import pytest

pytest.importorskip("apache_beam", reason="Apache Beam is not installed (pip install "
                                          "'attention-zoo[pipeline]')")
pytest.importorskip("tensorflow")

from zoo.training.errors import UserError  # noqa: E402
from zoo.pipelines import corpus  # noqa: E402
from zoo.pipelines.checks import max_workers  # noqa: E402


def fake_export(folder, input_name: str):
    """A version folder whose saved_model.pb has a serving signature taking `input_name`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    signature = saved.meta_graphs.add().signature_def["serving_default"]
    signature.inputs[input_name].name = f"serving_default_{input_name}:0"
    (folder / "variables").mkdir(parents=True)
    (folder / "variables" / "variables.index").write_bytes(b"")
    (folder / "saved_model.pb").write_bytes(saved.SerializeToString())
    return str(folder)


@pytest.fixture
def place(tmp_path):
    """A folder with a translator and a ViT export, a source, images, a file outside it
    (`victim`) and a link to that file; returns a dict of their paths."""
    paths = {"tmp": str(tmp_path),
             "tr": fake_export(tmp_path / "tr" / "1", "sentences"),
             "vit": fake_export(tmp_path / "vit" / "1", "images")}
    (tmp_path / "src.en").write_text("A dog.\n")
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(b"\x89PNG")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("the user's file\n")
    os.symlink(tmp_path / "outside" / "victim", tmp_path / "link.tsv")
    os.symlink(tmp_path / "outside" / "victim", tmp_path / "o.de.errors.link")
    (tmp_path / "old.de").write_text("kept\n")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "saved_model.pb").write_bytes(b"\x0a\xff\xff not a proto")
    paths.update({name: str(tmp_path / name) for name in (
        "src.en", "images", "link.tsv", "old.de", "corrupt")})
    return paths


# (case, function, model, source, output, keywords, the one line's words)
REFUSED = [
    ("output is a link", "translate", "tr", "src.en", "link.tsv", {},
     "--output {tmp}/link.tsv is a symbolic link"),
    ("output is a link, with --force", "classify", "vit", "images", "link.tsv",
     {"force": True}, "--output {tmp}/link.tsv is a symbolic link"),
    ("output exists", "translate", "tr", "src.en", "old.de", {},
     "--output {tmp}/old.de exists; --force replaces it"),
    ("output is the input", "translate", "tr", "src.en", "src.en", {"force": True},
     "--output {tmp}/src.en is the command's own input"),
    ("output is the input through a glob", "translate", "tr", "{tmp}/src.e?", "src.en",
     {"force": True}, "is the command's own input"),
    ("output is the image folder", "classify", "vit", "images", "images", {"force": True},
     "--output {tmp}/images is a folder"),
    ("output under a file", "translate", "tr", "src.en", "old.de/x", {},
     "--output {tmp}/old.de/x: {tmp}/old.de is not a folder"),
    ("output in a folder no one writes", "translate", "tr", "src.en", "/proc/x.de", {},
     "--output /proc/x.de: cannot write in /proc"),
    ("a file where a folder is read", "classify", "vit", "src.en", "o.tsv", {},
     "--pipeline {tmp}/src.en is a file; give a folder"),
    ("a folder where a file is read", "translate", "tr", "images", "o.de", {},
     "--pipeline {tmp}/images is a folder; give a text file"),
    ("missing source", "translate", "tr", "nope.en", "o.de", {},
     "--pipeline {tmp}/nope.en does not exist"),
    ("translator export to classify", "classify", "tr", "images", "o.tsv", {},
     "is an export of a translator; this command needs an export of a ViT"),
    ("ViT export to translate", "translate", "vit", "src.en", "o.de", {},
     "is an export of a ViT; this command needs an export of a translator"),
    ("corrupt export", "translate", "corrupt", "src.en", "o.de", {},
     "saved_model.pb cannot be read as a SavedModel"),
    ("no export at all", "translate", "images", "src.en", "o.de", {},
     "which holds saved_model.pb; got --model '{tmp}/images'"),
    ("runner typo", "translate", "tr", "src.en", "o.de",
     {"pipeline_args": ["--runner=DirectRuner"]}, "runner 'DirectRuner' cannot be used"),
    ("more workers than processors", "translate", "tr", "src.en", "o.de",
     {"workers": 10000}, "--workers 10000 is more than this machine's"),
]


@pytest.mark.parametrize("function, model, source, output, keywords, said",
                         [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_a_run_that_cannot_work_is_refused_before_it_starts(place, function, model, source,
                                                            output, keywords, said):
    tmp = place["tmp"]
    before = sorted(os.listdir(tmp))

    def at(name):
        return place.get(name) or os.path.join(tmp, name.format(tmp=tmp))

    run = corpus.translate_file if function == "translate" else corpus.classify_folder
    with pytest.raises(UserError) as refused:
        run(at(model), at(source), at(output), **keywords)
    message = str(refused.value)
    assert said.format(tmp=tmp) in message and "\n" not in message
    assert sorted(os.listdir(tmp)) == before  # nothing written, nothing made
    assert open(os.path.join(tmp, "outside", "victim")).read() == "the user's file\n"
    assert open(os.path.join(tmp, "old.de")).read() == "kept\n"


def test_the_errors_file_beside_the_output_follows_the_same_rules(place):
    tmp = place["tmp"]
    os.rename(os.path.join(tmp, "o.de.errors.link"), os.path.join(tmp, "o.de.errors"))
    with pytest.raises(UserError, match="o.de.errors is a symbolic link"):
        corpus.translate_file(place["tr"], place["src.en"], os.path.join(tmp, "o.de"),
                              force=True)


def test_the_command_refuses_without_force_and_names_the_flag(place):
    done = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "translate", "--pipeline", place["src.en"],
         "--output", place["old.de"], "--model", place["tr"]],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"zoo: error: --output {place['old.de']} exists; --force replaces it"]


def test_a_worker_per_processor_is_accepted():
    from zoo.pipelines.corpus import pipeline_options

    assert pipeline_options([], max_workers()).get_all_options()["direct_num_workers"] in (
        None, max_workers())


def test_the_write_replaces_a_linked_file_by_renaming_and_a_full_disk_keeps_the_old(
        tmp_path, monkeypatch):
    out = tmp_path / "o.de"
    out.write_text("old\n")
    os.link(out, tmp_path / "other-name")  # a hard link: a truncation would reach it
    corpus._write_in_order([(1, ["eins"])], str(out))
    assert out.read_text() == "eins\n"
    assert (tmp_path / "other-name").read_text() == "old\n"

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("pathlib.Path.write_bytes", full)
    with pytest.raises(OSError, match="No space left on device"):
        corpus._write_in_order([(1, ["zwei"])], str(out))
    monkeypatch.undo()
    assert out.read_text() == "eins\n"  # the old file, not an empty one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.de", "o.de.errors",
                                                          "other-name"]


def read_lines(path):
    """The (tag, value) pairs `_ReadLines` gives for the file at `path`."""
    from apache_beam.io import fileio
    from apache_beam.io.filesystems import FileSystems

    metadata = FileSystems.match([str(path)])[0].metadata_list[0]
    return [(getattr(item, "tag", "lines"), getattr(item, "value", item))
            for item in corpus._ReadLines().process(fileio.ReadableFile(metadata))]


def test_a_gz_corpus_is_read_and_a_corrupt_one_fails_alone(tmp_path):
    data = "a dog\r\nzwei\n".encode() + b"caf\xe9\n"
    (tmp_path / "c.gz").write_bytes(gzip.compress(data))
    assert read_lines(tmp_path / "c.gz") == [
        ("lines", (1, b"a dog")), ("lines", (2, b"zwei")),
        ("failed", (3, "not valid UTF-8 (byte 4 of the line)"))]
    lines = b"".join(os.urandom(20).hex().encode() + b"\n" for _ in range(2000))
    whole = gzip.compress(lines)
    # Bytes overwritten in the middle of the stream (Beam decompresses ahead in large
    # pieces, so the lines before them may not come first).
    middle = len(whole) // 2
    (tmp_path / "bad.gz").write_bytes(whole[:middle] + b"\0" * 64 + whole[middle + 64:])
    read = read_lines(tmp_path / "bad.gz")
    assert all(tag == "lines" for tag, _ in read[:-1])
    tag, (key, message) = read[-1]
    assert tag == "failed" and message.startswith(f"cannot read past line {key - 1}: ")
    assert key == len(read)


@pytest.mark.slow
def test_a_name_that_is_not_utf8_fails_alone_and_the_run_leaves_no_temporary_folder(tmp_path):
    """One real run (a tiny ViT export, two images, one of them named in Latin-1)."""
    import numpy as np
    from PIL import Image

    script = (
        "import keras, numpy as np\n"
        "from zoo.models.vit.model import VisionTransformer\n"
        "from zoo.serving.export import export_model\n"
        "m = VisionTransformer(image_size=16, patch_size=8, num_classes=2, hidden_dim=8, "
        "num_layers=1, num_heads=1, intermediate_dim=8, class_names=['a', 'b'])\n"
        "m(np.zeros((1, 16, 16, 3), 'uint8')); m.save('vit.keras')\n"
        "print(export_model('vit.keras', 'exports', top_k=1, name='vit'))\n")
    made = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "KERAS_BACKEND": "tensorflow"})
    assert made.returncode == 0, made.stderr[-2000:]
    images = tmp_path / "images"
    images.mkdir()
    Image.fromarray(np.zeros((16, 16, 3), "uint8")).save(images / "good.png")
    latin = os.fsdecode(b"caf\xe9.png")
    (images / latin).write_bytes((images / "good.png").read_bytes())
    temporary = tmp_path / "system-temporary"
    temporary.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "classify", "--pipeline", str(images), "--output",
         str(tmp_path / "labels.tsv"), "--model",
         str(tmp_path / made.stdout.strip().splitlines()[-1])],
        capture_output=True, timeout=300, env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.decode().strip().splitlines() == [
        f"zoo: error: 1 of 2 images failed; their keys and reasons are in "
        f"{tmp_path / 'labels.tsv.errors'}"]
    assert (tmp_path / "labels.tsv").read_text().split("\t")[0] == str(images / "good.png")
    assert (tmp_path / "labels.tsv.errors").read_bytes() == (
        str(images).encode() + b"/caf\\xe9.png\tthe file's name is not UTF-8\n")
    assert os.listdir(temporary) == []  # Beam's job server left a beam-temp* folder
