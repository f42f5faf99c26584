"""One import name: installed (a wheel, or this checkout through `pip install -e .`), the
project is `zoo` and nothing beside it. The checkout's other folders are not `zoo.tests` or
`zoo.benchmarks`, layers/ and training/ are not top-level `layers` and `training`, and each of
their modules is loaded once, as `zoo.layers.*` or `zoo.training.*`. (The wheel's file list:
test_wheel.py.)"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Run from a folder outside the checkout, as a user's script is: what it can import is what the
# installed environment offers.
FIND = r"""
import importlib.util, json
import zoo
names = ["zoo.tests", "zoo.benchmarks", "layers", "training", "saved_models", "tests"]
specs = {name: importlib.util.find_spec(name) for name in names}
print(json.dumps({"zoo": list(zoo.__path__), "found": {
    name: spec.origin or list(spec.submodule_search_locations)
    for name, spec in specs.items() if spec is not None}}))
"""


def test_the_installed_environment_offers_zoo_and_nothing_else_of_the_checkout(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", FIND], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)
    assert len(answer["zoo"]) == 1, answer["zoo"]  # the zoo/ folder only
    assert "zoo.tests" not in answer["found"] and "zoo.benchmarks" not in answer["found"]
    # Another distribution may own a top-level `tests` or `layers`; none of the checkout's.
    for name, where in answer["found"].items():
        for path in [where] if isinstance(where, str) else where:
            assert not Path(path).resolve().is_relative_to(ROOT), (name, path)


def test_layers_and_training_are_loaded_once_by_their_installed_names():
    folders = {}
    for package in ("zoo.layers", "zoo.training"):
        [folder] = importlib.util.find_spec(package).submodule_search_locations
        folders[package] = Path(folder).resolve()
        for file in sorted(folders[package].glob("*.py")):
            if file.stem != "__init__":
                importlib.import_module(f"{package}.{file.stem}")
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        for package, folder in folders.items():
            if file and Path(file).resolve().is_relative_to(folder):
                assert name == package or name.startswith(package + "."), (name, file)
