"""Putting an export's version folder in place, whole: `DIR/<name>/<version>/` appears
complete or not at all (TF Serving loads every numeric folder it sees), of two exports of one
version only one wins, and `--force` swaps the old version out atomically where Linux can
(renameat2 RENAME_EXCHANGE). `zoo.serving.export` writes each version under a hidden
temporary name `.VERSION.tmp-PID-*` first; what a killed export left is removed later.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path

from zoo.training.files.file_store import process_alive


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Removes the hidden `.VERSION.tmp-PID-*` folders that killed exports left in `folder`
    (a model's folder), those whose process is gone; returns what it removed."""
    removed = []
    for path in sorted(folder.glob(".*.tmp-*-*")) if folder.is_dir() else []:
        pid = path.name.rpartition(".tmp-")[2].split("-")[0]
        if not pid.isdigit() or process_alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the system
    cannot."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # no such call or file system
        return False
    raise OSError(code, os.strerror(code), str(a))


def put_in_place(temporary: Path, target: Path, force: bool) -> None:
    """Renames the complete `temporary` folder to `target`; with `force` an existing target
    is swapped out (atomically where the system can) and deleted afterwards."""
    if target.exists() and force:
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex}")
        if _exchange(temporary, target):
            shutil.rmtree(temporary)  # now the old version
            return
        os.rename(target, old)
        try:
            os.rename(temporary, target)
        except OSError:
            os.rename(old, target)  # put the old version back
            raise
        shutil.rmtree(old)
        return
    try:
        # rename(2) refuses a non-empty target: of two exports of one version, one wins.
        if target.exists():
            raise FileExistsError(errno.EEXIST, "exists", str(target))
        os.rename(temporary, target)
    except OSError as error:
        if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        raise FileExistsError(
            f"{target} was written by another export meanwhile; pass --force to replace "
            "it") from None
