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

from zoo.training.files.disk_faults import DISK_FULL_ERRNOS
from zoo.training.files.file_store import cache_dir, file_sha256, write_atomically
from zoo.training.errors import UserError

if TYPE_CHECKING:  # keras (and TensorFlow) load only when a model is: `zoo models` stays fast
    import keras

# zoo/saved_models/ in a wheel, the repository's saved_models/ in a checkout (or an editable
# install), or ZOO_MODELS_DIR.
_PACKAGE = Path(__file__).resolve().parents[1]  # zoo/
MODELS_DIR = Path(os.environ.get("ZOO_MODELS_DIR", _PACKAGE / "saved_models"
                                 if (_PACKAGE / "saved_models").is_dir()
                                 else _PACKAGE.parent / "saved_models"))
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


class DownloadError(UserError):
    """A URL that cannot be fetched, fails its sha256, or is refused (plain http, no hash)."""


def downloads_dir() -> Path:
    """Where downloaded models are kept: the zoo's cache folder's `downloads/`
    (`zoo.training.files.file_store.cache_dir`)."""
    return cache_dir("downloads")


def download(url: str, timeout: float = 60.0) -> Path:
    """The local copy of a model URL, downloaded on first use: `https://.../m.keras#sha256=HEX`.

    Every download lands in a folder of its own, named by a digest of the URL and of the
    expected hash, so two URLs that end in the same file name never share a cache entry, and
    the same URL with and without a hash never do either. A file is written under a temporary
    name and renamed into place only after its sha256 matched; a file that fails the check is
    deleted, never cached. A cached file with a hash is checked again on every use.

    Which URLs are accepted, and why:

    - `https://...#sha256=HEX` and `http://...#sha256=HEX`: the hash proves the content,
      whatever the transport.
    - `https://...` without a hash: accepted, with a warning on stderr that the file's
      integrity is unchecked (TLS authenticates the server, but nothing pins the content).
    - `http://...` without a hash: refused. Anyone on the path could substitute the file,
      and a `.keras` file is a model the zoo would then run.

    Progress goes to stderr (never stdout, which carries translations and labels).

    Why not `keras.utils.get_file`: it caches by file name in one folder (two URLs ending
    in `model.keras` would share an entry), writes the download in place (a process killed
    mid-download leaves a partial file under the final name, which a later call without a
    hash takes as the model), prints its progress bar on stdout, and accepts plain http
    without a hash.

    Args:
        url: the URL, optionally with a `#sha256=<64 hex digits>` fragment.
        timeout: seconds to wait for the server on connect and on each read.

    Returns:
        The path of the cached file (its name is the URL's last path segment).

    Raises:
        DownloadError: a malformed hash, plain http without one, a network or HTTP error, or
            a sha256 mismatch; the message names the URL.
    """
    import sys

    address, _, fragment = url.partition("#")
    expected = None
    if fragment:
        if not fragment.startswith("sha256="):
            raise DownloadError(f"the fragment of {url!r} must be #sha256=<64 hex digits>; "
                                f"got #{fragment}")
        expected = fragment.removeprefix("sha256=").lower()
        if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
            raise DownloadError(f"the sha256 in {url!r} must be 64 hex digits; got "
                                f"{expected!r}")
    if expected is None and address.startswith("http://"):
        raise DownloadError(
            f"refusing {address}: plain http without #sha256=<hex> cannot be trusted; use "
            "https, or append the file's #sha256=")
    filename = address.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or MODEL_FILE
    key = hashlib.sha256(f"{address}\n{expected or ''}".encode()).hexdigest()[:32]
    folder = downloads_dir() / key
    local = folder / filename
    if local.is_file():
        if expected is None or file_sha256(local) == expected:
            return local
        local.unlink()  # corrupted in the cache: fetch it again
    if expected is None:
        print(f"zoo: warning: {address} has no #sha256=; its integrity is unchecked",
              file=sys.stderr)
    def fetch_and_check(partial: Path) -> None:
        digest = _fetch(address, partial, timeout)
        if expected is not None and digest != expected:
            raise DownloadError(f"{address} has sha256 {digest}, not the expected {expected}; "
                                "the file was deleted")

    return write_atomically(local, fetch_and_check)


def _fetch(url: str, destination: Path, timeout: float) -> str:
    """Streams `url` into `destination` with progress on stderr; returns its sha256."""
    import sys
    import urllib.error
    import urllib.request

    digest = hashlib.sha256()
    interactive = sys.stderr.isatty()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, \
                open(destination, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            print(f"zoo: downloading {url}", file=sys.stderr, flush=True)
            for chunk in iter(lambda: response.read(1 << 20), b""):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if interactive:
                    share = f" of {total / 1e6:.1f}" if total else ""
                    print(f"\r  {done / 1e6:.1f}{share} MB", end="", file=sys.stderr,
                          flush=True)
            out.flush()
            os.fsync(out.fileno())
        if interactive:
            print(file=sys.stderr)
    except (urllib.error.URLError, OSError) as error:
        if error.errno in DISK_FULL_ERRNOS or (
                error.filename is not None and Path(error.filename) == Path(destination)):
            raise  # the cache's disk is full or read-only: the file's fault, not the URL's
        reason = (error if isinstance(error, urllib.error.HTTPError)
                  else getattr(error, "reason", None) or error)
        raise DownloadError(f"cannot download {url}: {reason}") from error
    if total and done != total:
        raise DownloadError(f"cannot download {url}: got {done} of {total} bytes")
    return digest.hexdigest()


def resolve(name_or_path: str) -> Path:
    """The local `.keras` file for a shipped name, a path (file or model folder), a URL, or
    a hub handle (`hf://ORG/NAME[@REVISION]`, or a folder laid out as the hub has it), which
    `zoo.hub.handles` converts on first use and keeps.

    URLs are downloaded once into the cache (see `download`); the sha256 is checked when the
    URL ends with `#sha256=<hex>`.

    Raises:
        ValueError: the name is not shipped and is no path or URL; the message lists the
            shipped names.
        FileNotFoundError: a path that does not exist.
        DownloadError: a URL that cannot be fetched, fails its sha256 or is plain http
            without one.
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
        return download(name_or_path)
    from zoo.hub.handles import is_handle, resolve_handle  # hf://ORG/NAME, hub-layout folders

    if is_handle(name_or_path):
        return resolve_handle(name_or_path)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        path = path / MODEL_FILE
    if path.exists():
        return path
    if os.sep in name_or_path or name_or_path.endswith(".keras"):
        raise FileNotFoundError(f"no model file at {path}")
    raise UserError(
        f"unknown model {name_or_path!r}: not a shipped model, a path or a URL. Shipped "
        f"models: {', '.join(sorted(shipped)) or '(none installed)'}")


def load(name_or_path: str, compile: bool = False, expect: type | None = None,
         num_classes: int | None = None, class_names: Any = None,
         dtype: str | None = None) -> keras.Model:
    """Loads a zoo model, ready to use: `zoo.load("translator-multi30k-en-de")`.

    Args:
        name_or_path: a shipped name (`zoo.list_models()`), a `.keras` file or a folder
            holding `model.keras`, an `https://...#sha256=...` URL, or a hub handle
            (`hf://ORG/NAME[@REVISION]`, or a folder laid out as the hub has it; see
            `zoo.hub.handles`).
        compile: restore the training configuration too (for further `fit` calls you may
            also `compile` yourself).
        expect: the model class the caller needs (e.g. `VisionTransformer`); another class
            is a ValueError that names both.
        num_classes, class_names: a ViT with a new head for these classes (timm's
            `create_model(..., num_classes=)`; `VisionTransformer.with_new_head`) where they
            differ from the model's; either alone is enough.
        dtype: a dtype policy to run in, e.g. "mixed_bfloat16": float32 weights, products
            in bfloat16 (the translator's key/value cache too), float32 logits; where the
            CPU lacks native bfloat16 it runs slower, said once. None keeps the stored one.

    Returns:
        The `keras.Model` (a `Translator`, a `VisionTransformer` or a `SentenceEncoder`).
        Loading uses Keras' safe mode: no pickled code is executed.

    Raises:
        ValueError: the file is not a readable `.keras` archive (truncated, damaged), its
            config asks for code that safe mode does not run (a Python lambda, `os.system`,
            a class neither Keras' nor the zoo's; see `zoo.hub.safe_config`), it holds
            another kind of model than `expect` (checked before any weight loads),
            its weights do not fit the model its config describes (the message names the
            first mismatched weight and both shapes), or a weight holds NaN or infinity
            (the message names the file and the first such weight).
        DownloadError: see `download`.
        FileNotFoundError: a path that does not exist, or a hub handle neither cached nor
            reachable (see `zoo.hub.handles.resolve_handle`).
    """
    import keras

    from zoo.models.pre_split_files import is_pre_split_file, load_pre_split_weights
    from zoo.models.task import Task

    _register_classes()
    path = resolve(name_or_path)
    if not str(path).endswith(".keras"):
        raise UserError(f"{path} is not a .keras file")
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise UserError(f"{path} is not a readable .keras file (truncated or damaged?): "
                        f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
                        ) from error
    if expect is not None and isinstance(config, dict):
        # The kind, from the config alone: a wrong kind is refused before any weight loads.
        stored = keras.saving.get_registered_object(str(config.get("registered_name")))
        if isinstance(stored, type) and not issubclass(stored, expect):
            raise UserError(f"{name_or_path!r} is a {stored.__name__}, not a "
                            f"{expect.__name__}")
    try:
        model = keras.saving.load_model(path, compile=compile, safe_mode=True)
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        raise UserError(f"{path} is not a readable .keras file (truncated or damaged?): "
                        f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
                        ) from error
    except (TypeError, ValueError) as error:
        _refuse_unsafe(path, config, error)
        if isinstance(error, TypeError):
            raise
        # Keras reports a layer that "could not be loaded"; say which weight and shapes.
        model = keras.saving.deserialize_keras_object(config, safe_mode=True)
        if isinstance(model, Task) and model.pre_split_layers() and is_pre_split_file(path):
            load_pre_split_weights(model, path)  # saved before the backbone/task split
        else:
            mismatch = weight_mismatches(model, path)
            if mismatch:
                raise UserError(f"{path}: {mismatch[0]}") from error
            raise
    from zoo.converters._tensors import refuse_non_finite

    # A NaN or infinite weight answers `nan` to every input: the check of hub checkpoints.
    refuse_non_finite(((w.path, w) for w in model.weights), str(path), what="weight")
    if expect is not None and not isinstance(model, expect):
        raise UserError(f"{name_or_path!r} is a {type(model).__name__}, not a "
                        f"{expect.__name__}")
    from zoo.models.quantization import settle_loaded_policies
    from zoo.models.vit.model import VisionTransformer

    settle_loaded_policies(model)  # an int8 model's layers, each with its own policy
    model.preset_name = source_name(name_or_path)  # what `zoo.export(model)` names it
    if isinstance(model, VisionTransformer):
        # Keras' own `model.export` takes only a model that was called once (it reads the
        # input signature of that call): a symbolic call costs nothing.
        model(keras.Input(tuple(model.image_shape)))
        if (num_classes not in (None, model.num_classes) or class_names is not None
                and list(class_names) != list(model.class_names or [])):
            model = model.with_new_head(num_classes, class_names)  # "<name>-<n>-classes"
            model(keras.Input(tuple(model.image_shape)))
    elif num_classes is not None or class_names is not None:
        raise UserError(f"num_classes and class_names are a ViT's; {name_or_path!r} is a "
                        f"{type(model).__name__}")
    if dtype is not None:
        from zoo.models.surgery import in_dtype

        preset_name = model.preset_name
        model = in_dtype(model, dtype)
        model.preset_name = preset_name
    return model


def source_name(name_or_path: str) -> str:
    """The name a model is known by from where it was loaded: a shipped name as it is, a
    model folder's (or `.../NAME/model.keras`'s) folder name, a file's stem, a hub handle's
    model name (`hf://Helsinki-NLP/opus-mt-en-de` -> `opus-mt-en-de`)."""
    from zoo.hub.handles import is_handle, model_name

    if is_handle(str(name_or_path)):
        return model_name(str(name_or_path))
    path = Path(str(name_or_path).partition("#")[0])  # no URL fragment (#sha256=...)
    return path.parent.name if path.name == MODEL_FILE else path.stem


def _refuse_unsafe(path: Path, config: Any, error: Exception) -> None:
    """A file Keras' safe mode refused (a lambda, `os.system`, an unknown class): one line
    (`zoo.hub.safe_config`). Other errors of Keras' pass on as they are, bugs included."""
    from zoo.hub.safe_config import refused_reference

    refused = refused_reference(config)
    if refused is not None:
        raise UserError(f"refusing {path}: its config asks for {refused}; a model file may "
                        "name only Keras' and the zoo's own classes and functions (safe mode "
                        "runs no code from it)") from error


def _register_classes() -> None:
    import zoo.models.captioner.captioner  # noqa: F401
    import zoo.models.causal_lm.causal_lm  # noqa: F401
    import zoo.models.sentence_encoder.model  # noqa: F401  registers the classes for deserialization
    import zoo.models.translator.model  # noqa: F401
    import zoo.models.vit.model  # noqa: F401
    import zoo.models.clip.model  # noqa: F401


def _weights_file(path: str | os.PathLike) -> Any:
    """The open `h5py.File` of a `.weights.h5` file or of a `.keras` archive's weights."""
    import h5py

    path = str(path)
    if path.endswith(".keras"):
        with zipfile.ZipFile(path) as archive:
            return h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")
    return h5py.File(path, "r")


def _stored_weights(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], str]]:
    """`{h5 key: (shape, layer name)}` of a `.weights.h5` file or a `.keras` archive."""
    import h5py

    found: dict[str, tuple[tuple[int, ...], str]] = {}
    with _weights_file(path) as f:
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
    from zoo.layers.keras_internals import saved_weight_paths

    return saved_weight_paths(model)


def load_weights(model: keras.Model, path: str | os.PathLike) -> keras.Model:
    """Loads the weights of a `.weights.h5` file or a `.keras` archive into `model`.

    Unlike `model.load_weights`, a checkpoint that does not fit, or holds a NaN or infinite
    value, is refused before anything is assigned, with a message that names the first
    mismatched weight and both shapes (or the first damaged weight).

    Raises:
        ValueError: the checkpoint's weights do not fit `model`, or are not finite.
    """
    from zoo.converters._tensors import refuse_non_finite

    mismatches = weight_mismatches(model, path)
    if mismatches:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        raise UserError(f"{path} does not fit {model.name}: {mismatches[0]}{more}")
    with _weights_file(path) as stored:  # named as the model names them
        refuse_non_finite(((variable.path, stored[key]) for key, variable
                           in _model_weights(model).items()), str(path), what="weight")
    model.load_weights(path)
    return model


def write_manifest(folder: str | os.PathLike, kind: str, description: str,
                   **extra: Any) -> dict:
    """Writes `manifest.json` for `folder/model.keras` (with its sha256) and returns it."""
    folder = Path(folder)
    info = {"kind": kind, "description": description,
            "sha256": file_sha256(folder / MODEL_FILE), **extra}
    text = json.dumps(info, indent=2) + "\n"
    write_atomically(folder / MANIFEST, lambda path: Path(path).write_text(text))
    return info
