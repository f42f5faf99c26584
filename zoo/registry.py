"""Named models: what ships in saved_models/, and loading by name, path or URL.

A shipped model is a folder `saved_models/<name>/` with `model.keras` (weights, config and,
for the translator, the tokenizer), `manifest.json` (kind, description, sha256 of the model
file) and `README.md` (the model card).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # keras (and TensorFlow) load only when a model is: `zoo models` stays fast
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
        import keras

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


def load(name_or_path: str, compile: bool = False,
         expect: type | None = None) -> keras.Model:
    """Loads a zoo model, ready to use: `zoo.load("translator-multi30k-en-de")`.

    Args:
        name_or_path: a shipped name (`zoo.list_models()`), a `.keras` file or a folder
            holding `model.keras`, or an `https://...#sha256=...` URL.
        compile: restore the training configuration too (for further `fit` calls you may
            also `compile` yourself).
        expect: the model class the caller needs (e.g. `VisionTransformer`); another class
            is a ValueError that names both.

    Returns:
        The `keras.Model` (a `Translator`, a `VisionTransformer` or a `SentenceEncoder`).
        Loading uses Keras' safe mode: no pickled code is executed.

    Raises:
        ValueError: the file's weights do not fit the model its config describes; the
            message names the first mismatched weight and both shapes.
    """
    import keras

    _register_classes()
    path = resolve(name_or_path)
    if not str(path).endswith(".keras"):
        raise ValueError(f"{path} is not a .keras file")
    try:
        model = keras.saving.load_model(path, compile=compile, safe_mode=True)
    except ValueError as error:
        # Keras reports a layer that "could not be loaded"; say which weight and shapes.
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
        model = keras.saving.deserialize_keras_object(config, safe_mode=True)
        mismatch = weight_mismatches(model, path)
        if mismatch:
            raise ValueError(f"{path}: {mismatch[0]}") from error
        raise
    if expect is not None and not isinstance(model, expect):
        raise ValueError(f"{name_or_path!r} is a {type(model).__name__}, not a "
                         f"{expect.__name__}")
    return model


def _register_classes() -> None:
    import zoo.sentence_encoder  # noqa: F401  registers the classes for deserialization
    import zoo.translator  # noqa: F401
    import zoo.vit  # noqa: F401


def _stored_weights(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], str]]:
    """`{h5 key: (shape, layer name)}` of a `.weights.h5` file or a `.keras` archive."""
    import h5py

    path = str(path)
    if path.endswith(".keras"):
        with zipfile.ZipFile(path) as archive:
            source: Any = io.BytesIO(archive.read("model.weights.h5"))
    else:
        source = path
    found: dict[str, tuple[tuple[int, ...], str]] = {}
    with h5py.File(source, "r") as f:
        def visit(key: str, item: Any) -> None:
            if isinstance(item, h5py.Dataset) and "/vars/" in key:
                group = f[key.rsplit("/vars/", 1)[0]]
                layer = group.attrs.get("name", key.rsplit("/vars/", 1)[0])
                found[key] = (tuple(item.shape), str(layer))
        f.visititems(visit)
    return found


def weight_mismatches(model: keras.Model, path: str | os.PathLike) -> list[str]:
    """How the weights stored at `path` fail to fit `model`, first mismatch first.

    Args:
        model: a built model.
        path: a `.weights.h5` file or a `.keras` archive.

    Returns:
        One message per missing, extra or differently shaped weight, in the order of
        `model.weights` (extra weights last); empty when every weight fits.
    """
    stored = _stored_weights(path)
    expected = _model_weights(model)
    order = {id(v): i for i, v in enumerate(model.weights)}
    problems: list[tuple[int, str]] = []
    for key, variable in expected.items():
        name, shape = variable.path, tuple(variable.shape)
        rank = order.get(id(variable), len(order))
        if key not in stored:
            problems.append((rank, f"weight {name} of shape {shape} is missing from the "
                                   "checkpoint"))
        elif stored[key][0] != shape:
            problems.append((rank, f"weight {name} has shape {stored[key][0]} in the "
                                   f"checkpoint but {shape} in the model"))
    for key, (shape, layer) in stored.items():
        if key not in expected:
            problems.append((len(order) + 1, f"the checkpoint's weight {key} (layer {layer}, "
                                             f"shape {shape}) has no place in the model"))
    return [message for _, message in sorted(problems, key=lambda p: p[0])]


def _model_weights(model: keras.Model) -> dict[str, Any]:
    """`{h5 key: variable}`: where Keras' saving writes each of `model`'s variables."""
    # Keras' own traversal (keras 3.15) into an in-memory store that keeps the variables.
    from keras.src.saving import saving_lib

    store = saving_lib.NpzIOStore("unused.npz", mode="w")
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="",
                           visited_saveables=set())
    found = {}
    for inner_path, variables in store.contents.items():
        prefix = "" if inner_path == "__root__" else f"{inner_path}/"
        for index, variable in variables.items():
            found[f"{prefix}vars/{index}"] = variable
    return found


def load_weights(model: keras.Model, path: str | os.PathLike) -> keras.Model:
    """Loads the weights of a `.weights.h5` file or a `.keras` archive into `model`.

    Unlike `model.load_weights`, a checkpoint that does not fit is refused before anything
    is assigned, with a message that names the first mismatched weight and both shapes.

    Raises:
        ValueError: the checkpoint's weights do not fit `model`.
    """
    mismatches = weight_mismatches(model, path)
    if mismatches:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        raise ValueError(f"{path} does not fit {model.name}: {mismatches[0]}{more}")
    model.load_weights(path)
    return model


def write_manifest(folder: str | os.PathLike, kind: str, description: str,
                   **extra: Any) -> dict:
    """Writes `manifest.json` for `folder/model.keras` (with its sha256) and returns it."""
    folder = Path(folder)
    info = {"kind": kind, "description": description,
            "sha256": sha256_of(folder / MODEL_FILE), **extra}
    (folder / MANIFEST).write_text(json.dumps(info, indent=2) + "\n")
    return info
