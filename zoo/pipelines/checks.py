"""What a corpus run checks before it starts, so that a mistake costs one line and no run.

A pipeline finds a bad path only once its workers reach it, after the whole corpus ran, and
then ends in a page of Beam's traceback. So before the pipeline is built, `check_run`
refuses in one line, naming the flag:

- a model that is not an export's version folder, an export of the other kind (a translator
  given to `classify`), or one whose `saved_model.pb` cannot be read;
- an input that is missing, or of the wrong kind (a folder where a text file is read, a file
  where a folder of images is);
- an output the zoo may not write (`zoo.training.files.output_file.check_output_file`: a
  link, a folder, an existing file without `--force`, the input itself, a folder that cannot
  be written), for the results and for `OUTPUT.errors` alike;
- a runner Beam does not know (`--pipeline-options "--runner=DirectRuner"`), and more
  DirectRunner workers than this machine has processors (each is a process holding the
  model: `--workers 10000` filled the memory).

Paths on a remote file system (`gs://...`) get the checks Beam's file systems can make.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from zoo.training.errors import UserError
from zoo.training.files.output_file import check_output_file

# What each signature input is, for the message on an export of the other kind.
EXPORT_KINDS = {"sentences": "translator", "images": "ViT"}
# The runner a run gets when its options name none: the DirectRunner's own engine for batch
# pipelines. Beam's DirectRunner tries its Prism runner first, which fetches a binary and
# leaves a `beam-temp*` folder in the system's temporary folder on every run.
DEFAULT_RUNNER = "FnApiRunner"
LOCAL_RUNNERS = ("directrunner", "fnapirunner", "switchingdirectrunner",
                 "bundlebaseddirectrunner", "prismrunner", "testdirectrunner")


def is_glob(path: str) -> bool:
    """Whether `path` is a pattern (`*`, `?` or `[`) rather than one path."""
    return any(ch in path for ch in "*?[")


def max_workers() -> int:
    """The most DirectRunner worker processes this machine runs at once: its processors."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_export(model: str, input_name: str) -> None:
    """Refuses a model that is not an export whose signature takes `input_name`."""
    from tensorflow.core.protobuf import saved_model_pb2
    from google.protobuf.message import DecodeError

    graph = FileSystems.join(model, "saved_model.pb")
    if not FileSystems.exists(graph):
        raise UserError(f"the pipeline runs an export's version folder (zoo export M --output "
                        f"DIR, then DIR/NAME/VERSION), which holds saved_model.pb; got --model "
                        f"{model!r}")
    saved = saved_model_pb2.SavedModel()
    try:
        with FileSystems.open(graph) as file:
            saved.ParseFromString(file.read())
        signature = saved.meta_graphs[0].signature_def["serving_default"]
    except (DecodeError, IndexError, OSError) as error:
        raise UserError(f"--model {model}: its saved_model.pb cannot be read as a SavedModel "
                        f"({str(error) or type(error).__name__}); export it again") from None
    if input_name not in signature.inputs:
        other = next((EXPORT_KINDS[name] for name in signature.inputs if name in EXPORT_KINDS),
                     "another model")
        raise UserError(f"--model {model} is an export of a {other}; this command needs an "
                        f"export of a {EXPORT_KINDS[input_name]}")
    if not FileSystems.exists(FileSystems.join(model, "variables", "variables.index")):
        raise UserError(f"--model {model} lacks variables/variables.index; export it again")


def check_input(path: str, folder: bool) -> None:
    """Refuses a missing input, a folder where a file is read (`folder=False`) or a file
    where a folder is (`folder=True`); a glob pattern passes (it may match on any system)."""
    if is_glob(path):
        return
    if not FileSystems.exists(path):
        raise UserError(f"--pipeline {path} does not exist")
    if "://" in path:
        return
    if folder and not os.path.isdir(path):
        raise UserError(f"--pipeline {path} is a file; give a folder of images (or a glob "
                        "pattern)")
    if not folder and os.path.isdir(path):
        raise UserError(f"--pipeline {path} is a folder; give a text file (or a glob pattern)")


def check_output(output: str, source: str, force: bool) -> None:
    """Refuses an output (or its `.errors` file) the zoo may not write."""
    for path in (output, output + ".errors"):
        if "://" not in path:
            check_output_file(path, "--output", force=force, inputs=[source])
        elif FileSystems.exists(path) and not force:
            raise UserError(f"--output {path} exists; --force replaces it")


def runner_and_options(pipeline_args: Sequence[str], workers: int) -> tuple[Any, PipelineOptions]:
    """The runner the options name (`DEFAULT_RUNNER` where none) and the options, with
    `workers` DirectRunner worker processes (ignored by other runners).

    Raises:
        zoo.UserError: an unknown runner, or more workers than `max_workers()`.
    """
    from apache_beam.runners.runner import create_runner

    args = list(pipeline_args)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"--workers must be a positive integer; got {workers!r}")
    name = PipelineOptions(args).view_as(StandardOptions).runner or DEFAULT_RUNNER
    try:
        runner = None if name == DEFAULT_RUNNER else create_runner(name)
    except (ValueError, ImportError, AttributeError) as error:
        detail = str(error).split(". Valid")[0]
        raise UserError(f"--pipeline-options: runner {name!r} cannot be used ({detail}); "
                        "choose one of Beam's runners, such as DirectRunner") from None
    local = name.lower() in LOCAL_RUNNERS or name.lower() + "runner" in LOCAL_RUNNERS
    if local and workers > max_workers():
        raise UserError(f"--workers {workers} is more than this machine's {max_workers()} "
                        "processors (each worker is a process holding the model)")
    if workers > 1 and not any(a.startswith("--direct_num_workers") for a in args):
        args.append(f"--direct_num_workers={workers}")
    if workers > 1 and not any(a.startswith("--direct_running_mode") for a in args):
        args.append("--direct_running_mode=multi_processing")
    options = PipelineOptions(args)
    return runner or _engine_of_direct_runner(options), options


def _engine_of_direct_runner(options: PipelineOptions) -> Any:
    """The FnApiRunner as the DirectRunner makes it for a batch pipeline: with the options
    handed to its workers (their log level among them)."""
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))
