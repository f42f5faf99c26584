"""Ctrl-C that is never lost: a SIGINT noted in a flag as well as raised.

Python turns SIGINT into a `KeyboardInterrupt` wherever the main thread happens to be, and
libraries do not all let it through: Keras' loader gathers the exceptions of the objects it
restores and raises a `ValueError` ("objects could not be loaded") that blames the model file;
a callback from compiled code can drop it, and the training runs on to the end with exit 0.
`note_interrupts()` installs a handler that records the signal before raising, so that the
`zoo` command can tell an interrupted run by `interrupted()` whatever exception (or none)
reached it, and a training loop can stop at its next step (`zoo.training.run`'s
`StopOnInterrupt`). In a job of several processes a Ctrl-C must stop every process, not one
(`zoo.training.job_stop`): `pass_interrupts_on(signum)` sends it on as another signal
instead. No Keras or TensorFlow here.

A Ctrl-C that arrives while a module is being imported (the start-up of a command, when JAX,
Keras and TensorFlow load) ends the process there and then, `zoo: interrupted` and status 130,
without the interpreter's teardown: raised inside an import, the `KeyboardInterrupt` leaves a
module half made while the native threads JAX/XLA started run on, and the teardown then aborted
in C++; or JAX's garbage-collection callback, running inside the import, swallowed it, and the
command ran on to the end (its results printed after the Ctrl-C). Nothing of the user's is
being written while modules load.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Iterator, NoReturn

_state = {"interrupted": False}


# The code objects of Python's import machinery (importlib's frozen bootstrap modules): a frame
# of theirs on the stack means a module is being imported.
_IMPORT_MACHINERY = "<frozen importlib._bootstrap"


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _state["interrupted"] = True
    if importing(frame):
        exit_interrupted()
    raise KeyboardInterrupt


def importing(frame: FrameType | None) -> bool:
    """Whether `frame`, or a frame below it on its thread's stack, runs Python's import
    machinery: code running there is part of a module's import (a garbage-collection
    callback that ran during one included)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(_IMPORT_MACHINERY):
            return True
        frame = frame.f_back
    return False


def say_interrupted() -> None:
    """Flushes stdout's whole lines and writes `zoo: interrupted` on stderr: the one line a
    Ctrl-C ends the `zoo` command with."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    with contextlib.suppress(AttributeError, OSError, ValueError):
        print("zoo: interrupted", file=sys.stderr, flush=True)


def exit_interrupted() -> NoReturn:
    """Ends the process at once after a Ctrl-C: `say_interrupted()`, status 130, and no
    clean-up (`os._exit`)."""
    say_interrupted()
    os._exit(128 + signal.SIGINT)


def note_interrupts() -> None:
    """Installs the SIGINT handler that records Ctrl-C and raises `KeyboardInterrupt` (in the
    main thread only, where Python allows signal handlers; elsewhere nothing changes). A
    SIGINT that is ignored (`SIG_IGN`, as for a background job) stays ignored."""
    _state["interrupted"] = False
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGINT, _on_sigint)


@contextlib.contextmanager
def noting_interrupts() -> Iterator[None]:
    """`note_interrupts()` for the block; the SIGINT handler from before it is back after it
    (so that a program that calls the `zoo` command's `main` keeps its own)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    note_interrupts()
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def pass_interrupts_on(signum: int) -> None:
    """From now on the first Ctrl-C is noted (`interrupted()`) and sent on to this process as
    `signum` instead of raised; a second one ends the process at once, `zoo: interrupted` on
    stderr, status 130 (its clean-up skipped: it is what the second Ctrl-C asks for). As
    `note_interrupts`, nothing changes outside the main thread or where SIGINT is ignored."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return

    def on_sigint(number: int, frame: Any) -> None:
        if _state["interrupted"]:
            exit_interrupted()
        _state["interrupted"] = True
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGINT, on_sigint)


def interrupted() -> bool:
    """Whether a SIGINT arrived since `note_interrupts()`, even one a library swallowed."""
    return _state["interrupted"]
