"""Translate a text file, or classify a folder of images, with an export on Apache Beam.

    read (key, bytes) -> check -> Reshuffle -> RunInference(KeyedModelHandler(ExportHandler))
        -> format -> one list -> written in key order, failures beside it

Each element keeps its key through the pipeline, the line's number or the image's path, and
the output is written in key order: one translation a line of the source (an empty line where
the line failed), or `path<TAB>label<TAB>probability` lines as `zoo classify` prints them, by
path. An element that cannot be read or run fails alone: its key and the reason go to
`OUTPUT.errors` (`KEY<TAB>message` lines; the file is written, empty, when none failed), and
the job goes on. The Reshuffle spreads the elements over the workers (without it, the step that
reads the file would run the model too, in one worker).

The runner is Beam's DirectRunner unless the pipeline options name another; `workers` above 1
asks the DirectRunner for that many worker processes. Any of Beam's options pass through
`pipeline_args` (`--runner=DataflowRunner --project=... --temp_location=gs://...`); the paths
may then be on any file system Beam reads and writes (gs://, s3://, hdfs://).

The writing step holds every result of the corpus in one list, so one worker's memory bounds
the corpus (a million translations are a few hundred megabytes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import KeyedModelHandler, PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from zoo.training.errors import UserError
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
    (ignored by other runners).

    Args:
        pipeline_args: Beam's flags, such as `["--runner=FlinkRunner"]`.
        workers: the DirectRunner's worker processes (`--direct_num_workers`), run in
            `multi_processing` mode when above 1, unless the flags choose otherwise.
    """
    args = list(pipeline_args)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"--workers must be a positive integer; got {workers!r}")
    if workers > 1 and not any(a.startswith("--direct_num_workers") for a in args):
        args.append(f"--direct_num_workers={workers}")
    if workers > 1 and not any(a.startswith("--direct_running_mode") for a in args):
        args.append("--direct_running_mode=multi_processing")
    return PipelineOptions(args)


def _numbered_lines(readable: Any) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, the line's bytes without its line end) of a matched file; a
    .gz or .bz2 file is read decompressed."""
    with readable.open(compression_type="auto") as stream:
        for number, line in enumerate(stream, start=1):
            yield number, line.rstrip(b"\n").removesuffix(b"\r")


class _CheckText(beam.DoFn):
    """Passes UTF-8 lines on; a line that is not fails alone (tagged `failed`)."""

    def process(self, element: tuple[int, bytes]) -> Iterator[Any]:
        key, raw = element
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
         format_rows: Any, output: str) -> None:
    """The shared back half: inference on the keyed elements, then the ordered write."""
    results = (keyed
               | "Spread" >> beam.Reshuffle()
               | "Infer" >> RunInference(KeyedModelHandler(handler))
               | "Split" >> beam.FlatMap(_split_results).with_outputs(FAILED, main="done"))
    failed = (failed_reading, results[FAILED]) | "AllFailures" >> beam.Flatten()
    rows = results["done"] | "Format" >> beam.Map(format_rows)
    everything = ((rows, failed | "AsRows" >> beam.Map(lambda pair: (pair[0], pair)))
                  | "Rows" >> beam.Flatten() | "One list" >> beam.combiners.ToList())
    _ = everything | "Write" >> beam.Map(_write_in_order, output)


def _write_in_order(rows: list, output: str) -> None:
    """Writes the output in key order: a row `(key, lines)` of a done element gives its
    lines; a row `(key, (key, message))` of a failed element an empty line (when `lines` is
    one line an element, a translation) and a line of `OUTPUT.errors`."""
    rows.sort(key=lambda row: row[0])
    done = [lines for _, lines in rows if isinstance(lines, list)]
    one_each = all(len(lines) == 1 for lines in done)
    with FileSystems.create(output) as out, FileSystems.create(output + ".errors") as errors:
        for key, lines in rows:
            if isinstance(lines, list):
                out.write("".join(line + "\n" for line in lines).encode("utf-8"))
                continue
            if one_each:
                out.write(b"\n")
            errors.write(f"{key}\t{lines[1]}\n".encode("utf-8", "backslashreplace"))


def _check_paths(model: str, source: str) -> None:
    """Refuses, in one line, a model that is not an export or a source that is missing."""
    if not FileSystems.exists(FileSystems.join(model, "saved_model.pb")):
        raise UserError(f"the pipeline runs an export's version folder (zoo export M --output "
                        f"DIR, then DIR/NAME/VERSION), which holds saved_model.pb; got "
                        f"{model!r}")
    if not any(ch in source for ch in "*?[") and not FileSystems.exists(source):
        raise FileNotFoundError(f"{source} does not exist")


def _report(result: Any, output: str, per_line: bool) -> CorpusReport:
    """Waits for the run; counts the elements from the files it wrote (`per_line`: one
    output line an element, else one distinct first field an element done)."""
    result.wait_until_finish()
    with FileSystems.open(output + ".errors") as errors:
        failed = errors.read().count(b"\n")
    with FileSystems.open(output) as out:
        lines = out.read().splitlines()
    done = len(lines) - failed if per_line else len({line.split(b"\t")[0] for line in lines})
    return CorpusReport(done + failed, failed, output, output + ".errors")


def translate_file(model: str, source: str, output: str, pipeline_args: Sequence[str] = (),
                   workers: int = 1, batch_size: int = 32) -> CorpusReport:
    """Translates every line of `source` with an exported translator, on Beam.

    Args:
        model: the export's version folder (`zoo export ... --output DIR`: `DIR/NAME/N`);
            the search (beam width, length penalty) is the one fixed in the export.
        source: a text file, one sentence a line (UTF-8; .gz and .bz2 read decompressed).
        output: the file to write, one translation a line in the source's order; a line
            that failed is empty there and named in `output + ".errors"`.
        pipeline_args: Beam's flags (the runner and its settings).
        workers: the DirectRunner's worker processes.
        batch_size: sentences an inference call.

    Returns:
        A `CorpusReport` (`elements` is the number of lines).

    Example:
        report = translate_file("exports/translator-multi30k-en-de/1", "news.en", "news.de",
                                workers=2)
    """
    _check_paths(model, source)
    options = pipeline_options(pipeline_args, workers)
    handler = ExportHandler(model, "sentences", batch_size=batch_size)
    pipeline = beam.Pipeline(options=options)
    checked = (pipeline
               | "Match" >> fileio.MatchFiles(source)
               | "Open" >> fileio.ReadMatches()
               | "Lines" >> beam.FlatMap(_numbered_lines)
               | "Check" >> beam.ParDo(_CheckText()).with_outputs(FAILED, main="lines"))
    _run(pipeline, checked["lines"], checked[FAILED], handler, _translation_row, output)
    return _report(pipeline.run(), output, per_line=True)


def _translation_row(pair: tuple[int, dict]) -> tuple[int, list[str]]:
    key, outputs = pair
    return key, [outputs["translations"].decode("utf-8").replace("\n", " ")]


def classify_folder(model: str, images: str, output: str, pipeline_args: Sequence[str] = (),
                    workers: int = 1, top_k: int = 3, batch_size: int = 32) -> CorpusReport:
    """Classifies every file under a folder (or matching a glob) with an exported ViT, on Beam.

    Args:
        model: the export's version folder (`DIR/NAME/N`).
        images: a folder (its files at any depth, hidden ones left out) or a glob pattern.
        output: the file to write: `path<TAB>label<TAB>probability` lines, `top_k` an image
            (at most the export's top-k), the images by path; an image that failed (not an
            image, corrupt, above the export's pixel limit) is named in `output + ".errors"`.
        pipeline_args, workers, batch_size: as `translate_file`'s.
        top_k: labels written an image.

    Returns:
        A `CorpusReport` (`elements` counts the images read).
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise UserError(f"--top-k must be a positive integer; got {top_k!r}")
    _check_paths(model, images)
    pattern = images if any(ch in images for ch in "*?[") else FileSystems.join(images, "**")
    options = pipeline_options(pipeline_args, workers)
    handler = ExportHandler(model, "images", batch_size=batch_size)
    pipeline = beam.Pipeline(options=options)
    read = (pipeline
            | "Match" >> fileio.MatchFiles(pattern)
            | "Visible" >> beam.Filter(_visible)
            | "Open" >> fileio.ReadMatches()
            | "Read" >> beam.ParDo(_ReadImage()).with_outputs(FAILED, main="images"))
    _run(pipeline, read["images"], read[FAILED], handler,
         lambda pair: _label_rows(pair, top_k), output)
    return _report(pipeline.run(), output, per_line=False)


def _visible(metadata: Any) -> bool:
    return not any(part.startswith(".") for part in metadata.path.split("/")[-1:])


def _label_rows(pair: tuple[str, dict], top_k: int) -> tuple[str, list[str]]:
    path, outputs = pair
    labels = [label.decode("utf-8") for label in outputs["labels"][:top_k]]
    return path, [f"{path}\t{label}\t{probability:.4f}"
                  for label, probability in zip(labels, outputs["probabilities"][:top_k])]
