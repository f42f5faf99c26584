"""A checkpoint's configuration, read and checked in one place: `config.json` through the
size-limited JSON reader, and each number the converters build a model from through
`config_int` / `config_float`, so that a damaged or foreign file (a patch size of 0, a head
count that does not divide the width, a string where a number belongs) is one `UserError`
line that names the file and the value, not a traceback from deep inside Keras.

A `config.json` read from disk is a `ConfigFile`: a dict that remembers its path for those
messages. A config passed in by the caller (a dict, a `transformers` config) is "the config".
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

from zoo.training.errors import UserError
from zoo.training.files.json_files import read_json_file

_REQUIRED = object()


class ConfigFile(dict):
    """A parsed `config.json` that knows its path (`path`), for messages."""

    def __init__(self, values: Mapping[str, Any], path: str | os.PathLike) -> None:
        super().__init__(values)
        self.path = os.fspath(path)


def read_config_file(path: str | os.PathLike) -> ConfigFile:
    """`config.json` (a JSON object of at most `JSON_FILE_LIMIT` bytes) as a `ConfigFile`.

    Raises:
        UserError: too large, not JSON, or not an object; the message names the file.
        FileNotFoundError: no such file.
    """
    return ConfigFile(read_json_file(path, expect=dict), path)


def load_config(config: Any, source: Any) -> Any:
    """`config` as given, or the `config.json` beside a checkpoint path when it is None."""
    if config is not None:
        return config
    if isinstance(source, (str, os.PathLike)):
        folder = os.fspath(source)
        if not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        path = os.path.join(folder, "config.json")
        if os.path.exists(path):
            return read_config_file(path)
    raise UserError("pass the checkpoint's config (a transformers config, or the dict of its "
                    "config.json); none was found beside the checkpoint")


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """`config[key]` for a dict (a parsed config.json), `config.key` for a config object."""
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


def config_name(config: Any) -> str:
    """How messages name `config`: its file's path, or "the config"."""
    return config.path if isinstance(config, ConfigFile) else "the config"


def config_int(config: Any, key: str, default: Any = _REQUIRED, *, minimum: int = 1) -> int:
    """`config`'s `key` as an int of at least `minimum` (an integral float such as 768.0
    counts); `default` when the key is absent or null.

    Raises:
        UserError: the key is missing (and has no default), or its value is not an integer
            of at least `minimum`; the message names the file, the key and the value.
    """
    value = config_value(config, key)
    if value is None:
        if default is _REQUIRED:
            raise UserError(f"{config_name(config)} has no {key}")
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        expected = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise UserError(f"{config_name(config)}: {key} must be {expected}; got {value!r}")
    return value


def config_float(config: Any, key: str, default: float, *, minimum: float = 0.0,
                 below: float | None = None) -> float:
    """`config`'s `key` as a finite float in `[minimum, below)` (`below` None: no upper
    bound); `default` when the key is absent or null.

    Raises:
        UserError: the value is not such a number; the message names the file and key.
    """
    value = config_value(config, key)
    if value is None:
        return default
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value < minimum
            or (below is not None and value >= below)):
        bounds = f"from {minimum} to {below} (excluded)" if below is not None else (
            f">= {minimum}")
        raise UserError(f"{config_name(config)}: {key} must be a number {bounds}; "
                        f"got {value!r}")
    return float(value)


def check_heads(config: Any, width: int, heads: int, width_key: str, heads_key: str) -> None:
    """Refuses a head count that does not divide the width (each head takes an equal part).

    Raises:
        UserError: naming the file, both keys and their values.
    """
    if width % heads:
        raise UserError(f"{config_name(config)}: {heads_key} {heads} does not divide "
                        f"{width_key} {width} (each attention head takes an equal part)")
