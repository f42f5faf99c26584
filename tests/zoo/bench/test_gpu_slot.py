"""benchmarks/gpu_slot.sh, the one command of a GPU loan, runs end to end on the CPU in its
dry-run form (tiny sizes, one epoch, the JAX backend the lent machine has), so that the next
loan is not spent finding its bugs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.training.image_fixtures import cifar_subset

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_dry_run_brings_back_bench_logs_metrics_and_the_best_models(
        tmp_path, tmp_path_factory, shared_data):
    pytest.importorskip("jax")
    data = tmp_path / "data"
    (data / "cifar10").mkdir(parents=True)
    with tarfile.open(data / "cifar10" / "cifar10-train-jpg.tar.gz", "w:gz") as archive:
        archive.add(cifar_subset(tmp_path_factory, shared_data), arcname="train")
    (data / "multi30k").symlink_to(shared_data / "multi30k")
    out, runs = tmp_path / "out", tmp_path / "runs"
    # The loan's deadline (540 s) is the GPU's; a loaded 2-core host needs longer for the
    # dry run's three trainings side by side.
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(out), "RUNS": str(runs),
           "DATA": str(data), "SLOT_SECONDS": "840"}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_slot.sh")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    bench = json.loads((out / "bench-gpu.json").read_text())
    rates = [r for r in bench["results"] if r.get("system") == "zoo"]
    assert rates and all(r["rate"] > 0 for r in rates), bench["results"]

    parts = sorted(out.glob("runs.tgz.part-*"))
    assert parts and all(p.stat().st_size <= 15 * 2 ** 20 for p in parts)
    assert len(list(out.iterdir())) <= 8  # the loan brings back at most 8 files
    joined = io.BytesIO(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(fileobj=joined, mode="r:gz") as archive:
        names = set(archive.getnames())
        for run in ("vit-qk", "vit-cct7", "vit-vgg", "translator"):
            assert {f"./{run}.log", f"./{run}/metrics.json"} <= names
        # The better ViT by validation top-1 comes back, and the translator.
        back = tmp_path / "back"
        archive.extractall(back, filter="data")
    top1 = {run: json.loads((back / run / "metrics.json").read_text())["validation"]["top1"]
            for run in ("vit-qk", "vit-cct7", "vit-vgg")}
    brought = {p.parent.name for p in back.glob("*/final.keras")}
    assert "translator" in brought and len(brought) == 2
    (best,) = brought - {"translator"}
    assert top1[best] == max(top1.values())

    import zoo

    vit = zoo.load(str(back / best / "final.keras"))
    assert vit.num_classes == 10
    translator = zoo.load(str(back / "translator" / "final.keras"))
    assert isinstance(translator.translate(["A dog runs."], beam_size=1)[0], str)
    # Without optimizer state: the weights alone.
    weights = sum(w.numpy().nbytes for w in vit.weights)
    assert (back / best / "final.keras").stat().st_size < 1.5 * weights
