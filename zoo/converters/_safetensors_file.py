"""Reading a `.safetensors` file whose every byte is checked before it is trusted.

The format: 8 bytes (little-endian) giving the header's length N, N bytes of JSON (each tensor's
`dtype`, `shape` and `data_offsets` into the data that follows), then the data. A file from the
hub may be truncated by a failed download, damaged, or not a safetensors file at all; each is
one `UserError` line naming the file and what is wrong, found from the header alone: the length
is compared with the file's size before anything is read (a length of 2**62 allocates nothing),
and each tensor's offsets and size are checked against the data before its bytes are read.

Tensors are read with NumPy (`bfloat16` ones as float32, which NumPy has no type for).
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

import numpy as np

from zoo.training.errors import UserError
from zoo.layers.validation import is_int

# safetensors' own limit on the header (its MAX_HEADER_SIZE).
HEADER_LIMIT = 100_000_000
# The format's dtypes that NumPy reads, little-endian; BF16 is read as its 16 bits.
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
           "I32": "<i4", "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2",
           "U8": "u1", "BOOL": "?"}


def read_safetensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The tensors of a `.safetensors` file, by name, as NumPy arrays.

    Raises:
        UserError: the file is not a regular file, is truncated, is not a safetensors file,
            or its header is damaged (not JSON, a tensor past the end of the data, a size
            that does not fit the shape, an unknown dtype); one line naming the file.
        FileNotFoundError, PermissionError: as `open` raises them.
    """
    where = os.fspath(path)
    with open(path, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{where} is not a regular file, so not a safetensors file")
        header, start = _read_header(file, info.st_size, where)
        entries = _check_entries(header, info.st_size - start, where)
        tensors = {}
        for name, (dtype, shape, begin, count) in entries.items():
            file.seek(start + begin)
            array = np.fromfile(file, dtype=np.dtype(_DTYPES[dtype]), count=count)
            if array.size != count:  # the file shrank while it was read
                raise UserError(f"{where} is truncated: tensor {name!r} ends past the end")
            if dtype == "BF16":  # the high half of a float32
                array = (array.astype("uint32") << 16).view("float32")
            tensors[name] = array.reshape(shape)
    return tensors


def _read_header(file: Any, size: int, where: str) -> tuple[dict, int]:
    """The parsed header and the offset at which the data starts."""
    head = file.read(8)
    if len(head) < 8:
        raise UserError(f"{where} is not a safetensors file: it has {size} bytes, fewer than "
                        "the 8 that give its header's length (truncated?)")
    length = int.from_bytes(head, "little")
    if length > size - 8:
        raise UserError(f"{where} is truncated or not a safetensors file: its first 8 bytes "
                        f"give a header of {length:,} bytes, but the file has {size:,}")
    if length > HEADER_LIMIT:
        raise UserError(f"{where} is not a safetensors file: its header of {length:,} bytes "
                        f"is over the format's limit of {HEADER_LIMIT:,}")
    try:
        header = json.loads(file.read(length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{where} is not a safetensors file: its header is not JSON "
                        f"({reason})") from None
    if not isinstance(header, dict):
        raise UserError(f"{where} is not a safetensors file: its header is not a JSON object")
    return header, 8 + length


def _check_entries(header: dict, data_size: int, where: str
                   ) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
    """`name -> (dtype, shape, first byte, element count)` of every tensor, after checking
    that each lies inside the data, fits its shape and overlaps no other."""
    entries, spans = {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("shape"), list)
                and isinstance(entry.get("data_offsets"), list)
                and len(entry["data_offsets"]) == 2
                and all(_is_count(v) for v in entry["shape"] + entry["data_offsets"])):
            raise UserError(f"{where} has a damaged header: the entry of tensor {name!r} is "
                            "not {dtype, shape, data_offsets: [begin, end]}")
        dtype = entry.get("dtype")
        if dtype not in _DTYPES:
            raise UserError(f"{where}: tensor {name!r} has dtype {dtype!r}, which the zoo "
                            f"does not read (it reads {', '.join(_DTYPES)})")
        begin, end = entry["data_offsets"]
        if end > data_size:
            raise UserError(f"{where} is truncated or damaged: tensor {name!r} ends at byte "
                            f"{end:,} of the data, past its end ({data_size:,} bytes)")
        count = math.prod(entry["shape"])
        if end - begin != count * np.dtype(_DTYPES[dtype]).itemsize:
            raise UserError(f"{where} has a damaged header: tensor {name!r} of shape "
                            f"{tuple(entry['shape'])} and dtype {dtype} does not fill bytes "
                            f"{begin:,} to {end:,} of the data")
        entries[name] = (dtype, tuple(entry["shape"]), begin, count)
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise UserError(f"{where} has a damaged header: tensors {first!r} and {second!r} "
                            "share bytes of the data")
    return entries


def _is_count(value: Any) -> bool:
    return is_int(value) and value >= 0
