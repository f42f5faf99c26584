"""What the stock TensorFlow Serving model server needs of an export, besides the version
folder: a graph without XLA-only ops (the server runs with XLA off: `xla_only_op_types`),
the repository's `models.config` for `--model_config_file`, and `batching_parameters.txt`
for `--batching_parameters_file`. `zoo.serving.export.export_model` checks the one and writes
the others, after `check_server_files` has made sure, before any tracing, that it can.
"""

from __future__ import annotations

import os
from pathlib import Path

from zoo.training.errors import UserError
from zoo.training.files.file_store import write_atomically
from zoo.serving.chunks import CHUNK_ROWS
from zoo.serving.image_endpoints import MAX_IMAGES
from zoo.serving.server_messages import message_class
from zoo.serving.text_endpoints import MAX_SENTENCES, MAX_TRANSLATOR_SENTENCES


MODELS_CONFIG = "models.config"
BATCHING_FILE = "batching_parameters.txt"


def check_server_files(repository: str | os.PathLike) -> None:
    """Refuses, in one line, a repository whose `models.config` or `batching_parameters.txt`
    the export could not replace with its own: a symbolic link, a folder, a pipe or device.
    Called before the export traces anything (they are written after the version).

    Raises:
        zoo.UserError: naming the file, what it is, and `--output`.
    """
    for name in (MODELS_CONFIG, BATCHING_FILE):
        path = Path(repository) / name
        kind = ("a symbolic link" if path.is_symlink() else "a folder" if path.is_dir()
                else "a pipe or device" if path.exists() and not path.is_file() else None)
        if kind:
            raise UserError(f"--output {repository}: {path} is {kind}, where the export "
                            f"writes the model server's {name}; remove it, or choose "
                            "another --output")


def xla_only_op_types(export_dir: str | os.PathLike) -> set[str]:
    """The op types in a SavedModel's graph and function library that run only through XLA
    (`Xla*`): the stock model server, which runs graphs with XLA off, fails on them."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel.FromString(
        (Path(export_dir) / "saved_model.pb").read_bytes())
    found = set()
    for meta_graph in saved_model.meta_graphs:
        functions = meta_graph.graph_def.library.function
        for nodes in [meta_graph.graph_def.node] + [f.node_def for f in functions]:
            found.update(node.op for node in nodes if node.op.startswith("Xla"))
    return found


def write_models_config(repository: str | os.PathLike) -> Path:
    """Writes `models.config` for TF Serving's `--model_config_file`: every model folder.

    Written by protobuf's text serializer from TF Serving's `ModelServerConfig` (its fields
    as `zoo.serving.server_messages` declares them), so that any folder name is quoted and
    escaped as the server reads it."""
    from google.protobuf import text_format

    repository = Path(repository)
    config = message_class("ModelServerConfig")()
    for folder in sorted(p for p in repository.iterdir() if p.is_dir()):
        if any(v.name.isdigit() for v in folder.iterdir()):
            entry = config.model_config_list.config.add()
            entry.name = folder.name
            entry.base_path = f"/models/{folder.name}"
            entry.model_platform = "tensorflow"
    path = repository / MODELS_CONFIG
    # TF Serving re-reads the file: never a half-written one.
    return write_atomically(
        path, lambda temporary: temporary.write_text(text_format.MessageToString(config)))


# The most rows one request to any exported signature may hold (`MAX_SENTENCES`,
# `MAX_IMAGES`; a translator's signatures take fewer), and the most rows the server runs at
# once: the slice the signatures compute at a time anyway (`zoo.serving.chunks.CHUNK_ROWS`),
# no more than any signature accepts.
MAX_REQUEST_ROWS = max(MAX_SENTENCES, MAX_IMAGES, MAX_TRANSLATOR_SENTENCES)
MAX_EXECUTION_BATCH = CHUNK_ROWS

# The model server's batching (`--enable_batching --batching_parameters_file`). A request
# (a "task") of up to `max_batch_size` rows is accepted; with large-batch splitting on, the
# server cuts a larger one into pieces and runs batches of at most
# `max_execution_batch_size` rows, so every request a signature accepts is served (without
# splitting, a task above `max_batch_size` is refused, and `max_batch_size` is also the batch
# run at once). Requests that arrive within `batch_timeout_micros` of each other run as one
# batch. Chosen from `zoo bench --work mt-served` on a 2-core CPU (docs/benchmarks.md,
# "Serving"): a batch of 32 translates many more sentences a second than a batch of one,
# and a request takes far longer than the wait, so waiting for company costs little.
# The server pads the id signatures' rows to one length (pad id 0).
BATCHING_PARAMETERS = """\
# TensorFlow Serving batching, written by `zoo export`: pass this file with
#   --enable_batching=true --batching_parameters_file=/models/batching_parameters.txt
# A request of up to max_batch_size rows (sentences or images; the most any signature
# accepts) is split into batches of at most max_execution_batch_size rows; requests that
# arrive within batch_timeout_micros of each other are run together.
max_batch_size { value: %(max_batch_size)d }
enable_large_batch_splitting { value: true }
max_execution_batch_size { value: %(max_execution_batch_size)d }
batch_timeout_micros { value: 10000 }
max_enqueued_batches { value: %(max_enqueued_batches)d }
num_batch_threads { value: %(num_batch_threads)d }
pad_variable_length_inputs: true
"""


def write_batching_parameters(repository: str | os.PathLike) -> Path:
    """Writes `batching_parameters.txt` beside `models.config`: requests of up to
    `MAX_REQUEST_ROWS` rows, split and run `MAX_EXECUTION_BATCH` rows at a time, a queue of
    two largest requests, and one batch thread a core of this machine (edit
    `num_batch_threads` for a server with other cores)."""
    text = BATCHING_PARAMETERS % {
        "max_batch_size": MAX_REQUEST_ROWS, "max_execution_batch_size": MAX_EXECUTION_BATCH,
        "max_enqueued_batches": 2 * MAX_REQUEST_ROWS // MAX_EXECUTION_BATCH,
        "num_batch_threads": max(1, os.cpu_count() or 1)}
    return write_atomically(Path(repository) / BATCHING_FILE,
                            lambda temporary: temporary.write_text(text))
