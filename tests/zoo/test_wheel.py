"""The wheel carries the shipped models: a non-editable install lists (and loads) them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("translator-multi30k-en-de", "vit-cifar10", "vit-hybrid-cifar10")


@pytest.mark.slow
def test_the_wheel_holds_the_shipped_models(tmp_path):
    # Build from a copy, so that the build leaves nothing in the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, source / name)
    for folder in ("layers", "training", "zoo", "saved_models"):
        shutil.copytree(REPO / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(tmp_path / "dist")],
        cwd=source, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("attention_zoo-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for model in SHIPPED:
            for file in ("model.keras", "manifest.json", "README.md"):
                member = f"zoo/saved_models/{model}/{file}"
                assert member in names, f"{member} is not in {wheel.name}"
                assert archive.getinfo(member).file_size == (
                    REPO / "saved_models" / model / file).stat().st_size
            manifest = json.loads(archive.read(f"zoo/saved_models/{model}/manifest.json"))
            assert manifest["kind"] in ("translator", "vit")
        assert "zoo/hub/loader.py" in names and "zoo/cli/main.py" in names
        # One import name: every package of the tree, under zoo/, and nothing else on top.
        for folder in ("layers", "training", "zoo"):
            for init in (REPO / folder).rglob("__init__.py"):
                relative = init.relative_to(REPO).as_posix()
                member = relative if folder == "zoo" else f"zoo/{relative}"
                assert member in names, f"{member} is not in {wheel.name}"
        tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(
            (".dist-info", ".data"))}
        assert tops == {"zoo"}, tops

    # Installed elsewhere (no editable link to this checkout), the registry finds them.
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(site), str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "ZOO_MODELS_DIR"}
    # A user's own training.py and layers.py beside their script shadow nothing of ours.
    (tmp_path / "training.py").write_text("raise SystemExit('the user training.py ran')\n")
    (tmp_path / "layers.py").write_text("raise SystemExit('the user layers.py ran')\n")
    listed = subprocess.run(
        [sys.executable, "-c", "import zoo, json; print(zoo.__file__); "
         "print(json.dumps({k: v['path'] for k, v in zoo.list_models().items()})); "
         "print(zoo.load('vit-cifar10').num_classes)"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(site)}, capture_output=True, text=True,
        timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    location, paths, classes = listed.stdout.splitlines()[:3]
    assert classes == "10"
    assert location.startswith(str(site))
    paths = json.loads(paths)
    assert sorted(paths) == sorted(SHIPPED)
    assert all(Path(p).is_file() and p.startswith(str(site)) for p in paths.values())
