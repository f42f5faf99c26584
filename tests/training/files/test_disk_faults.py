"""`zoo.training.files.disk_faults`: which errors are a full or read-only disk, the path they name,
and the file store's writes and an archive's extraction under them (whole or not at all, the
path named). A checkpoint under a disk fault: tests/training/test_checkpoint_disk_faults.py."""

from __future__ import annotations

import errno
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from zoo.training.files.disk_faults import describe, disk_fault, naming
from zoo.training.files.file_store import write_atomically


def _tf_errors():
    tf = pytest.importorskip("tensorflow")
    return tf.errors


def _fault(code: int) -> OSError:
    """What write(2) raises on a full or read-only disk: an OSError naming no file."""
    return OSError(code, os.strerror(code))


# (name, the error (a function of TensorFlow's errors module), (errno, path) or None)
CLASSES = [
    ("ENOSPC", lambda tf: OSError(errno.ENOSPC, "No space left on device", "/x/m.keras"),
     (errno.ENOSPC, "/x/m.keras")),
    ("EDQUOT", lambda tf: _fault(errno.EDQUOT), (errno.EDQUOT, None)),
    ("EROFS", lambda tf: OSError(errno.EROFS, "Read-only file system", "/ro"),
     (errno.EROFS, "/ro")),
    ("EACCES", lambda tf: PermissionError(errno.EACCES, "Permission denied", "/root/x"),
     (errno.EACCES, "/root/x")),
    ("EPERM", lambda tf: _fault(errno.EPERM), (errno.EPERM, None)),
    ("TF full disk", lambda tf: tf.ResourceExhaustedError(
        None, None, "/e/1/saved_model.pb.tmp12; No space left on device"),
     (errno.ENOSPC, "/e/1/saved_model.pb.tmp12")),
    ("TF full disk in a function", lambda tf: tf.ResourceExhaustedError(
        None, None, "{{function_node __wrapped__MergeV2Checkpoints_device_/job:localhost/"
                    "replica:0/task:0/device:CPU:0}} /e/v/variables.index; No space left on "
                    "device [Op:MergeV2Checkpoints]"), (errno.ENOSPC, "/e/v/variables.index")),
    ("TF read-only", lambda tf: tf.PermissionDeniedError(
        None, None, "/e/.1.tmp-9; Read-only file system"), (errno.EROFS, "/e/.1.tmp-9")),
    ("TF quota", lambda tf: tf.FailedPreconditionError(
        None, None, "/q/f; Disk quota exceeded"), (errno.EDQUOT, "/q/f")),
    # Not disk faults: other errnos, memory, a graph's precondition, other types.
    ("EIO", lambda tf: OSError(errno.EIO, "Input/output error"), None),
    ("ENOENT", lambda tf: FileNotFoundError(errno.ENOENT, "No such file", "/x"), None),
    ("an OSError without errno", lambda tf: PermissionError("cannot write /srv: denied"), None),
    ("TF out of memory", lambda tf: tf.ResourceExhaustedError(
        None, None, "OOM when allocating tensor with shape[4096,4096]"), None),
    ("TF uninitialized variable", lambda tf: tf.FailedPreconditionError(
        None, None, "Could not find variable dense/kernel"), None),
    ("TF not found", lambda tf: tf.NotFoundError(None, None, "/x; No such file"), None),
    ("a ValueError naming the message", lambda tf: ValueError("No space left on device"),
     None),
]


@pytest.mark.parametrize("name, make, expected", CLASSES, ids=[c[0] for c in CLASSES])
def test_disk_fault_tells_a_full_or_read_only_disk_from_everything_else(name, make,
                                                                        expected):
    fault = disk_fault(make(_tf_errors()))
    if expected is None:
        assert fault is None
    else:
        assert isinstance(fault, OSError)
        assert (fault.errno, fault.filename) == expected
        assert fault.strerror == os.strerror(expected[0])


def test_describe_says_write_for_a_full_disk_and_access_for_a_refusal():
    assert describe(OSError(errno.ENOSPC, "No space left on device", "/x/model.keras")) == (
        "cannot write /x/model.keras: No space left on device")
    assert describe(OSError(errno.EROFS, "Read-only file system", "/ro")) == (
        "cannot write /ro: Read-only file system")
    assert describe(PermissionError(errno.EACCES, "Permission denied", "/root/x")) == (
        "cannot access /root/x: Permission denied")
    assert describe(_fault(errno.ENOSPC)) == "cannot write: No space left on device"


# (name, the error raised in the block, the OSError that leaves it: (errno, path) or the same)
NAMING = [
    ("names no file", lambda t: _fault(errno.ENOSPC), (errno.ENOSPC, "/out/model.keras")),
    ("names the temporary", lambda t: OSError(errno.EROFS, "Read-only file system", str(t)),
     (errno.EROFS, "/out/model.keras")),
    ("names a file in the temporary folder", lambda t: OSError(
        errno.EDQUOT, "Disk quota exceeded", str(t / "variables")), (errno.EDQUOT,
                                                                     "/out/model.keras")),
    ("names another path", lambda t: OSError(errno.EROFS, "Read-only file system", "/out"),
     (errno.EROFS, "/out")),
    ("TensorFlow, in the temporary folder", lambda t: _tf_errors().ResourceExhaustedError(
        None, None, f"{t}/saved_model.pb; No space left on device"),
     (errno.ENOSPC, "/out/model.keras")),
    ("another errno", lambda t: OSError(errno.EIO, "Input/output error"), "same"),
    ("not an OSError", lambda t: ValueError("bug"), "same"),
]


@pytest.mark.parametrize("name, make, expected", NAMING, ids=[c[0] for c in NAMING])
def test_naming_makes_a_disk_fault_name_the_users_file(name, make, expected):
    temporary = Path("/out/.model.tmp-1.keras")
    error = make(temporary)
    with pytest.raises(BaseException) as raised:
        with naming("/out/model.keras", temporary):
            raise error
    if expected == "same":
        assert raised.value is error
    else:
        assert isinstance(raised.value, OSError)
        assert (raised.value.errno, raised.value.filename) == expected


# ------------------------------------------------------------------------- writes
def _half_then(error: BaseException):
    def write(path):
        Path(path).write_bytes(b"half a file")
        raise error
    return write


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EDQUOT],
                         ids=errno.errorcode.get)
def test_write_atomically_under_a_disk_fault_names_the_file_and_keeps_the_old_one(tmp_path,
                                                                                  code):
    path = tmp_path / "metrics.json"
    path.write_text("the old metrics")
    with pytest.raises(OSError) as raised:
        write_atomically(path, _half_then(_fault(code)))
    assert (raised.value.errno, raised.value.filename) == (code, str(path))
    assert path.read_text() == "the old metrics"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_write_atomically_writes_a_special_file_in_place_and_never_replaces_it(tmp_path):
    """A path that is no regular file (a device such as /dev/full, here a named pipe, never
    a real device: a regression would replace it) is written in place, and its ENOSPC names
    it."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomically(pipe, lambda path: Path(path).write_text("through the pipe"))
        assert os.read(reader, 100) == b"through the pipe"
        with pytest.raises(OSError) as raised:
            write_atomically(pipe, _half_then(_fault(errno.ENOSPC)))
        assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(pipe))
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def _pets(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name in ("cat", "dog"):
            for i in range(3):
                member = tarfile.TarInfo(f"train/{name}/{i}.png")
                member.size = 4
                archive.addfile(member, io.BytesIO(b"data"))
    return path


@pytest.mark.parametrize("existing", [False, True], ids=["new folder", "existing folder"])
def test_an_extraction_under_a_disk_fault_names_the_member_and_is_not_marked_done(
        tmp_path, existing, monkeypatch):
    from zoo.training.files.archives import extract_archive

    archive = _pets(tmp_path / "pets.tar.gz")
    destination = tmp_path / "data"
    if existing:
        destination.mkdir()
    real, written = tarfile.TarFile.makefile, []

    def makefile(self, tarinfo, targetpath):
        if len(written) == 3:
            _half_then(_fault(errno.ENOSPC))(targetpath)
        written.append(targetpath)
        real(self, tarinfo, targetpath)

    monkeypatch.setattr(tarfile.TarFile, "makefile", makefile)
    with pytest.raises(OSError) as raised:
        extract_archive(archive, destination)
    assert (raised.value.errno, raised.value.filename) == (
        errno.ENOSPC, str(destination / "train" / "dog" / "0.png"))
    # A folder this call created is gone; one that was there holds no marker of a
    # complete extraction, so the next call extracts again.
    assert destination.exists() == existing
    assert not (destination / ".extracted.json").exists()
    monkeypatch.undo()
    assert sorted(p.name for p in (extract_archive(archive, destination) / "train").iterdir()
                  ) == ["cat", "dog"]
