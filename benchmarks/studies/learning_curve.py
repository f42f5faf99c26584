"""Validation score per epoch of one or more training runs, as a PNG for a model card.

    python benchmarks/studies/learning_curve.py --metric val_accuracy --percent \\
        --run "vit-cifar-tiny, 24 epochs=~/zoo-runs/vit-cifar10/metrics.json" \\
        --prefix "vit-cifar-tiny, 24 epochs=0.377,0.413" \\
        --output saved_models/vit-cifar10/learning_curve.png

Each `--run` is `LABEL=PATH` to the `metrics.json` that `zoo train` writes; the curve is the
run's per-epoch `history[METRIC]` (Keras' names: `val_accuracy`, `val_loss`, ...). A run
resumed over several sessions keeps only its last session's history in `metrics.json`; give
the earlier epochs with `--prefix LABEL=V1,V2,...` (read off the earlier logs, in the
metric's own units). A run scored every few epochs (the translator's validation BLEU) is
given by its points, `--points LABEL=EPOCH:VALUE,...`:

    python benchmarks/studies/learning_curve.py --ylabel "validation BLEU" \
        --points "dropout 0.2=5:24.27,10:34.61,15:35.86" --points "dropout 0.1=5:28.87" \
        --output saved_models/translator-multi30k-en-de/learning_curve.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zoo.recipes.plots import plot_learning_curves  # noqa: E402


def read_curve(path: str, metric: str) -> list[float] | dict[int, float]:
    """The per-epoch values of `metric` in a run's metrics.json; for a validation metric of
    a run that validated every few epochs (`zoo train vit --validate-every`), the points
    `{epoch: value}` at the epochs its `validation_epochs` names."""
    metrics = json.loads(Path(path).expanduser().read_text())
    history = metrics["history"]
    if metric not in history:
        raise SystemExit(f"{path} has no {metric!r} history; it has {sorted(history)}")
    values = [float(v) for v in history[metric]]
    epochs = metrics.get("validation_epochs")
    if metric.startswith("val_") and epochs and len(epochs) == len(values):
        return dict(zip(epochs, values))
    return values


def _pair(item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise SystemExit(f"{flag} {item!r}: expected LABEL=VALUE")
    label, value = item.rsplit("=", 1)
    return label, value


def _point(item: str) -> tuple[str, str]:
    epoch, sep, value = item.partition(":")
    if not sep or not epoch.strip().isdigit():
        raise SystemExit(f"--points {item!r}: expected EPOCH:VALUE")
    return epoch, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--points", action="append", default=[],
                        metavar="LABEL=EPOCH:VALUE,...")
    parser.add_argument("--prefix", action="append", default=[], metavar="LABEL=V1,V2,...")
    parser.add_argument("--metric", default="val_accuracy")
    parser.add_argument("--percent", action="store_true", help="plot values x 100")
    parser.add_argument("--ylabel", default=None)
    parser.add_argument("--output", required=True, metavar="FILE.png")
    args = parser.parse_args()

    if not args.run and not args.points:
        parser.error("give at least one --run or --points")
    prefixes = {label: [float(v) for v in values.split(",")]
                for label, values in (_pair(item, "--prefix") for item in args.prefix)}
    scale = 100.0 if args.percent else 1.0
    curves = {}
    for item in args.run:
        label, path = _pair(item, "--run")
        curve = read_curve(path, args.metric)
        if isinstance(curve, dict):
            if label in prefixes:
                raise SystemExit(f"--prefix {label}: its run names its epochs; give the earlier "
                                 "ones with --points")
            curves[label] = {epoch: v * scale for epoch, v in curve.items()}
        else:
            curves[label] = [v * scale for v in prefixes.get(label, []) + curve]
    for item in args.points:
        label, values = _pair(item, "--points")
        curves[label] = {int(epoch): float(value) * scale
                         for epoch, value in (_point(p) for p in values.split(","))}
    plot_learning_curves(curves, args.ylabel or args.metric + (" (%)" if args.percent else ""),
                         args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
