"""The attention zoo: a Transformer translator and a Vision Transformer, with their recipes.

    import zoo
    translator = zoo.load("translator-multi30k-en-de")
    translator.translate(["A man is riding a bicycle."])
    zoo.export(translator, "serving")  # serving/translator/1/, for TensorFlow Serving

The model classes are `zoo.Translator`, `zoo.VisionTransformer` and `zoo.SentenceEncoder`
(defined in `zoo.models`), the tokenizers `zoo.SubwordTokenizer` and `zoo.MarianTokenizer`
(`zoo.text`).

`import zoo` is cheap: Keras (and TensorFlow) load on first use of a name that needs them,
so `zoo.list_models()` and the `zoo --help` / `zoo models` commands never import them.
A mistake in what the user gave raises `zoo.UserError` (a ValueError; see training/errors.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# `zoo.layers` and `zoo.training` are the repository's top-level `layers/` and `training/`
# folders, mapped there by pyproject.toml's package-dir: a wheel installs them inside zoo/, an
# editable install (`pip install -e .`) finds them where they are. A checkout is used through
# such an install; nothing here adds the checkout's other folders to `zoo`.

# Public name -> the module that defines it and its name there; imported on first access
# (PEP 562).
_LAZY = {
    "MarianTokenizer": ("zoo.text.marian", "MarianTokenizer"),
    "SentenceEncoder": ("zoo.models.sentence_encoder.model", "SentenceEncoder"),
    "SubwordTokenizer": ("zoo.text.tokenizer", "SubwordTokenizer"),
    "Translator": ("zoo.models.translator.model", "Translator"),
    "UserError": ("zoo.training.errors", "UserError"),
    "VisionTransformer": ("zoo.models.vit.model", "VisionTransformer"),
    "export": ("zoo.serving.export", "export_model"),
    "list_models": ("zoo.hub.loader", "list_models"),
    "load": ("zoo.hub.loader", "load"),
    "load_weights": ("zoo.hub.loader", "load_weights"),
    "quantize": ("zoo.models.quantization", "quantize_model"),
}

__all__ = ["MarianTokenizer", "SentenceEncoder", "SubwordTokenizer", "Translator", "UserError",
           "VisionTransformer", "export", "list_models", "load", "load_weights", "quantize"]

if TYPE_CHECKING:
    from zoo.training.errors import UserError  # noqa: F401
    from zoo.models.sentence_encoder.model import SentenceEncoder  # noqa: F401
    from zoo.models.translator.model import Translator  # noqa: F401
    from zoo.models.vit.model import VisionTransformer  # noqa: F401
    from zoo.text.marian import MarianTokenizer  # noqa: F401
    from zoo.text.tokenizer import SubwordTokenizer  # noqa: F401
    from zoo.hub.loader import list_models, load, load_weights  # noqa: F401
    from zoo.serving.export import export_model as export  # noqa: F401
    from zoo.models.quantization import quantize_model as quantize  # noqa: F401


def __getattr__(name: str) -> Any:
    """The lazily imported public names (`zoo.load`, ...) and submodules (`zoo.hub.loader`)."""
    if name == "__version__":
        from zoo.version import zoo_version

        globals()[name] = zoo_version()
        return globals()[name]
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise  # the submodule exists but needs a package that is missing
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"__version__"})
