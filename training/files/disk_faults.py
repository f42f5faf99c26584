"""A full disk, a read-only file system, a write refused: how the zoo tells these faults of the
machine from its own bugs, and how a failed write names the file it could not write.

The operating system reports such a fault as an OSError whose `errno` is ENOSPC (no space
left), EDQUOT (quota exceeded), EROFS (read-only file system), EACCES or EPERM (permission
denied); TensorFlow's file functions (a SavedModel export, TensorBoard logs) raise
`tf.errors.ResourceExhaustedError`, `PermissionDeniedError` or `FailedPreconditionError` whose
message holds `PATH; <the system's message>`. `disk_fault(error)` gives either as one OSError
(errno, message, path); anything else, a ResourceExhaustedError for memory or an OSError of
another errno included, is not a disk fault and stays what it is.

A failed write(2) or fsync(2) names no file, and a write into a temporary file names the
temporary; `naming(path, temporary)` around a write makes its fault name the file the user
asked for:

    with naming(out / "model.keras", temporary):
        model.save(temporary)  # a full disk: OSError(ENOSPC, ..., "out/model.keras")

The `zoo` command prints a disk fault as one line, `describe(fault)`:
`cannot write out/model.keras: No space left on device`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from typing import Iterator

# Errnos of a disk that is full or refuses writes: the machine's fault, not the zoo's.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
DISK_FAULT_ERRNOS = DISK_FULL_ERRNOS | {errno.EACCES, errno.EPERM}
# TensorFlow's exceptions for a failed file operation (tensorflow/core/platform/errors.cc
# maps ENOSPC and EDQUOT to RESOURCE_EXHAUSTED, EACCES, EPERM and EROFS to
# PERMISSION_DENIED); looked up only where TensorFlow is loaded already.
_TF_ERRORS_MODULE = "tensorflow.python.framework.errors_impl"
_TF_FILE_ERRORS = ("ResourceExhaustedError", "PermissionDeniedError", "FailedPreconditionError")


def disk_fault(error: BaseException) -> OSError | None:
    """`error` as an OSError `(errno, message, path)` if it is a disk fault, else None.

    Args:
        error: any exception: an OSError, a TensorFlow error, anything else.

    Returns:
        `error` itself for an OSError whose errno is one of `DISK_FAULT_ERRNOS`; for a
        TensorFlow file error whose message holds one of their messages, a new OSError
        with the path the message names (or None); None for everything else.

    Example:
        >>> disk_fault(OSError(errno.ENOSPC, "No space left on device", "/x/model.keras"))
        OSError(28, 'No space left on device')
        >>> disk_fault(OSError(errno.EIO, "Input/output error")) is None
        True
    """
    if isinstance(error, OSError):
        return error if error.errno in DISK_FAULT_ERRNOS else None
    module = sys.modules.get(_TF_ERRORS_MODULE)
    classes = tuple(getattr(module, name) for name in _TF_FILE_ERRORS
                    if hasattr(module, name)) if module is not None else ()
    if not classes or not isinstance(error, classes):
        return None
    lines = str(getattr(error, "message", None) or error).strip().splitlines()
    line = lines[0] if lines else ""
    for code in sorted(DISK_FAULT_ERRNOS):
        reason = os.strerror(code)
        at = line.find(reason)
        if at < 0:
            continue
        # "[{{function_node ...}} ]PATH; No space left on device[ [Op:...]]"
        before = line[:at].rstrip()
        path = None
        if before.endswith(";"):
            path = re.sub(r"^\{\{.*?\}\}\s*", "", before[:-1]).strip() or None
        return OSError(code, reason, path)
    return None


def describe(fault: OSError) -> str:
    """One line for a disk fault: `cannot write PATH: No space left on device` (a full or
    read-only disk), `cannot access PATH: Permission denied` (a refused read or write)."""
    verb = "cannot write" if fault.errno in DISK_FULL_ERRNOS else "cannot access"
    where = f" {fault.filename}" if fault.filename else ""
    return f"{verb}{where}: {fault.strerror or os.strerror(fault.errno or 0)}"


def _is_within(name: object, folder: str | os.PathLike) -> bool:
    name, folder = os.fspath(name), os.fspath(folder)  # type: ignore[arg-type]
    return name == folder or name.startswith(folder.rstrip(os.sep) + os.sep)


@contextlib.contextmanager
def naming(path: str | os.PathLike, temporary: str | os.PathLike | None = None
           ) -> Iterator[None]:
    """Within the block, a disk fault that names no file, or names `temporary` (a file or a
    folder, and what lies in it), is raised as an OSError that names `path`; a TensorFlow
    disk fault that names another path becomes an OSError naming that path. Every other
    exception passes unchanged.

    Args:
        path: the file or folder the block writes, as the user knows it.
        temporary: where the block writes first (renamed to `path` when complete), if
            anywhere.
    """
    try:
        yield
    except Exception as error:
        fault = disk_fault(error)
        if fault is None:
            raise
        named = fault.filename
        if named is None or (temporary is not None and _is_within(named, temporary)):
            raise OSError(fault.errno, fault.strerror, os.fspath(path)) from error
        if fault is not error:
            raise fault from error
        raise
