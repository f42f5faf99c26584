"""Hub handles: `hf://ORG/NAME[@REVISION]` and folders laid out as the hub has them.

A handle names a public checkpoint; the first use downloads it with `huggingface_hub` (so its
cache, `revision=`, tokens for private repositories and `HF_HUB_OFFLINE=1` work as users know
them), converts it into a zoo model, and keeps that model as a `.keras` file:

    <cache>/hub/<org>--<name>/<commit>/model.keras     converted model of that commit
    <cache>/hub/<org>--<name>/refs/<revision>           the commit a revision resolved to
    <cache>/hub/local/<folder digest>/<files digest>/model.keras   for local folders

`<cache>` is the zoo's cache folder (`$ZOO_CACHE_DIR`, else `~/.cache/attention-zoo`). A
second use of a handle reads the recorded commit and loads the kept file: no conversion and
no network. `resolve_handle(handle, refresh=True)` asks the hub again (a moved branch).
Files are written under a temporary name and renamed into place, so an interrupted or failed
conversion leaves nothing behind.

The architecture is read from `config.json`:

    ViTForImageClassification      -> VisionTransformer (classifies with `id2label`)
    DeiTForImageClassification[WithTeacher] -> VisionTransformer with a distillation token
    timm ViT (`architecture`, `pretrained_cfg`) -> VisionTransformer (timm's `label_names`)
    MarianMTModel (OPUS-MT)        -> Translator with a `zoo.text.marian.MarianTokenizer`
    GPT2LMHeadModel (gpt2, distilgpt2, ...) -> CausalLM with its byte-level BPE tokenizer
    VisionEncoderDecoderModel (ViT + GPT-2) -> ImageCaptioner with its BPE tokenizer
    BERT sentence-transformers     -> SentenceEncoder (needs `modules.json`)
    CLIPModel                      -> CLIP with its `zoo.text.clip_tokenizer.CLIPTokenizer`

DeiTs: the non-distilled `facebook/deit-*` checkpoints are ViTForImageClassification; the
distilled ones (`facebook/deit-*-distilled-*`, DeiTForImageClassificationWithTeacher) become
a ViT with DeiT's distillation token and two heads whose logits are averaged, as Hugging
Face computes them (`zoo.converters.hf_vit.deit_from_hf`); a DeiTForImageClassification
checkpoint classifies from the class token alone. timm's distilled DeiTs
(`deit_*_distilled_*`) are not supported. Weights come from `model.safetensors` (or its
shards), else from `pytorch_model.bin` read with `torch.load(weights_only=True)`.

Images: the converted ViTs take 0..255 images, as the shipped ViT does; the checkpoint's
image processor normalisation (`preprocessor_config.json`, or timm's `mean`/`std`) is built in
(folded into the patch projection where it is not mean = std = 0.5). Images of another size
are resized straight to the model's size (no resize-then-center-crop as DeiT's processor
does), so such images can score slightly differently from the reference pipeline.

Example (a handle loads through `zoo.load`, the one door; `zoo.hub.loader.resolve` sends it
here):
    >>> import zoo
    >>> model = zoo.load("hf://Helsinki-NLP/opus-mt-en-de")     # doctest: +SKIP
    >>> model.translate(["A dog runs through the snow."])        # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from zoo.training.files.disk_faults import naming
from zoo.training.files.file_store import cache_dir, write_atomically
from zoo.training.errors import UserError

if TYPE_CHECKING:
    import keras

HANDLE_PREFIX = "hf://"
MODEL_FILE = "model.keras"
# config.json's architecture -> what the zoo makes of it.
SUPPORTED_ARCHITECTURES = {
    "ViTForImageClassification": "vit",
    "DeiTForImageClassification": "deit",
    "DeiTForImageClassificationWithTeacher": "deit",
    "MarianMTModel": "marian",
    "BertModel": "sentence-encoder",
    "GPT2LMHeadModel": "gpt2",
    "CLIPModel": "clip",
    "VisionEncoderDecoderModel": "vision-encoder-decoder",
}
SUPPORTED_DESCRIPTION = ("ViTForImageClassification, DeiTForImageClassification[WithTeacher] "
                         "(distilled DeiTs), timm ViTs (vit_*/deit_* with a class token, not "
                         "the distilled deit_*_distilled_*), MarianMTModel (OPUS-MT), BERT "
                         "sentence-transformers models, GPT2LMHeadModel, CLIPModel, "
                         "VisionEncoderDecoderModel (ViT + GPT-2)")
# What a conversion reads from a repository (the weights are fetched separately).
_CONFIG_FILES = ["config.json", "preprocessor_config.json", "tokenizer_config.json",
                 "special_tokens_map.json", "source.spm", "target.spm", "vocab.json", "merges.txt",
                 "target_vocab.json", "vocab.txt", "tokenizer.json", "modules.json",
                 "sentence_bert_config.json", "1_Pooling/config.json"]
_SAFETENSORS_FILES = ["model.safetensors", "model.safetensors.index.json",
                      "model-*-of-*.safetensors"]
_PICKLE_FILE = "pytorch_model.bin"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TRUE = {"1", "on", "yes", "true"}


# ---------------------------------------------------------------------- names and places
def is_handle(name: str) -> bool:
    """True for `hf://...`, and for a folder holding `config.json` but no `model.keras`
    (a checkpoint laid out as the hub has it)."""
    if not isinstance(name, (str, os.PathLike)):
        return False
    name = os.fspath(name)
    if name.startswith(HANDLE_PREFIX):
        return True
    folder = Path(name).expanduser()
    return (folder.is_dir() and (folder / "config.json").is_file()
            and not (folder / MODEL_FILE).exists())


def parse_handle(handle: str) -> tuple[str, str | None]:
    """`("ORG/NAME", revision or None)` of `hf://ORG/NAME[@REVISION]`.

    Raises:
        ValueError: a malformed handle (the message names it).
    """
    if not handle.startswith(HANDLE_PREFIX):
        raise UserError(f"{handle!r} is not a hub handle (hf://ORG/NAME[@REVISION])")
    repo, at, revision = handle[len(HANDLE_PREFIX):].partition("@")
    parts = repo.split("/")
    if (not 1 <= len(parts) <= 2 or not all(_NAME.fullmatch(p) for p in parts)
            or "--" in repo or ".." in repo
            or (at and not (_REVISION.fullmatch(revision) and ".." not in revision))):
        raise UserError(f"malformed hub handle {handle!r}: expected hf://ORG/NAME or "
                        "hf://ORG/NAME@REVISION")
    return repo, (revision or None)


def model_name(handle: str) -> str:
    """A plain name for a handle's model (e.g. a served model's folder): the repository's
    name (`hf://Helsinki-NLP/opus-mt-en-de@v1` -> `opus-mt-en-de`) or the folder's."""
    if os.fspath(handle).startswith(HANDLE_PREFIX):
        return parse_handle(handle)[0].rsplit("/", 1)[-1]
    return Path(handle).expanduser().resolve().name


def hub_cache_dir() -> Path:
    """Where converted hub models are kept: the zoo's cache folder's `hub/`
    (`zoo.training.files.file_store.cache_dir`)."""
    return cache_dir("hub")


def _hf_cache_dir() -> str:
    """The `huggingface_hub` cache, read from the environment at call time."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return os.path.expanduser(os.environ[variable])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _offline() -> bool:
    """`HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`), read at call time."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def _ref_file(repo: str, revision: str) -> Path:
    return hub_cache_dir() / repo.replace("/", "--") / "refs" / revision.replace("/", "%2F")


# ---------------------------------------------------------------------- resolving
def resolve_handle(handle: str, refresh: bool = False) -> Path:
    """The local `.keras` file of a hub handle or hub-layout folder, converted on first use.

    Args:
        handle: `hf://ORG/NAME`, `hf://ORG/NAME@REVISION` (a branch, tag or commit), or a
            folder with `config.json` and the checkpoint's files.
        refresh: ask the hub which commit the revision names now, instead of using the one
            recorded at the last conversion.

    Returns:
        The path of the converted model (`.../model.keras`).

    Raises:
        ValueError: a malformed handle, a repository or revision the hub does not have, an
            unsupported architecture, or a checkpoint that does not convert (a missing or
            misshapen tensor; a damaged, foreign or oversized file: a truncated
            safetensors file, a config.json that is not JSON or has a value out of range, a
            pytorch_model.bin holding Python objects); one line naming the handle and the
            file.
        FileNotFoundError: nothing cached and the hub unreachable (offline mode or no
            network), or a folder without the files its architecture needs.
        ModuleNotFoundError: `huggingface_hub` is not installed (or PyTorch, for a
            checkpoint that has only `pytorch_model.bin`).
    """
    handle = os.fspath(handle)
    if not handle.startswith(HANDLE_PREFIX):
        return _resolve_folder(Path(handle).expanduser())
    repo, revision = parse_handle(handle)
    revision = revision or "main"
    if not refresh:
        commit = revision if _COMMIT.fullmatch(revision) else _read_ref(repo, revision)
        if commit is not None:
            kept = hub_cache_dir() / repo.replace("/", "--") / commit / MODEL_FILE
            if kept.is_file():
                return kept
    folder = _download(handle, repo, revision)
    commit = folder.name
    target = hub_cache_dir() / repo.replace("/", "--") / commit / MODEL_FILE
    if not target.is_file():
        model = _convert(folder, handle, name=repo.rsplit("/", 1)[-1])
        _save_atomically(model, target, {"handle": handle, "repo": repo,
                                         "revision": revision, "commit": commit})
    if revision != commit:
        write_atomically(_ref_file(repo, revision), lambda path: path.write_bytes(commit.encode()))
    return target


def _read_ref(repo: str, revision: str) -> str | None:
    """The commit `revision` resolved to: our record, else the `huggingface_hub` cache's."""
    for ref in (_ref_file(repo, revision),
                Path(_hf_cache_dir()) / f"models--{repo.replace('/', '--')}" / "refs"
                / revision):
        try:
            with open(ref, "rb") as file:  # 40 hex digits: a longer file is not a ref
                commit = file.read(128).decode("utf-8", "replace").strip()
        except OSError:
            continue
        if _COMMIT.fullmatch(commit):
            return commit
    return None


def _download(handle: str, repo: str, revision: str) -> Path:
    """The snapshot folder of the files a conversion reads (weights: safetensors, else
    `pytorch_model.bin`)."""
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:
        raise ModuleNotFoundError(f"{handle}: loading hub handles needs huggingface_hub "
                                  "(pip install huggingface_hub)", name="huggingface_hub"
                                  ) from None

    def snapshot(patterns: list[str]) -> Path:
        return Path(huggingface_hub.snapshot_download(
            repo, revision=revision, cache_dir=_hf_cache_dir(), allow_patterns=patterns,
            local_files_only=_offline(), endpoint=os.environ.get("HF_ENDPOINT") or None))

    try:
        folder = snapshot(_CONFIG_FILES + _SAFETENSORS_FILES)
        if not any(folder.glob("*.safetensors")) and not (folder / _PICKLE_FILE).is_file():
            folder = snapshot([_PICKLE_FILE])
    except errors.GatedRepoError:
        raise UserError(f"{handle}: the repository is gated; accept its terms on the hub and "
                        "log in (hf auth login, or set HF_TOKEN)") from None
    except errors.RepositoryNotFoundError:
        raise UserError(f"{handle}: no such repository on the hub (or it is private: log in "
                        "with hf auth login, or set HF_TOKEN)") from None
    except errors.RevisionNotFoundError:
        raise UserError(f"{handle}: the repository has no revision {revision!r}") from None
    except errors.LocalEntryNotFoundError:
        why = ("offline mode is on (HF_HUB_OFFLINE=1)" if _offline()
               else "the hub cannot be reached")
        raise FileNotFoundError(f"{handle}: not in the Hugging Face cache ({_hf_cache_dir()}) "
                                f"and {why}; download it once with network access") from None
    except errors.HFValidationError as error:
        raise UserError(f"{handle}: {str(error).splitlines()[0]}") from None
    except errors.HfHubHTTPError as error:
        raise UserError(f"{handle}: the hub answered {str(error).splitlines()[0]}") from None
    return folder


def _resolve_folder(folder: Path) -> Path:
    """A hub-layout folder's converted model, kept under a digest of its path and files."""
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a checkpoint folder (no config.json)")
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    stamp = hashlib.sha256()
    for path in files:
        info = path.stat()
        stamp.update(f"{path.relative_to(folder)}\0{info.st_size}\0{info.st_mtime_ns}\n"
                     .encode())
    place = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    target = hub_cache_dir() / "local" / place / stamp.hexdigest()[:16] / MODEL_FILE
    if not target.is_file():
        model = _convert(folder, str(folder), name=folder.resolve().name)
        _save_atomically(model, target, {"folder": str(folder.resolve())})
    return target


# ---------------------------------------------------------------------- converting
def architecture(config: Mapping[str, Any], folder: str | os.PathLike | None = None) -> str:
    """What the zoo makes of a checkpoint: "vit", "deit", "timm-vit", "marian",
    "sentence-encoder", "gpt2" or "clip".

    Args:
        config: the parsed `config.json`.
        folder: the checkpoint's folder (a BERT model is a sentence encoder only with
            sentence-transformers' `modules.json` beside it).

    Raises:
        ValueError: an architecture the zoo cannot take; the message names it and the
            supported ones.
    """
    if "architecture" in config and ("pretrained_cfg" in config or "num_classes" in config):
        name = str(config["architecture"])
        if re.match(r"(vit|deit)_", name) and "distilled" not in name:
            return "timm-vit"
        raise UserError(f"the timm architecture {name!r} is not supported; supported are "
                        f"{SUPPORTED_DESCRIPTION}")
    names = config.get("architectures") or []
    names = [str(name) for name in (names if isinstance(names, list) else [names])]
    model_type = config.get("model_type")
    for name in names:
        if name in SUPPORTED_ARCHITECTURES:
            kind = SUPPORTED_ARCHITECTURES[name]
            if kind == "sentence-encoder" and (
                    folder is None or not (Path(folder) / "modules.json").is_file()):
                raise UserError(
                    "BertModel is supported as a sentence-transformers model only; this "
                    "checkpoint has no modules.json")
            return kind
    if model_type == "marian" and not names:
        return "marian"
    if model_type == "gpt2" and (not names or "GPT2Model" in names):
        return "gpt2"  # GPT2Model: the same tensors without a head (GPT-2's is tied)
    shown = ", ".join(names) or f"model_type {model_type!r}"
    raise UserError(f"the architecture {shown} is not supported; supported are "
                    f"{SUPPORTED_DESCRIPTION}")


def convert_folder(folder: str | os.PathLike, name: str | None = None) -> keras.Model:
    """Converts a hub-layout checkpoint folder into a zoo model (not kept; see
    `resolve_handle`).

    Raises:
        ValueError, FileNotFoundError: as `resolve_handle`.
    """
    folder = Path(folder)
    return _convert(folder, str(folder), name=name or folder.resolve().name)


def _convert(folder: Path, where: str, name: str) -> keras.Model:
    """The zoo model of a snapshot folder; every failure is one line naming `where`."""
    from zoo.converters._config import read_config_file

    name = re.sub(r"\W", "_", name)
    try:
        if not (folder / "config.json").exists():
            raise FileNotFoundError("the checkpoint has no config.json")
        config = read_config_file(folder / "config.json")
        kind = architecture(config, folder)
        from zoo.hub.builders import BUILDERS

        return BUILDERS[kind](folder, config, name)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{where}: {_one_line(error)}") from None
    except UserError as error:  # a plain ValueError is a bug: its traceback stays
        raise UserError(f"{where}: {_one_line(error)}") from None


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


# ---------------------------------------------------------------------- writing the cache
def _save_atomically(model: keras.Model, target: Path, source: Mapping[str, str]) -> None:
    """Saves `model` at `target` under a temporary name first; `source.json` beside it
    says where it came from."""
    folder = target.parent
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{target.stem}.part-{os.getpid()}.keras"
    try:
        with naming(target, partial):  # a full disk names the model, not its partial file
            model.save(partial)
        write_atomically(folder / "source.json",
                         lambda path: path.write_text(json.dumps(dict(source), indent=2) + "\n"))
        with naming(target, partial):
            os.replace(partial, target)
    except BaseException:
        if created:
            (folder / "source.json").unlink(missing_ok=True)
        raise
    finally:
        partial.unlink(missing_ok=True)
        if created and not target.exists():
            try:
                folder.rmdir()
            except OSError:
                pass
