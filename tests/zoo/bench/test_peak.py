"""The host's peak in `zoo bench`: the peak jobs planned beside the works, each work's
achieved FLOP/s and fraction of its backend's peak in its precision, in the JSON and the
printed table; and a real (tiny) peak measurement."""

from __future__ import annotations

import importlib.util
import json

import pytest

from zoo.bench import harness as bench
from zoo.bench import peak
from zoo.bench.harness import Job
from zoo.bench.works import WORKS, flops_per_unit

PEAKS = {("tensorflow", "float32"): 100.0, ("tensorflow", "bfloat16"): 400.0,
         ("jax", "float32"): 80.0, ("jax", "bfloat16"): 70.0}


def _runner(calls: list):
    def run(job: Job) -> list[dict]:
        calls.append(job)
        if job.work == "peak":
            return [{"variant": p, "rate": PEAKS[job.backend, p], "unit": "GFLOP/s",
                     "precision": p, "detail": "4096^3 product on cpu"}
                    for p in peak.PRECISIONS if (job.backend, p) in PEAKS]
        rate = {"zoo": 100.0, "hf": 50.0}.get(job.system, 10.0)
        return [{"rate": rate, "unit": WORKS[job.work].unit, "precision": "float32"}]
    return run


def test_a_bench_measures_the_peak_and_gives_every_counted_work_its_fraction(tmp_path):
    calls: list[Job] = []
    lines: list[str] = []
    present = {"tensorflow", "jax", "torch"}
    if not present <= {m for m in present if importlib.util.find_spec(m)}:
        pytest.skip("the peak is planned only for installed backends")
    output = tmp_path / "bench.json"
    document = bench.bench(["vit-tiny-train", "mt-greedy"], rounds=1, output=output,
                           runner=_runner(calls), available=lambda system: [],
                           say=lines.append)
    # One peak job per backend the works use, first in the round.
    assert [(j.work, j.backend) for j in calls[:3]] == [
        ("peak", "tensorflow"), ("peak", "jax"), ("peak", "torch")]
    assert all(j.work != "peak" for j in calls[3:])
    assert json.loads(output.read_text()) == document
    assert document["settings"]["cpu_flags"] == bench.report.cpu_flags()
    results = {(r["work"], r["system"], r["backend"], r.get("variant")): r
               for r in document["results"]}
    zoo_tf = results["vit-tiny-train", "zoo", "tensorflow", None]
    # 100 images/s x 0.752 GFLOP an image against TensorFlow's 100 GFLOP/s in float32.
    assert zoo_tf["flops_per_unit"] == flops_per_unit("vit-tiny-train")
    assert zoo_tf["achieved_gflops"] == pytest.approx(100 * zoo_tf["flops_per_unit"] / 1e9)
    assert zoo_tf["fraction_of_peak"] == pytest.approx(zoo_tf["achieved_gflops"] / 100.0)
    assert zoo_tf["peak_of"] == "tensorflow float32"
    assert results["vit-tiny-train", "zoo", "jax", None]["peak_of"] == "jax float32"
    # The torch peak failed (no rate in the fake): timm falls back to the best backend's.
    assert results["vit-tiny-train", "timm", "torch", None]["peak_of"] == "best float32"
    assert results["vit-tiny-train", "timm", "torch", None]["peak_gflops"] == 100.0
    # CTranslate2's products cannot be timed alone: the best backend's peak.
    assert results["mt-greedy", "ctranslate2", "ctranslate2", None]["peak_of"] == "best float32"
    # Printed: the peaks, then every counted work's GFLOP/s and share.
    text = "\n".join(lines)
    assert "| 4096^3 product on cpu | tensorflow | bfloat16 | 400.0 |" in text
    assert f"| {zoo_tf['achieved_gflops']:,.1f} | 75% of tensorflow float32 |" in text
    # The main table does not list the peak as a work.
    table = next(line for line in lines if line.startswith("| work | unit"))
    assert "peak" not in table


def test_a_bfloat16_result_is_set_against_the_bfloat16_peak_and_uncounted_works_are_not():
    results = [{"work": "peak", "system": "matmul", "backend": "tensorflow", "variant": p,
                "rate": PEAKS["tensorflow", p]} for p in peak.PRECISIONS]
    results += [
        {"work": "vit-tiny-infer", "system": "zoo", "backend": "tensorflow", "rate": 800.0,
         "precision": "bfloat16"},
        {"work": "mt-greedy-int8", "system": "ctranslate2", "backend": "ctranslate2",
         "variant": "int8_bfloat16", "rate": 5000.0},
        {"work": "mt-served", "system": "zoo", "backend": "tensorflow", "rate": None}]
    out = {r["work"]: r for r in peak.with_fractions(results)}
    infer = out["vit-tiny-infer"]
    assert infer["peak_of"] == "tensorflow bfloat16" and infer["peak_gflops"] == 400.0
    assert infer["fraction_of_peak"] == pytest.approx(800 * flops_per_unit("vit-tiny-infer")
                                                      / 400e9)
    assert peak.peak_precision(out["mt-greedy-int8"]) == "bfloat16"
    assert "fraction_of_peak" not in out["mt-greedy-int8"]  # int8 work: no FLOP count
    assert "flops_per_unit" not in out["mt-served"]
    assert results[2] == {"work": "vit-tiny-infer", "system": "zoo", "backend": "tensorflow",
                          "rate": 800.0, "precision": "bfloat16"}  # copies, not changed


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_the_peak_is_measured_in_both_precisions():
    measured = peak.measure_peak("torch", 0.0, dry_run=True)
    assert [r["variant"] for r in measured] == ["float32", "bfloat16"]
    for r in measured:
        assert r["rate"] > 0 and r["unit"] == "GFLOP/s" and r["detail"].startswith("256^3")
    with pytest.raises(ValueError, match="no peak measurement for backend 'ctranslate2'"):
        peak.measure_peak("ctranslate2", 0.0, dry_run=True)


@pytest.mark.parametrize("call_seconds, full, seconds, size", [
    (0.02, 4096, 3.0, 4096),   # float32 on 2 AVX2 cores: a 4096^3 call takes about 1.3 s
    (0.2, 4096, 3.0, 2048),    # 12.8 s at 4096, 1.6 s at 2048
    (1.0, 4096, 3.0, 1024),    # bfloat16 emulated (PyTorch on AVX2): 64 s at 4096
    (30.0, 8192, 3.0, 1024),   # never below the size that was timed
    (0.001, 8192, 3.0, 8192),  # a GPU's
    (0.02, 4096, 0.0, 2048),   # no seconds given: a call of at most about one second
])
def test_a_slow_product_is_measured_smaller(call_seconds, full, seconds, size):
    assert peak.peak_size(call_seconds, full, seconds) == size


def test_where_bfloat16_is_slower_than_float32_a_bfloat16_work_is_set_against_float32():
    # An AVX2 host (2026-11-29): PyTorch's bfloat16 product at 0.9 GFLOP/s, float32 at 115;
    # timm under autocast reached 4.4 GFLOP/s, which no bfloat16 peak of 0.9 can bound.
    rates = {("torch", "float32"): 115.0, ("torch", "bfloat16"): 0.9,
             ("tensorflow", "float32"): 130.0, ("tensorflow", "bfloat16"): 69.6}
    results = [{"work": "peak", "system": "matmul", "backend": b, "variant": p, "rate": r}
               for (b, p), r in rates.items()]
    results += [{"work": "vit-tiny-train", "system": s, "backend": b, "rate": 10.0,
                 "precision": "bfloat16"} for s, b in (("timm", "torch"), ("zoo", "tensorflow"))]
    timm, zoo = peak.with_fractions(results)[-2:]
    assert timm["peak_of"] == "torch float32" and zoo["peak_of"] == "tensorflow float32"
    assert timm["fraction_of_peak"] == pytest.approx(timm["achieved_gflops"] / 115.0)
    assert zoo["fraction_of_peak"] == pytest.approx(zoo["achieved_gflops"] / 130.0)
