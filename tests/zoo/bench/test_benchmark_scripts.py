"""The plan of benchmarks/, held by reading the scripts (no script runs here):

- every timing script measures with the one harness: it imports `zoo.bench`, reads no clock
  of its own (no `time`, `timeit`), and writes its result through
  `zoo.bench.report.write_benchmark`, never with a JSON writer of its own;
- studies of accuracy (scripts that train or score rather than time) live in
  benchmarks/studies/;
- every result in benchmarks/results/ is named by script, host kind and date
  (`zoo.bench.report.RESULT_NAME`), and the script it names exists;
- the documentation names only scripts that exist.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from zoo.bench.report import RESULT_NAME

ROOT = Path(__file__).resolve().parents[3]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"

CLOCK_MODULES = {"time", "timeit"}
STUDIES = ("vit_overfit.py", "vit_reference.py", "learning_curve.py", "head_pruning.py",
           "lora_finetune.py", "int8_quality.py", "bfloat16_quality.py")


def _scripts() -> list[Path]:
    return sorted(BENCHMARKS.glob("*.py"))


def _called(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def problems(path: Path) -> list[str]:
    """How the script at `path` departs from the plan (none when it follows it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, imports_harness, writes_through_harness = [], False, False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in CLOCK_MODULES:
                    found.append(f"line {node.lineno}: imports {alias.name} (a clock)")
                imports_harness |= alias.name.startswith("zoo.bench")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in CLOCK_MODULES:
                found.append(f"line {node.lineno}: imports from {node.module} (a clock)")
            imports_harness |= node.module.startswith("zoo.bench")
        elif isinstance(node, ast.Call):
            name = _called(node)
            # JSON written by the script itself: `json.dump`, or `json.dumps` handed to
            # anything but `print` (a worker's line on stdout is no result file).
            if name == "dump" or (name != "print" and any(
                    isinstance(a, ast.Call) and _called(a) == "dumps" for a in node.args)):
                found.append(f"line {node.lineno}: writes its own JSON ({name})")
            writes_through_harness |= name == "write_benchmark"
    if not imports_harness:
        found.append("does not import zoo.bench")
    if not writes_through_harness:
        found.append("does not write its result with zoo.bench.report.write_benchmark")
    return found


def test_the_reader_finds_a_timing_loop_of_its_own(tmp_path):
    script = tmp_path / "own_loop.py"
    script.write_text("import json\nimport time\nfrom pathlib import Path\n"
                      "started = time.perf_counter()\n"
                      "Path('x.json').write_text(json.dumps({}))\n")
    found = problems(script)
    assert any("imports time" in p for p in found)
    assert any("writes its own JSON (write_text)" in p for p in found)
    assert "does not import zoo.bench" in found
    good = tmp_path / "good.py"
    good.write_text("from zoo.bench.report import write_benchmark\n"
                    "from zoo.bench.steps import measure\n"
                    "write_benchmark(__file__, {'rate': measure(print, 1, 0.0)})\n")
    assert problems(good) == []


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: p.name)
def test_every_timing_script_measures_and_writes_with_the_harness(path):
    assert problems(path) == []


def test_the_studies_of_accuracy_live_in_their_own_folder():
    for name in STUDIES:
        assert (BENCHMARKS / "studies" / name).is_file(), name
        assert not (BENCHMARKS / name).exists(), f"{name} is a study: benchmarks/studies/"


def test_every_result_is_named_by_script_host_and_date():
    scripts = {p.stem for p in BENCHMARKS.rglob("*.py")} | {"bench"}  # `zoo bench`
    wrong = []
    for path in sorted(p for p in RESULTS.iterdir() if p.is_file()):
        match = RESULT_NAME.match(path.name)
        if match is None or match.group("script") not in scripts:
            wrong.append(path.name)
    assert not wrong, f"not <script>[-<variant>]-<host kind>-<YYYY-MM-DD>: {wrong}"


def test_the_documentation_names_only_scripts_that_exist():
    """A script moved (to studies/, or merged into another) leaves no stale path behind."""
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
                 *sorted((ROOT / "saved_models").glob("*/README.md"))]
    missing = []
    for document in documents:
        for found in re.findall(r"benchmarks/[\w/]+\.(?:py|sh)", document.read_text()):
            if not (ROOT / found).is_file():
                missing.append(f"{document.relative_to(ROOT)}: {found}")
    assert not missing, missing
