"""`zoo bench`: the zoo against timm, keras-hub, Hugging Face and CTranslate2, in one run.

    zoo bench [--work NAME ...] [--rounds N] [--seconds S] [--precision P] [--no-peak]
              [--output FILE.json] [--dry-run]

Every (system, work) runs in a process of its own (one Keras backend per process:
`zoo.bench.workers`; the GPU works' in `zoo.bench.gpu`), and the whole list is repeated
`--rounds` times, interleaved, so that
noise from other jobs on the machine hits every system alike; each one's best round is kept.
The table gives every rate and its ratio to the zoo's fastest backend on the same work; the
JSON holds the device, the versions, the settings and the results. A peer that is not
installed (`pip install attention-zoo[bench]`) is skipped with a line saying so.

Two groups of works: `--work cpu` (the default) sized for the 2-core CPU machines, and
`--work gpu`, ANCHORS.md's "Measured on a lent H100" table (`zoo.bench.works`, which holds
every work and its settings): on a GPU in
bfloat16 mixed precision, on a CPU in float32. `--dry-run` shrinks the GPU works to
`DRY_RUN` (2 layers, width 64, batch 4, 1 warm-up and 1 timed step) so that the whole GPU
command can be tried on a CPU before a loan; the CPU works keep their shapes and run one
warm-up and one timed call.

Every run also measures the host's peak (`zoo.bench.peak`: a large matrix product in float32
and bfloat16 on each backend the works use, interleaved with them) and reports each work's
achieved FLOP/s (its count from its shapes, `zoo.bench.works.flops_per_unit`) as a fraction of
it; `--no-peak` leaves it out. `--precision bfloat16` runs the works' products in bfloat16
(Keras' `mixed_bfloat16`, timm under `torch.autocast`, Hugging Face's model in bfloat16,
CTranslate2's `bfloat16` and `int8_bfloat16` compute types); the GPU works' default is
bfloat16 on a GPU and float32 on a CPU (`zoo.bench.gpu.precision`).

The table and the JSON are written by `zoo.bench.report`. This module imports nothing heavy:
the workers do, each in its own process.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from zoo.bench import peak as host_peak
from zoo.bench import report
from zoo.recipes.checks import POSITIVE_INT, SECONDS, checked_type
from zoo.training.cpu_features import has_native_bfloat16
from zoo.bench.works import (DRY_RUN, GPU_SETTINGS, GROUPS, PEAK_BACKENDS, PEAK_SYSTEM,
                             SETTINGS, SYSTEMS, WORKS, expand_works, flops_per_unit,
                             gpu_work_settings)

RESULT_PREFIX = "BENCH_RESULT "


@dataclasses.dataclass(frozen=True)
class Job:
    """One (work, system, backend): one worker process per round."""

    work: str
    system: str
    backend: str

    @property
    def label(self) -> str:
        return f"{self.system} ({self.backend}) {self.work}"


def missing_modules(system: str) -> list[str]:
    """The modules `system` needs that this environment lacks (imports none of them)."""
    return [m for m in SYSTEMS[system] if importlib.util.find_spec(m) is None]


def peak_jobs(jobs: Sequence[Job]) -> list[Job]:
    """The `peak` jobs that `jobs` need: one per backend of theirs that `zoo.bench.peak`
    measures and this environment has, where some job's work has a FLOP count (CTranslate2's
    is set against the best backend's; none where `peak` itself is among `jobs`)."""
    if any(job.work == "peak" for job in jobs) or not any(
            flops_per_unit(job.work) is not None for job in jobs):
        return []
    backends = [b for b in PEAK_BACKENDS if any(job.backend == b for job in jobs)]
    if not backends:
        backends = [b for b in PEAK_BACKENDS if importlib.util.find_spec(b) is not None][:1]
    return [Job("peak", PEAK_SYSTEM, b) for b in backends
            if importlib.util.find_spec(b) is not None]


def plan(works: Sequence[str], available: Callable[[str], list[str]] = missing_modules,
         say: Callable[[str], None] = print) -> list[Job]:
    """The jobs of `works` (groups expanded), less those whose system is missing (each skip
    said once)."""
    jobs, said = [], set()
    for name in expand_works(works):
        if name not in WORKS:
            raise ValueError(f"unknown work {name!r}; expected one of {', '.join(WORKS)}")
        for system, backend in WORKS[name].runs:
            missing = available(system)
            if missing:
                if system not in said:
                    say(f"skipped {system}: {', '.join(missing)} not installed "
                        "(pip install 'attention-zoo[bench]')")
                    said.add(system)
                continue
            jobs.append(Job(name, system, backend))
    return jobs


def run_worker(job: Job, seconds: float, timeout: float = 900.0,
               dry_run: bool = False, precision: str | None = None) -> list[dict]:
    """Runs one job in a fresh process (`--dry-run` passed on, `precision` as
    `ZOO_BENCH_PRECISION`); its results (a list of dicts with `rate`, `unit` and perhaps
    `variant`, `device`, `precision`, `settings`), or one dict with `error` or `skipped`."""
    env = dict(os.environ, KERAS_BACKEND=job.backend if job.backend in (
        "tensorflow", "jax", "torch") else "tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    if precision is not None:
        env["ZOO_BENCH_PRECISION"] = precision
    command = [sys.executable, "-m", "zoo.bench.workers", job.work, job.system, job.backend,
               "--seconds", str(seconds)] + (["--dry-run"] if dry_run else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        return [{"error": f"no result within {timeout:.0f} s"}]
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [{"error": f"exit status {done.returncode}: {tail}"}]
    return json.loads(lines[-1][len(RESULT_PREFIX):])


def run_rounds(jobs: Sequence[Job], rounds: int,
               runner: Callable[[Job], list[dict]],
               say: Callable[[str], None] = print,
               after_round: Callable[[int, list[dict]], None] | None = None,
               after_job: Callable[[int, list[dict]], None] | None = None) -> list[dict]:
    """Runs every job once per round, the rounds interleaved (job 1, 2, ..., 1, 2, ...), and
    keeps each (job, variant)'s best rate. `after_round(rounds_done, results)` is called
    after each round and `after_job(rounds_done, results)` after each job (the bench writes
    its JSON then: a run cut short keeps what it measured, which on a GPU lent for minutes
    may be one round or less).

    Returns:
        One dict per (job, variant): `work`, `system`, `backend`, `rate` (the best round),
        `unit`, `rounds` (every round's rate, in order), `wall_s` (every round's seconds in
        the worker, start-up and compilation included), and `variant`, `detail`, `device`,
        `precision` and `settings` where the worker gave them; `error` or `skipped` instead
        of a rate where no round gave one.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1; got {rounds!r}")
    best: dict[tuple, dict] = {}
    for round_index in range(rounds):
        for job_index, job in enumerate(jobs):
            say(f"round {round_index + 1}/{rounds}, job {job_index + 1}/{len(jobs)}: "
                f"{job.label} ...")
            started = time.perf_counter()
            job_results = runner(job)
            wall = round(time.perf_counter() - started, 1)
            for result in job_results:
                key = (job.work, job.system, job.backend, result.get("variant"))
                entry = best.setdefault(key, {"work": job.work, "system": job.system,
                                              "backend": job.backend, "rate": None,
                                              "unit": WORKS[job.work].unit, "rounds": [],
                                              "wall_s": []})
                if result.get("variant") is not None:
                    entry["variant"] = result["variant"]
                rate = result.get("rate")
                entry["rounds"].append(rate)
                entry["wall_s"].append(wall)
                if rate is None:
                    reason = result.get("error") or result.get("skipped") or "no rate"
                    entry.setdefault("skipped" if "skipped" in result else "error", reason)
                    if round_index == 0:
                        say(f"{'skipped' if 'skipped' in result else 'failed'} {job.label}: "
                            f"{reason}")
                    continue
                for key_name in ("unit", "detail", "device", "precision", "settings"):
                    if key_name in result:
                        entry[key_name] = result[key_name]
                if entry["rate"] is None or rate > entry["rate"]:
                    entry["rate"] = rate
            if after_job is not None:
                after_job(round_index, _final(best.values()))
        say(f"round {round_index + 1}/{rounds} done")
        if after_round is not None:
            after_round(round_index + 1, _final(best.values()))
    return _final(best.values())


def _final(entries: Iterable[dict]) -> list[dict]:
    """Copies of the entries; one that has a rate keeps no error of a failed round, and a
    job whose variants gave rates loses the entry of its failed rounds."""
    entries = list(entries)
    measured = {(e["work"], e["system"], e["backend"]) for e in entries
                if e["rate"] is not None}
    results = []
    for entry in entries:
        if (entry["rate"] is None and "variant" not in entry
                and (entry["work"], entry["system"], entry["backend"]) in measured):
            continue
        entry = dict(entry, rounds=list(entry["rounds"]),
                     wall_s=list(entry.get("wall_s", [])))
        if entry["rate"] is not None:
            entry.pop("error", None)
            entry.pop("skipped", None)
        results.append(entry)
    return results


def bench(works: Sequence[str], rounds: int = 3, seconds: float = 3.0,
          output: str | os.PathLike | None = None,
          runner: Callable[[Job], list[dict]] | None = None,
          available: Callable[[str], list[str]] = missing_modules,
          say: Callable[[str], None] = print, dry_run: bool = False,
          precision: str | None = None, peak: bool = True) -> dict:
    """Plans, runs and reports a benchmark; writes and returns the JSON document.

    Args:
        works: names from `WORKS` or `GROUPS`.
        rounds: how many times the whole list runs (interleaved); the best round is kept.
        seconds: timed seconds per job and round, after warm-up (a GPU work times at least
            `GPU_SETTINGS`' step counts; a dry run one step).
        output: the JSON file; `report.default_output()` when None.
        runner: runs one job (a fresh process by default; tests pass a fake).
        available: the modules a system lacks (tests pass a fake).
        say: where progress lines go.
        dry_run: the GPU works at `DRY_RUN`'s size, every job one warm-up and one timed step
            (a check that the command runs, not a measurement).
        precision: "float32" or "bfloat16" for every work (None: float32 on a CPU, the GPU
            works bfloat16 on a GPU).
        peak: measure the host's peak beside the works and give each work's fraction of it
            (`zoo.bench.peak`).
    """
    command_works = list(works)
    works = expand_works(works)
    jobs = plan(works, available, say)
    if peak:
        jobs = peak_jobs(jobs) + jobs
    if precision == "bfloat16" and has_native_bfloat16() is False:
        say("bfloat16 on a CPU without native bfloat16 (no avx512_bf16 or amx_bf16 among its "
            "flags): the works run, slower than in float32")
    runner = runner or (lambda job: run_worker(job, seconds, dry_run=dry_run,
                                               precision=precision))
    path = Path(output) if output is not None else report.default_output()
    settings = dict(SETTINGS, rounds=rounds, seconds=seconds, works=list(works),
                    command="zoo bench " + " ".join(f"--work {w}" for w in command_works)
                    + f" --rounds {rounds} --seconds {seconds:g}"
                    + (f" --precision {precision}" if precision else "")
                    + ("" if peak else " --no-peak") + (" --dry-run" if dry_run else ""),
                    date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"), dry_run=dry_run,
                    cpu_flags=report.cpu_flags(), precision=precision or "float32")
    gpu_works = [w for w in works if w in GROUPS["gpu"]]
    if gpu_works:
        # Each result's `settings` and `precision` say what its worker ran; these are the
        # intended ones.
        settings["gpu"] = dict(GPU_SETTINGS, works={
            w: gpu_work_settings(w, dry_run) for w in gpu_works})
        if dry_run:
            settings["gpu"]["dry_run"] = DRY_RUN
        elif not report.gpu_names():
            say(f"no GPU found (nvidia-smi): {', '.join(gpu_works)} will run at full size in "
                "float32 on the CPU, for a long time; --dry-run tries them small")
    document: dict = {}

    def write(rounds_done: int, results: list[dict]) -> None:
        document.clear()
        document.update({"device": report.device(), "versions": report.versions(),
                         "settings": dict(settings, rounds_done=rounds_done),
                         "results": host_peak.with_fractions(results, dry_run)})
        report.write_results(document, path)

    results = run_rounds(jobs, rounds, runner, say, after_round=write, after_job=write)
    if not jobs:
        write(rounds, results)
    say(report.format_table([r for r in results if r["work"] != "peak"]))
    fractions = host_peak.format_fractions(document["results"])
    if fractions:
        say(fractions)
    say(f"wrote {path}")
    return document


def add_arguments(parser: Any) -> None:
    """The flags of `zoo bench` (zoo/cli/parser.py registers the subcommand)."""
    parser.add_argument("--work", action="append", choices=list(WORKS) + list(GROUPS),
                        metavar="NAME",
                        help="work to measure, repeatable: " + ", ".join(WORKS)
                             + "; or a group: cpu (the default: "
                             + ", ".join(GROUPS["cpu"]) + "), gpu (ANCHORS.md's H100 "
                             "works, bf16 on a GPU: " + ", ".join(GROUPS["gpu"]) + "), "
                             "text-generation (" + ", ".join(GROUPS["text-generation"])
                             + "), vision-language (" + ", ".join(GROUPS["vision-language"])
                             + ")")
    parser.add_argument("--rounds", type=checked_type(int, POSITIVE_INT), default=3,
                        help="times the whole list runs, interleaved; the best round is kept")
    parser.add_argument("--seconds", type=checked_type(float, SECONDS), default=3.0,
                        help="timed seconds per system, work and round, after warm-up")
    parser.add_argument("--precision", choices=host_peak.PRECISIONS, default=None,
                        help="the works' products in float32 or bfloat16 (Keras "
                             "mixed_bfloat16, torch autocast, CTranslate2's bfloat16 compute "
                             "types); default float32 on a CPU, the GPU works bfloat16 on a GPU")
    parser.add_argument("--no-peak", dest="peak", action="store_false",
                        help="do not measure the host's peak (a large matrix product in "
                             "float32 and bfloat16 per backend) nor the works' fraction of it")
    parser.add_argument("--output", default=None, metavar="FILE.json",
                        help="where the JSON goes (default: benchmarks/results/"
                             "bench-HOST-DATE.json)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check that every job runs: the GPU works at a tiny size "
                             "(2 layers, width 64, batch 4), one warm-up and one timed step "
                             "each; the rates mean nothing")


def main(args: Any) -> None:
    """`zoo bench` with parsed arguments."""
    from zoo.training.errors import UserError

    if args.rounds < 1:
        raise UserError(f"--rounds must be at least 1; got {args.rounds}")
    bench(args.work or ["cpu"], rounds=args.rounds, seconds=args.seconds,
          output=args.output, dry_run=args.dry_run, precision=args.precision, peak=args.peak)
