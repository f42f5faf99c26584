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
SHIPPED = ("translator-multi30k-en-de", "vit-cifar10")


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
                member = f"saved_models/{model}/{file}"
                assert member in names, f"{member} is not in {wheel.name}"
                assert archive.getinfo(member).file_size == (
                    REPO / "saved_models" / model / file).stat().st_size
            manifest = json.loads(archive.read(f"saved_models/{model}/manifest.json"))
            assert manifest["kind"] in ("translator", "vit")
        assert "zoo/registry.py" in names and "zoo/cli.py" in names

    # Installed elsewhere (no editable link to this checkout), the registry finds them.
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(site), str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "ZOO_MODELS_DIR"}
    listed = subprocess.run(
        [sys.executable, "-c", "import zoo, json; print(zoo.__file__); "
         "print(json.dumps({k: v['path'] for k, v in zoo.list_models().items()}))"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(site)}, capture_output=True, text=True,
        timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    location, paths = listed.stdout.splitlines()[:2]
    assert location.startswith(str(site))
    paths = json.loads(paths)
    assert sorted(paths) == sorted(SHIPPED)
    assert all(Path(p).is_file() and p.startswith(str(site)) for p in paths.values())
