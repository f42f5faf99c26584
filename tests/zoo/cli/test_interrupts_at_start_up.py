"""Ctrl-C while a command starts (its modules importing: the zoo's own, JAX, Keras, TensorFlow)
ends it with status 130 and the one line `zoo: interrupted`, on both backends, at once.

Raised inside an import, the KeyboardInterrupt had left JAX half imported with XLA's threads
running (the teardown then aborted in C++), or JAX's garbage-collection callback swallowed it
("Exception ignored in: _xla_gc_callback", and the command ran on and printed its results);
before `main` noted Ctrl-C, it was a traceback. The signal is sent from inside the import it
names, by an audit hook that a `sitecustomize` installs in the command's process: no sleeps.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoo.training import interrupts

ROOT = Path(__file__).resolve().parents[3]

# Installed in the command's process: on the import of SIGINT_AT, Ctrl-C, sent from there
# (SIGINT_HOW=now) or from a garbage-collection callback run there (gc), as JAX's runs; the
# moment is written to SIGINT_SENT.
_SITECUSTOMIZE = """
import gc, os, signal, sys, time
target, how, sent = os.environ["SIGINT_AT"], os.environ["SIGINT_HOW"], os.environ["SIGINT_SENT"]
def ctrl_c(*args):
    if ctrl_c in gc.callbacks:
        gc.callbacks.remove(ctrl_c)
    with open(sent, "w") as file:
        file.write(repr(time.time()))
    signal.raise_signal(signal.SIGINT)
def on_import(event, args):
    global target
    if event == "import" and args[0] == target:
        target = None
        if how == "gc":
            gc.callbacks.append(ctrl_c)
            gc.collect()
        else:
            ctrl_c()
sys.addaudithook(on_import)
"""


def _image(folder: Path) -> Path:
    from PIL import Image

    Image.new("RGB", (8, 8), (200, 10, 10)).save(folder / "a.png")
    return folder / "a.png"


def _classes(folder: Path) -> Path:
    from PIL import Image

    for index, colour in enumerate([(250, 0, 0), (0, 0, 250)]):
        (folder / f"class{index}").mkdir(parents=True)
        for item in range(2):
            Image.new("RGB", (8, 8), colour).save(folder / f"class{index}" / f"{item}.png")
    return folder


CLASSIFY = ["classify", "--model", "vit-cifar10", "{image}"]
TRAIN = ["train", "vit", "--data", "{classes}", "--output", "{run}", "--architecture",
         "vit-cifar-tiny", "--image-size", "8", "--validation-size", "2", "--batch-size", "2",
         "--epochs", "1", "--warmup-epochs", "0"]
# (case, KERAS_BACKEND, command, the import during which Ctrl-C comes, from where)
START_UP = [
    ("jax, the parser's modules", "jax", CLASSIFY, "zoo.cli.commands", "now"),
    ("jax, jaxlib loaded", "jax", CLASSIFY, "jax._src.xla_bridge", "now"),
    ("jax, gc callback in keras", "jax", CLASSIFY, "keras.src.models", "gc"),
    ("jax, tensorflow for data", "jax", TRAIN, "tensorflow.python.data", "now"),
    ("tensorflow, its import", "tensorflow", CLASSIFY, "tensorflow.python.framework.ops",
     "now"),
]


@pytest.mark.parametrize("backend, command, module, how", [s[1:] for s in START_UP],
                         ids=[s[0] for s in START_UP])
def test_ctrl_c_while_a_command_starts_is_130_and_one_line(backend, command, module, how,
                                                           tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    sent = tmp_path / "sent"
    values = {"image": _image(tmp_path) if command is CLASSIFY else "",
              "classes": _classes(tmp_path / "d") if command is TRAIN else "",
              "run": tmp_path / "run"}
    argv = [part.format(**values) for part in command]
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=f"{hook}{os.pathsep}{ROOT}",
               SIGINT_AT=module, SIGINT_HOW=how, SIGINT_SENT=str(sent))
    env.pop("ZOO_LOG", None)
    done = subprocess.run([sys.executable, "-m", "zoo.cli", *argv], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    ended = time.time()
    assert sent.exists(), f"{module} was not imported: {done.stderr[-2000:]}"
    assert (done.returncode, done.stderr, done.stdout) == (130, "zoo: interrupted\n", "")
    assert ended - float(sent.read_text()) < 20  # at once, not after the command's work


# Modules whose import Ctrl-C interrupts: the process ends there (status 130), even where a
# garbage-collection callback swallows what the handler raises; after the import, a
# KeyboardInterrupt is raised as usual.
_OWN_CODE = "import signal\nsignal.raise_signal(signal.SIGINT)\n"
_A_FUNCTION = """
import signal
def load():
    signal.raise_signal(signal.SIGINT)
load()
"""
_A_GC_CALLBACK = """
import gc, signal
def callback(phase, info):
    gc.callbacks.remove(callback)
    signal.raise_signal(signal.SIGINT)
gc.callbacks.append(callback)
gc.collect()
"""
# (case, the module's source, Ctrl-C after the import, os._exit's statuses, what was raised)
IN_PROCESS = [
    ("the module's own code", _OWN_CODE, False, [130], SystemExit),
    ("a function it calls", _A_FUNCTION, False, [130], SystemExit),
    ("a gc callback in it", _A_GC_CALLBACK, False, [130], None),
    ("after it, in its caller", "", True, [], KeyboardInterrupt),
]


@pytest.mark.parametrize("source, after, exits, raised", [c[1:] for c in IN_PROCESS],
                         ids=[c[0] for c in IN_PROCESS])
def test_ctrl_c_ends_the_process_only_while_a_module_imports(source, after, exits, raised,
                                                            tmp_path, monkeypatch, capsys):
    got, caught = [], None

    def exit_now(status):
        got.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(interrupts.os, "_exit", exit_now)
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)  # the gc callback's
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "interrupted_module.py").write_text(source)
    try:
        with interrupts.noting_interrupts():
            try:
                importlib.import_module("interrupted_module")
                if after:
                    signal.raise_signal(signal.SIGINT)
            except (SystemExit, KeyboardInterrupt) as error:
                caught = type(error)
    finally:
        sys.modules.pop("interrupted_module", None)
    assert (got, caught) == (exits, raised)
    assert interrupts.interrupted()
    assert capsys.readouterr().err == ("zoo: interrupted\n" if exits else "")


def test_the_handler_from_before_is_back_after_main(capsys):
    from zoo.cli.main import main

    def own(number, frame):
        raise AssertionError("not called")

    previous = signal.signal(signal.SIGINT, own)
    try:
        assert main(["models"]) == 0
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)
