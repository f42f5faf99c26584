"""Peak memory and time of dense, chunked and sliding-window attention as T grows (CPU).

Batch 1, 4 heads, d_k 64, window 256, key blocks of 512, float32, TensorFlow backend with
its Eigen kernels, in two modes: "graph" (one `tf.function`, as `model.fit` runs on a CPU)
and "eager". Every (mode, method, T) runs in its own subprocess, which:

1. imports Keras and the layers, creates the inputs and, in graph mode, traces the function
   (without running it, so that no earlier run's buffers sit in allocator caches);
2. resets the peak resident set size (writing 5 to /proc/self/clear_refs) and notes the
   current RSS: a process that imported the same and holds the same inputs;
3. runs the function once: the extra peak memory is VmHWM minus that RSS; then
   `--repeats - 1` more times: the time is the fastest run (the first included), each
   timed by the harness (`zoo.bench.steps`).

glibc's mmap threshold is fixed at 64 KiB in the workers (MALLOC_MMAP_THRESHOLD_) and oneDNN
is off (it caches buffers of its own), so freed buffers go back to the system and the RSS
follows what is live.

    python benchmarks/attention_memory.py                      # T = 512 ... 16384
    python benchmarks/attention_memory.py --lengths 512 1024 --repeats 1

Writes benchmarks/results/attention_memory-HOST-DATE.json and .png
(`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from zoo.bench.report import write_benchmark
from zoo.bench.steps import Stopwatch, seconds_per_call

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("dense", "chunked", "window")
MODES = ("graph", "eager")
HEADS, HEAD_DIM, WINDOW, BLOCK_SIZE = 4, 64, 256, 512


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _available_mb() -> float:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("inf")


def worker(method: str, length: int, repeats: int, mode: str) -> dict:
    """Runs one measurement in this process; returns its record."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)

    from zoo.layers.attention import scaled_dot_product_attention
    from zoo.layers.chunked_attention import chunked_attention, sliding_window_attention

    rng = np.random.default_rng(0)
    q, k, v = (tf.constant(rng.normal(size=(1, HEADS, length, HEAD_DIM)).astype("float32"))
               for _ in range(3))
    if method == "dense":
        fn = lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]  # noqa: E731
    elif method == "chunked":
        fn = lambda q, k, v: chunked_attention(q, k, v, block_size=BLOCK_SIZE)  # noqa: E731
    else:
        fn = lambda q, k, v: sliding_window_attention(q, k, v, WINDOW)  # noqa: E731
    # Start the thread pools and kernels on something small, so their memory is baseline.
    tf.nn.softmax(tf.matmul(q[..., :64, :], k[..., :64, :], transpose_b=True)).numpy()
    if mode == "graph":
        # Traced without running, so no earlier run's buffers sit in the allocator's caches.
        fn = tf.function(fn).get_concrete_function(q, k, v)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM := VmRSS
    baseline_kb = _status_kb("VmRSS")
    with Stopwatch() as first:
        fn(q, k, v).numpy()
    extra_mb = (_status_kb("VmHWM") - baseline_kb) / 1024
    times = [first.seconds] + [seconds_per_call(lambda: fn(q, k, v).numpy())
                               for _ in range(repeats - 1)]
    return {"method": method, "mode": mode, "length": length, "seconds": min(times),
            "extra_peak_mb": round(extra_mb, 1), "repeats": repeats}


def _dense_estimate_mb(length: int, mode: str) -> float:
    # Scores and softmax: about two float32 (heads, T, T) arrays in a graph, three eagerly.
    return (2 if mode == "graph" else 3) * HEADS * length * length * 4 / 2**20


def run_all(lengths: list[int], modes: list[str], repeats: int, timeout: float) -> list[dict]:
    """Runs every (mode, T, method) in a fresh subprocess and prints a line for each."""
    records = []
    # oneDNN keeps freed buffers in caches of its own, which the RSS would not show go away;
    # the Eigen kernels allocate through malloc, where the fixed mmap threshold returns them.
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "MALLOC_MMAP_THRESHOLD_": "65536",
           "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    for mode in modes:
        for length in lengths:
            for method in METHODS:
                where = f"{mode:5s} {method:8s} T={length:6d}"
                needed = _dense_estimate_mb(length, mode)
                if method == "dense" and needed > 0.8 * _available_mb():
                    print(f"{where}  skipped: about {needed:.0f} MB needed", flush=True)
                    records.append({"method": method, "mode": mode, "length": length,
                                    "skipped": "memory"})
                    continue
                command = [sys.executable, __file__, "--worker", method, str(length),
                           "--mode", mode, "--repeats", str(repeats)]
                try:
                    done = subprocess.run(command, env=env, capture_output=True, text=True,
                                          timeout=timeout, check=True)
                except subprocess.TimeoutExpired:
                    print(f"{where}  skipped: over {timeout:.0f} s", flush=True)
                    records.append({"method": method, "mode": mode, "length": length,
                                    "skipped": "time"})
                    continue
                except subprocess.CalledProcessError as error:
                    raise SystemExit(f"worker {where} failed:\n{error.stderr[-2000:]}")
                record = json.loads(done.stdout.strip().splitlines()[-1])
                records.append(record)
                print(f"{where}  {record['seconds']:8.3f} s  {record['extra_peak_mb']:9.1f} MB",
                      flush=True)
    return records


def plot(records: list[dict], path: Path) -> None:
    """Extra peak memory and time against T, one line per method and mode (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (memory_axes, time_axes) = plt.subplots(1, 2, figsize=(11, 4.5))
    colors = {"dense": "tab:red", "chunked": "tab:blue", "window": "tab:green"}
    for mode, style in zip(MODES, ("o-", "s--")):
        for method in METHODS:
            rows = [r for r in records
                    if r["method"] == method and r.get("mode") == mode and "seconds" in r]
            if not rows:
                continue
            lengths = [r["length"] for r in rows]
            label = f"{method} ({mode})"
            memory_axes.plot(lengths, [max(r["extra_peak_mb"], 0.1) for r in rows], style,
                             color=colors[method], label=label)
            time_axes.plot(lengths, [r["seconds"] for r in rows], style,
                           color=colors[method], label=label)
    for axes, label in ((memory_axes, "extra peak RSS (MB)"), (time_axes, "time (s)")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("sequence length T")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(f"Attention on the CPU (TensorFlow): batch 1, {HEADS} heads, "
                    f"d_k {HEAD_DIM}, window {WINDOW}, key block {BLOCK_SIZE}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+",
                        default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds allowed per measurement")
    parser.add_argument("--output", type=Path,
                        help="default: benchmarks/results/attention_memory-HOST-DATE.json")
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="graph", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.repeats,
                                args.mode)))
        return
    records = run_all(args.lengths, args.modes, args.repeats, args.timeout)
    setup = {"batch": 1, "heads": HEADS, "head_dim": HEAD_DIM, "window": WINDOW,
             "key_block_size": BLOCK_SIZE, "window_query_block_size": min(max(WINDOW, 64), 256),
             "dtype": "float32", "backend": "tensorflow, Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0)",
             "modes": args.modes, "cpu_count": os.cpu_count(), "repeats": args.repeats,
             "note": "CPU shared with a training run: times are noisy"}
    path = write_benchmark(__file__, {"setup": setup, "records": records}, output=args.output)
    plot(records, path.with_suffix(".png"))
    print(f"wrote {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
