"""`zoo bench`'s orchestration with fake workers: the plan, the interleaving, the best round,
the skip line, the JSON and the table. Nothing here is timed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zoo import bench
from zoo.bench import WORKS, Job


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
                           say=lines.append)

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
    assert lines[0] == "failed timm (torch) vit-tiny-infer: exit status 1: no torch"
    assert "| failed |" in bench.format_table(results)


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
        assert work.runs and all(system in bench.SYSTEMS for system, _ in work.runs)


def test_the_worker_protocol_reaches_the_orchestrator(monkeypatch):
    """`run_worker` reads the last BENCH_RESULT line of a real subprocess."""
    def fake_run(command, **kwargs):
        assert command[1:4] == ["-m", "zoo.bench_workers", "mt-beam4"]
        assert kwargs["env"]["KERAS_BACKEND"] == "jax"
        stdout = "noise\n" + bench.RESULT_PREFIX + json.dumps([{"rate": 5.0}]) + "\n"
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert bench.run_worker(Job("mt-beam4", "zoo", "jax"), 0.1) == [{"rate": 5.0}]


def test_zoo_bench_help_imports_no_backend():
    code = ("import sys\nfrom zoo.cli import main\n"
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
                    say=lambda line: None)
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
from zoo.bench_workers import torchvision_or_stub
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
