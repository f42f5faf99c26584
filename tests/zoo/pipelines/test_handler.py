"""The pieces of the Beam pipeline that need no model: the handler's failure isolation, the
ordered writer, the pipeline options, and the command's one-line refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("apache_beam", reason="Apache Beam is not installed (pip install "
                                          "'attention-zoo[pipeline]')")
tf = pytest.importorskip("tensorflow")

from zoo.training.errors import UserError  # noqa: E402
from zoo.pipelines.corpus import _write_in_order, pipeline_options  # noqa: E402
from zoo.pipelines.handler import ExportHandler, Failure  # noqa: E402


def upper_unless_bad(sentences):
    """A stand-in signature: refuses the whole request when one element is b"bad", as the
    ViT export refuses a batch holding a corrupt image."""
    values = sentences.numpy().tolist()
    if b"bad" in values:
        # Worded as a tf.function's error: the op's message after its definition's stack.
        raise tf.errors.InvalidArgumentError(None, None, (
            "Graph execution error:\n\nDetected at node Assert defined at (most recent call "
            "last):\n  File \"export.py\", line 9, in decode\n\nassertion failed: [bad "
            "element]\n\t [[{{node Assert}}]] [Op:__inference_signature_wrapper_1]"))
    return {"translations": tf.constant([v.upper() for v in values]),
            "scores": tf.constant([float(len(v)) for v in values])}


def test_a_refused_batch_is_run_again_so_only_its_bad_element_fails():
    handler = ExportHandler("unused", "sentences", batch_size=8)
    results = list(handler.run_inference([b"a", b"bad", b"cc"], upper_unless_bad))
    assert [r.example for r in results] == [b"a", b"bad", b"cc"]
    assert results[0].inference["translations"] == b"A"
    assert results[2].inference["translations"] == b"CC"
    assert results[2].inference["scores"] == 2.0
    assert results[1].inference == Failure("assertion failed: [bad element]")


def test_a_batch_of_good_elements_is_one_call():
    calls = []

    def counting(sentences):
        calls.append(len(sentences.numpy()))
        return upper_unless_bad(sentences)

    handler = ExportHandler("unused", "sentences")
    assert [r.inference["translations"] for r in handler.run_inference([b"x", b"y"], counting)
            ] == [b"X", b"Y"]
    assert calls == [2]


@pytest.mark.parametrize("batch_size", [0, -1, 1025])
def test_a_batch_the_export_would_refuse_is_refused_when_built(batch_size):
    with pytest.raises(ValueError, match=f"got {batch_size}"):
        ExportHandler("unused", "images", batch_size=batch_size)


def test_rows_are_written_in_key_order_and_failures_beside_them(tmp_path):
    out = str(tmp_path / "out.txt")
    rows = [(3, ["drei"]), (1, ["eins"]), (2, (2, "not valid UTF-8 (byte 4 of the line)")),
            (10, ["zehn"])]
    _write_in_order(rows, out)
    assert (tmp_path / "out.txt").read_text() == "eins\n\ndrei\nzehn\n"
    assert (tmp_path / "out.txt.errors").read_text() == (
        "2\tnot valid UTF-8 (byte 4 of the line)\n")


def test_labels_leave_no_blank_line_for_a_failure_even_one_label_an_image(tmp_path):
    out = str(tmp_path / "labels.tsv")
    _write_in_order([("b.png", ["b.png\tcat\t0.9000", "b.png\tdog\t0.1000"]),
                     ("a.png", ("a.png", "image 0 is not a JPEG, PNG, GIF or BMP"))], out,
                    line_each=False)
    assert (tmp_path / "labels.tsv").read_text() == "b.png\tcat\t0.9000\nb.png\tdog\t0.1000\n"
    assert "a.png\timage 0 is not" in (tmp_path / "labels.tsv.errors").read_text()
    _write_in_order([("b.png", ["b.png\tcat\t0.9000"]), ("a.png", ("a.png", "corrupt"))],
                    out, line_each=False)
    assert (tmp_path / "labels.tsv").read_text() == "b.png\tcat\t0.9000\n"


def test_two_workers_are_two_direct_runner_processes():
    options = pipeline_options([], workers=2).get_all_options()
    assert options["direct_num_workers"] == 2
    assert options["direct_running_mode"] == "multi_processing"
    kept = pipeline_options(["--direct_running_mode=multi_threading"], 2).get_all_options()
    assert kept["direct_running_mode"] == "multi_threading"
    assert pipeline_options(["--runner=FlinkRunner"]).get_all_options()["runner"] == (
        "FlinkRunner")


@pytest.mark.parametrize("workers", [0, -2, 1.5, True, "2"])
def test_a_bad_worker_count_is_a_user_error(workers):
    with pytest.raises(UserError, match="--workers must be a positive integer; got"):
        pipeline_options([], workers=workers)


def test_without_beam_the_command_says_what_to_install(monkeypatch):
    import zoo.pipelines
    from zoo.cli.pipeline_commands import _corpus_module

    # As where Beam is not installed: the module of ours imports afresh, and Beam fails.
    monkeypatch.delattr(zoo.pipelines, "corpus")
    monkeypatch.delitem(sys.modules, "zoo.pipelines.corpus")
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    with pytest.raises(UserError, match=r"--pipeline needs Apache Beam: pip install "
                                        r"'attention-zoo\[pipeline\]'"):
        _corpus_module()


@pytest.mark.parametrize("message, said", [
    ("Graph execution error:\n\nDetected at node map/while/cond/ExtractJpegShape defined at "
     "(most recent call last):\n<stack traces unavailable>\nInvalid JPEG data, size 200\n\t "
     "[[{{node map/while/cond/ExtractJpegShape}}]] [Op:__inference_signature_wrapper_1707]",
     "Invalid JPEG data, size 200"),
    ("Graph execution error:\n\nDetected at node Assert defined at (most recent call last):"
     "\n  File \"x.py\", line 3, in f\n\nassertion failed: [image] [0] [is not a JPEG]\n",
     "assertion failed: [image] [0] [is not a JPEG]"),
    ("Permission denied: photos/a.jpg", "Permission denied: photos/a.jpg"),
])
def test_a_failure_is_the_line_that_says_what_went_wrong(message, said):
    from zoo.pipelines.handler import first_line

    assert first_line(tf.errors.InvalidArgumentError(None, None, message)) == said


def test_a_model_that_is_no_export_or_a_bad_top_k_is_refused_in_one_line(tmp_path):
    from zoo.pipelines.corpus import classify_folder, translate_file

    with pytest.raises(UserError, match="holds saved_model.pb; got --model "
                                        "'translator-multi30k-en-de'"):
        translate_file("translator-multi30k-en-de", str(tmp_path), str(tmp_path / "o"))
    with pytest.raises(UserError, match="--top-k must be a positive integer; got 0"):
        classify_folder(str(tmp_path / "export"), str(tmp_path), str(tmp_path / "o"), top_k=0)


BAD_COMMANDS = [
    ("no --output", ["translate", "--pipeline", "{src}", "--model", "{tmp}"],
     "--pipeline needs --output FILE"),
    ("TEXT beside it", ["translate", "--pipeline", "{src}", "--output", "{tmp}/o", "hello"],
     "give no TEXT or IMAGE arguments"),
    ("unsplittable options", ["translate", "--pipeline", "{src}", "--output", "{tmp}/o",
                              "--pipeline-options=--runner='Direct"],
     "--pipeline-options must be flags as a shell splits them"),
    ("no images at all", ["classify", "--model", "vit-cifar10"],
     "classify needs IMAGE arguments (or --pipeline FOLDER)"),
]


@pytest.mark.parametrize("argv, expected", [case[1:] for case in BAD_COMMANDS],
                         ids=[case[0] for case in BAD_COMMANDS])
def test_a_mistake_with_pipeline_is_one_line_and_status_2(tmp_path, argv, expected):
    (tmp_path / "src.en").write_text("A dog.\n")
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "saved_model.pb").write_bytes(b"")
    argv = [a.format(src=tmp_path / "src.en", tmp=tmp_path) for a in argv]
    done = subprocess.run([sys.executable, "-m", "zoo.cli", *argv], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
