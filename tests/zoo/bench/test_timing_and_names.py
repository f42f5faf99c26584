"""The harness's timing functions (`zoo.bench.steps`) and the one naming of results
(`zoo.bench.report.result_name`), which every script in benchmarks/ uses."""

from __future__ import annotations

import datetime
import json

import pytest

from zoo.bench import report, steps


def test_seconds_per_call_leaves_the_warm_up_out(clock):
    calls = []

    def step():
        calls.append(clock.now)
        clock.now += 10.0 if len(calls) <= 2 else 0.5  # two slow warm-up calls

    assert steps.seconds_per_call(step, calls=4, warmup=2) == pytest.approx(0.5)
    assert len(calls) == 6


@pytest.mark.parametrize("durations, rate, calls", [
    ([20.0, 0.5, 0.5], 2.0, 8),      # a slow first call (tracing) only: 3 s of timed calls
    ([20.0, 4.0, 4.0], 0.25, 3),     # the last warm-up call over 3 s: one timed call
    ([20.0, 2.9, 2.9], 1 / 2.9, 5),  # just under: the usual three calls at least
])
def test_measure_times_one_call_of_a_step_slower_than_its_seconds(clock, durations, rate,
                                                                 calls):
    made = []

    def step():
        clock.now += durations[min(len(made), len(durations) - 1)]
        made.append(clock.now)

    assert steps.measure(step, 1, 3.0, warmup=2, min_calls=3) == pytest.approx(rate)
    assert len(made) == calls


def test_measure_without_seconds_makes_its_calls_however_slow(clock):
    # benchmarks/train_step_speed.py times a count of steps: `seconds` 0, `min_calls` N.
    made = []

    def step():
        clock.now += 20.0
        made.append(clock.now)

    assert steps.measure(step, 1, 0.0, warmup=2, min_calls=4) == pytest.approx(1 / 20.0)
    assert len(made) == 6


def test_interleaved_reverses_the_order_every_other_round(clock):
    order = []

    def step(name, cost):
        def run():
            order.append(name)
            clock.now += cost
        return run

    times = steps.interleaved({"a": step("a", 1.0), "b": step("b", 3.0)}, rounds=3, calls=2)
    assert order == ["a", "a", "b", "b", "b", "b", "a", "a", "a", "a", "b", "b"]
    assert times == {"a": [1.0, 1.0, 1.0], "b": [3.0, 3.0, 3.0]}


@pytest.mark.parametrize("call", [lambda: steps.seconds_per_call(lambda: None, calls=0),
                                  lambda: steps.interleaved({"a": lambda: None}, rounds=0),
                                  lambda: steps.Stopwatch().stop()])
def test_timing_refuses_what_cannot_be_timed(call):
    with pytest.raises((ValueError, RuntimeError), match="got 0|before start"):
        call()


def test_the_stopwatch_times_a_span(clock):
    with steps.Stopwatch() as watch:
        clock.now += 2.5
    assert watch.seconds == 2.5
    watch.start()
    clock.now += 1.0
    assert watch.stop() == 1.0


@pytest.mark.parametrize("flags, gpus, expected", [
    (["sse4_2", "avx2", "avx512f", "amx_tile"], [], "avx512"),
    (["sse4_2", "avx2"], [], "avx2"),
    ([], ["NVIDIA H100 80GB HBM3"], "gpu-nvidia-h100-80gb-hbm3"),
    (["avx2"], ["NVIDIA H200", "NVIDIA H200"], "gpu-2x-nvidia-h200"),
])
def test_the_host_kind_is_the_gpu_else_the_widest_vector_extension(flags, gpus, expected):
    assert report.host_kind(flags, gpus) == expected


def test_a_cpu_without_avx_is_named_by_its_architecture(monkeypatch):
    monkeypatch.setattr(report.platform, "machine", lambda: "aarch64")
    assert report.host_kind([], []) == "cpu-aarch64"


@pytest.mark.parametrize("script, variant, host, expected", [
    ("beam_step", "tensorflow", "avx2", "beam_step-tensorflow-avx2-2026-11-25"),
    ("/x/benchmarks/startup_time.py", None, "avx512", "startup_time-avx512-2026-11-25"),
    ("step_profile", "ViT tiny / train", "gpu-nvidia-h100",
     "step_profile-vit-tiny-train-gpu-nvidia-h100-2026-11-25"),
])
def test_result_names_say_script_variant_host_and_date(script, variant, host, expected):
    name = report.result_name(script, variant, host, datetime.date(2026, 11, 25))
    assert name == expected
    parsed = report.RESULT_NAME.match(name + ".json").groupdict()
    assert (parsed["host"], parsed["date"]) == (host, "2026-11-25")


@pytest.mark.parametrize("name", ["Beam-Step", "beam step", ""])
def test_a_script_name_that_the_pattern_cannot_read_back_is_refused(name):
    with pytest.raises(ValueError, match="got"):
        report.result_name(name, host="avx2")


def test_write_benchmark_adds_the_machine_and_keeps_what_the_script_wrote(tmp_path):
    said = []
    path = report.write_benchmark("beam_step", {"results": [1], "device": "mine"},
                                  output=tmp_path / "out.json", say=said.append)
    written = json.loads(path.read_text())
    assert written["results"] == [1] and written["device"] == "mine"
    assert {"versions", "date", "command"} <= set(written)
    assert said == [f"wrote {path}"]


def test_zoo_bench_names_its_output_as_every_script_does():
    name = report.default_output().name
    assert report.RESULT_NAME.match(name).group("script") == "bench"


def test_write_benchmark_names_its_file_in_a_folder_it_is_given(tmp_path):
    path = report.write_benchmark("/x/benchmarks/beam_step.py", {"results": []},
                                  variant="jax", output=tmp_path, say=lambda line: None)
    assert path.parent == tmp_path
    parsed = report.RESULT_NAME.match(path.name)
    assert parsed and (parsed["script"], parsed["variant"]) == ("beam_step", "jax")
