"""Quiet start-up for the `zoo` command: TensorFlow's C++ chatter filtered from stderr.

TensorFlow's C++ runtime writes to file descriptor 2 directly, much of it before its logging is
configured (`All log messages before absl::InitializeLog() ...`, oneDNN and CPU-feature
notices, `Could not find cuda drivers`, `failed call to cuInit`), so neither
`TF_CPP_MIN_LOG_LEVEL` nor Python's `sys.stderr` can silence it. `filtered_stderr()` points
fd 2 at a pipe read by a small filter process that forwards every line except the known
chatter to the real stderr, line by line as it comes: errors, tracebacks and warnings still
reach the user, in order, even when the process aborts.

    with filtered_stderr(verbose=False):
        import tensorflow  # the start-up notices go nowhere; anything else comes through

`--verbose` on the command line or `ZOO_LOG=debug` in the environment turns the filter off.

The library starts TensorFlow the same way (`start_tensorflow_quietly`, called by `zoo`'s
lazily imported names such as `zoo.load`): its import and device set-up run behind the filter,
and nothing else is filtered, so a program's own logging is untouched; `zoo.verbose()` or
`ZOO_LOG=debug` shows the start-up logs.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from typing import Iterator

# Lines TensorFlow (and its CUDA/oneDNN plumbing) writes on every start; never the user's concern.
# The prefix of an absl log line: `I0000 00:00:1795447617.969488    7382 port.cc:153] `.
_ABSL = r"[IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w./-]+:\d+\] "
CHATTER_PATTERNS: tuple[str, ...] = (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    # INFO lines of the C++ runtime (oneDNN notices, CPU features, device creation).
    "^" + _ABSL.replace("[IWE]", "I"),
    # WARNING and ERROR lines that only say the machine has no GPU, or an optional fast path
    # is off; other warnings and errors come through.
    "^" + _ABSL + r".*(failed call to cuInit|Could not find cuda drivers|"
    r"Unable to register cu\w+ factory|Could not find TensorRT|TF-TRT Warning|oneDNN|"
    r"computation placer already registered)",
    r"^This TensorFlow binary is optimized to use available CPU instructions",
    # A Ctrl-C that ends a run while a Python generator feeds `tf.data`: TensorFlow says, as
    # the interpreter exits, that it could not close the generator (and names its op).
    "^" + _ABSL + r"Error occurred when finalizing GeneratorDataset iterator",
    r"^\s*\[\[\{\{node PyFunc\}\}\]\]$",
    r"^To enable the following instructions: .*rebuild TensorFlow",
    # Apache Beam's worker processes (`zoo translate --pipeline --workers 2`) say on start-up
    # that they set up logging, and that Google Cloud's optional clients are not installed.
    r"^WARNING:root:apitools not found, and bigquery client libraries are not available",
    r"^INFO:__main__:Logging handler created\.$",
)
CHATTER = re.compile("|".join(f"(?:{p})" for p in CHATTER_PATTERNS))

# The filter process: reads the pipe, writes what is not chatter to its stdout (the real fd 2).
_FILTER_PROGRAM = r"""
import os, re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
chatter = re.compile(sys.argv[1])
pending = b""
def forward(line):
    if not chatter.search(line.decode("utf-8", "replace")):
        os.write(1, line)
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    pending += chunk
    *lines, pending = pending.split(b"\n")
    for line in lines:
        forward(line + b"\n")
if pending:
    forward(pending)
"""


def verbose_requested(argv: list[str] | None = None) -> bool:
    """True when `-v`/`--verbose` is among `argv` or the environment has `ZOO_LOG=debug`."""
    if os.environ.get("ZOO_LOG", "").strip().lower() == "debug":
        return True
    return any(a in ("-v", "--verbose") for a in (argv or []))


def is_chatter(line: str) -> bool:
    """Whether one line of stderr is TensorFlow start-up chatter that `filtered_stderr` drops."""
    return bool(CHATTER.search(line))


@contextlib.contextmanager
def filtered_stderr(verbose: bool = False) -> Iterator[None]:
    """Within the block, file descriptor 2 passes through the chatter filter.

    Args:
        verbose: leave stderr untouched (and TensorFlow's logging at its own default).

    Yields:
        Nothing; on leaving, fd 2 is the original one again and every forwarded line has
        been written.
    """
    if verbose:
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        saved = os.dup(2)
    except OSError:  # no usable fd 2 (a detached process): nothing to filter
        yield
        return
    try:
        process = subprocess.Popen(
            [sys.executable, "-S", "-E", "-c", _FILTER_PROGRAM, CHATTER.pattern],
            stdin=subprocess.PIPE, stdout=saved, stderr=subprocess.DEVNULL, close_fds=True)
    except (OSError, ValueError):  # no interpreter to run the filter (an embedded Python)
        os.close(saved)
        yield
        return
    _flush_stderr()
    os.dup2(process.stdin.fileno(), 2)
    _state["until_exit"] = False
    try:
        yield
    finally:
        _flush_stderr()
        if _state["until_exit"]:
            # fd 2 keeps the pipe: the filter ends when the process does (end of file).
            os.close(saved)
        else:
            _restore(saved, process)


def _restore(saved: int, process: subprocess.Popen) -> None:
    """Points fd 2 back at `saved` and lets the filter write what it holds and end."""
    os.dup2(saved, 2)
    os.close(saved)
    process.stdin.close()  # the filter sees end of file once fd 2 no longer holds the pipe
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


_state = {"until_exit": False}


def filter_until_exit() -> None:
    """Keeps the filter of `filtered_stderr` on fd 2 after its block, until the process
    exits: a run ended by Ctrl-C leaves TensorFlow's objects to the interpreter's teardown,
    whose C++ notices ("Error occurred when finalizing GeneratorDataset iterator") come after
    the block, below the one line the command printed."""
    _state["until_exit"] = True


def start_tensorflow_quietly(verbose: bool = False) -> None:
    """Imports TensorFlow and sets up its devices behind `filtered_stderr`, where that is what
    the next step would do anyway: TensorFlow is the Keras backend (`KERAS_BACKEND` unset or
    `tensorflow`), is installed, and neither it nor Keras is loaded yet. Otherwise, and with
    `verbose` or `ZOO_LOG=debug`, nothing happens (TensorFlow then says what it says)."""
    import importlib.util

    if verbose or verbose_requested() or "tensorflow" in sys.modules or "keras" in sys.modules:
        return
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    try:
        if importlib.util.find_spec("tensorflow") is None:
            return
    except (ImportError, ValueError):
        return
    with filtered_stderr():
        import tensorflow as tf

        tf.config.list_physical_devices()  # CUDA's set-up: "failed call to cuInit" on a CPU


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass
