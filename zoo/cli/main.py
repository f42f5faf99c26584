"""The `zoo` console script's entry point, `main(argv)`, and how it reports what goes wrong.

The flags are built in zoo/cli/parser.py and the subcommands run in zoo/cli/commands.py;
`python -m zoo.cli` (zoo/cli/__main__.py) runs `main` too.

Errors in what the user gave (a `zoo.UserError`: an unknown model, a bad image, a bad flag
value; or a missing file) are printed as one line, `zoo: error: ...`, with exit status 2, never
as a stack trace. So are the machine's faults: a full disk, a read-only file system, a write
refused (an OSError with errno ENOSPC, EDQUOT, EROFS, EACCES or EPERM, or TensorFlow's error
for one, `zoo.training.files.disk_faults`), as `zoo: error: cannot write PATH: No space left on
device`, and the same for stdout (`zoo models > /dev/full`: `cannot write standard output
(/dev/full): ...`). Any other exception is the zoo's bug and keeps its traceback. The zoo's own
warnings print as one line, `zoo: warning: ...`; TensorFlow's start-up chatter on stderr is
filtered (zoo/cli/quiet.py) unless `--verbose` or `ZOO_LOG=debug` asks for it.

Every command runs TensorFlow with its oneDNN kernels (`zoo.runtime.use_onednn`), which
TensorFlow turns on by itself only on CPUs with AVX-512 VNNI, BF16 or AMX: on a 2-core AVX2
host they trained about twice as fast (docs/performance-log.md, 2026-11-25, oneDNN).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import typing
import warnings
from pathlib import Path
from typing import Any, Sequence

from zoo.cli.line_reader import argument_bytes, utf8_problem
from zoo.cli.stdout_faults import StdoutClosed, fault_naming_stdout
from zoo.training.errors import FILE_ERRORS, UserError
from zoo.runtime import keep_jax_out_of_tensorflow, use_onednn
from zoo.training.interrupts import interrupted, noting_interrupts, say_interrupted
from zoo.training.files.disk_faults import describe, disk_fault

# The zoo's own packages: their errors and warnings are the zoo's.
OWN_PACKAGES = ("zoo",)
# Where the zoo's code lives: zoo/ (a wheel's zoo/layers and zoo/training inside it), and in
# a checkout the layers/ and training/ folders beside it.
OWN_FOLDERS = ("zoo", "layers", "training")

# Commands that load Keras (and TensorFlow): they run behind the stderr chatter filter. `zoo
# models`, `--help` and argument errors import neither.
TENSORFLOW_COMMANDS = ("translate", "classify", "caption", "generate", "train", "finetune",
                       "evaluate", "export", "convert", "quantize")
RECIPE_COMMANDS = ("train", "finetune")
# Keras 3's backends (keras.src.backend.config): what KERAS_BACKEND may name.
KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


def build_parser(recipes: bool = True) -> argparse.ArgumentParser:
    """The `zoo` command's parser (zoo/cli/parser.py), whose modules (every subcommand's)
    load here, once `main` notes Ctrl-C, rather than as this module loads, before it can."""
    from zoo.cli import parser

    return parser.build_parser(recipes)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (the first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `zoo` console script; returns the exit status.

    Argument errors exit with status 2 (argparse's usage and message); a user's mistake
    found while running (a `zoo.UserError`, such as an unknown model, or a missing file) or
    a full or read-only disk (stdout's included) is one line `zoo: error: ...` on stderr and
    status 2; any other exception is the zoo's bug and propagates (the console script prints
    its traceback, status 1). Status 1 returned: `zoo translate` finished, but some stdin
    lines or TEXT arguments were not valid UTF-8 (their output lines are empty); 141: stdout
    was closed early; 130: interrupted (Ctrl-C), one line, wherever it lands.

    One path does not return: a Ctrl-C while a module is being imported (the start-up's JAX,
    Keras and TensorFlow) ends the process there, with that line and status 130
    (`zoo.training.interrupts`; the interpreter's teardown aborted in C++ on JAX). Ctrl-C is
    noted from this function's first line; the SIGINT handler from before is back when it
    returns.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    with noting_interrupts():
        try:
            return _run(argv)
        except KeyboardInterrupt:  # while the arguments and files are checked
            from zoo.cli.quiet import verbose_requested

            if verbose_requested(argv):
                raise
            return _interrupted_exit()


def _run(argv: list[str]) -> int:
    """`main`'s work, with Ctrl-C noted (`zoo.training.interrupts`)."""
    from zoo.cli.quiet import filtered_stderr, verbose_requested

    use_onednn()
    command = _command_of(argv)
    verbose = verbose_requested(argv)
    parser = build_parser(recipes=command in RECIPE_COMMANDS)
    args = parser.parse_args(argv)
    if (args.command == "translate" and not args.text and not args.pipeline
            and _stdin_is_terminal()):
        _translate_parser(parser).error(
            "give TEXT to translate, or pipe sentences on stdin (one per line)")
    message = (_check_utf8(args, parser) or _check_backend(args.command, os.environ)
               or _check_inputs(args))
    if message is not None:  # a mistake found before any model (and TensorFlow) loads
        print(f"zoo: error: {message}", file=sys.stderr)
        return 2
    quiet = filtered_stderr(verbose or args.verbose) if args.command in TENSORFLOW_COMMANDS else (
        contextlib.nullcontext())
    status = 0
    utf8_stdout()
    with quiet, own_warnings_in_one_line(not (verbose or args.verbose)):
        try:
            if args.command in TENSORFLOW_COMMANDS:
                keep_jax_out_of_tensorflow()
            with fault_naming_stdout():  # a full disk behind stdout names it; flushed here
                status = args.func(args)
        except StdoutClosed:  # the reader went away (`zoo models | head -0`): quietly
            return 141
        # A user's mistake (zoo.UserError, see training/errors.py), a path that is missing, in
        # the way or unreadable, or a package to install is one line. Anything else, a
        # ValueError from inside Keras and a module of the zoo's own that is missing
        # included, is the zoo's bug and keeps its traceback, as everything does with
        # --verbose.
        except (UserError, *FILE_ERRORS, ModuleNotFoundError) as error:
            # Ctrl-C, here and below also where a library turned it into another exception
            # (Keras' loader: "objects could not be loaded", blaming the model file).
            if interrupted() and not (verbose or args.verbose):
                return _interrupted_exit()
            if verbose or args.verbose or _is_own_module(error):
                raise
            message = _disk_fault_line(error) or str(error).strip() or repr(error)
        except KeyboardInterrupt:  # Ctrl-C: what was written stays (checkpoints, whole lines)
            if verbose or args.verbose:
                raise
            return _interrupted_exit()
        except Exception as error:  # a full or read-only disk is one line; a bug is not
            if interrupted() and not (verbose or args.verbose):
                return _interrupted_exit()
            message = _disk_fault_line(error)
            if message is None or verbose or args.verbose:
                raise
        # A Ctrl-C that something swallowed (a training run's StopOnInterrupt) is not lost
        # either; inside the block, so that the stderr filter stays on to the process's exit.
        if interrupted():
            return _interrupted_exit()
    if message is not None:
        print(f"zoo: error: {message}", file=sys.stderr)
        return 2
    return status if isinstance(status, int) else 0


def utf8_stdout(stream: Any = None) -> None:
    """Makes stdout write UTF-8 where its encoding cannot write every character (an ASCII or
    C locale, `PYTHONIOENCODING=ascii`): a translation with an umlaut was a
    UnicodeEncodeError traceback there. UTF-8 bytes lose nothing (a pipe or file receives the
    exact text); the error handler stays the stream's own."""
    import codecs

    stream = sys.stdout if stream is None else stream
    encoding = getattr(stream, "encoding", None)
    if not encoding or not hasattr(stream, "reconfigure"):
        return
    if codecs.lookup(encoding).name not in ("utf-8", "utf-16", "utf-32", "utf-8-sig"):
        with contextlib.suppress(OSError, ValueError):
            stream.reconfigure(encoding="utf-8")


def _interrupted_exit() -> int:
    """Ctrl-C: stdout's whole lines flushed, one line on stderr, status 130."""
    from zoo.cli.quiet import filter_until_exit

    say_interrupted()
    filter_until_exit()
    return 130


def _disk_fault_line(error: BaseException) -> str | None:
    """`cannot write PATH: No space left on device` for a full or read-only disk or a
    refused write (`zoo.training.files.disk_faults`), else None (a bug's error, say)."""
    fault = disk_fault(error)
    return None if fault is None else describe(fault)


@contextlib.contextmanager
def own_warnings_in_one_line(active: bool = True) -> typing.Iterator[None]:
    """Within the block, a warning raised in the zoo's own packages prints as one line,
    `zoo: warning: MESSAGE` (a bfloat16 run on a CPU without it, a truncated sentence), not
    as Python's two lines of file, line number and source; other packages' warnings keep
    Python's format. `active=False` (`--verbose`): Python's format for all."""
    if not active:
        yield
        return
    original = warnings.formatwarning
    root = Path(__file__).resolve().parents[2]
    own = [root / folder for folder in OWN_FOLDERS]

    def one_line(message: Any, category: type, filename: str, lineno: int,
                 line: str | None = None) -> str:
        path = Path(filename).resolve()
        if any(path.is_relative_to(folder) for folder in own):
            return f"zoo: warning: {message}\n"
        return original(message, category, filename, lineno, line)

    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = original


def _is_own_module(error: BaseException) -> bool:
    """Whether `error` is a ModuleNotFoundError for a module of the zoo's own packages (a bug;
    a third-party package that is missing is for the user to install)."""
    name = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    return (name or "").split(".")[0] in OWN_PACKAGES


def _check_backend(command: str, environ: typing.MutableMapping[str, str]) -> str | None:
    """An unknown `KERAS_BACKEND` as one line (Keras would raise on import); `zoo export`
    sets TensorFlow's itself, the only backend whose graphs TF Serving runs."""
    if command == "export" and "keras" not in sys.modules:
        environ["KERAS_BACKEND"] = "tensorflow"
    backend = environ.get("KERAS_BACKEND")
    if command in TENSORFLOW_COMMANDS and backend is not None and backend not in KERAS_BACKENDS:
        return (f"KERAS_BACKEND={backend} is not a Keras backend; use one of "
                f"{', '.join(KERAS_BACKENDS)} (or unset it: tensorflow)")
    return None


# Arguments that may hold bytes that are not UTF-8: `zoo translate` answers such a TEXT with
# an empty line and a warning (as a line of stdin), `zoo classify` opens such an IMAGE (and
# prints its name with the bytes as \xNN escapes where stdout cannot write them back).
NON_UTF8_ALLOWED = {("translate", "text"), ("classify", "images"), ("caption", "images"),
                    ("generate", "text")}


def _check_utf8(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """The first argument that is not valid UTF-8 (Python decodes `sys.argv` with
    surrogateescape, so its bytes come as lone surrogates), as one line that names its flag,
    unless the command takes it (`NON_UTF8_ALLOWED`): TensorFlow encodes every path and
    name it is handed as strict UTF-8 and fails with a traceback."""
    names = _argument_names(parser, args)
    for dest, value in vars(args).items():
        if (args.command, dest) in NON_UTF8_ALLOWED:
            continue
        for text in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(text, str):
                continue
            raw = argument_bytes(text)
            if raw is not None:
                shown = raw.decode("utf-8", "backslashreplace")
                return (f"{names.get(dest, dest)} {shown} {utf8_problem(raw)[1]}; the zoo takes "
                        "paths and names in UTF-8")
    return None


def _argument_names(parser: argparse.ArgumentParser, args: argparse.Namespace
                    ) -> dict[str, str]:
    """Each destination of the (sub)parsers `args` went through, by how the user writes it:
    its longest flag (`--output`) or its metavar (`SOURCE`)."""
    names: dict[str, str] = {}
    while parser is not None:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
            elif action.option_strings:
                names[action.dest] = max(action.option_strings, key=len)
            else:
                names[action.dest] = str(action.metavar or action.dest.upper())
        parser = chosen
    return names


def _check_inputs(args: argparse.Namespace) -> str | None:
    """The first mistake in the files and model names a command was given, found without
    loading anything: an unknown model name, a missing model path, image, data file or
    checkpoint, an `--attention` picture that cannot be written where it is asked."""
    import zoo.hub.loader as registry
    from zoo.hub.handles import is_handle  # a hub-layout folder converts when loaded, not here

    model = getattr(args, "model", None)
    if getattr(args, "pipeline", None):  # an export's folder, and Beam's paths: checked there
        return None
    if (args.command in ("translate", "classify", "caption", "evaluate", "export", "quantize")
            and isinstance(model, str) and "://" not in model and not is_handle(model)
            and hasattr(registry, "resolve")):
        try:
            registry.resolve(model)  # shipped names and local paths only: no download
        except (UserError, *FILE_ERRORS) as error:
            return str(error).strip() or repr(error)
    if args.command in ("classify", "caption"):
        for path in args.images:
            if os.path.isdir(path):
                return f"image {path} is a directory, not an image file"
            if not os.path.exists(path):
                return f"image file {path} does not exist"
            if not os.path.isfile(path):
                return f"image {path} is not a regular file"
    attention = getattr(args, "attention", None)
    if attention:  # a picture drawn after the work: its path checked before it
        from zoo.training.files.output_file import check_output_file

        try:
            check_output_file(attention, "--attention", force=True, in_place=False,
                              inputs=getattr(args, "images", None) or ())
        except UserError as error:
            return str(error)
    if args.command == "convert" and args.source and not os.path.exists(args.source):
        return f"convert {args.format}: SOURCE {args.source} does not exist"
    if args.command == "evaluate" and args.task == "translator" and not (
            args.source and args.reference):
        return "evaluate translator needs --source FILE and --reference FILE"
    if args.command == "evaluate" and args.task == "vit" and not args.data:
        return "evaluate vit needs --data DIR (one folder per class) or tfds:NAME[:SPLIT]"
    if args.command == "evaluate":
        for flag in ("source", "reference", "data"):
            path = getattr(args, flag, None)
            if path and not path.startswith("tfds:") and not os.path.exists(path):
                return f"--{flag} {path} does not exist"
    return None


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _translate_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `translate` subparser of `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["translate"]
    return parser

