"""`zoo bench`'s orchestration with fake workers: the plan, the interleaving, the best round,
the skip line, the JSON and the table; the GPU works' plan, settings and dry run. Nothing
here is timed; one slow test runs two real dry-run workers of the zoo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.bench import harness as bench
from zoo.bench import report
from zoo.bench.harness import Job
from zoo.bench.works import (FAMILY_WORKS, GPU_SETTINGS, GROUPS, SYSTEMS, WORKS, expand_works,
                             gpu_work_settings)


def _fake_runner(rates: dict, calls: list):
    """A runner that gives, per job, the next rate of its list (None: a failed round)."""
    def run(job: Job) -> list[dict]:
        calls.append(job)
        rate = rates[job.system].pop(0)
        if rate is None:
            return [{"error": "exit status 1: boom"}]
        return [{"rate": rate, "unit": WORKS[job.work].unit}]
    return run


def test_bench_interleaves_rounds_keeps_the_best_and_skips_missing_peers(tmp_path):
    lines: list[str] = []
    calls: list[Job] = []
    rates = {"zoo": [100.0, 130.0, 120.0, 90.0, 95.0, 80.0],
             "hf": [50.0, None, 70.0],
             "ctranslate2": []}
    missing = {"ctranslate2": ["ctranslate2"]}
    output = tmp_path / "out" / "bench.json"
    document = bench.bench(["mt-greedy"], rounds=3, seconds=0.1, output=output,
                           runner=_fake_runner(rates, calls),
                           available=lambda system: missing.get(system, []),
                           say=lines.append, peak=False)

    # Skipped once, with a line naming the system and what it lacks.
    assert "skipped ctranslate2: ctranslate2 not installed (pip install " \
           "'attention-zoo[bench]')" in lines
    assert all(job.system != "ctranslate2" for job in calls)
    # Interleaved: every job once per round, the rounds one after another.
    order = [(job.system, job.backend) for job in calls]
    one_round = [("zoo", "tensorflow"), ("zoo", "jax"), ("hf", "torch")]
    assert order == one_round * 3
    # The zoo's TF rates were 100, 120, 95 (rounds 1-3), JAX 130, 90, 80: best kept.
    by_run = {(r["system"], r["backend"]): r for r in document["results"]}
    assert by_run["zoo", "tensorflow"]["rate"] == 120.0
    assert by_run["zoo", "tensorflow"]["rounds"] == [100.0, 120.0, 95.0]
    assert by_run["zoo", "jax"]["rate"] == 130.0
    # A failed round does not hide the others, nor leaves an error on a measured entry.
    assert by_run["hf", "torch"]["rate"] == 70.0
    assert by_run["hf", "torch"]["rounds"] == [50.0, None, 70.0]
    assert "error" not in by_run["hf", "torch"]

    written = json.loads(output.read_text())
    assert written == document
    assert set(written) == {"device", "versions", "settings", "results"}
    assert written["settings"]["rounds"] == 3 and written["settings"]["rounds_done"] == 3
    assert "python" in written["versions"]
    for result in written["results"]:
        assert {"work", "system", "backend", "rate", "unit"} <= set(result)
        assert result["work"] == "mt-greedy" and result["unit"] == "tokens/s"
    # The table's ratio is the zoo's best backend over the peer: 130 / 70.
    table = next(line for line in lines if line.startswith("| work"))
    assert "70 (zoo 1.86x)" in table
    assert "| mt-greedy | tokens/s | 120 | 130 |" in table


def test_a_job_that_never_measures_says_why_and_has_no_rate():
    lines: list[str] = []
    results = bench.run_rounds([Job("vit-tiny-infer", "timm", "torch")], 2,
                               lambda job: [{"error": "exit status 1: no torch"}],
                               say=lines.append)
    assert results[0]["rate"] is None and results[0]["error"] == "exit status 1: no torch"
    assert lines[:2] == ["round 1/2, job 1/1: timm (torch) vit-tiny-infer ...",
                         "failed timm (torch) vit-tiny-infer: exit status 1: no torch"]
    assert "| failed |" in report.format_table(results)


def test_variants_are_kept_apart_and_a_failed_round_leaves_no_row():
    outcomes = [[{"error": "exit status 1: boom"}],
                [{"variant": "batch 1", "rate": 2.0}, {"variant": "batch 32", "rate": 20.0}]]
    results = bench.run_rounds([Job("mt-served", "zoo", "tensorflow")], 2,
                               lambda job: outcomes.pop(0), say=lambda line: None)
    assert [(r["variant"], r["rate"]) for r in results] == [("batch 1", 2.0), ("batch 32", 20.0)]


def test_plan_refuses_an_unknown_work_and_rounds_below_one():
    with pytest.raises(ValueError, match="unknown work 'vit-huge'"):
        bench.plan(["vit-huge"])
    with pytest.raises(ValueError, match="rounds must be at least 1; got 0"):
        bench.run_rounds([], 0, lambda job: [])


def test_every_work_names_known_systems():
    for work in WORKS.values():
        assert work.runs and all(system in SYSTEMS for system, _ in work.runs)


def test_the_worker_protocol_reaches_the_orchestrator(monkeypatch):
    """`run_worker` reads the last BENCH_RESULT line of a real subprocess."""
    def fake_run(command, **kwargs):
        assert command[1:4] == ["-m", "zoo.bench.workers", "mt-beam4"]
        assert kwargs["env"]["KERAS_BACKEND"] == "jax"
        stdout = "noise\n" + bench.RESULT_PREFIX + json.dumps([{"rate": 5.0}]) + "\n"
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert bench.run_worker(Job("mt-beam4", "zoo", "jax"), 0.1) == [{"rate": 5.0}]


def test_zoo_bench_help_imports_no_backend():
    code = ("import sys\nfrom zoo.cli.main import main\n"
            "try:\n    main(['bench', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('heavy', sorted(m for m in ('tensorflow', 'keras', 'jax', 'torch') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert "--rounds" in result.stdout and "heavy []" in result.stdout, result.stderr


def test_a_run_cut_short_keeps_the_rounds_it_finished(tmp_path):
    calls: list[Job] = []

    def runner(job: Job) -> list[dict]:
        calls.append(job)
        if len(calls) == 4:  # the first job of round 2
            raise KeyboardInterrupt
        return [{"rate": float(len(calls))}]

    output = tmp_path / "bench.json"
    with pytest.raises(KeyboardInterrupt):
        bench.bench(["mt-beam4"], rounds=3, output=output, runner=runner,
                    available=lambda system: [] if system != "ctranslate2" else ["x"],
                    say=lambda line: None, peak=False)
    written = json.loads(output.read_text())
    assert written["settings"]["rounds_done"] == 1
    assert [r["rate"] for r in written["results"]] == [1.0, 2.0, 3.0]


def test_a_torchvision_that_does_not_load_is_stubbed_so_marian_imports():
    """PyPI's torchvision beside the CPU torch fails on import ("operator torchvision::nms
    does not exist"), and transformers then cannot import `MarianMTModel`: the bench's HF
    and CTranslate2 workers stand a stub in for it first. In a process of its own, a
    torchvision that raises as that one does."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    script = """
import importlib.abc, importlib.machinery, sys

class Broken(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        raise RuntimeError("operator torchvision::nms does not exist")

sys.meta_path.insert(0, Broken())
try:
    import torchvision
    raise SystemExit("the broken torchvision imported")
except RuntimeError:
    pass
from zoo.bench.steps import torchvision_or_stub
note = torchvision_or_stub()
assert note.startswith("torchvision stubbed (RuntimeError)"), note
assert torchvision_or_stub() == "torchvision stubbed"  # once only
import torchvision.transforms
assert torchvision.transforms.InterpolationMode.BICUBIC is not None
from transformers import MarianMTModel
print("imported", MarianMTModel.__name__)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "imported MarianMTModel" in done.stdout


# ---------------------------------------------------------------------- the GPU works
def test_the_gpu_group_plans_anchors_systems_and_the_default_stays_the_cpu_works():
    jobs = bench.plan(["gpu"], available=lambda system: [], say=lambda line: None)
    planned = {(job.work, job.system, job.backend) for job in jobs}
    vision = {("zoo", "jax"), ("timm", "torch"), ("timm-compiled", "torch"),
              ("keras-hub", "jax")}
    expected = ({("vit-b16-train", *run) for run in vision}
                | {("vit-b16-infer-512", *run) for run in vision}
                | {("mt-base-train", "zoo", "jax"), ("mt-base-train", "keras-hub", "jax"),
                   ("mt-base-train", "hf", "torch")}
                | {(work, system, backend) for work in ("mt-base-greedy", "mt-base-beam4")
                   for system, backend in (("zoo", "jax"), ("hf", "torch"))}
                | {("vit-cifar-small-train", "zoo", "jax"),
                   ("vit-cifar-small-train", "timm", "torch")}
                | {("gpt2-greedy-64", "zoo", "jax"), ("gpt2-greedy-64", "hf", "torch")}
                | {("clip-b32-embed-256", system, backend) for system, backend in (
                    ("zoo", "jax"), ("hf", "torch"), ("keras-hub", "jax"))})
    assert planned == expected and len(jobs) == len(expected)
    # The lent GPU has no TensorFlow: no GPU job may need it.
    assert all(job.backend in ("jax", "torch") for job in jobs)
    # Groups and works mix, each work once; a group name is no work of its own.
    assert expand_works(["vit-b16-train", "gpu", "mt-greedy"]) == (
        ["vit-b16-train"] + [w for w in GROUPS["gpu"] if w != "vit-b16-train"]
        + ["mt-greedy"])
    # Every work but the host's peak (which every run adds) is in exactly one group, and the
    # default (`cpu`) has no GPU work.
    assert sorted(GROUPS["cpu"] + GROUPS["int8"] + GROUPS["gpu"] + GROUPS["text-generation"]
                  + GROUPS["vision-language"] + ("peak",)) == sorted(WORKS)
    assert not set(GROUPS["cpu"]) & set(GROUPS["gpu"])
    assert set(GROUPS["cpu"]) == {"vit-tiny-train", "vit-tiny-infer", "vit-b16-infer",
                                  "mt-greedy", "mt-beam4", "mt-served"}


def test_gpu_work_settings_are_anchors_h100_table():
    settings = {w: gpu_work_settings(w) for w in GROUPS["gpu"]}
    vit_b16 = {"image_size": 224, "patch_size": 16, "num_layers": 12, "hidden_dim": 768,
               "num_heads": 12, "intermediate_dim": 3072, "num_classes": 1000}
    assert settings["vit-b16-train"]["model"] == vit_b16
    assert (settings["vit-b16-train"]["batch"], settings["vit-b16-infer-512"]["batch"]) == (
        256, 512)
    assert settings["vit-b16-train"]["train"] and not settings["vit-b16-infer-512"]["train"]
    for work in ("vit-b16-train", "vit-b16-infer-512", "vit-cifar-small-train"):
        assert (settings[work]["warmup"], settings[work]["timed"]) == (10, 30)
    base = {"vocabulary_size": 32000, "hidden_dim": 512, "num_encoder_layers": 6,
            "num_decoder_layers": 6, "num_heads": 8, "intermediate_dim": 2048}
    train = settings["mt-base-train"]
    assert train["model"] == base and train["train"]
    assert (train["batch"], train["source_tokens"], train["target_tokens"]) == (128, 64, 64)
    for work, beam in (("mt-base-greedy", 1), ("mt-base-beam4", 4)):
        s = settings[work]
        assert s["model"] == base and not s["train"] and s["beam"] == beam
        assert (s["batch"], s["new_tokens"], s["warmup"], s["timed"]) == (64, 64, 5, 20)
    cifar = settings["vit-cifar-small-train"]
    assert cifar["batch"] == 512 == GPU_SETTINGS["vit_cifar_small_batch"]
    with pytest.raises(ValueError, match="'mt-greedy' is no GPU work"):
        gpu_work_settings("mt-greedy")


def test_vit_cifar_small_train_is_the_zoo_architecture():
    """The work's model is zoo/models/vit/architectures.py's "vit-cifar-small" (dropout aside: the bench
    runs without), so that its rate is that of the model the zoo trains."""
    from zoo.models.vit import architectures  # noqa: F401  (registers the architectures)
    from zoo.models.architectures import ARCHITECTURES

    config = dict(ARCHITECTURES["vit-cifar-small"].config)
    config.pop("dropout")
    assert gpu_work_settings("vit-cifar-small-train")["model"] == config


def test_a_dry_run_shrinks_every_gpu_work_and_leaves_the_full_size_alone():
    # (The new families' GPU works shrink to their tiny architectures:
    # tests/zoo/bench/test_family_works.py.)
    for work in [w for w in GROUPS["gpu"] if w not in FAMILY_WORKS]:
        full = gpu_work_settings(work)
        tiny = gpu_work_settings(work, dry_run=True)
        model = tiny["model"]
        layers = [v for k, v in model.items() if k.endswith("_layers")]
        assert layers and set(layers) == {2}, (work, model)
        assert (model["hidden_dim"], model["num_heads"], model["intermediate_dim"]) == (
            64, 2, 128)
        assert (tiny["batch"], tiny["warmup"], tiny["timed"]) == (4, 1, 1)
        assert model.get("vocabulary_size", 0) <= 512 and model.get("image_size", 0) <= 32
        for key in ("source_tokens", "target_tokens", "new_tokens"):
            assert tiny.get(key, 0) <= 8
        # Same keys, same kind of step: the same code runs, only smaller.
        assert set(tiny) == set(full) and tiny["train"] == full["train"]
        assert tiny.get("beam") == full.get("beam")
        assert gpu_work_settings(work) == full  # the constants were not changed


def test_the_json_of_a_gpu_dry_run_records_its_settings_and_each_workers(tmp_path):
    calls: list[Job] = []

    def runner(job: Job) -> list[dict]:
        calls.append(job)
        return [{"rate": 10.0, "unit": WORKS[job.work].unit, "device": "NVIDIA H100",
                 "precision": "bfloat16 mixed",
                 "settings": gpu_work_settings(job.work, dry_run=True)}]

    lines: list[str] = []
    document = bench.bench(["gpu"], rounds=1, output=tmp_path / "gpu.json", runner=runner,
                           available=lambda system: [], say=lines.append, dry_run=True, peak=False)
    settings = document["settings"]
    assert settings["dry_run"] is True
    assert settings["command"] == "zoo bench --work gpu --rounds 1 --seconds 3 --no-peak --dry-run"
    assert settings["works"] == list(GROUPS["gpu"])
    assert settings["gpu"]["works"]["vit-b16-train"]["batch"] == 4
    assert settings["gpu"]["dry_run"]["hidden_dim"] == 64
    assert len(calls) == 22
    for result in document["results"]:
        assert result["device"] == "NVIDIA H100" and result["precision"] == "bfloat16 mixed"
        settings = result["settings"]
        assert settings.get("batches", [settings.get("batch")]) == [4]  # GPT-2: batches
        assert len(result["wall_s"]) == 1
    # The CPU works' JSON has no GPU settings.
    cpu = bench.bench(["mt-greedy"], rounds=1, output=tmp_path / "cpu.json",
                      runner=lambda job: [{"rate": 1.0}], available=lambda system: [],
                      say=lambda line: None, peak=False)
    assert "gpu" not in cpu["settings"] and cpu["settings"]["dry_run"] is False


def test_full_size_gpu_works_without_a_gpu_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "gpu_names", lambda: [])
    lines: list[str] = []
    bench.bench(["mt-base-beam4"], rounds=1, output=tmp_path / "b.json",
                runner=lambda job: [{"rate": 1.0}], available=lambda system: [],
                say=lines.append, peak=False)
    assert any(line.startswith("no GPU found (nvidia-smi): mt-base-beam4 will run at full "
                               "size") for line in lines)


def test_the_worker_gets_dry_run_and_the_cli_takes_the_gpu_group(monkeypatch):
    def fake_run(command, **kwargs):
        assert command[3:6] == ["vit-b16-train", "zoo", "jax"] and command[-1] == "--dry-run"
        assert kwargs["env"]["KERAS_BACKEND"] == "jax"
        return subprocess.CompletedProcess(
            command, 0, stdout=bench.RESULT_PREFIX + '[{"rate": 2.0}]\n', stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    job = Job("vit-b16-train", "zoo", "jax")
    assert bench.run_worker(job, 0.1, dry_run=True) == [{"rate": 2.0}]

    import argparse

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    seen: dict = {}
    monkeypatch.setattr(bench, "bench", lambda works, **kwargs: seen.update(
        works=works, **kwargs))
    bench.main(parser.parse_args(["--work", "gpu", "--dry-run", "--rounds", "2"]))
    assert seen["works"] == ["gpu"] and seen["dry_run"] is True and seen["rounds"] == 2
    bench.main(parser.parse_args([]))
    assert seen["works"] == ["cpu"] and seen["dry_run"] is False


def test_a_run_cut_short_within_a_round_keeps_the_jobs_it_finished(tmp_path):
    """On a lent GPU a round can outlast the command: the JSON is written after every job."""
    calls: list[Job] = []

    def runner(job: Job) -> list[dict]:
        calls.append(job)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return [{"rate": float(len(calls))}]

    output = tmp_path / "bench.json"
    with pytest.raises(KeyboardInterrupt):
        bench.bench(["mt-base-beam4", "mt-base-greedy"], rounds=2, output=output,
                    runner=runner, available=lambda system: [], say=lambda line: None, peak=False)
    written = json.loads(output.read_text())
    assert written["settings"]["rounds_done"] == 0
    assert [(r["work"], r["system"], r["rate"]) for r in written["results"]] == [
        ("mt-base-beam4", "zoo", 1.0), ("mt-base-beam4", "hf", 2.0)]


def test_device_names_the_gpus_that_nvidia_smi_lists(tmp_path, monkeypatch):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\n[ \"$1\" = --query-gpu=name ] || exit 9\n"
                    "echo 'NVIDIA H100 80GB HBM3'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert report.gpu_names() == ["NVIDIA H100 80GB HBM3"]
    assert report.device().endswith("CPUs; NVIDIA H100 80GB HBM3")
    tool.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n")
    assert report.gpu_names() == [] and report.device().endswith(" CPUs")


def test_gpu_works_choose_bf16_on_a_gpu_unless_told(monkeypatch):
    from zoo.bench import gpu as bench_gpu

    monkeypatch.delenv("ZOO_BENCH_PRECISION", raising=False)
    assert (bench_gpu.precision(True), bench_gpu.precision(False)) == ("bfloat16", "float32")
    monkeypatch.setenv("ZOO_BENCH_PRECISION", "bfloat16")
    assert bench_gpu.precision(False) == "bfloat16"
    monkeypatch.setenv("ZOO_BENCH_PRECISION", "float16")
    with pytest.raises(ValueError, match="ZOO_BENCH_PRECISION must be one of"):
        bench_gpu.precision(True)


_NO_TENSORFLOW = """
import importlib.abc, sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    # As on the lent GPU machine, which has no TensorFlow.
    def find_spec(self, name, path, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}")


sys.meta_path.insert(0, _NoTensorFlow())
"""


@pytest.mark.slow
def test_a_dry_run_of_the_zoo_trains_tiny_vit_b16_and_mt_base_without_tensorflow(
        tmp_path, monkeypatch):
    """`zoo bench --dry-run` as the GPU command runs it, the zoo's jobs only, each in its own
    worker process where TensorFlow cannot be imported (the GPU machine has none): a tiny
    train step of each, one warm-up and one timed, in float32 on this CPU."""
    pytest.importorskip("jax")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NO_TENSORFLOW)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), str(Path(bench.__file__).resolve().parents[2])]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.delenv("ZOO_BENCH_PRECISION", raising=False)
    lines: list[str] = []
    document = bench.bench(["vit-b16-train", "mt-base-train"], rounds=1,
                           output=tmp_path / "dry.json", dry_run=True, say=lines.append,
                           available=lambda system: [] if system == "zoo" else ["peer"], peak=False)
    results = {r["work"]: r for r in document["results"]}
    assert set(results) == {"vit-b16-train", "mt-base-train"}, lines
    for work, result in results.items():
        assert result["system"] == "zoo" and result["backend"] == "jax"
        assert result["rate"] is not None and result["rate"] > 0, result.get("error")
        assert result["precision"] == "float32" and result["device"]
        assert result["settings"] == gpu_work_settings(work, dry_run=True)
    assert results["mt-base-train"]["unit"] == "target tokens/s"
