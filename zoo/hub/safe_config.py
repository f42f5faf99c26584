"""What in a `.keras` file's config Keras' safe mode refuses to build, in words.

`zoo.load` loads with `safe_mode=True`: no code from a model file runs. Keras refuses a
Python lambda (a `Lambda` layer's function) and any class or function that is neither Keras'
own nor registered (`os.system`, `subprocess.Popen`, `eval`, a class of an unknown package),
but it refuses with a ValueError or a TypeError, the types of a bug, and a long message.
`refused_reference(config)` says what such a config names, so that `zoo.load` refuses the
file in one line (a `zoo.UserError`) and a bug keeps its traceback.
"""

from __future__ import annotations

import importlib
from typing import Any, Iterator

# Packages whose classes Keras itself imports by module name (keras.saving's rule).
KERAS_PACKAGES = ("keras", "keras_hub", "keras_cv", "keras_nlp")
# Where Keras looks up a built-in function stored by name (`"relu"`, `"glorot_uniform"`).
BUILTIN_MODULES = ("activations", "constraints", "initializers", "losses", "metrics",
                   "optimizers", "regularizers")


def refused_reference(config: Any) -> str | None:
    """The first object `config` asks for that safe mode does not build, in words: `a Python
    lambda`, `the function os.system`, `the class subprocess.Popen`; None when every object
    in it is Keras' own or registered (a class of the zoo's, say).

    Args:
        config: the parsed `config.json` of a `.keras` file.

    Example:
        >>> refused_reference({"module": "os", "class_name": "function", "config": "system",
        ...                    "registered_name": "function"})
        'the function os.system'
        >>> refused_reference({"module": "keras.layers", "class_name": "Dense",
        ...                    "config": {"units": 2}, "registered_name": None}) is None
        True
    """
    for item in _objects(config):
        refused = _refused(item)
        if refused is not None:
            return refused
    return None


def _objects(value: Any) -> Iterator[dict]:
    """The serialized objects (dicts with a `class_name`) in `value`, outermost first."""
    if isinstance(value, dict):
        if isinstance(value.get("class_name"), str):
            yield value
        for item in value.values():
            yield from _objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item)


def _refused(item: dict) -> str | None:
    """`_objects`' one object in words if safe mode refuses it, else None."""
    import keras

    class_name, module = item["class_name"], item.get("module")
    if class_name == "__lambda__":
        return "a Python lambda"
    if class_name.startswith("__"):  # Keras' encodings of tensors, arrays, bytes, ...
        return None
    if class_name == "function":
        name = item.get("config")
        if not isinstance(name, str) or keras.saving.get_registered_object(name) is not None:
            return None
        if module in (None, "builtins"):
            if any(callable(getattr(getattr(keras, place, None), name, None))
                   for place in BUILTIN_MODULES):
                return None
        elif _in_keras(module, name):
            return None
        return f"the function {module or 'builtins'}.{name}"
    registered = item.get("registered_name")
    for key in (registered, class_name):
        if isinstance(key, str) and keras.saving.get_registered_object(key) is not None:
            return None
    if isinstance(module, str) and _in_keras(module, class_name):
        return None
    return f"the class {module}.{class_name}" if module else f"the class {class_name}"


def _in_keras(module: str, name: str) -> bool:
    """Whether `module.name` exists in one of the Keras packages (imported as Keras would)."""
    if module.split(".")[0] not in KERAS_PACKAGES:
        return False
    try:
        return getattr(importlib.import_module(module), name, None) is not None
    except ImportError:
        return False
