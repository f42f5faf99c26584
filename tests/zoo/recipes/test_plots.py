"""zoo.recipes.plots' learning curves and the benchmark script that draws a model card's curve."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
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
        # 6 x 3.6 in at 120 dpi, grown or trimmed to what the labels need ("tight")
        assert image.format == "PNG" and 600 < image.size[0] < 800 and 350 < image.size[1] < 500
    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.update(
        lines=[(list(line.get_xdata()), list(line.get_ydata()))
               for line in fig.axes[0].get_lines()]))
    plots.plot_learning_curves({"every": [1.0, 2.0], "some": {10: 3.0, 5: 2.5}}, "BLEU", path)
    assert drawn["lines"] == [([1, 2], [1.0, 2.0]), ([5, 10], [2.5, 3.0])]
    with pytest.raises(ValueError, match="'b': 0"):
        plots.plot_learning_curves({"a": [1.0], "b": []}, "BLEU", tmp_path / "x.png")


# ------------------------------------------------------------------ pictures people can read
def _saved_with(monkeypatch):
    from matplotlib.figure import Figure

    calls = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: (
        calls.append(kw), original(fig, path, **kw))[1])
    return calls


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)
            ] + [fig._suptitle.get_text() if fig._suptitle else ""]


def test_every_picture_is_saved_with_room_for_its_labels(tmp_path, monkeypatch):
    calls = _saved_with(monkeypatch)
    plots.plot_learning_curves({"a run with a long name": [1.0, 2.0]},
                               "validation top-1 (5,000 held-out images)", tmp_path / "c.png")
    plots.plot_alignment(["a", "b"], ["x"], [[0.4, 0.6]], tmp_path / "a.png")
    plots.plot_confusion_matrix([[1, 0], [0, 1]], ["cat", "dog"], tmp_path / "m.png")
    assert [kw.get("bbox_inches") for kw in calls] == ["tight"] * 3


def test_the_attention_overlay_has_a_colorbar_a_title_and_the_label(tmp_path):
    image = np.zeros((32, 32, 3), "uint8")
    fig = plots.plot_attention_overlay(image, np.full((8, 8), 1 / 64), tmp_path / "r.png",
                                       title="attention rollout over 7 layers, heads averaged",
                                       label="cat (0.61)")
    assert len(fig.axes) == 3 and fig.axes[2].get_ylabel() == "share of attention"  # colorbar
    texts = _texts(fig)
    assert "attention rollout over 7 layers, heads averaged" in texts
    assert "predicted: cat (0.61)" in texts
    assert (tmp_path / "r.png").stat().st_size > 0


def test_the_alignment_has_a_colorbar_and_says_which_attention(tmp_path):
    fig = plots.plot_alignment(["A", "dog"], ["Ein", "Hund"], np.eye(2), tmp_path / "a.png")
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "attention weight"
    assert "cross-attention, last decoder layer, heads averaged" in _texts(fig)


def _classify_attention(tmp_path, capsys, **config):
    from zoo.cli.main import main
    from zoo.models.vit.model import VisionTransformer

    model = VisionTransformer(image_size=16, patch_size=4, num_classes=2, hidden_dim=16,
                              num_layers=2, num_heads=2, intermediate_dim=16,
                              class_names=["cat", "dog"], **config)
    model(np.zeros((1, 16, 16, 3), "uint8"))
    model.save(tmp_path / "m.keras")
    Image.new("RGB", (16, 16), (200, 10, 10)).save(tmp_path / "red.png")
    drawn = {}
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.update(fig=fig))
    try:
        assert main(["classify", "--model", str(tmp_path / "m.keras"), "--attention",
                     str(tmp_path / "r.png"), str(tmp_path / "red.png")]) == 0
    finally:
        monkeypatch.undo()
    label = capsys.readouterr().out.splitlines()[0].split("\t")[1]
    return _texts(drawn["fig"]), label, model


def test_zoo_classify_draws_rollout_for_a_patch_vit(tmp_path, capsys):
    texts, label, _ = _classify_attention(tmp_path, capsys)
    assert "attention rollout over 2 layers, heads averaged" in texts
    assert any(t.startswith(f"predicted: {label} (") for t in texts)


def test_zoo_classify_draws_the_last_layer_class_token_map_for_a_hybrid(tmp_path, capsys):
    texts, label, model = _classify_attention(tmp_path, capsys, stem_filters=[8])
    assert model.is_hybrid
    grid = model.grid_size
    assert (f"class token's attention, last layer, heads averaged,\nover the {grid[0]} x "
            f"{grid[1]} stem map (upsampled)") in texts
    assert any(t.startswith(f"predicted: {label} (") for t in texts)
    heat = model.class_token_attention(np.zeros((2, 16, 16, 3), "uint8"))
    assert heat.shape == (2, *grid) and np.allclose(heat.sum(axis=(1, 2)), 1.0)
    # It is the last block's class-token row, heads averaged, over the patches.
    last = model.attention_maps(np.zeros((2, 16, 16, 3), "uint8"))[-1].mean(axis=1)[:, 0, 1:]
    np.testing.assert_allclose(heat.reshape(2, -1), last / last.sum(1, keepdims=True),
                               rtol=1e-5)


def test_the_attention_map_lies_exactly_over_the_image(tmp_path):
    """An even map over a grey image is one colour up to every edge: no pale band where the
    map stood half a pixel past the image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    image = np.full((32, 32, 3), 128, "uint8")
    fig = plots.plot_attention_overlay(image, np.full((8, 8), 1 / 64, "float32"),
                                       tmp_path / "map.png")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[..., :3].astype(int)
    x0, y0, x1, y1 = (round(v) for v in fig.axes[1].get_window_extent().extents)
    height = pixels.shape[0]
    panel = pixels[height - y1 + 1:height - y0 - 1, x0 + 1:x1 - 1]
    inner = panel[panel.shape[0] // 2, panel.shape[1] // 2]
    for edge in (panel[:2], panel[-2:], panel[:, :2], panel[:, -2:]):
        assert (np.abs(edge - inner) <= 2).all(), (edge.reshape(-1, 3)[:3], inner)


def test_the_confusion_matrix_has_a_title(tmp_path):
    fig = plots.plot_confusion_matrix(np.array([[3, 1], [0, 4]]), ["cat", "dog"],
                                      tmp_path / "confusion.png")
    assert fig.axes[0].get_title() == "confusion matrix, 8 images, top-1 0.8750"
    assert (tmp_path / "confusion.png").stat().st_size > 0
