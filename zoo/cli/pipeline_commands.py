"""`zoo translate --pipeline FILE` and `zoo classify --pipeline FOLDER`: a corpus through an
export on Apache Beam (zoo/pipelines/corpus.py), on the DirectRunner or the runner that
`--pipeline-options` names.

    zoo export translator-multi30k-en-de --output exports --beam-size 4
    zoo translate --pipeline news.en --output news.de \\
        --model exports/translator-multi30k-en-de/1 --workers 2
    zoo classify --pipeline photos/ --output labels.tsv --model exports/vit-cifar10/1 \\
        --pipeline-options "--runner=FlinkRunner --flink_master=host:8081"

A run prints the file it wrote (`--output`) on stdout, as `zoo export` prints its folder
(Beam's logging is kept to errors, in the workers too, unless `--verbose`); when some elements
failed, one line on stderr names how many and the errors file, and the command ends with
status 1, as `zoo translate` does for lines that are not UTF-8. The search of an export is
fixed in its graph: `--beam-size` and `--max-length` are refused beside `--pipeline` (give them
to `zoo export`).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from typing import Callable

from zoo.training.errors import UserError


def _beam_args(args: argparse.Namespace) -> list[str]:
    try:
        flags = shlex.split(args.pipeline_options or "")
    except ValueError as error:
        raise UserError(f"--pipeline-options must be flags as a shell splits them ({error}); "
                        f"got {args.pipeline_options!r}") from None
    if getattr(args, "verbose", False) or any(
            flag.startswith("--default_sdk_harness_log_level") for flag in flags):
        return flags
    return flags + ["--default_sdk_harness_log_level=ERROR"]


def _quiet_beam(args: argparse.Namespace) -> None:
    """Beam logs its progress (and, on import, optional clients it lacks) through Python's
    logging; the command keeps to errors unless --verbose."""
    if getattr(args, "verbose", False):
        return
    root = logging.getLogger()
    if not root.handlers:  # else the first log call would set up a stderr handler
        root.addHandler(logging.NullHandler())
    logging.getLogger("apache_beam").setLevel(logging.ERROR)


def _corpus_module() -> object:
    try:
        from zoo.pipelines import corpus
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != "apache_beam":
            raise
        raise UserError("--pipeline needs Apache Beam: pip install "
                        "'attention-zoo[pipeline]'") from None
    return corpus


def _check_flags(args: argparse.Namespace, what: str) -> None:
    if not args.output:
        raise UserError(f"--pipeline needs --output FILE for the {what}")
    if getattr(args, "text", None) or getattr(args, "images", None):
        raise UserError("--pipeline reads its own input; give no TEXT or IMAGE arguments "
                        "beside it")
    if args.attention:
        raise UserError("--attention draws one input; it does not run with --pipeline")
    for flag in ("beam_size", "max_length"):
        if getattr(args, flag, None) is not None:
            name = "--" + flag.replace("_", "-")
            raise UserError(f"{name} does not apply with --pipeline: the export's search is "
                            f"fixed in its graph (zoo export --beam-size N); got {name} "
                            f"{getattr(args, flag)}")


def _finish(report: object, kind: str) -> int:
    print(report.output)  # what the run wrote (the rest of the elements, where some failed)
    if report.failed:
        print(f"zoo: error: {report.failed} of {report.elements} {kind} failed; their keys "
              f"and reasons are in {report.errors}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace, results: str, elements: str, run: Callable) -> int:
    """Checks the flags, quiets Beam, runs `run(corpus_module, beam_args)` and returns the
    exit status (1 when some of the `elements` failed)."""
    _check_flags(args, results)
    beam_args = _beam_args(args)
    _quiet_beam(args)
    return _finish(run(_corpus_module(), beam_args), elements)


def translate_pipeline(args: argparse.Namespace) -> int:
    """`zoo translate --pipeline FILE --output FILE --model EXPORT`: returns the exit status
    (1 when some lines failed)."""
    return _run(args, "translations", "lines", lambda corpus, beam_args: corpus.translate_file(
        args.model, args.pipeline, args.output, pipeline_args=beam_args, workers=args.workers,
        force=args.force))


def classify_pipeline(args: argparse.Namespace) -> int:
    """`zoo classify --pipeline FOLDER --output FILE --model EXPORT`: returns the exit status
    (1 when some images failed)."""
    return _run(args, "labels", "images", lambda corpus, beam_args: corpus.classify_folder(
        args.model, args.pipeline, args.output, pipeline_args=beam_args, workers=args.workers,
        top_k=args.top_k, force=args.force))


def add_pipeline_flags(parser: argparse.ArgumentParser, reads: str, positive: object) -> None:
    """The flags of `--pipeline` on `zoo translate` or `zoo classify`; `reads` says what the
    pipeline's input is, `positive` is the parser's positive-integer type."""
    parser.add_argument("--pipeline", metavar="PATH",
                        help=f"run on Apache Beam over {reads}, with --model an export's "
                             "version folder (zoo export M --output DIR: DIR/NAME/VERSION) "
                             "and the results in --output")
    parser.add_argument("--output", metavar="FILE",
                        help="--pipeline: the results, in input order; failures in "
                             "FILE.errors")
    parser.add_argument("--force", action="store_true",
                        help="--pipeline: replace an existing --output (and FILE.errors)")
    parser.add_argument("--workers", type=positive, default=1,
                        help="--pipeline: worker processes of Beam's DirectRunner (at most "
                             "this machine's processors)")
    parser.add_argument("--pipeline-options", metavar="FLAGS",
                        help="--pipeline: Beam's own flags, quoted as one argument "
                             "(\"--runner=DataflowRunner --project=P ...\")")
