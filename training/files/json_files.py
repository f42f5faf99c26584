"""Reading a JSON file that someone else wrote (a checkpoint's `config.json`, `vocab.json`,
`tokenizer_config.json`, ...): at most `JSON_FILE_LIMIT` bytes are read, and every way the file
can be wrong is one `UserError` line that names it.

The limit keeps a damaged or hostile file from filling memory (a `config.json` that is a link
to /dev/zero grows without end under `json.load`). The largest JSON files the zoo reads are
OPUS-MT's `vocab.json` (about 1 to 2 MB for 60,000 pieces) and a `config.json` with
ImageNet-21k's `id2label` (about 1 MB); 16 MiB leaves room for eight times that.
"""

from __future__ import annotations

import json
import os
from typing import Any

from zoo.training.errors import UserError

JSON_FILE_LIMIT = 16 * 1024 * 1024
_KINDS = {dict: "an object", list: "an array", str: "a string", int: "a number",
          float: "a number", bool: "true or false", type(None): "null"}


def read_json_file(path: str | os.PathLike, *, expect: type | None = None,
                   limit: int = JSON_FILE_LIMIT) -> Any:
    """The parsed contents of a JSON file of at most `limit` bytes.

    Args:
        path: the file (a link is followed).
        expect: `dict` or `list`: the kind of value the file must hold; None for any.
        limit: the largest size read, in bytes; at most `limit + 1` bytes are ever read.

    Returns:
        The parsed value.

    Raises:
        UserError: the file is larger than `limit`, is not UTF-8, is not JSON (or nests too
            deeply for the parser), or holds another kind of value than `expect`; one line
            naming the file.
        FileNotFoundError, IsADirectoryError, PermissionError: as `open` raises them.

    Example:
        >>> import pathlib, tempfile
        >>> folder = tempfile.TemporaryDirectory()  # deleted with the object
        >>> path = pathlib.Path(folder.name) / "config.json"
        >>> _ = path.write_text('{"patch_size": 16}')
        >>> read_json_file(path, expect=dict)
        {'patch_size': 16}
    """
    with open(path, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{os.fspath(path)} is larger than the {_size(limit)} a JSON file may "
                        "have here; it is not a checkpoint's JSON file (or is damaged)")
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise UserError(f"{os.fspath(path)} is not UTF-8 text, so not JSON (byte "
                        f"{error.start})") from None
    except RecursionError:
        raise UserError(f"{os.fspath(path)} nests its JSON too deeply to be read") from None
    except ValueError as error:  # JSONDecodeError, and numbers too long for an int
        raise UserError(f"{os.fspath(path)} is not valid JSON: "
                        f"{str(error).splitlines()[0]}") from None
    if expect is not None and not isinstance(value, expect):
        raise UserError(f"{os.fspath(path)} holds {_KINDS.get(type(value), 'a value')}, not "
                        f"{_KINDS.get(expect, expect.__name__)}")
    return value


def _size(limit: int) -> str:
    return f"{limit // 2 ** 20} MiB" if limit % 2 ** 20 == 0 else f"{limit:,} bytes"
