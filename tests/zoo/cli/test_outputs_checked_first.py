"""Where a command writes is checked before its work, in one line naming the flag: one rule for
every output folder (`train`, `export`, `quantize`: a symbolic link is refused, a link to a
folder too, and so is a file), `quantize --output` as every output file, the model server's
files of `export`, and an `--attention` picture (a folder, a pipe). One row per case; each
run ends before any model loads, with nothing on stdout and nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from zoo.cli.main import main


def _link_to_folder(tmp: Path) -> Path:
    (tmp / "elsewhere").mkdir()
    (tmp / "link").symlink_to(tmp / "elsewhere", target_is_directory=True)
    return tmp / "link"


def _file(tmp: Path, name: str = "notes.txt") -> Path:
    (tmp / name).write_text("precious")
    return tmp / name


def _fifo(tmp: Path, name: str = "pipe") -> Path:
    os.mkfifo(tmp / name)
    return tmp / name


def _server_file_as(make):
    def planted(tmp: Path) -> Path:
        (tmp / "serving").mkdir()
        make(tmp / "serving" / "models.config")
        return tmp / "serving"

    return planted


def _folder(tmp: Path, name: str = "pictures") -> Path:
    (tmp / name).mkdir()
    return tmp / name


LINK = " is a symbolic link; the zoo does not write through links (give the folder it points "
LINK += "to, or another path)"
# (case, the command with {out} for the planted path, how the path is planted, the line)
CASES = [
    ("train: a link to a folder", "train vit --data {tmp}/none --output {out}",
     _link_to_folder, "--output {out}" + LINK),
    ("export: a link to a folder", "export vit-cifar10 --output {out}", _link_to_folder,
     "--output {out}" + LINK),
    ("quantize: a link to a folder", "quantize vit-cifar10 --output {out}", _link_to_folder,
     "--output {out}" + LINK),
    ("quantize: a file for a folder", "quantize vit-cifar10 --output {out}", _file,
     "--output {out} is a file, not a folder"),
    ("quantize: an existing .keras", "quantize vit-cifar10 --output {out}",
     lambda tmp: _file(tmp, "int8.keras"), "--output {out} exists; --force replaces it"),
    ("export: models.config a folder", "export vit-cifar10 --output {out}",
     _server_file_as(os.mkdir), "--output {out}: {out}/models.config is a folder, where the "
     "export writes the model server's models.config; remove it, or choose another --output"),
    ("export: models.config a pipe", "export vit-cifar10 --output {out}",
     _server_file_as(os.mkfifo), "--output {out}: {out}/models.config is a pipe or device, "
     "where the export writes the model server's models.config; remove it, or choose "
     "another --output"),
    ("classify --attention: a pipe", "classify {tmp}/cat.png --attention {out}", _fifo,
     "--attention {out} is a pipe or device, not a file; give a file name"),
    ("classify --attention: a folder", "classify {tmp}/cat.png --attention {out}", _folder,
     "--attention {out} is a folder; give a file name"),
    ("classify --attention: its own image", "classify {tmp}/cat.png --attention {out}",
     lambda tmp: tmp / "cat.png", "--attention {out} is the command's own input; choose "
     "another path"),
    ("translate --attention: a folder", "translate --attention {out} Hello", _folder,
     "--attention {out} is a folder; give a file name"),
]


@pytest.mark.parametrize("command, plant, said", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_where_a_command_writes_is_refused_before_its_work(command, plant, said, tmp_path,
                                                          capsys):
    Image.new("RGB", (8, 8), (200, 10, 10)).save(tmp_path / "cat.png")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    out = plant(tmp_path)
    argv = command.format(tmp=tmp_path, out=out).split()
    status = main(argv)
    captured = capsys.readouterr()
    assert (status, captured.out) == (2, "")
    assert captured.err == f"zoo: error: {said.format(out=out)}\n"
    elsewhere = tmp_path / "elsewhere"  # a link's folder: nothing written into it
    assert not elsewhere.exists() or not any(elsewhere.iterdir())
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())
