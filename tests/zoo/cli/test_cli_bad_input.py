"""Bad input to the `zoo` command: a table of the user's mistakes, each with its
exit status and one line on stderr (a `zoo.UserError` or a file error), never a traceback; a
table of the zoo's bugs, each a traceback; stdin read lazily and line by line."""

from __future__ import annotations

import argparse
import io
import struct
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import keras
import numpy as np
import pytest

import zoo.cli.commands
import zoo.cli.main
from zoo.training.image_files import load_image
from zoo.hub import loader as registry
from zoo.cli.main import main
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` 1-bit grey pixels and holds none: what PIL reads
    before it refuses a decompression bomb, in a few bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"")


@pytest.fixture(scope="module")
def files(tmp_path_factory, small_tokenizer):
    """A saved_models/ folder with a small translator and a small ViT, and bad images."""
    from PIL import Image

    root = tmp_path_factory.mktemp("bad_input")
    keras.utils.set_random_seed(0)
    translator = Translator.from_architecture(
        "transformer-tiny", small_tokenizer, hidden_dim=32, intermediate_dim=64, num_heads=4,
        max_source_length=32, max_target_length=16)
    translator.ensure_built()
    vit = VisionTransformer(image_size=16, patch_size=4, num_classes=3, hidden_dim=16,
                            num_layers=1, num_heads=2, intermediate_dim=32,
                            class_names=["cat", "dog", "bird"])
    for name, model, kind in (("translator-test", translator, "translator"),
                              ("vit-test", vit, "vit")):
        folder = root / "saved_models" / name
        folder.mkdir(parents=True)
        model.save(folder / "model.keras")
        registry.write_manifest(folder, kind=kind, description="a test model")
    Image.new("RGB", (8, 8), (200, 30, 30)).save(root / "good.png")
    (root / "corrupt.png").write_bytes(b"this is not a picture\n")
    (root / "truncated.png").write_bytes((root / "good.png").read_bytes()[:40])
    (root / "bomb.png").write_bytes(_png_header(20_000, 20_000))  # PIL: an error
    (root / "big.png").write_bytes(_png_header(10_000, 10_000))  # PIL: only a warning
    (root / "folder.png").mkdir()
    (root / "damaged.keras").write_bytes(b"PK\x03\x04 not a whole zip archive")
    (root / "three.en").write_text("A dog runs.\nTwo men talk.\nA cat sleeps.\n")
    (root / "two.de").write_text("Ein Hund rennt.\nZwei Maenner reden.\n")
    (root / "exported" / "translator-test" / "1").mkdir(parents=True)
    (root / "images" / "cat").mkdir(parents=True)
    (root / "images" / "cat" / "loose.txt").write_text("not an image")
    (root / "one-class" / "cat").mkdir(parents=True)
    for i in range(4):
        Image.new("RGB", (8, 8), (10 * i, 30, 30)).save(root / "one-class" / "cat" / f"{i}.png")
    (root / "empty.en").write_text("")
    (root / "empty.de").write_text("")
    return root, translator


@pytest.fixture()
def repository(files, monkeypatch):
    root, translator = files
    monkeypatch.setattr(registry, "MODELS_DIR", root / "saved_models")
    return root, translator


def run(argv, stdin, monkeypatch, capsys):
    """`main(argv)` in-process with `stdin` (bytes) on sys.stdin; (status, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin), "utf-8"))
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's errors
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


T, V = ["translate", "--model", "translator-test"], ["classify", "--model", "vit-test"]
CASES = [
    # (name, argv ({dir} is the test folder), stdin, status, stderr holds)
    ("unknown model", ["translate", "--model", "no-such-model", "hi"], None, 2,
     "zoo: error: unknown model 'no-such-model'"),
    ("missing model file", ["classify", "--model", "{dir}/nope.keras", "{dir}/good.png"], None,
     2, "nope.keras"),
    ("missing image", [*V, "{dir}/missing.png"], None, 2,
     "zoo: error: image file {dir}/missing.png does not exist"),
    ("directory as image", [*V, "{dir}/folder.png"], None, 2,
     "zoo: error: image {dir}/folder.png is a directory, not an image file"),
    ("corrupt image", [*V, "{dir}/good.png", "{dir}/corrupt.png"], None, 2,
     "zoo: error: cannot decode image file {dir}/corrupt.png"),
    ("truncated image", [*V, "{dir}/truncated.png"], None, 2,
     "zoo: error: cannot decode image file {dir}/truncated.png"),
    ("decompression bomb", [*V, "{dir}/bomb.png"], None, 2,
     "zoo: error: image file {dir}/bomb.png has 400,000,000 pixels"),
    ("image PIL only warns of", [*V, "{dir}/big.png"], None, 2,
     "zoo: error: image file {dir}/big.png has 100,000,000 pixels"),
    ("wrong kind of model", ["classify", "--model", "translator-test", "{dir}/good.png"], None,
     2, "zoo: error: 'translator-test' is a Translator, not a VisionTransformer"),
    ("top-k 0", [*V, "--top-k", "0", "{dir}/good.png"], None, 2,
     "argument --top-k: must be a positive int up to 2147483647; got 0"),
    ("beam size 0", [*T, "--beam-size", "0", "hi"], None, 2,
     "zoo translate: error: argument --beam-size: must be a positive int up to 2147483647; "
     "got 0"),
    ("beam size not a number", [*T, "--beam-size", "x", "hi"], None, 2,
     "argument --beam-size: invalid int value: 'x'"),
    ("beam size 0, stdin unread", [*T, "--beam-size", "0"], b"hi\n", 2,
     "argument --beam-size: must be a positive int up to 2147483647; got 0"),
    ("max length too long", [*T, "--max-length", "100000", "hi"], None, 2,
     "zoo: error: max_length must be an integer from 1 to 16"),
    ("max length 0", [*T, "--max-length", "0", "hi"], None, 2,
     "zoo: error: max_length must be an integer from 1 to 16"),
    ("empty stdin", T, b"", 0, ""),
    ("invalid UTF-8 line", [*T, "--beam-size", "1"], b"A dog.\n\xff\xfe dog\nA cat.\n", 1,
     ("zoo: warning: line 2 of stdin is not valid UTF-8 (invalid start byte at byte 0: "
      "b'\\xff\\xfe d'); its output line is empty")),
    ("attention without a sentence", [*T, "--attention", "{dir}/a.png"], b"\n", 2,
     "zoo: error: --attention needs a sentence"),
    # Models: a damaged file, a URL or hub handle refused before any download.
    ("damaged model file", [*T, "--model", "{dir}/damaged.keras", "hi"], None, 2,
     "zoo: error: {dir}/damaged.keras is not a readable .keras file (truncated or damaged?)"),
    ("plain http URL", [*T, "--model", "http://example.com/m.keras", "hi"], None, 2,
     "zoo: error: refusing"),
    ("malformed hub handle", [*T, "--model", "hf://org/name/extra", "hi"], None, 2,
     "zoo: error: malformed hub handle 'hf://org/name/extra'"),
    # evaluate: a missing flag, a missing file, files that do not align.
    ("evaluate without --reference", ["evaluate", "translator", "--model", "translator-test",
                                      "--source", "{dir}/three.en"], None, 2,
     "zoo: error: evaluate translator needs --source FILE and --reference FILE"),
    ("evaluate a ViT without --data", ["evaluate", "vit", "--model", "vit-test"], None, 2,
     "zoo: error: evaluate vit needs --data DIR (one folder per class)"),
    ("evaluate a missing file", ["evaluate", "translator", "--model", "translator-test",
                                 "--source", "{dir}/nope.en", "--reference", "{dir}/two.de"],
     None, 2, "zoo: error: --source {dir}/nope.en does not exist"),
    ("evaluate misaligned files", ["evaluate", "translator", "--model", "translator-test",
                                   "--source", "{dir}/three.en", "--reference", "{dir}/two.de",
                                   "--beam-size", "1"], None, 2,
     "zoo: error: 3 sources but 2 references; they must align"),
    ("evaluate a ViT with a translator", ["evaluate", "vit", "--model", "translator-test",
                                          "--data", "{dir}/images"], None, 2,
     "zoo: error: 'translator-test' is a Translator, not a VisionTransformer"),
    # train: a bad flag value is refused before any data is read or folder written.
    ("train with 0 epochs", ["train", "vit", "--epochs", "0", "--data", "{dir}/images",
                             "--output", "{dir}/run"], None, 2,
     "zoo train vit: error: argument --epochs: must be a positive int up to 2147483647; "
     "got 0"),
    ("train with RandAugment magnitude 9", ["train", "vit", "--rand-augment-magnitude", "9",
                                            "--data", "{dir}/images", "--output",
                                            "{dir}/run"], None, 2,
     "argument --rand-augment-magnitude: must lie in [0, 1] (the paper's M / 10); got 9.0"),
    ("train with max length 1", ["train", "translator", "--max-length", "1", "--output",
                                 "{dir}/run"], None, 2,
     "zoo train translator: error: argument --max-length: must be an integer from 2 to "
     "4096; got 1"),
    ("train on a single class", ["train", "vit", "--data", "{dir}/one-class", "--output",
                                 "{dir}/run-one", "--validation-size", "1"], None, 2,
     "zoo: error: --data {dir}/one-class holds 1 class (cat); a classifier needs at least two"),
    ("evaluate on empty files", ["evaluate", "translator", "--model", "translator-test",
                                 "--source", "{dir}/empty.en", "--reference", "{dir}/empty.de"],
     None, 2, "zoo: error: no sentences to evaluate: the source file is empty"),
    ("train with empty validation files", ["train", "translator", "--source", "{dir}/three.en",
                                           "--target", "{dir}/three.en", "--validation-source",
                                           "{dir}/empty.en", "--validation-target",
                                           "{dir}/empty.de", "--output", "{dir}/run-tr"], None,
     2, "zoo: error: the validation data holds no sentence pairs"),
    ("train on a folder without images", ["train", "vit", "--data", "{dir}/images",
                                          "--output", "{dir}/run-images"], None, 2,
     "zoo: error: class folder {dir}/images/cat holds no images"),
    # export and convert.
    ("export version 0", ["export", "translator-test", "--output", "{dir}/exported",
                          "--version", "0"], None, 2,
     "zoo export: error: argument --version: must be a positive int up to "
     "9223372036854775807 (TF Serving's int64); got 0"),
    ("export over an existing version", ["export", "translator-test", "--output",
                                         "{dir}/exported"], None, 2,
     "zoo: error: {dir}/exported/translator-test/1 exists; pass --force to replace it"),
    ("convert without SOURCE", ["convert", "hf-vit", "--output", "{dir}/converted"], None, 2,
     "zoo: error: convert hf-vit needs SOURCE"),
    ("convert timm without --num-heads", ["convert", "timm-vit", "{dir}/good.png",
                                          "--output", "{dir}/converted"], None, 2,
     "zoo: error: convert timm-vit needs --num-heads"),
    ("convert a missing checkpoint", ["convert", "hf-vit", "{dir}/nope", "--output",
                                      "{dir}/converted"], None, 2,
     "zoo: error: convert hf-vit: SOURCE {dir}/nope does not exist"),
]


@pytest.mark.parametrize("name, argv, stdin, status, message", CASES,
                         ids=[case[0] for case in CASES])
def test_a_mistake_is_one_line_and_its_status(name, argv, stdin, status, message, repository,
                                               monkeypatch, capsys):
    root, _ = repository
    argv = [a.format(dir=root) for a in argv]
    got, out, err = run(argv, stdin, monkeypatch, capsys)
    assert "Traceback" not in err
    assert message.format(dir=root) in err
    assert got == status, err
    if status == 2 and name != "attention without a sentence":  # (that one translates "")
        assert out == ""
        if not err.startswith("usage:"):
            assert len(err.splitlines()) == 1, err
    if status == 0:
        assert err == ""


# The zoo's bugs: an exception that is not a user's mistake keeps its traceback (status 1).
BUGS = [
    # (name, the exception `zoo models` meets, as Python source)
    ("a plain ValueError (as from inside Keras)", "ValueError('Exception encountered when "
                                                  "calling layer')"),
    ("a KeyError", "KeyError('kind')"),
    ("a module of the zoo's own missing", "ModuleNotFoundError(\"No module named 'zoo.gone'\", "
                                           "name='zoo.gone')"),
]


@pytest.mark.parametrize("name, error", BUGS, ids=[case[0] for case in BUGS])
def test_a_bug_is_a_traceback_with_status_1(name, error):
    """Run as the console script runs `main`: the traceback and Python's status 1, not
    `zoo: error:` (`zoo models` loads no TensorFlow: a fast child process)."""
    script = ("import sys, zoo.hub.loader, zoo.cli.main\n"
              "def broken(*args, **kwargs):\n"
              f"    raise {error}\n"
              "zoo.hub.loader.list_models = broken\n"
              "sys.exit(zoo.cli.main.main(['models']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=Path(zoo.cli.main.__file__).parents[2])
    assert done.returncode == 1, done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert "zoo: error:" not in done.stderr


def test_a_valueerror_from_deep_inside_translate_is_not_a_users_mistake(repository,
                                                                         monkeypatch, capsys):
    def broken(self, *args, **kwargs):
        raise ValueError("Exception encountered when calling layer 'decoder'")

    monkeypatch.setattr(Translator, "translate", broken)
    with pytest.raises(ValueError, match="calling layer 'decoder'"):
        main([*T, "hi"])
    assert "zoo: error" not in capsys.readouterr().err


def test_an_invalid_utf8_line_fails_alone(repository, monkeypatch, capsys):
    _, translator = repository
    stdin = b"A dog runs.\n\xc3\x28 broken\n\nTwo men talk.\r\n"
    status, out, err = run([*T, "--beam-size", "1"], stdin, monkeypatch, capsys)
    assert status == 1
    assert out.split("\n") == [*translator.translate(
        ["A dog runs.", "", "", "Two men talk."], beam_size=1), ""]
    assert out.split("\n")[1:3] == ["", ""]  # the bad line and the empty line
    assert err.splitlines() == [
        ("zoo: warning: line 2 of stdin is not valid UTF-8 (invalid continuation byte at "
         "byte 0: b'\\xc3( b'); its output line is empty"),
        "zoo: error: 1 of 4 lines of stdin were not valid UTF-8; their output lines are empty"]


class _Stdin:
    """A stdin whose bytes are made on demand, counting the lines read so far."""

    def __init__(self, lines):
        self.lines, self.read = lines, 0

    @property
    def buffer(self):
        for line in self.lines:
            self.read += 1
            yield line


class _Stdout(io.StringIO):
    """A stdout that records, at each flush, how many lines are written and how many read."""

    def __init__(self, stdin):
        super().__init__()
        self.stdin, self.flushes = stdin, []

    def flush(self):
        self.flushes.append((self.getvalue().count("\n"), self.stdin.read))


def test_stdin_is_translated_batch_by_batch_as_it_is_read(repository, monkeypatch):
    _, translator = repository
    texts = [f"A dog runs {i} times." if i % 3 else "" for i in range(10)]
    stdin = _Stdin([(t + "\n").encode() for t in texts])
    stdout = _Stdout(stdin)
    monkeypatch.setattr(zoo.cli.commands, "TRANSLATE_BATCH", 4)
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr("sys.stdout", stdout)
    assert main([*T, "--beam-size", "1", "--max-length", "6"]) == 0
    # Each batch is out before the next is read; one line per input line, in order.
    assert stdout.flushes[:3] == [(4, 4), (8, 8), (10, 10)]
    expected = translator.translate(texts, beam_size=1, max_length=6)
    assert stdout.getvalue().split("\n") == [*expected, ""]
    assert all(line == "" for text, line in zip(texts, expected) if not text)


def test_load_image_refuses_folders_bombs_and_corrupt_files(files):
    root, _ = files
    with pytest.raises(IsADirectoryError, match="folder.png is a directory, not an image"):
        load_image(root / "folder.png")
    for name, pixels in (("bomb.png", "400,000,000"), ("big.png", "100,000,000")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # PIL's warning is not let out either
            with pytest.raises(ValueError, match=f"{name} has {pixels} pixels, more than the "
                                                 "89,478,485 allowed"):
                load_image(root / name)
    with pytest.raises(ValueError, match="cannot decode image file .*corrupt.png: "):
        load_image(root / "corrupt.png")
    assert load_image(root / "good.png").shape == (8, 8, 3)
    assert np.all(load_image(root / "good.png", image_size=4) == (200, 30, 30))


def test_lines_piped_alone_are_answered_without_waiting_for_more(repository, monkeypatch):
    """A co-process that writes two lines and waits for their translations gets them: a batch
    is what stdin holds so far, not a full `TRANSLATE_BATCH`."""
    import os
    import threading

    _, translator = repository
    read_fd, write_fd = os.pipe()
    answered = threading.Event()

    class Stdout(io.StringIO):
        def flush(self):
            if self.getvalue().count("\n") >= 2:
                answered.set()

    stdout = Stdout()
    outcome = {}

    def producer():
        os.write(write_fd, b"A dog runs.\nTwo men talk.\n")
        outcome["answered"] = answered.wait(60)
        os.write(write_fd, b"A cat sleeps.\n")
        os.close(write_fd)

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(open(read_fd, "rb"), "utf-8"))
    monkeypatch.setattr("sys.stdout", stdout)
    thread = threading.Thread(target=producer)
    thread.start()
    try:
        assert main([*T, "--beam-size", "1", "--max-length", "6"]) == 0
    finally:
        thread.join()
        answered.set()
    assert outcome["answered"], "the first two lines waited for the third"
    texts = ["A dog runs.", "Two men talk.", "A cat sleeps."]
    assert stdout.getvalue().split("\n") == [
        *translator.translate(texts, beam_size=1, max_length=6), ""]


def test_a_closed_stdout_stops_translate_quietly(repository, monkeypatch, capsys):
    """`zoo translate < big.txt | head -1`: no BrokenPipeError traceback; status 141."""
    class ClosedStdout(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"A dog.\n" * 3), "utf-8"))
    monkeypatch.setattr("sys.stdout", ClosedStdout())
    assert main([*T, "--beam-size", "1", "--max-length", "4"]) == 141
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["translate", "classify", "train", "export"])
def test_an_unknown_keras_backend_is_one_line_before_anything_loads(command, monkeypatch):
    from zoo.cli.main import _check_backend

    monkeypatch.delitem(sys.modules, "keras", raising=False)  # as in a fresh process
    environ = {"KERAS_BACKEND": "pytorch"}
    message = _check_backend(command, environ)
    if command == "export":  # export sets TensorFlow's backend itself
        assert message is None and environ["KERAS_BACKEND"] == "tensorflow"
    else:
        assert message == ("KERAS_BACKEND=pytorch is not a Keras backend; use one of "
                           "tensorflow, jax, torch, numpy, openvino (or unset it: tensorflow)")
    assert _check_backend("models", {"KERAS_BACKEND": "pytorch"}) is None  # loads no Keras
    assert _check_backend(command, {"KERAS_BACKEND": "jax"}) is None


def test_an_unknown_keras_backend_fails_the_command_with_one_line(monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", "pytorch")
    status, _, err = run([*T, "hi"], None, monkeypatch, capsys)
    assert status == 2 and err.strip().splitlines() == [
        "zoo: error: KERAS_BACKEND=pytorch is not a Keras backend; use one of tensorflow, "
        "jax, torch, numpy, openvino (or unset it: tensorflow)"]


@pytest.mark.parametrize("command", ["translate", "export"])
def test_ctrl_c_is_exit_130_with_one_line(repository, monkeypatch, capsys, command):
    import zoo.cli.commands

    def interrupted(args):
        print("a whole line")
        raise KeyboardInterrupt

    name = {"translate": "cmd_translate", "export": "cmd_export"}[command]
    monkeypatch.setattr(zoo.cli.commands, name, interrupted)
    monkeypatch.setattr(zoo.cli.main, "build_parser", _parser_with(name, interrupted))
    argv = ([*T, "hi"] if command == "translate"
            else ["export", "translator-test", "--output", str(repository[0] / "ctrl-c")])
    status, out, err = run(argv, None, monkeypatch, capsys)
    assert status == 130 and out == "a whole line\n"
    assert err.strip().splitlines()[-1] == "zoo: interrupted" and "Traceback" not in err


def _parser_with(name, function):
    """build_parser, with `function` in place of the command function `name`."""
    from zoo.cli.parser import build_parser

    def build(recipes=True):
        parser = build_parser(recipes=recipes)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    if getattr(sub.get_default("func"), "__name__", "") == name:
                        sub.set_defaults(func=function)
        return parser

    return build
