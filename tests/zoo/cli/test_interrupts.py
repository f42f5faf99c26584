"""Ctrl-C always ends the `zoo` command with exit status 130 and one line, never lost: also
where a library turns the KeyboardInterrupt into another exception (Keras' loader) or
swallows it (a callback from compiled code), and for real, a SIGINT sent to a training run.
A TensorFlow run does not load JAX (TF Lite would import it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zoo.cli.main
from zoo.cli.main import main
from zoo.training.errors import UserError
from zoo.training import interrupts
from zoo.training.interrupts import interrupted, pass_interrupts_on

ROOT = Path(__file__).resolve().parents[3]


def _ctrl_c() -> None:
    signal.raise_signal(signal.SIGINT)


def _turned_into_a_value_error(args):
    try:
        _ctrl_c()
    except BaseException as error:  # as Keras' loader gathers what failed to load
        raise ValueError("A total of 3 objects could not be loaded") from error


def _turned_into_a_user_error(args):
    try:
        _ctrl_c()
    except BaseException:
        raise UserError("model.keras is damaged") from None


def _swallowed(args):
    try:
        _ctrl_c()
    except BaseException:
        pass  # a callback that drops it: the command runs on to the end
    print("finished")


def _plain(args):
    _ctrl_c()


WHERE = [("plain", _plain), ("turned into a ValueError", _turned_into_a_value_error),
         ("turned into a UserError", _turned_into_a_user_error), ("swallowed", _swallowed)]


@pytest.mark.parametrize("command", [w[1] for w in WHERE], ids=[w[0] for w in WHERE])
def test_ctrl_c_is_status_130_and_one_line_wherever_it_lands(command, monkeypatch, capsys):
    monkeypatch.setattr(zoo.cli.main, "build_parser", _parser_running(command))
    # A test run earlier in this worker may leave SIGINT ignored (as a background job has it,
    # where `zoo` keeps it ignored); Ctrl-C at a terminal has Python's own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status = main(["models"])
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert status == 130
    assert capsys.readouterr().err == "zoo: interrupted\n"
    assert interrupted()


def _parser_running(command):
    real = zoo.cli.main.build_parser

    def build(recipes: bool = True):
        parser = real(recipes)
        parser.set_defaults(func=command)
        for action in parser._subparsers._group_actions:  # `models`'s own default wins
            for sub in action.choices.values():
                sub.set_defaults(func=command)
        return parser

    return build


# TensorFlow's notice as the interpreter tears down a run that Ctrl-C ended.
_TEARDOWN_NOTICE = ("W0000 00:00:1795447617.969488    7382 op_kernel.cc:1857] Error occurred "
                    "when finalizing GeneratorDataset iterator: FAILED_PRECONDITION\n")
_AFTER_CTRL_C = """
import atexit, os, signal, sys
import zoo.cli.main as cli

def run(args):
    atexit.register(os.write, 2, NOTICE.encode())  # after main returns, as at teardown
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        if SWALLOW:
            return 0  # a training run's StopOnInterrupt: fit ends, the command returns
        raise

real = cli.build_parser
def build(recipes=True):
    parser = real(recipes)
    for action in parser._subparsers._group_actions:
        for sub in action.choices.values():
            sub.set_defaults(func=run)
    return parser

cli.build_parser = build
sys.exit(cli.main(["export", "vit-cifar10", "--output", "unused"]))
"""


@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "swallowed"])
def test_teardown_notices_after_ctrl_c_stay_filtered_to_the_exit(swallowed, tmp_path):
    code = f"NOTICE = {_TEARDOWN_NOTICE!r}\nSWALLOW = {swallowed}\n" + _AFTER_CTRL_C
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 130, done.stderr[-2000:]
    assert done.stderr == "zoo: interrupted\n"


# (case, Ctrl-Cs pressed, the signals this process then receives, its exit status or None)
PASSED_ON = [("first Ctrl-C", 1, [signal.SIGUSR1], None),
             ("second Ctrl-C", 2, [signal.SIGUSR1], 130)]


@pytest.mark.parametrize("presses, received, status", [p[1:] for p in PASSED_ON],
                         ids=[p[0] for p in PASSED_ON])
def test_in_a_job_ctrl_c_is_passed_on_and_a_second_one_ends_the_process(presses, received,
                                                                       status, monkeypatch,
                                                                       capsys):
    """A job's Ctrl-C becomes the notice that stops every process (zoo.training.job_stop;
    SIGUSR1 stands in for its SIGTERM here) instead of a KeyboardInterrupt in one."""
    got, exits = [], []

    def exit_now(status):
        exits.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(interrupts.os, "_exit", exit_now)
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: got.append(number))
    try:
        interrupts.note_interrupts()
        pass_interrupts_on(signal.SIGUSR1)
        for _ in range(presses):
            with contextlib.suppress(SystemExit):
                _ctrl_c()  # no KeyboardInterrupt
            time.sleep(0.01)  # the signal sent on is handled
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGUSR1, previous)
    assert got == received and interrupted()
    assert exits == ([] if status is None else [status])
    assert capsys.readouterr().err == ("" if status is None else "zoo: interrupted\n")


def test_a_command_without_ctrl_c_is_not_taken_for_interrupted(capsys):
    assert main(["models"]) == 0
    assert not interrupted()


def test_a_tensorflow_command_does_not_load_jax():
    code = ("import sys; from zoo.runtime import keep_jax_out_of_tensorflow as k; k(); "
            "import keras; print('jax' in sys.modules, keras.backend.backend()); "
            "import jax; print('jax' in sys.modules)")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.stdout.split() == ["False", "tensorflow", "True"], done.stderr[-2000:]


def _images(folder: Path) -> Path:
    from PIL import Image

    for index, colour in enumerate([(250, 0, 0), (0, 0, 250)]):
        (folder / f"class{index}").mkdir(parents=True)
        for item in range(4):
            Image.new("RGB", (8, 8), colour).save(folder / f"class{index}" / f"{item}.png")
    return folder


@pytest.mark.slow
def test_sigint_during_a_training_run_is_130_and_one_line(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli", "train", "vit", "--data", str(_images(tmp_path / "d")),
         "--output", str(out), "--architecture", "vit-cifar-tiny", "--image-size", "8",
         "--validation-size", "2", "--batch-size", "2", "--epochs", "100000",
         "--warmup-epochs", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        deadline = time.time() + 240
        while not list(out.glob("checkpoints/epoch-*")) and time.time() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)  # mid-fit: epochs keep coming
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == "zoo: interrupted", err[-3000:]
    assert "Traceback" not in err
