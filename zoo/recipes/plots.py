"""Pictures for people: translation alignments, attention over images, confusion matrices,
learning curves."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np


def _figure(width: float, height: float) -> Any:
    """A matplotlib `Figure` drawn off-screen: no pyplot, so the user's backend is left as
    it is and no window opens."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _save(fig: Any, path: str | os.PathLike) -> None:
    """Saves the figure at `path` whole or not at all (a full disk leaves no half-written
    picture and names `path`); the format is `path`'s suffix (PNG where it has none).

    Raises:
        zoo.UserError: a suffix that names no picture format matplotlib writes.
        IsADirectoryError: `path` is a folder."""
    from zoo.training.files.file_store import write_atomically

    from zoo.training.errors import UserError

    # The format is named, not left to the suffix: the temporary file's name must not decide
    # it, and a name without a suffix (`--attention out`) is a PNG.
    kind = os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or "png"
    supported = fig.canvas.get_supported_filetypes()
    if kind not in supported:
        raise UserError(f"cannot draw a picture as .{kind} ({os.fspath(path)}); use one of "
                        f"{', '.join('.' + k for k in sorted(supported))}")
    fig.tight_layout()
    # "tight": the saved area grows to hold every label, title and colorbar (none clipped).
    write_atomically(path, lambda temporary: fig.savefig(temporary, dpi=120, format=kind,
                                                         bbox_inches="tight"))


def _label_grid(ax: Any, columns: Sequence[str], rows: Sequence[str], column_title: str,
                row_title: str) -> None:
    """Names a heatmap's columns (turned upright) and rows, and titles both axes."""
    ax.set_xticks(range(len(columns)), columns, rotation=90)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(column_title)
    ax.set_ylabel(row_title)


def plot_alignment(source: Sequence[str], target: Sequence[str], weights: np.ndarray,
                   path: str | os.PathLike,
                   title: str = "cross-attention, last decoder layer, heads averaged") -> Any:
    """Heatmap of cross-attention: one row per target piece, one column per source piece,
    with a colorbar and a title saying which attention it is. Returns the figure."""
    weights = np.asarray(weights)
    if weights.shape != (len(target), len(source)):
        raise ValueError(f"weights of shape {weights.shape} do not match {len(target)} target "
                         f"and {len(source)} source pieces")
    fig = _figure(0.45 * len(source) + 3, 0.45 * len(target) + 2)
    ax = fig.subplots()
    shown = ax.imshow(weights, cmap="viridis", aspect="auto", vmin=0.0)
    fig.colorbar(shown, ax=ax, label="attention weight")
    ax.set_title(title)
    _label_grid(ax, source, target, "source", "target")
    _save(fig, path)
    return fig


def plot_attention_overlay(image: np.ndarray, heat: np.ndarray, path: str | os.PathLike,
                           title: str = "attention rollout, all layers, heads averaged",
                           label: str | None = None) -> Any:
    """The image beside itself with an attention map (any grid size) laid over it, a
    colorbar for the map, the map's `title` (which attention: layer, heads) and, above both,
    the predicted `label`. Returns the figure."""
    image = np.asarray(image).astype("uint8")
    heat = np.asarray(heat, "float32")
    fig = _figure(7, 3.4)
    axes = fig.subplots(1, 2)
    for ax in axes:
        ax.imshow(image, interpolation="nearest")
        ax.axis("off")
    h, w = image.shape[:2]
    # The image's own extent (pixel centres on integers): a map laid at (0, w, h, 0) stood
    # half a pixel off it, a pale band along the right and bottom edges.
    shown = axes[1].imshow(heat, cmap="jet", alpha=0.5, extent=(-0.5, w - 0.5, h - 0.5, -0.5),
                           interpolation="bilinear", vmin=0.0)
    fig.colorbar(shown, ax=axes[1], label="share of attention")
    axes[0].set_title("image", fontsize=9)
    axes[1].set_title(title, fontsize=9)
    if label is not None:
        fig.suptitle(f"predicted: {label}")
    _save(fig, path)
    return fig


def plot_confusion_matrix(matrix: np.ndarray, class_names: Sequence[str],
                          path: str | os.PathLike, title: str | None = None) -> Any:
    """Counts of (true class, predicted class), rows the truth, under `title` (by default
    "confusion matrix, N images, top-1 A"). Returns the figure."""
    matrix = np.asarray(matrix)
    if title is None:
        total = int(matrix.sum())
        accuracy = np.trace(matrix) / total if total else 0.0
        title = f"confusion matrix, {total:,} images, top-1 {accuracy:.4f}"
    fig = _figure(0.6 * len(class_names) + 2, 0.6 * len(class_names) + 1.5)
    ax = fig.subplots()
    ax.set_title(title, fontsize=9)
    ax.imshow(matrix, cmap="Blues")
    for (i, j), count in np.ndenumerate(matrix):
        ax.text(j, i, int(count), ha="center", va="center", fontsize=7,
                color="white" if count > matrix.max() / 2 else "black")
    _label_grid(ax, class_names, class_names, "predicted", "true")
    _save(fig, path)
    return fig


def plot_learning_curves(curves: Mapping[str, Sequence[float] | Mapping[int, float]],
                         ylabel: str, path: str | os.PathLike) -> None:
    """One line per run, e.g. a model card's validation top-1 or BLEU: a score per epoch
    (a sequence, epoch 1 first) or at some epochs (`{epoch: score}`, for a run evaluated
    every few epochs)."""
    if not curves or any(len(values) == 0 for values in curves.values()):
        raise ValueError(f"every curve needs at least one value; got lengths "
                         f"{ {label: len(values) for label, values in curves.items()} }")
    fig = _figure(6, 3.6)
    ax = fig.subplots()
    for label, values in curves.items():
        if isinstance(values, Mapping):
            epochs, scores = zip(*sorted(values.items()))
        else:
            epochs, scores = range(1, len(values) + 1), list(values)
        ax.plot(list(epochs), list(scores), marker="o", markersize=3, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
