"""zoo.recipes.plots' learning curves and the benchmark script that draws a model card's curve."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

from zoo.recipes import plots

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "studies" / "learning_curve.py"


def _script():
    spec = importlib.util.spec_from_file_location("learning_curve_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learning_curve_joins_earlier_epochs_to_the_run_history(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"history": {"val_accuracy": [0.5, 0.55],
                                               "accuracy": [0.4, 0.45]}}))
    drawn = {}
    script = _script()
    monkeypatch.setattr(script, "plot_learning_curves",
                        lambda curves, ylabel, path: drawn.update(curves=curves, ylabel=ylabel))
    monkeypatch.setattr(sys, "argv", [
        "learning_curve.py", "--percent", "--run", f"tiny, 4 epochs={metrics}",
        "--prefix", "tiny, 4 epochs=0.375,0.4", "--output", str(tmp_path / "c.png")])
    script.main()
    assert drawn["curves"] == {"tiny, 4 epochs": pytest.approx([37.5, 40.0, 50.0, 55.0])}
    assert drawn["ylabel"] == "val_accuracy (%)"


def test_learning_curve_draws_a_run_scored_every_few_epochs_at_its_epochs(tmp_path, monkeypatch):
    drawn = {}
    script = _script()
    monkeypatch.setattr(script, "plot_learning_curves",
                        lambda curves, ylabel, path: drawn.update(curves=curves, ylabel=ylabel))
    monkeypatch.setattr(sys, "argv", [
        "learning_curve.py", "--points", "C=10:34.61,5:24.27", "--ylabel", "BLEU",
        "--output", str(tmp_path / "c.png")])
    script.main()
    assert drawn == {"curves": {"C": {5: 24.27, 10: 34.61}}, "ylabel": "BLEU"}
    monkeypatch.setattr(sys, "argv", ["x", "--points", "C=5-24.27", "--output", "c.png"])
    with pytest.raises(SystemExit, match="--points '5-24.27': expected EPOCH:VALUE"):
        script.main()


def test_learning_curve_puts_a_run_validated_every_few_epochs_at_its_epochs(tmp_path,
                                                                           monkeypatch):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"history": {"val_accuracy": [0.5, 0.6, 0.65],
                                               "accuracy": [0.1, 0.2, 0.3, 0.4, 0.5]},
                                   "validation_epochs": [2, 4, 5]}))
    drawn = {}
    script = _script()
    monkeypatch.setattr(script, "plot_learning_curves",
                        lambda curves, ylabel, path: drawn.update(curves=curves))
    monkeypatch.setattr(sys, "argv", ["x", "--percent", "--run", f"r={metrics}",
                                      "--output", "c.png"])
    script.main()
    assert drawn["curves"] == {"r": {2: pytest.approx(50.0), 4: pytest.approx(60.0),
                                     5: pytest.approx(65.0)}}
    monkeypatch.setattr(sys, "argv", ["x", "--metric", "accuracy", "--run", f"r={metrics}",
                                      "--output", "c.png"])
    script.main()  # the training metric has every epoch
    assert drawn["curves"] == {"r": pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])}
    monkeypatch.setattr(sys, "argv", ["x", "--run", f"r={metrics}", "--prefix", "r=0.4",
                                      "--output", "c.png"])
    with pytest.raises(SystemExit, match="--prefix r: its run names its epochs"):
        script.main()


def test_learning_curve_names_a_missing_metric_and_a_malformed_run(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"history": {"loss": [1.0]}}))
    script = _script()
    monkeypatch.setattr(sys, "argv", ["x", "--run", f"a={metrics}", "--output", "c.png"])
    with pytest.raises(SystemExit, match="no 'val_accuracy' history; it has \\['loss'\\]"):
        script.main()
    monkeypatch.setattr(sys, "argv", ["x", "--run", str(metrics), "--output", "c.png"])
    with pytest.raises(SystemExit, match="expected LABEL=VALUE"):
        script.main()


def test_plot_learning_curves_writes_a_png_and_rejects_an_empty_curve(tmp_path, monkeypatch):
    path = tmp_path / "curve.png"
    plots.plot_learning_curves({"a": [1.0, 2.0, 3.0], "b": [2.0]}, "BLEU", path)
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == (720, 432)  # 6 x 3.6 in at 120 dpi
    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.update(
        lines=[(list(line.get_xdata()), list(line.get_ydata()))
               for line in fig.axes[0].get_lines()]))
    plots.plot_learning_curves({"every": [1.0, 2.0], "some": {10: 3.0, 5: 2.5}}, "BLEU", path)
    assert drawn["lines"] == [([1, 2], [1.0, 2.0]), ([5, 10], [2.5, 3.0])]
    with pytest.raises(ValueError, match="'b': 0"):
        plots.plot_learning_curves({"a": [1.0], "b": []}, "BLEU", tmp_path / "x.png")
