"""benchmarks/gpu_slot.sh, the one command of a GPU loan, runs end to end on the CPU in its
dry-run form (tiny sizes, one epoch) as the lent machine runs it: the JAX backend and no
TensorFlow (benchmarks/without_tensorflow/sitecustomize.py), so that the next loan is not spent
finding its bugs; and it fails, naming the step, when a step fails."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.training.image_fixtures import cifar_subset
from zoo.bench.slot import bench_outcomes

REPO = Path(__file__).resolve().parents[3]
WITHOUT_TENSORFLOW = REPO / "benchmarks" / "without_tensorflow"
TRAININGS = ("vit-qk", "vit-cct7", "vit-vgg", "translator")


def lent_machine_env(view: Path | None = None, **settings: str) -> dict:
    """The environment of a process run as on the lent GPU machine: TensorFlow absent, the
    zoo not installed (the checkout on PYTHONPATH, or the package `view` of it), the JAX
    backend, and `python3` this interpreter (the script calls it by that name)."""
    path = [str(WITHOUT_TENSORFLOW), str(view) if view else str(REPO)]
    safe = {"PYTHONSAFEPATH": "1"} if view else {}
    return {**os.environ, **settings, **safe, "KERAS_BACKEND": "jax",
            "PYTHONPATH": os.pathsep.join(path),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def package_view(folder: Path) -> Path:
    """`folder`/view: the checkout as the lent machine reads it (benchmarks/package_view.sh)."""
    view = folder / "view"
    subprocess.run(["bash", str(REPO / "benchmarks" / "package_view.sh"), str(view)],
                   check=True, timeout=60)
    return view


def test_the_checkout_is_read_through_a_package_view(tmp_path):
    # The lent machine does not install the project: the checkout itself has no `zoo.layers`
    # (pyproject.toml maps it to layers/), which ended every step of the first loan at once.
    check = [sys.executable, "-c", "import zoo.layers, zoo.training.files, zoo.saved_models"]
    bare = subprocess.run(check, env=lent_machine_env(), cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert "No module named 'zoo.layers'" in bare.stderr, bare.stderr[-2000:]
    view = package_view(tmp_path)
    seen = subprocess.run([*check[:2], check[2] + "; print(zoo.layers.__file__)"],
                          env=lent_machine_env(view), cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert seen.stdout.strip() == str(view / "zoo" / "layers" / "__init__.py")
    assert not list(REPO.glob("zoo/layers")), "nothing is written in the checkout"


def run_slot(env: dict, timeout: float) -> subprocess.CompletedProcess:
    """benchmarks/gpu_slot.sh in a session of its own; past `timeout` every process of that
    session (its background trainings too, which outlive a killed bash) is killed, then the
    test fails."""
    command = ["bash", str(REPO / "benchmarks" / "gpu_slot.sh")]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            try:
                if os.getsid(pid) == process.pid:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        stdout, stderr = process.communicate()
        pytest.fail(f"gpu_slot.sh ran past {timeout} s:\n{stdout[-3000:]}{stderr[-3000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_the_training_path_imports_and_fits_without_tensorflow(tmp_path):
    # The seconds-long guard of the dry run below: everything the command's trainings and
    # bench import, and one resumable fit, in a process that cannot import TensorFlow.
    code = f"""
import importlib.util, sys
from pathlib import Path
assert importlib.util.find_spec("tensorflow") is None
try:
    import tensorflow
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("TensorFlow was importable")
import numpy as np, keras
import zoo.cli.main, zoo.recipes.vit, zoo.recipes.translator, zoo.bench.workers, zoo.bench.gpu
import zoo.bench.decoding, zoo.bench.vision_language  # the GPU works of the new families
import zoo.models.causal_lm.causal_lm, zoo.models.clip.model, zoo.models.captioner.captioner
from zoo.training.run import fit_resumably
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
history, _ = fit_resumably(model, np.ones((8, 3)), Path({str(tmp_path)!r}), epochs=1,
                           initial_epoch=0, y=np.zeros((8, 1)), batch_size=4)
print("EPOCHS", len(history.history["loss"]))
print("TF_LOADED", sorted(m for m in sys.modules if m.startswith("tensorflow")))
"""
    view = package_view(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], env=lent_machine_env(view),
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "EPOCHS 1" in done.stdout and "TF_LOADED []" in done.stdout, done.stdout
    # Said in one line, and no TensorBoard folder.
    assert done.stdout.count("TensorBoard logs skipped") == 1, done.stdout
    assert not (tmp_path / "logs").exists()
    assert (tmp_path / "checkpoints").is_dir()


@pytest.mark.parametrize("results, absent, expected", [
    # The zoo measured, the peer's worker failed: the peer is skipped with the worker's error.
    ([{"work": "vit-cifar-small-train", "system": "zoo", "backend": "jax", "rate": 9.0,
       "unit": "images/s"},
      {"work": "vit-cifar-small-train", "system": "timm", "backend": "torch", "rate": None,
       "error": "exit status 1: ImportError: x"}], [],
     [("ok", "9 images/s"), ("skipped", "exit status 1: ImportError: x")]),
    # The peer is not installed (no entry): skipped, naming what is missing.
    ([{"work": "vit-cifar-small-train", "system": "zoo", "backend": "jax", "rate": 9.0,
       "unit": "images/s"}], ["timm"],
     [("ok", "9 images/s"), ("skipped", "not installed (timm)")]),
    # The zoo's own worker failed: the one outcome that fails the command.
    ([{"work": "vit-cifar-small-train", "system": "zoo", "backend": "jax", "rate": None,
       "error": "exit status 1: boom"}], ["timm"],
     [("failed", "exit status 1: boom"), ("skipped", "not installed (timm)")]),
    # The bench stopped (its time limit) before the zoo's job: failed.
    ([], [], [("failed", "no result: the bench stopped before it"),
              ("skipped", "no result: the bench stopped before it")]),
])
def test_bench_outcomes_fail_only_for_the_zoos_own_jobs(results, absent, expected):
    outcomes = bench_outcomes(results, ["vit-cifar-small-train"],
                              missing=lambda system: [m for m in absent if system == m])
    assert [job for job, _, _ in outcomes] == ["zoo (jax) vit-cifar-small-train",
                                               "timm (torch) vit-cifar-small-train"]
    assert [(status, detail) for _, status, detail in outcomes] == expected


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
    # The loan's deadline (540 s) is the GPU's; a 2-core host may need longer for the dry
    # run's four trainings side by side, their XLA compilations most of it: about 95 s in all
    # at a load of 4 (235 s before the dry run compiled with LLVM's optimisations off and
    # gave the translator two batch shapes instead of ten), 1,333 s once at a load of 16.
    env = lent_machine_env(DRY_RUN="1", OUT=str(out), RUNS=str(runs), DATA=str(data),
                           SLOT_SECONDS="1800")
    done = run_slot(env, timeout=1900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.rstrip().endswith("done"), done.stdout[-3000:]

    bench = json.loads((out / "bench-gpu.json").read_text())
    rates = [r for r in bench["results"] if r.get("system") == "zoo"]
    assert rates and all(r["rate"] > 0 for r in rates), bench["results"]

    parts = sorted(out.glob("runs.tgz.part-*"))
    assert parts and all(p.stat().st_size <= 15 * 2 ** 20 for p in parts)
    assert len(list(out.iterdir())) <= 8  # the loan brings back at most 8 files
    joined = io.BytesIO(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(fileobj=joined, mode="r:gz") as archive:
        names = set(archive.getnames())
        for run in TRAININGS:
            assert {f"./{run}.log", f"./{run}/metrics.json"} <= names
        # The better ViT by validation top-1 comes back, and the translator.
        back = tmp_path / "back"
        archive.extractall(back, filter="data")
    steps = (back / "steps.log").read_text()
    for run in TRAININGS:
        assert f"training {run}: ok" in steps, steps
        # Trained without TensorFlow: no TensorBoard logs, and one line saying so.
        assert "TensorBoard logs skipped" in (back / f"{run}.log").read_text()
    assert "bench zoo (jax) vit-cifar-small-train: ok" in steps, steps
    assert "failed" not in steps, steps
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


@pytest.mark.slow
def test_a_failed_training_fails_the_command_naming_it(tmp_path):
    # A second call on a warm machine finds the bench written and goes to the trainings, which
    # here fail at once (no data): the command packs their logs and exits 1 naming each.
    out, runs = tmp_path / "out", tmp_path / "runs"
    out.mkdir()
    (out / "bench-gpu.json").write_text(json.dumps({"results": [
        {"work": "vit-cifar-small-train", "system": "zoo", "backend": "jax", "rate": 5.0,
         "unit": "images/s"}]}))
    env = lent_machine_env(DRY_RUN="1", OUT=str(out), RUNS=str(runs),
                           DATA=str(tmp_path / "no-data"))
    done = run_slot(env, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.rstrip().splitlines()[-1]
    assert "FAILED" in last and "done" not in last, done.stdout[-3000:]
    for run in TRAININGS:
        assert f"training {run}" in last
    steps = (runs / "steps.log").read_text()
    assert "bench zoo (jax) vit-cifar-small-train: ok" in steps
    assert "training translator: failed: exit 2: " in steps, steps
    assert sorted(out.glob("runs.tgz.part-*")), "the logs come back all the same"
