"""Translate a text file, or classify a folder of images, with an export on Apache Beam.

    read (key, bytes) -> check -> Reshuffle -> RunInference(KeyedModelHandler(ExportHandler))
        -> format -> one list -> written in key order, failures beside it

Each element keeps its key through the pipeline, the line's number or the image's path, and
the output is written in key order: one translation a line of the source (an empty line where
the line failed), or `path<TAB>label<TAB>probability` lines as `zoo classify` prints them, by
path. An element that cannot be read or run fails alone: its key and the reason go to
`OUTPUT.errors` (`KEY<TAB>message` lines; the file is written, empty, when none failed), and
the job goes on. The Reshuffle spreads the elements over the workers (without it, the step that
reads the file would run the model too, in one worker). What can be checked before the run is
(zoo/pipelines/checks.py): the export and its kind, the input, the output, the runner and the
number of workers; the output and its `.errors` file are written whole at the end
(`write_atomically`), never through a link, never over an existing file without `force`, never
onto the input; a run leaves nothing in the system's temporary folder.

The runner is the DirectRunner's engine (FnApiRunner) unless the pipeline options name another;
`workers` above 1 asks it for that many worker processes. Any of Beam's options pass through
`pipeline_args` (`--runner=DataflowRunner --project=... --temp_location=gs://...`); the paths
may then be on any file system Beam reads and writes (gs://, s3://, hdfs://).

The writing step holds every result of the corpus in one list, so one worker's memory bounds
the corpus (a million translations are a few hundred megabytes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import KeyedModelHandler, PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from zoo.training.errors import UserError
from zoo.training.files.disk_faults import disk_fault
from zoo.training.files.file_store import write_atomically
from zoo.pipelines.checks import (check_export, check_input, check_output, is_glob,
                                  runner_and_options)
from zoo.pipelines.handler import ExportHandler, Failure, first_line

FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class CorpusReport:
    """What a pipeline run did: `elements` read, `failed` of them, and the files written."""

    elements: int
    failed: int
    output: str
    errors: str


def pipeline_options(pipeline_args: Sequence[str] = (), workers: int = 1) -> PipelineOptions:
    """Beam's options from its usual flags, with `workers` DirectRunner worker processes
    (ignored by other runners; at most this machine's processors).

    Args:
        pipeline_args: Beam's flags, such as `["--runner=FlinkRunner"]`.
        workers: the DirectRunner's worker processes (`--direct_num_workers`), run in
            `multi_processing` mode when above 1, unless the flags choose otherwise.
    """
    return runner_and_options(pipeline_args, workers)[1]


class _ReadLines(beam.DoFn):
    """(line number from 1, the line's bytes without its line end) of a matched file (a .gz
    or .bz2 file read decompressed); a line that is not UTF-8 fails alone (tagged
    `failed`), and so does the rest of a file that cannot be read on (a corrupt archive)."""

    def process(self, readable: Any) -> Iterator[Any]:
        number = 0
        try:
            with readable.open(compression_type="auto") as stream:
                # A decompressing stream has readline but is not iterable.
                for number, line in enumerate(iter(stream.readline, b""), start=1):
                    yield from _checked_line(number, line.rstrip(b"\n").removesuffix(b"\r"))
        except (OSError, EOFError, zlib.error) as error:
            yield beam.pvalue.TaggedOutput(FAILED, (number + 1, f"cannot read past line "
                                                               f"{number}: {first_line(error)}"))


def _checked_line(key: int, raw: bytes) -> Iterator[Any]:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        yield beam.pvalue.TaggedOutput(FAILED, (key, f"not valid UTF-8 (byte "
                                                    f"{error.start + 1} of the line)"))
        return
    yield key, raw


class _ReadImage(beam.DoFn):
    """(path, bytes) of a matched image file; a file that cannot be read fails alone."""

    def process(self, readable: Any) -> Iterator[Any]:
        path = readable.metadata.path
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8: its bytes as \xNN escapes
            shown = os.fsencode(path).decode("utf-8", "backslashreplace")
            yield beam.pvalue.TaggedOutput(FAILED, (shown, "the file's name is not UTF-8"))
            return
        try:
            yield path, readable.read()
        except OSError as error:
            yield beam.pvalue.TaggedOutput(FAILED, (path, first_line(error)))


def _split_results(element: tuple[Any, PredictionResult]) -> Iterator[Any]:
    key, result = element
    if isinstance(result.inference, Failure):
        yield beam.pvalue.TaggedOutput(FAILED, (key, result.inference.message))
    else:
        yield key, result.inference


def _run(pipeline: beam.Pipeline, keyed: Any, failed_reading: Any, handler: ExportHandler,
         format_rows: Any, output: str, line_each: bool) -> None:
    """The shared back half: inference on the keyed elements, then the ordered write
    (`line_each`: an output line an element, as `_write_in_order`'s)."""
    results = (keyed
               | "Spread" >> beam.Reshuffle()
               | "Infer" >> RunInference(KeyedModelHandler(handler))
               | "Split" >> beam.FlatMap(_split_results).with_outputs(FAILED, main="done"))
    failed = (failed_reading, results[FAILED]) | "AllFailures" >> beam.Flatten()
    rows = results["done"] | "Format" >> beam.Map(format_rows)
    everything = ((rows, failed | "AsRows" >> beam.Map(lambda pair: (pair[0], pair)))
                  | "Rows" >> beam.Flatten() | "One list" >> beam.combiners.ToList())
    _ = everything | "Write" >> beam.Map(_write_in_order, output, line_each)


def _write_in_order(rows: list, output: str, line_each: bool = True) -> None:
    """Writes the output in key order: a row `(key, lines)` of a done element gives its
    lines; a row `(key, (key, message))` of a failed element a line of `OUTPUT.errors`, and
    an empty line in the output where it has one line an element (`line_each`: a
    translation a line of the source, not an image's top-k lines, however few)."""
    rows.sort(key=lambda row: row[0])
    out, errors = [], []
    for key, lines in rows:
        if isinstance(lines, list):
            out.append("".join(line + "\n" for line in lines).encode("utf-8"))
            continue
        if line_each:
            out.append(b"\n")
        errors.append(f"{key}\t{lines[1]}\n".encode("utf-8", "backslashreplace"))
    _write_whole(output + ".errors", b"".join(errors))
    _write_whole(output, b"".join(out))


def _write_whole(path: str, data: bytes) -> None:
    """Writes a local file atomically (a full disk leaves no part-written file; an existing
    one is replaced by a rename, so its other hard links keep their content), a remote one
    with Beam's file systems."""
    if "://" in path:
        with FileSystems.create(path) as file:
            file.write(data)
    else:
        write_atomically(path, lambda temporary: temporary.write_bytes(data))


def _check(model: str, input_name: str, source: str, output: str, force: bool,
           pipeline_args: Sequence[str], workers: int) -> tuple[Any, PipelineOptions]:
    """Every check made before the run (zoo/pipelines/checks.py); returns the runner and
    the options."""
    check_export(model, input_name)
    check_input(source, folder=input_name == "images")
    check_output(output, source, force)
    return runner_and_options(pipeline_args, workers)


@contextlib.contextmanager
def _own_temporary_folder() -> Iterator[None]:
    """Runs the block with the system's temporary folder (of this process, and of the worker
    processes it starts) set to a new folder, removed afterwards: what a runner leaves
    there (a job server's `beam-temp*` folder) goes with it."""
    folder = tempfile.mkdtemp(prefix="zoo-pipeline-")
    saved, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = folder, folder
    try:
        yield
    finally:
        tempfile.tempdir = saved
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(folder, ignore_errors=True)


def _run_pipeline(pipeline: beam.Pipeline, output: str) -> None:
    """Runs the pipeline to its end. A full or read-only disk met by a worker (whose error
    comes back as text where the worker is another process) is an OSError naming the
    output, as the zoo's other writes report it."""
    try:
        with _own_temporary_folder():
            pipeline.run().wait_until_finish()
    except Exception as error:
        if disk_fault(error) is not None:
            raise
        text = str(error)
        for code in (28, 122, 30):  # ENOSPC, EDQUOT, EROFS
            if os.strerror(code) in text:
                raise OSError(code, os.strerror(code), output) from None
        raise


def _report(output: str, per_line: bool) -> CorpusReport:
    """Counts the elements from the files a run wrote (`per_line`: one output line an
    element, else one distinct first field an element done)."""
    with FileSystems.open(output + ".errors") as errors:
        failed = errors.read().count(b"\n")
    with FileSystems.open(output) as out:
        lines = out.read().splitlines()
    done = len(lines) - failed if per_line else len({line.split(b"\t")[0] for line in lines})
    return CorpusReport(done + failed, failed, output, output + ".errors")


def translate_file(model: str, source: str, output: str, pipeline_args: Sequence[str] = (),
                   workers: int = 1, batch_size: int = 32, force: bool = False
                   ) -> CorpusReport:
    """Translates every line of `source` with an exported translator, on Beam.

    Args:
        model: the export's version folder (`zoo export ... --output DIR`: `DIR/NAME/N`);
            the search (beam width, length penalty) is the one fixed in the export.
        source: a text file, one sentence a line (UTF-8; .gz and .bz2 read decompressed).
        output: the file to write, one translation a line in the source's order; a line
            that failed is empty there and named in `output + ".errors"`. Both files are
            written whole once the run ends, never through a link, never onto `source`.
        pipeline_args: Beam's flags (the runner and its settings).
        workers: the DirectRunner's worker processes (at most this machine's processors).
        batch_size: sentences an inference call.
        force: replace an existing `output` (and its `.errors`).

    Raises:
        zoo.UserError: before the run, a model, source, output, runner or worker count that
            cannot run (zoo/pipelines/checks.py).

    Returns:
        A `CorpusReport` (`elements` is the number of lines).

    Example:
        report = translate_file("exports/translator-multi30k-en-de/1", "news.en", "news.de",
                                workers=2)
    """
    runner, options = _check(model, "sentences", source, output, force, pipeline_args, workers)
    handler = ExportHandler(model, "sentences", batch_size=batch_size)
    pipeline = beam.Pipeline(runner=runner, options=options)
    checked = (pipeline
               | "Match" >> fileio.MatchFiles(source)
               | "Open" >> fileio.ReadMatches()
               | "Lines" >> beam.ParDo(_ReadLines()).with_outputs(FAILED, main="lines"))
    _run(pipeline, checked["lines"], checked[FAILED], handler, _translation_row, output,
         line_each=True)
    _run_pipeline(pipeline, output)
    return _report(output, per_line=True)


def _translation_row(pair: tuple[int, dict]) -> tuple[int, list[str]]:
    key, outputs = pair
    return key, [outputs["translations"].decode("utf-8").replace("\n", " ")]


def classify_folder(model: str, images: str, output: str, pipeline_args: Sequence[str] = (),
                    workers: int = 1, top_k: int = 3, batch_size: int = 32,
                    force: bool = False) -> CorpusReport:
    """Classifies every file under a folder (or matching a glob) with an exported ViT, on Beam.

    Args:
        model: the export's version folder (`DIR/NAME/N`).
        images: a folder (its files at any depth, hidden ones left out) or a glob pattern.
        output: the file to write: `path<TAB>label<TAB>probability` lines, `top_k` an image
            (at most the export's top-k), the images by path; an image that failed (not an
            image, corrupt, above the export's pixel limit) is named in `output + ".errors"`.
        pipeline_args, workers, batch_size, force: as `translate_file`'s.
        top_k: labels written an image.

    Returns:
        A `CorpusReport` (`elements` counts the images read).
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise UserError(f"--top-k must be a positive integer; got {top_k!r}")
    runner, options = _check(model, "images", images, output, force, pipeline_args, workers)
    pattern = images if is_glob(images) else FileSystems.join(images, "**")
    handler = ExportHandler(model, "images", batch_size=batch_size)
    pipeline = beam.Pipeline(runner=runner, options=options)
    read = (pipeline
            | "Match" >> fileio.MatchFiles(pattern)
            | "Visible" >> beam.Filter(_visible)
            | "Open" >> fileio.ReadMatches()
            | "Read" >> beam.ParDo(_ReadImage()).with_outputs(FAILED, main="images"))
    _run(pipeline, read["images"], read[FAILED], handler,
         lambda pair: _label_rows(pair, top_k), output, line_each=False)
    _run_pipeline(pipeline, output)
    return _report(output, per_line=False)


def _visible(metadata: Any) -> bool:
    return not any(part.startswith(".") for part in metadata.path.split("/")[-1:])


def _label_rows(pair: tuple[str, dict], top_k: int) -> tuple[str, list[str]]:
    path, outputs = pair
    labels = [label.decode("utf-8") for label in outputs["labels"][:top_k]]
    return path, [f"{path}\t{label}\t{probability:.4f}"
                  for label, probability in zip(labels, outputs["probabilities"][:top_k])]
