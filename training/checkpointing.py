"""Resumable training: per-epoch checkpoints of weights and optimizer state, and resuming.

An interrupted run (a killed job, a pre-empted machine) starts again with the same command
and continues where it stopped:

    model.compile(optimizer=..., loss=...)
    initial_epoch = restore_latest(model, "runs/translator/checkpoints")
    model.fit(data, epochs=20, initial_epoch=initial_epoch,
              callbacks=[ResumableCheckpoint("runs/translator/checkpoints")])

Each checkpoint is a folder `epoch-NNNN/` holding

- `model.weights.h5`: `model.save_weights` (Keras 3 also stores the compiled optimizer's
  variables in it);
- `optimizer.npz`: the optimizer's variables (step counter, moments, loss scale) in the order
  of `optimizer.variables`, restored explicitly so that resuming never depends on Keras
  matching optimizer variables by position inside the weights file;
- `lora.npz`, for a model with Keras LoRA factors (`Dense.enable_lora`,
  `EinsumDense.enable_lora`): each adapted layer's frozen kernel and its two factors, which
  `save_weights` does not keep (it writes the kernel with the factors added, and no factors);
- `state.json`: the number of completed epochs and that epoch's logs.

A checkpoint folder is written under a temporary name and renamed when complete, so a crash
while writing leaves the previous checkpoint intact and never a half-written one; a full or
read-only disk raises an OSError that names the checkpoint, after its temporary folder is
removed (a disk with less room than the checkpoint needs is refused before HDF5 writes: it
crashes the process when the disk fills up under it). The final
files of a run go through `write_atomically` in the same way, and `prepare_run_folder`
keeps a run from overwriting a finished run or files it did not write.

Why not `keras.callbacks.BackupAndRestore`: it keeps one backup and deletes it when `fit`
ends, so a finished run cannot be continued with more epochs (`zoo train --force`) and there
is no record of which epoch a folder holds beside the weights; it writes its files in place,
so a kill while writing can leave a damaged backup; it has no hook for what `save_weights`
leaves out (Keras LoRA factors) or for refusing a resume whose settings differ (`facts`); and
a full disk fails inside HDF5 rather than as one line naming the checkpoint. The restore
here is still Keras's own `load_weights` and optimizer variables, with those additions.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable

import keras
import numpy as np

from zoo.training.errors import UserError
from zoo.training.files.disk_faults import naming
from zoo.training.files.file_store import fsync, refuse_link
from zoo.training.files.output_file import check_output_folder

WEIGHTS_FILE = "model.weights.h5"
OPTIMIZER_FILE = "optimizer.npz"
STATE_FILE = "state.json"
LORA_FILE = "lora.npz"
_CHECKPOINT_NAME = re.compile(r"^epoch-(\d+)$")


def _checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints in `directory`, oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _CHECKPOINT_NAME.match(path.name)
        if match and (path / STATE_FILE).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The folder of the newest complete checkpoint in `directory`, or None if there is none."""
    found = _checkpoints(Path(directory))
    return found[-1][1] if found else None


def _plain(value: Any) -> Any:
    """A JSON-friendly version of a logs value."""
    try:
        return float(np.asarray(value))
    except (TypeError, ValueError):
        return str(value)


def lora_variables(model: keras.Model) -> list:
    """The variables of Keras' LoRA that `model.save_weights` does not keep as they are:
    for each layer with LoRA enabled, its frozen kernel (saved with the factors added) and its
    factors `lora_kernel_a`, `lora_kernel_b` (not saved). Empty for a model without LoRA.

    Args:
        model: a built model.

    Returns:
        The variables, three per adapted layer.
    """
    by_path = {v.path: v for v in model.weights}
    found = []
    for variable in model.weights:
        if variable.name == "lora_kernel_a":
            layer = variable.path.rpartition("/")[0]
            found += [by_path[f"{layer}/kernel"], variable, by_path[f"{layer}/lora_kernel_b"]]
    return found


def _save_arrays(path: Path, variables: list) -> None:
    np.savez(path, **{f"v{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(variables)})


def _load_arrays(path: Path) -> list[np.ndarray]:
    with np.load(path) as stored:
        return [stored[key] for key in sorted(stored.files)]  # checks each member's CRC


FINAL_FILES = ("model.keras", "metrics.json")


def prepare_run_folder(folder: str | os.PathLike, written: Iterable[str],
                       force: bool = False) -> None:
    """Makes sure a training run may write into `folder`, before it writes anything.

    - A new folder, or an unfinished run (checkpoints but no final files): fine; the run
      starts, or resumes from its last checkpoint.
    - A finished run (`model.keras` or `metrics.json` present): refused unless `force`. With
      `force` the run continues from the finished run's checkpoints (so a larger epoch count
      trains further) and replaces its final files, atomically, when it ends. To start over,
      give another folder.
    - Files the run does not write (neither in `written` nor hidden): refused unless
      `force`; with it they stay beside the run, untouched.

    Args:
        folder: the run's output folder (it may not exist yet).
        written: the names the run writes at the top of `folder` (final files included).
        force: write into the folder anyway (the `--force` flag of `zoo train`).

    Raises:
        FileExistsError: a finished run or foreign files without `force`; one line that
            names the folder and the files.
        UserError: `folder` is a file or a symbolic link, or a file or folder the run writes
            is a symbolic link (even with `force`): `check_output_folder`, the rule every
            output folder of the zoo follows.
    """
    folder = check_output_folder(folder)
    if not folder.is_dir():
        return
    written = set(written) | set(FINAL_FILES)
    for name in sorted(written):  # with --force too: a link would send a write elsewhere
        refuse_link(folder / name)
    if force:
        return
    entries = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    finished = [name for name in FINAL_FILES if name in entries]
    if finished:
        raise FileExistsError(
            f"{folder} holds a finished run ({', '.join(finished)}); choose another "
            "--output, or pass --force to continue it and replace its final model")
    foreign = [name for name in entries if name not in written]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more"
                                          if len(foreign) > 5 else "")
        raise FileExistsError(
            f"{folder} holds files this run does not write ({shown}); choose an empty or "
            "new --output, or pass --force to write beside them")


class ResumableCheckpoint(keras.callbacks.Callback):
    """Writes a checkpoint of weights and optimizer state at the end of every epoch (or of
    every `every`-th epoch, and of the last one).

    Args:
        directory: The folder of the checkpoints; created if missing.
        keep: How many of the newest checkpoints to keep (older ones are deleted).
        every: Write after epochs `every`, `2 * every`, ... and after the run's last epoch
            (epochs counted from 1). A run interrupted between two checkpoints repeats the
            epochs since the last one.
        facts: settings of the run that a resumed run must share (JSON values, e.g.
            `{"data_placement": "device"}`), written into `state.json` for
            `restore_latest(..., facts=...)` to compare.

    Example (a run folder such as "runs/vit/checkpoints"; here a temporary one):
        >>> import tempfile
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile(optimizer="adam", loss="mse")
        >>> x, y = np.zeros((4, 2)), np.zeros((4, 1))
        >>> run = tempfile.TemporaryDirectory()  # deleted with the object
        >>> callback = ResumableCheckpoint(run.name, keep=2)
        >>> _ = model.fit(x, y, epochs=3, initial_epoch=restore_latest(model, callback.directory),
        ...               callbacks=[callback], verbose=0)
        >>> sorted(path.name for path in callback.directory.iterdir())  # the newest two
        ['epoch-0002', 'epoch-0003']
        >>> restore_latest(model, callback.directory)  # a rerun would start at epoch 3
        3
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 2, every: int = 1,
                 facts: dict | None = None) -> None:
        super().__init__()
        if int(keep) < 1:
            raise ValueError(f"keep must be at least 1; got {keep!r}")
        if int(every) < 1:
            raise ValueError(f"every must be at least 1; got {every!r}")
        self.directory = Path(directory)
        self.keep = int(keep)
        self.every = int(every)
        self.facts = dict(facts or {})

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        completed = epoch + 1  # Keras numbers epochs from 0
        if completed % self.every and completed != (self.params or {}).get("epochs"):
            return
        final = self.directory / f"epoch-{completed:04d}"
        temporary = self.directory / f".{final.name}.tmp-{os.getpid()}"
        # A full or read-only disk names the checkpoint (not its temporary folder) and
        # leaves no part of it: the previous checkpoint stays the newest.
        try:
            with naming(final, temporary):
                self._write(completed, logs, final, temporary)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
        self._prune()

    def _write(self, completed: int, logs: dict | None, final: Path, temporary: Path) -> None:
        """Writes the checkpoint into `temporary` and renames it to `final`."""
        for path in (self.directory, final):
            refuse_link(path)  # a planted link would move the checkpoint outside the run
        self.directory.mkdir(parents=True, exist_ok=True)
        _require_space(self.model, self.directory, final)
        if temporary.is_symlink():
            temporary.unlink()
        elif temporary.exists():
            shutil.rmtree(temporary)
        temporary.mkdir()  # a fresh folder: nothing inside it can be a link

        self.model.save_weights(str(temporary / WEIGHTS_FILE))
        optimizer = self.model.optimizer
        variables = list(optimizer.variables) if optimizer is not None else []
        _save_arrays(temporary / OPTIMIZER_FILE, variables)
        lora = lora_variables(self.model)
        if lora:
            _save_arrays(temporary / LORA_FILE, lora)
        state = {
            "epoch": completed,
            "logs": {key: _plain(value) for key, value in (logs or {}).items()},
            "optimizer_variables": [v.path for v in variables],
            "lora_variables": [v.path for v in lora],
            "facts": self.facts,
        }
        (temporary / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
        for name in (WEIGHTS_FILE, OPTIMIZER_FILE, STATE_FILE) + ((LORA_FILE,) if lora else ()):
            fsync(temporary / name)

        if final.exists():  # left by an earlier run that started over in this folder
            stale = self.directory / f".{final.name}.stale-{os.getpid()}"
            os.replace(final, stale)
            shutil.rmtree(stale)
        os.replace(temporary, final)
        fsync(self.directory)

    def _prune(self) -> None:
        for _, path in _checkpoints(self.directory)[: -self.keep]:
            shutil.rmtree(path, ignore_errors=True)
        for path in self.directory.glob(".epoch-*.tmp-*"):
            if path.name.endswith(f".tmp-{os.getpid()}"):
                continue
            shutil.rmtree(path, ignore_errors=True)  # left by a killed run


def _require_space(model: keras.Model, directory: Path, final: Path) -> None:
    """Raises ENOSPC (naming `final`) where `directory`'s disk has less room than the
    checkpoint needs: HDF5 crashes the process (a segmentation fault) when the disk fills up
    under `save_weights`, so a full disk is refused before it starts."""
    def size(variables: Iterable[Any]) -> int:
        total = 0
        for variable in variables:
            try:
                itemsize = np.dtype(str(variable.dtype)).itemsize
            except TypeError:  # a dtype NumPy does not name (bfloat16): at most 4 bytes
                itemsize = 4
            total += int(np.prod(variable.shape)) * itemsize
        return total

    optimizer = getattr(model, "optimizer", None)
    state = size(optimizer.variables) if optimizer is not None else 0
    # The weights file holds the weights and the optimizer's variables; optimizer.npz
    # holds those again; and a margin for HDF5's and zip's own structures.
    needed = size(model.weights) + 2 * state + (1 << 20)
    if shutil.disk_usage(directory).free < needed:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(final))


def _read_checkpoint(checkpoint: Path) -> tuple[dict, list[np.ndarray], list[np.ndarray]]:
    """The state, optimizer values and LoRA values (`lora_variables`; none for a model
    without LoRA) of a checkpoint, after reading every byte of it.

    Raises whatever reading a damaged file raises (OSError, ValueError, EOFError, KeyError,
    zipfile.BadZipFile, ...): the caller treats any of them as a corrupt checkpoint.
    """
    import h5py

    state = json.loads((checkpoint / STATE_FILE).read_text())
    int(state["epoch"])
    names = list(state["optimizer_variables"])
    values = _load_arrays(checkpoint / OPTIMIZER_FILE)
    if len(names) != len(values):
        raise UserError(f"state.json names {len(names)} optimizer variables but "
                        f"{OPTIMIZER_FILE} holds {len(values)}")
    lora_names = list(state.get("lora_variables", []))  # absent: written before LoRA
    lora = _load_arrays(checkpoint / LORA_FILE) if lora_names else []
    if len(lora_names) != len(lora):
        raise UserError(f"state.json names {len(lora_names)} LoRA variables but "
                        f"{LORA_FILE} holds {len(lora)}")
    with h5py.File(checkpoint / WEIGHTS_FILE, "r") as weights:
        def read(_: str, item: Any) -> None:
            if isinstance(item, h5py.Dataset):
                item[()]
        weights.visititems(read)
    return state, values, lora


def _check_lora(model: keras.Model, checkpoint: Path, names: list[str],
                values: list[np.ndarray]) -> list:
    """The model's LoRA variables, once they are known to fit the checkpoint's (as many, of
    the same shapes, in order, as the optimizer's are matched); a one-line UserError
    otherwise."""
    variables = lora_variables(model)
    if len(variables) != len(names):
        have = f"{len(variables) // 3} layers with LoRA" if variables else "no LoRA"
        held = f"LoRA factors of {len(names) // 3} layers" if names else "no LoRA factors"
        raise UserError(f"the checkpoint {checkpoint} holds {held} but the model has {have}; "
                        "resume with the LoRA settings the run started with")
    for variable, value, path in zip(variables, values, names):
        if tuple(variable.shape) != tuple(value.shape):
            raise UserError(
                f"the checkpoint {checkpoint} holds {path.split('/', 1)[-1]} of shape "
                f"{tuple(value.shape)} but the model's has shape {tuple(variable.shape)}; "
                "resume with the LoRA rank the run started with")
    return variables


def restore_latest(model: keras.Model, directory: str | os.PathLike,
                   facts: dict | None = None) -> int:
    """Loads the newest intact checkpoint's weights and optimizer state into a compiled model.

    A checkpoint whose files cannot be read (truncated or damaged on disk, say by a full disk
    or a copy that stopped half-way) is skipped with a warning on stderr, and the previous
    one is used; it is replaced when training reaches its epoch again.

    Args:
        model: A built and compiled model of the same architecture and optimizer as the one
            that wrote the checkpoints.
        directory: The folder `ResumableCheckpoint` writes to.
        facts: the settings the checkpoint's run must have had (`ResumableCheckpoint`'s
            `facts`); one that the checkpoint records with another value is a one-line
            UserError naming both (a checkpoint that does not record it is not checked).

    Returns:
        The number of epochs the checkpoint had completed: the `initial_epoch` for
        `model.fit`. 0 when there is no checkpoint yet (a fresh start).

    Raises:
        ValueError: If the model is not compiled, the checkpoint's optimizer state does not
            fit the model's optimizer, its LoRA factors (`lora_variables`) do not fit the
            model's, or there are checkpoints but none is intact.
    """
    import sys

    found = _checkpoints(Path(directory))
    if not found:
        return 0
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        raise ValueError(
            "restore_latest needs a compiled model (the optimizer state is restored too); "
            "call model.compile(...) first"
        )
    if not optimizer.built:
        optimizer.build(model.trainable_variables)

    damaged = []
    for _, checkpoint in reversed(found):
        try:
            state, values, lora = _read_checkpoint(checkpoint)
        except Exception as error:  # noqa: BLE001  any failure to read is damage on disk
            reason = f"{type(error).__name__}: {error}".splitlines()[0]
            damaged.append(f"{checkpoint.name} ({reason})")
            continue
        if damaged:
            print(f"warning: skipping unreadable checkpoint(s) {', '.join(damaged)} in "
                  f"{directory}; resuming from {checkpoint.name}", file=sys.stderr)
        break
    else:
        raise UserError(
            f"no intact checkpoint in {directory}: {', '.join(damaged)}; move the folder "
            "away to start the run over")

    # Check the LoRA and optimizer state first, so that a mismatch leaves the model untouched.
    recorded = state.get("facts", {})
    for key, value in (facts or {}).items():
        if key in recorded and recorded[key] != value:
            raise UserError(f"the checkpoint {checkpoint} was written by a run with {key} "
                            f"{recorded[key]!r}, not {value!r}; resume it with the same {key}")
    lora_targets = _check_lora(model, checkpoint, state.get("lora_variables", []), lora)
    variables = list(optimizer.variables)
    if len(values) != len(variables):
        raise UserError(
            f"the checkpoint {checkpoint} holds {len(values)} optimizer variables but the "
            f"model's optimizer has {len(variables)}; was it compiled with another optimizer?"
        )
    for variable, value, path in zip(variables, values, state["optimizer_variables"]):
        if tuple(variable.shape) != tuple(value.shape):
            raise UserError(
                f"optimizer variable {variable.path} has shape {tuple(variable.shape)} but the "
                f"checkpoint's {path} has shape {tuple(value.shape)}"
            )

    model.load_weights(str(checkpoint / WEIGHTS_FILE))
    # After the weights file, which sets an adapted kernel to the sum and zeroes its factors.
    for variable, value in zip(lora_targets + variables, lora + values):
        variable.assign(value)
    return int(state["epoch"])
