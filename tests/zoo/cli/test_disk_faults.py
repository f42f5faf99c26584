"""A full disk, a read-only file system or a refused write, at every place the `zoo` command
writes: one line `zoo: error: cannot write PATH: CAUSE` naming the file the user knows, exit
status 2, no traceback, and nothing half-written left behind. Other errors at the same places
are the zoo's bugs and keep their tracebacks. Stdout on a full device (`> /dev/full`): one
line and status 2, and none of Python's "Exception ignored" lines at exit.

The faults are raised where the disk would raise them (root ignores file modes, so a chmod
cannot make a folder read-only here): a write point writes part of its file, then fails as
write(2) does, with an OSError that names no file, or as TensorFlow's file functions do.
"""

from __future__ import annotations

import errno
import fnmatch
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import keras
import numpy as np
import pytest
from PIL import Image

from zoo.cli.main import main
from zoo.models import architectures as presets
from zoo.models.vit.model import VisionTransformer

REPO = Path(__file__).resolve().parents[3]
NANO = dict(image_size=8, patch_size=4, num_classes=10, hidden_dim=16, num_layers=1,
            num_heads=2, intermediate_dim=32, dropout=0.0, attention_dropout=0.0)


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, "uint8")).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small ViT file, an image, and a .tar.gz of three classes of images."""
    root = tmp_path_factory.mktemp("disk_faults")
    keras.utils.set_random_seed(0)
    vit = VisionTransformer(image_size=16, patch_size=4, num_classes=3, hidden_dim=16,
                            num_layers=1, num_heads=2, intermediate_dim=32,
                            class_names=["cat", "dog", "bird"])
    vit(keras.Input((16, 16, 3)))
    vit.save(root / "vit-test.keras")
    Image.new("RGB", (8, 8), (200, 30, 30)).save(root / "good.png")
    with tarfile.open(root / "pets.tar.gz", "w:gz") as archive:
        for name, value in (("cat", 10), ("dog", 120), ("bird", 230)):
            for i in range(4):
                data = _png(value + i)
                member = tarfile.TarInfo(f"train/{name}/{i}.png")
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
    return root


@pytest.fixture()
def place(files, tmp_path, monkeypatch):
    """(the shared files, this test's folder); the zoo's cache lies in the test's folder."""
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(presets.ARCHITECTURES, "vit-nano", presets.Architecture(
        "vit-nano", "VisionTransformer", NANO, "test"))
    return files, tmp_path


def _fault(code: int) -> OSError:
    """What write(2) raises on a full or read-only disk: an OSError naming no file."""
    return OSError(code, os.strerror(code))


def _tf_fault(code: int, path: Path) -> Exception:
    """What TensorFlow's file functions raise for the same fault (the message as TF 2.21
    writes it for a SavedModel's variables)."""
    import tensorflow as tf

    kind = (tf.errors.ResourceExhaustedError if code in (errno.ENOSPC, errno.EDQUOT)
            else tf.errors.PermissionDeniedError)
    return kind(None, None, "{{function_node __wrapped__MergeV2Checkpoints_device_/job:"
                "localhost/replica:0/task:0/device:CPU:0}} "
                f"{path}/variables/variables.index; {os.strerror(code)} "
                "[Op:MergeV2Checkpoints]")


def _half_then(error: BaseException, path: str | os.PathLike) -> None:
    """Writes half a file at `path`, then fails with `error`."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(b"half a file")
    raise error


# ----------------------------------------------------------------- the write points
def _export_fails(monkeypatch, error):
    def write_out(self, filepath, **kwargs):
        _half_then(error(Path(filepath)), Path(filepath) / "saved_model.pb")

    # (`keras.export.ExportArchive()` makes an archive of the backend's own class)
    monkeypatch.setattr(type(keras.export.ExportArchive()), "write_out", write_out)


def _save_fails(monkeypatch, error):
    """`model.save` (the final model.keras, a converted hub model) fails half-way."""
    monkeypatch.setattr(keras.Model, "save", lambda self, path, *a, **k: _half_then(
        error(Path(path)), path))


def _checkpoint_fails(monkeypatch, error):
    monkeypatch.setattr(keras.Model, "save_weights", lambda self, path, *a, **k: _half_then(
        error(Path(path)), path))


def _extraction_fails(monkeypatch, error):
    """The archive's second member cannot be written."""
    real = tarfile.TarFile.makefile
    written = []

    def makefile(self, tarinfo, targetpath):
        if written:
            _half_then(error(Path(targetpath)), targetpath)
        written.append(targetpath)
        real(self, tarinfo, targetpath)

    monkeypatch.setattr(tarfile.TarFile, "makefile", makefile)


def _plot_fails(monkeypatch, error):
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", lambda self, path, *a, **k: _half_then(
        error(Path(path)), path))


def _hub_conversion_fails(monkeypatch, error):
    import zoo.hub.handles

    def convert(folder, where, name):
        model = VisionTransformer(image_size=16, patch_size=4, num_classes=3, hidden_dim=16,
                                  num_layers=1, num_heads=2, intermediate_dim=32)
        model(keras.Input((16, 16, 3)))
        return model

    monkeypatch.setattr(zoo.hub.handles, "_convert", convert)
    _save_fails(monkeypatch, error)


class _Response(io.BytesIO):
    headers: dict = {}


def _download_fails(monkeypatch, error):
    """The server sends the file; writing it into the download cache fails half-way."""
    import urllib.request

    import zoo.hub.loader

    monkeypatch.setattr(urllib.request, "urlopen",
                        lambda url, timeout=None: _Response(b"x" * 3_000_000))

    class HalfFile(io.FileIO):
        def write(self, data):
            if self.tell():
                raise error(Path(self.name))
            return super().write(data[:100])

    monkeypatch.setattr(zoo.hub.loader, "open", lambda path, mode: HalfFile(path, mode),
                        raising=False)


def _train(data: str) -> list[str]:
    return ["train", "vit", "--data", data, "--output", "{tmp}/run", "--architecture",
            "vit-nano", "--image-size", "8", "--epochs", "1", "--validation-size", "3",
            "--batch-size", "6", "--warmup-epochs", "0", "--no-augment"]


EXPORT = ["export", "{files}/vit-test.keras", "--output", "{tmp}/exported"]
URL = "https://models.example/vit.keras"
slow = pytest.mark.slow
# (name, argv, the fault's place, the path the line names, files that must not be there)
WRITE_POINTS = [
    ("export", EXPORT, _export_fails, "{tmp}/exported/vit-test/1",
     ["{tmp}/exported/vit-test/1", "{tmp}/exported/vit-test/.1.tmp-*"]),
    ("export --force over an old version", [*EXPORT, "--force"], _export_fails,
     "{tmp}/exported/vit-test/1", ["{tmp}/exported/vit-test/.1.*"]),
    pytest.param("checkpoint after an epoch", _train("{files}/pets.tar.gz"), _checkpoint_fails,
                 "{tmp}/run/checkpoints/epoch-0001",
                 ["{tmp}/run/checkpoints/*", "{tmp}/run/checkpoints/.*", "{tmp}/run/model.keras"],
                 marks=slow),
    pytest.param("final model", _train("{files}/pets.tar.gz"), _save_fails,
                 "{tmp}/run/model.keras", ["{tmp}/run/model.keras", "{tmp}/run/.model*",
                                           "{tmp}/run/metrics.json"], marks=slow),
    ("archive extraction", _train("{files}/pets.tar.gz"), _extraction_fails,
     "{tmp}/run/data/train/cat/1.png", ["{tmp}/run/data", "{tmp}/run/checkpoints"]),
    ("hub conversion into the cache", ["classify", "--model", "{tmp}/hub-folder",
                                       "{files}/good.png"], _hub_conversion_fails,
     "{tmp}/cache/hub/local/*/*/model.keras", ["{tmp}/cache/hub/local/*/*/*"]),
    ("download cache", ["classify", "--model", URL, "{files}/good.png"], _download_fails,
     "{tmp}/cache/downloads/*/vit.keras", ["{tmp}/cache/downloads/*/*"]),
    ("classify --attention", ["classify", "--model", "{files}/vit-test.keras", "--attention",
                              "{tmp}/map.png", "{files}/good.png"], _plot_fails,
     "{tmp}/map.png", ["{tmp}/map.png", "{tmp}/.map*"]),
    pytest.param("translate --attention", [
        "translate", "--model", "translator-multi30k-en-de", "--beam-size", "1",
        "--attention", "{tmp}/align.png", "A dog runs."], _plot_fails, "{tmp}/align.png",
        ["{tmp}/align.png", "{tmp}/.align*"], marks=slow),
]
CODES = [errno.ENOSPC, errno.EROFS]
ALL_CODES = [errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM]
# Every write point with a full and a read-only disk, as an OSError; the export also as
# TensorFlow's error; one write point with every errno of the class.
CASES = [pytest.param(*point.values, how, code, marks=point.marks,
                      id=f"{point.values[0]}-{how}-{errno.errorcode[code]}")
         for point in (p if hasattr(p, "marks") else pytest.param(*p) for p in WRITE_POINTS)
         for how in (("oserror", "tensorflow") if point.values[0].startswith("export")
                     else ("oserror",))
         for code in (ALL_CODES if point.values[0] == "classify --attention" else CODES)]


def _run(argv, capsys):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def _one_error_line(err: str) -> str:
    """The command's `zoo: error:` line: the only one, and the last line; no traceback."""
    assert "Traceback" not in err and "Exception ignored" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("zoo: error:")]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    return errors[0]


@pytest.mark.parametrize("name, argv, fails, path, absent, how, code", CASES)
def test_a_full_or_read_only_disk_is_one_line_and_leaves_nothing_half_written(
        name, argv, fails, path, absent, how, code, place, monkeypatch, capsys):
    files, tmp = place
    if name == "hub conversion into the cache":
        (tmp / "hub-folder").mkdir()
        (tmp / "hub-folder" / "config.json").write_text('{"architectures": ["ViTModel"]}')
    if name == "download cache":
        argv = [a.replace(URL, f"{URL}#sha256={'0' * 64}") for a in argv]
    old = tmp / "exported" / "vit-test" / "1"
    if "--force" in argv:
        old.mkdir(parents=True)
        (old / "saved_model.pb").write_text("the old version")
    fails(monkeypatch, (lambda where: _tf_fault(code, where)) if how == "tensorflow"
          else (lambda where: _fault(code)))

    status, _, err = _run([a.format(files=files, tmp=tmp) for a in argv], capsys)

    line = _one_error_line(err)
    verb = "cannot write" if code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) else (
        "cannot access")  # a refused write: EACCES, EPERM
    expected = f"zoo: error: {verb} {path.format(tmp=tmp)}: {os.strerror(code)}"
    assert fnmatch.fnmatchcase(line, expected), line
    assert status == 2
    left = [p for pattern in absent for p in tmp.glob(
        str(Path(pattern.format(tmp=tmp)).relative_to(tmp)))]
    assert left == [], f"half-written files left behind: {left}"
    if "--force" in argv:  # the old version is untouched
        assert (old / "saved_model.pb").read_text() == "the old version"


# ----------------------------------------------------------------- what stays a bug
BUGS = [
    # (name, the error at the export's write point)
    ("an I/O error of another errno", lambda where: OSError(errno.EIO, "Input/output error")),
    ("TensorFlow out of memory", lambda where: __import__("tensorflow").errors
     .ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[1024,1024]")),
    ("TensorFlow's failed precondition of a graph", lambda where: __import__("tensorflow")
     .errors.FailedPreconditionError(None, None, "Could not find variable dense/kernel")),
    ("a ValueError", lambda where: ValueError("Exception encountered when calling layer")),
]


@pytest.mark.parametrize("name, error", BUGS, ids=[bug[0] for bug in BUGS])
def test_other_errors_at_a_write_point_keep_their_traceback(name, error, place, monkeypatch,
                                                            capsys):
    files, tmp = place
    _export_fails(monkeypatch, error)
    raised = error(Path("x")).__class__
    with pytest.raises(raised):
        main([a.format(files=files, tmp=tmp) for a in EXPORT])
    assert "zoo: error" not in capsys.readouterr().err


def test_verbose_keeps_the_traceback_of_a_full_disk(place, monkeypatch):
    files, tmp = place
    _export_fails(monkeypatch, lambda where: _fault(errno.ENOSPC))
    with pytest.raises(OSError, match="No space left on device"):
        main([a.format(files=files, tmp=tmp) for a in EXPORT] + ["--verbose"])


# ----------------------------------------------------------------- stdout on a full device
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_stdout_on_a_full_device_is_one_line(buffered):
    """`python -m zoo.cli models > /dev/full`: one line and status 2; no traceback, and no
    "Exception ignored" from the interpreter's last flush."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "zoo.cli", "models"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=REPO,
                              env=env)
    assert done.stderr == ("zoo: error: cannot write standard output (/dev/full): No space left "
                           "on device\n")
    assert done.returncode == 2


@pytest.mark.parametrize("argv", [
    ["classify", "--model", "{files}/vit-test.keras", "{files}/good.png"],
    ["export", "{files}/vit-test.keras", "--output", "{tmp}/exported"],
])
def test_stdout_on_a_full_device_is_one_line_for_every_command(argv, place, monkeypatch,
                                                               capsys):
    """In-process: stdout is a file on /dev/full (its buffer fills, or the last flush
    fails)."""
    files, tmp = place
    with open("/dev/full", "w") as full:
        monkeypatch.setattr("sys.stdout", full)
        status = main([a.format(files=files, tmp=tmp) for a in argv])
        err = capsys.readouterr().err
    assert _one_error_line(err) == ("zoo: error: cannot write standard output (/dev/full): "
                                    "No space left on device")
    assert status == 2


def test_a_reader_that_went_away_ends_quietly(tmp_path):
    """`zoo models | head -0`: status 141 and nothing on stderr (not Python's BrokenPipe)."""
    read, write = os.pipe()
    os.close(read)
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "models"], stdout=write,
                          stderr=subprocess.PIPE, text=True, timeout=120, cwd=REPO)
    os.close(write)
    assert done.stderr == ""
    assert done.returncode == 141
