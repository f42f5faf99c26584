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
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

_state = {"interrupted": False}


def _on_sigint(signum: int, frame: Any) -> None:
    _state["interrupted"] = True
    raise KeyboardInterrupt


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
            print("zoo: interrupted", file=sys.stderr, flush=True)
            os._exit(128 + signal.SIGINT)
        _state["interrupted"] = True
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGINT, on_sigint)


def interrupted() -> bool:
    """Whether a SIGINT arrived since `note_interrupts()`, even one a library swallowed."""
    return _state["interrupted"]
