"""Start-up time of each `zoo` verb, against `python -c "import tensorflow"` in the same run.

    python benchmarks/startup_time.py [--repeats 3]

Every command runs in a fresh process (`python -m zoo.cli ...`, as the console script does),
the median wall time of `--repeats` runs is kept, and the ratio to the median of `python -c
"import tensorflow"` is reported: below 1 means the verb answers before TensorFlow could
even be imported. Commands that need a model do one small real job (one sentence, one
CIFAR-10 JPEG from ../shared/data), so their time is start-up plus loading plus that job.
Also records, per command, whether stderr stayed empty. Writes
benchmarks/results/startup_time.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ZOO_SHARED_DATA", REPO.parent / "shared" / "data"))
RESULT = REPO / "benchmarks" / "results" / "startup_time.json"


def commands(image: Path | None) -> dict[str, list[str]]:
    """The measured command lines (without the interpreter), by label."""
    zoo = ["-m", "zoo.cli"]
    found = {
        "zoo --help": [*zoo, "--help"],
        "zoo models": [*zoo, "models"],
        "zoo translate --help": [*zoo, "translate", "--help"],
        "zoo train vit --help": [*zoo, "train", "vit", "--help"],
        "zoo finetune translator --help": [*zoo, "finetune", "translator", "--help"],
        "zoo export --help": [*zoo, "export", "--help"],
        "zoo evaluate (argument error)": [*zoo, "evaluate", "nonsense"],
        "zoo translate TEXT (beam 1)": [*zoo, "translate", "--beam-size", "1",
                                        "A man is riding a bicycle."],
    }
    if image is not None:
        found["zoo classify IMAGE"] = [*zoo, "classify", str(image)]
    return found


def time_command(argv: list[str], repeats: int) -> tuple[float, int, bool]:
    """(median seconds, exit status, stderr empty) of `python argv` over `repeats` runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ZOO_LOG")}
    times, status, quiet = [], 0, True
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, *argv], cwd=REPO, env=env,
                              capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        status = done.returncode
        quiet = quiet and done.stderr == ""
    return statistics.median(times), status, quiet


def main() -> None:
    """Times every command and writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per command (median)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        image = None
        archive = DATA / "cifar10" / "cifar10-train-jpg.tar.gz"
        if archive.is_file():
            with tarfile.open(archive) as tar:
                member = next(m for m in tar if m.name.endswith(".jpg"))
                image = Path(folder) / "image.jpg"
                image.write_bytes(tar.extractfile(member).read())
        baseline, _, _ = time_command(["-c", "import tensorflow"], args.repeats)
        rows = []
        for label, argv in commands(image).items():
            seconds, status, quiet = time_command(argv, args.repeats)
            rows.append({"command": label, "seconds": round(seconds, 3),
                         "ratio_to_import_tensorflow": round(seconds / baseline, 3),
                         "exit_status": status, "stderr_empty": quiet})
            print(f"{label:34s} {seconds:7.2f} s  {seconds / baseline:5.2f}x  "
                  f"exit {status}  stderr {'empty' if quiet else 'NOT empty'}")
    label = 'python -c "import tensorflow"'
    print(f"{label:34s} {baseline:7.2f} s  1.00x")
    result = {
        "baseline": "python -c \"import tensorflow\"",
        "baseline_seconds": round(baseline, 3),
        "repeats": args.repeats,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "commands": rows,
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT}")


if __name__ == "__main__":
    main()
