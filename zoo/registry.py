"""Named models: what ships in saved_models/, and loading by name, path or URL.

A shipped model is a folder `saved_models/<name>/` with `model.keras` (weights, config and,
for the translator, the tokenizer), `manifest.json` (kind, description, sha256 of the model
file) and `README.md` (the model card).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import keras

# The repository's saved_models/ (an editable install), or ZOO_MODELS_DIR.
MODELS_DIR = Path(os.environ.get("ZOO_MODELS_DIR",
                                 Path(__file__).resolve().parents[1] / "saved_models"))
MODEL_FILE = "model.keras"
MANIFEST = "manifest.json"


def _manifests() -> dict[str, dict]:
    found = {}
    if MODELS_DIR.is_dir():
        for manifest in sorted(MODELS_DIR.glob(f"*/{MANIFEST}")):
            info = json.loads(manifest.read_text())
            info["path"] = str(manifest.parent / MODEL_FILE)
            found[manifest.parent.name] = info
    return found


def list_models() -> dict[str, dict]:
    """The shipped models: `{name: {"kind", "description", "sha256", "path", ...}}`."""
    return _manifests()


def sha256_of(path: str | os.PathLike) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve(name_or_path: str) -> Path:
    """The local `.keras` file for a shipped name, a path (file or model folder) or a URL.

    URLs are downloaded once into the Keras cache; the sha256 is checked when the URL ends
    with `#sha256=<hex>`.

    Raises:
        ValueError: the name is not shipped and is no path or URL; the message lists the
            shipped names.
        FileNotFoundError: a path that does not exist.
    """
    shipped = _manifests()
    if name_or_path in shipped:
        path = Path(shipped[name_or_path]["path"])
        if not path.exists():
            raise FileNotFoundError(
                f"model {name_or_path!r} is registered but {path} is missing; reinstall the "
                "zoo or fetch saved_models/ again")
        return path
    if name_or_path.startswith(("http://", "https://")):
        url, _, fragment = name_or_path.partition("#")
        expected = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        filename = url.rstrip("/").rsplit("/", 1)[-1] or "model.keras"
        local = keras.utils.get_file(filename, url, file_hash=expected, hash_algorithm="sha256",
                                     cache_subdir="zoo_models")
        return Path(local)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        path = path / MODEL_FILE
    if path.exists():
        return path
    if os.sep in name_or_path or name_or_path.endswith(".keras"):
        raise FileNotFoundError(f"no model file at {path}")
    raise ValueError(
        f"unknown model {name_or_path!r}: not a shipped model, a path or a URL. Shipped "
        f"models: {', '.join(sorted(shipped)) or '(none installed)'}")


def load(name_or_path: str, compile: bool = False) -> keras.Model:
    """Loads a zoo model, ready to use: `zoo.load("translator-multi30k-en-de")`.

    Args:
        name_or_path: a shipped name (`zoo.list_models()`), a `.keras` file or a folder
            holding `model.keras`, or an `https://...#sha256=...` URL.
        compile: restore the training configuration too (for further `fit` calls you may
            also `compile` yourself).

    Returns:
        The `keras.Model` (a `Translator` or a `VisionTransformer`). Loading uses Keras' safe
        mode: no pickled code is executed.
    """
    import zoo.translator  # noqa: F401  registers the classes for deserialization
    import zoo.vit  # noqa: F401

    path = resolve(name_or_path)
    if not str(path).endswith(".keras"):
        raise ValueError(f"{path} is not a .keras file")
    return keras.saving.load_model(path, compile=compile, safe_mode=True)


def write_manifest(folder: str | os.PathLike, kind: str, description: str,
                   **extra: Any) -> dict:
    """Writes `manifest.json` for `folder/model.keras` (with its sha256) and returns it."""
    folder = Path(folder)
    info = {"kind": kind, "description": description,
            "sha256": sha256_of(folder / MODEL_FILE), **extra}
    (folder / MANIFEST).write_text(json.dumps(info, indent=2) + "\n")
    return info
