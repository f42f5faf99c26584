"""The front door: `zoo --help`, `zoo models` and argument errors load no TensorFlow; a
successful command writes nothing on stderr; every flag explains itself."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zoo.cli import main as cli, quiet, recipe_flags
from zoo.cli.parser import build_parser

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("tensorflow", "keras", "jax", "matplotlib", "torch")


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_help_models_and_argument_errors_import_no_tensorflow():
    result = _run_python(f"""
        import sys
        from zoo.cli.main import main

        def status(argv):
            try:
                return main(argv)
            except SystemExit as stop:
                return stop.code

        codes = [status(a) for a in (["--help"], ["models"], ["translate", "--help"],
                                     ["train", "vit", "--help"], ["finetune", "translator",
                                     "--help"], ["translate", "--beam-size", "x"],
                                     ["train", "vit", "--mix", "blend"], ["nonsense"],
                                     ["translate", "--model", "no-such-model", "hello"],
                                     ["classify", "missing.jpg"],
                                     ["evaluate", "vit", "--model", "vit-cifar10", "--data",
                                      "no-such-folder"])]
        print("codes", codes)
        print("heavy", sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert "codes [0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2]" in result.stdout
    assert "heavy []" in result.stdout
    assert "translator-multi30k-en-de\ttranslator" in result.stdout
    assert "invalid int value: 'x'" in result.stderr
    assert "invalid choice: 'blend'" in result.stderr
    assert "zoo: error: unknown model 'no-such-model'" in result.stderr
    assert "zoo: error: image file missing.jpg does not exist" in result.stderr
    assert "zoo: error: --data no-such-folder does not exist" in result.stderr


def test_import_zoo_is_lazy_and_keeps_its_names():
    result = _run_python(f"""
        import sys
        import zoo
        assert sorted(zoo.list_models()) == ["translator-multi30k-en-de", "vit-cifar10",
                                           "vit-hybrid-cifar10"]
        from zoo import list_models, load, load_weights
        assert callable(load) and callable(load_weights) and zoo.hub.loader.list_models
        print("heavy", sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert "heavy []" in result.stdout


def test_stderr_filter_drops_tensorflow_chatter_and_keeps_the_rest():
    chatter = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to "
        "STDERR",
        "I0000 00:00:1795447459.114875    4418 port.cc:153] oneDNN custom operations are on.",
        "I0000 00:00:1795447459.115569    4418 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.",
        "E0000 00:00:1795447481.793827    5014 cuda_platform.cc:52] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    ]
    code = f"""
        import os, sys
        from zoo.cli.quiet import filtered_stderr
        with filtered_stderr(verbose={{verbose}}):
            for line in {chatter!r}:
                os.write(2, (line + "\\n").encode())
            os.write(2, b"E0000 00:00:1.5  1 op_kernel.cc:9] real trouble\\n")
            os.write(2, b"W0000 00:00:1.5  1 bfc_allocator.cc:9] out of memory\\n")
            print("a Python warning", file=sys.stderr)
        print("after", file=sys.stderr)
    """
    quiet_run = _run_python(code.format(verbose=False))
    assert quiet_run.returncode == 0
    assert quiet_run.stderr.splitlines() == [
        "E0000 00:00:1.5  1 op_kernel.cc:9] real trouble",
        "W0000 00:00:1.5  1 bfc_allocator.cc:9] out of memory", "a Python warning", "after"]
    loud = _run_python(code.format(verbose=True))
    assert loud.stderr.splitlines()[:len(chatter)] == chatter
    assert all(quiet.is_chatter(line) for line in chatter)


def test_verbose_comes_from_the_flag_or_zoo_log(monkeypatch):
    monkeypatch.delenv("ZOO_LOG", raising=False)
    assert not quiet.verbose_requested(["translate", "hello"])
    assert quiet.verbose_requested(["translate", "--verbose", "hello"])
    monkeypatch.setenv("ZOO_LOG", "debug")
    assert quiet.verbose_requested([])
    args = build_parser(recipes=False).parse_args(["translate", "-v", "hello"])
    assert args.verbose is True


def test_translate_at_a_terminal_without_text_prints_its_usage(monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    with pytest.raises(SystemExit) as stop:
        cli.main(["translate"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: zoo translate") and "pipe sentences on stdin" in err


def _parsers(parser: argparse.ArgumentParser, name: str = "zoo"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from _parsers(child, f"{name} {child_name}")


def test_every_flag_has_help_and_shows_its_default():
    for name, parser in _parsers(build_parser(recipes=True)):
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
            if action.option_strings and not any(action.default is empty for empty in (
                    None, argparse.SUPPRESS, False)) and "default" not in action.help:
                # Wrapping may break a line anywhere, a hyphen included: compare unwrapped.
                assert f"(default:{action.default})" in "".join(text.split()), (
                    f"{name} {action.option_strings} does not show its default")


def test_recipe_flags_have_choices_and_take_none():
    parser = build_parser(recipes=True)
    args = parser.parse_args(["train", "vit", "--precision", "mixed_bfloat16", "--mix",
                              "cutmix", "--clipnorm", "none", "--limit-per-class", "20"])
    assert (args.precision, args.mix, args.clipnorm, args.limit_per_class) == (
        "mixed_bfloat16", "cutmix", None, 20)


def test_precision_choices_are_the_trainings():
    from zoo.training.precision import PRECISIONS

    for command, task in recipe_flags.RECIPES:
        precision = next(field for field in recipe_flags.fields_of_recipe(command, task)
                         if field.name == "precision")
        assert precision.choices == tuple(PRECISIONS), (command, task)


@pytest.mark.slow
def test_successful_commands_write_nothing_on_stderr(shared_data, tmp_path):
    import tarfile

    archive = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not archive.is_file():
        pytest.skip(f"CIFAR-10 archive {archive} is absent")
    with tarfile.open(archive) as tar:
        member = next(m for m in tar if m.name.endswith(".jpg"))
        (tmp_path / "cat.jpg").write_bytes(tar.extractfile(member).read())
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",
                                                            "ZOO_LOG")}
    zoo = [sys.executable, "-m", "zoo.cli"]
    translate = subprocess.run([*zoo, "translate", "--beam-size", "1", "A dog runs."],
                               capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert translate.returncode == 0 and translate.stdout.strip()
    assert translate.stderr == ""
    classify = subprocess.run([*zoo, "classify", str(tmp_path / "cat.jpg")],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert classify.returncode == 0 and classify.stdout.count("\t") == 6
    assert classify.stderr == ""
