"""The skeleton every training recipe shares, written once.

A recipe (`zoo.recipes.translator`, `zoo.recipes.vit`) reads its data and builds its model; the
steps around that are the same for every model and live here:

    with hold_run_folder(recipe.output, RUN_FILES, recipe.force):  # one run at a time
        out = start_run(recipe.output, RUN_FILES, recipe.force, recipe.seed, recipe.precision)
        ...data, model...
        initial_epoch = resume(model, out)
        history, seconds = fit_resumably(model, batches, out, recipe.epochs, initial_epoch)
        metrics = finish_run(out, model, recipe, history, seconds, initial_epoch, final, ...)

so that every run is refused over a finished one and while another run holds its folder,
seeds and sets its precision the same way, continues from its last epoch checkpoint, and
writes its final model and `metrics.json` (with the same keys) atomically.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

import keras

from zoo.training.errors import UserError
from zoo.training.files.file_store import write_atomically
from zoo.training.files.new_folders import folder_for
from zoo.training.files.run_lock import run_folder_lock
from zoo.training.checkpointing import (
    ResumableCheckpoint,
    prepare_run_folder,
    restore_latest,
)
from zoo.training.distribution import barrier, is_chief, process_count, process_index
from zoo.training.interrupts import interrupted
from zoo.training.job_stop import StopWithTheJob
from zoo.training.precision import bfloat16_warning, set_precision
from zoo.training.progress import fit_verbosity


@contextlib.contextmanager
def hold_run_folder(output: str | os.PathLike, run_files: Iterable[str],
                    force: bool) -> Iterator[Path]:
    """Holds the run folder for one run, from before it is read or written to the end of the
    block: refuses it as `prepare_run_folder` does, creates it, and locks it
    (`zoo.training.files.run_lock.run_folder_lock`), so that a second run into it meanwhile is
    refused in one line naming the folder and the process that holds it. In a multi-process
    job only process 0 creates and locks it (the others check it and write nothing).

    Raises:
        FileExistsError: see `prepare_run_folder`.
        RunFolderInUse: another run holds the folder.
    """
    out = Path(output)
    prepare_run_folder(out, run_files, force=force)  # refused before anything is written
    if not is_chief():
        yield out
        return
    # A run that fails before writing anything (its data does not decode) leaves no folder.
    with folder_for(out), run_folder_lock(out):
        yield out


def start_run(output: str | os.PathLike, run_files: Iterable[str], force: bool, seed: int,
              precision: str) -> Path:
    """Prepares the run folder (refusing one that holds a finished run or foreign files,
    unless `force`), seeds every generator and sets the precision policy; returns the folder.
    Call it inside `hold_run_folder`, so that the folder is checked while the run holds it.
    """
    out = Path(output)
    prepare_run_folder(out, run_files, force=force)
    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    set_precision(precision)
    warning = bfloat16_warning(precision)
    if warning:
        warnings.warn(warning, stacklevel=2)
    return out


def resume(model: keras.Model, out: Path, facts: dict | None = None) -> int:
    """Restores the newest epoch checkpoint of the run into the built, compiled `model`;
    returns the number of epochs it had completed (0 for a fresh run). `facts`: settings the
    checkpoint's run must share (see `restore_latest`)."""
    initial_epoch = restore_latest(model, out / "checkpoints", facts=facts)
    if initial_epoch:
        print(f"resuming from the checkpoint of epoch {initial_epoch} in {out / 'checkpoints'}")
    return initial_epoch


def tensorflow_installed() -> bool:
    """Whether TensorFlow can be imported here, without importing it (the lent GPU machine
    has JAX and no TensorFlow). A meta-path finder that raises ModuleNotFoundError for the
    name (one way to stand in for such a machine) counts as absent too."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except ImportError:
        return False


def fit_resumably(model: keras.Model, data: Any, out: Path, epochs: int, initial_epoch: int,
                  callbacks: list | None = None, keep: int = 2, checkpoint_every: int = 1,
                  facts: dict | None = None,
                  **fit_kwargs: Any) -> tuple[keras.callbacks.History, float]:
    """`model.fit` from `initial_epoch` to `epochs` with a checkpoint after every
    `checkpoint_every`-th epoch and the last (the newest `keep` kept), TensorBoard logs, and a
    progress bar at a terminal; returns the history and the seconds it took. TensorBoard logs
    need TensorFlow's summary writer: on a machine without TensorFlow (a JAX-only GPU
    machine) the run trains without them. `facts` go into every checkpoint (see
    `ResumableCheckpoint`). In a multi-process job only process 0 writes into `out`
    (`written_folder`), and a SIGTERM or Ctrl-C in any process stops every process after
    the same step (`zoo.training.job_stop.JobStopped`)."""
    count = process_count()
    stop = StopOnInterrupt() if count == 1 else StopWithTheJob(process_index(), count)
    with written_folder(out) as folder:
        # The loss check comes first: an epoch whose loss is not finite is never checkpointed.
        callbacks = [stop, StopOnNonFiniteLoss(out)] + list(callbacks or []) + [
            ResumableCheckpoint(folder / "checkpoints", keep=keep, every=checkpoint_every,
                                facts=facts)]
        if tensorflow_installed():
            callbacks.append(keras.callbacks.TensorBoard(str(folder / "logs")))
        elif initial_epoch < epochs:
            print("TensorBoard logs skipped: their writer is TensorFlow's, which is not "
                  "installed")
        started = time.time()
        history = model.fit(data, epochs=epochs, initial_epoch=initial_epoch,
                            callbacks=callbacks, verbose=fit_verbosity(), **fit_kwargs)
        barrier("zoo-fit-end")  # process 0's last checkpoint is complete for every process
    return history, time.time() - started


@contextlib.contextmanager
def written_folder(out: Path) -> Iterator[Path]:
    """The folder this process writes the run's files into: `out` for process 0 (or the
    only process), a temporary folder, removed at the end of the block, for the others.

    Every process of a multi-process job must save alike, because saving reads the weights
    with JAX calls that every process takes part in; the files of all but one are thrown away
    (TensorFlow's multi-worker saving does the same)."""
    if is_chief():
        yield out
        return
    with tempfile.TemporaryDirectory(prefix="zoo-process-") as scratch:
        yield Path(scratch)


class StopOnInterrupt(keras.callbacks.Callback):
    """Stops training at the next step after a Ctrl-C that something swallowed (a callback
    from compiled code, say): raises `KeyboardInterrupt` again where Python code runs. See
    `zoo.training.interrupts`."""

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if interrupted():
            raise KeyboardInterrupt

    on_test_batch_end = on_predict_batch_end = on_train_batch_end


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Ends a run whose loss is not finite (NaN or infinite) with one line, at the end of the
    epoch: training on would only write a NaN model and NaN metrics with exit 0. Keras'
    `TerminateOnNaN` stops the fit quietly, and the run would then finish normally.

    Raises:
        UserError: from `on_epoch_end`, naming the epoch, the loss and the run folder.
    """

    def __init__(self, out: str | os.PathLike) -> None:
        super().__init__()
        self.out = Path(out)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise UserError(
                f"the training loss became {float(loss)} in epoch {epoch + 1}; the run "
                f"stopped without writing this epoch (the earlier checkpoints stay in "
                f"{self.out / 'checkpoints'}): lower the learning rate or LoRA alpha")


def finite_json(value: Any) -> Any:
    """`value` (nested dicts, lists, numbers) with every NaN or infinite float as None, so
    that its JSON is standard JSON (Python writes `NaN` and `Infinity`, which other readers
    refuse)."""
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def finish_run(out: Path, model: keras.Model, recipe: Any, history: keras.callbacks.History,
               seconds: float, initial_epoch: int, validation: dict,
               before: dict | None = None, final_model: keras.Model | None = None,
               **extra: Any) -> dict:
    """Writes the final `model.keras` and `metrics.json` atomically and returns the metrics:
    the recipe, backend, parameters (of the final model) and trainable parameters (of the
    trained `model`), time and epochs of this run, the per-epoch history, the final
    `validation` scores, the scores `before` fine-tuning (if any), and `extra`.

    `final_model` is the model written to `model.keras` when it is not `model` itself (the
    trained model with its LoRA factors merged into its kernels, say). In a multi-process
    job only process 0 writes; every process returns the metrics."""
    final_model = model if final_model is None else final_model
    with written_folder(out) as folder:
        write_atomically(folder / "model.keras", final_model.save)
    metrics = {
        "recipe": dataclasses.asdict(recipe),
        "backend": keras.backend.backend(),
        "parameters": int(final_model.count_params()),
        "trainable_parameters": int(sum(math.prod(v.shape) for v in model.trainable_weights)),
        "train_seconds_this_run": round(seconds, 1),
        "epochs_this_run": recipe.epochs - initial_epoch,
        "history": {k: [float(v) for v in vals] for k, vals in history.history.items()},
        **extra,
        "validation": validation,
    }
    if before is not None:
        metrics["validation_before"] = before
    if is_chief():
        write_atomically(out / "metrics.json",
                         lambda path: path.write_text(
                             json.dumps(finite_json(metrics), indent=2, allow_nan=False)))
    return metrics
