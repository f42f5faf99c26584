"""Hostile or foreign `.keras` files: a Lambda layer, an unknown class, configs that point at
`os.system`, `subprocess.Popen` and `eval`. `zoo.load` refuses each in safe mode before any of
it runs, as one `zoo.UserError` line naming the file and what it asked for, and every command
that takes a model (`translate`, `classify`, `export`) prints that line, exit status 2, no
traceback, nothing written. A ValueError or TypeError of Keras' for a file that asks for
nothing foreign stays a bug (its traceback)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import keras
import pytest

import zoo
from zoo.cli.main import main


def _sequential(path: Path) -> Path:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    model.save(path)
    return path


def _rewritten(source: Path, path: Path, change) -> Path:
    """`source` with its config.json changed by `change(config)`."""
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    config = change(json.loads(members["config.json"]))
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _dense_with(key: str, value: dict):
    """A change that sets the Dense layer's `key` (an activation, an initializer)."""
    def change(config: dict) -> dict:
        config["config"]["layers"][-1]["config"][key] = value
        return config
    return change


def _function(module: str, name: str) -> dict:
    return {"module": module, "class_name": "function", "config": name,
            "registered_name": "function"}


def build_lambda(folder: Path, sentinel: Path) -> Path:
    model = keras.Sequential([
        keras.Input((2,)),
        keras.layers.Lambda(lambda x, ran=str(sentinel): (open(ran, "w"), x)[1])])
    model.save(folder / "lambda.keras")
    sentinel.unlink()  # (made while the model was built here)
    return folder / "lambda.keras"


def build_unknown_class(folder: Path, sentinel: Path) -> Path:
    def change(config):
        config["config"]["layers"][-1] = {"module": "backdoor.layers", "class_name": "Backdoor",
                                          "config": {"name": "x"},
                                          "registered_name": "backdoor>Backdoor"}
        return config
    return _rewritten(_sequential(folder / "plain.keras"), folder / "unknown.keras", change)


def build_os_system(folder: Path, sentinel: Path) -> Path:
    return _rewritten(_sequential(folder / "plain.keras"), folder / "os_system.keras",
                      _dense_with("activation", _function("os", "system")))


def build_popen(folder: Path, sentinel: Path) -> Path:
    popen = {"module": "subprocess", "class_name": "Popen",
             "config": {"args": ["touch", str(sentinel)]}, "registered_name": None}
    return _rewritten(_sequential(folder / "plain.keras"), folder / "popen.keras",
                      lambda config: popen)


def build_eval(folder: Path, sentinel: Path) -> Path:
    return _rewritten(_sequential(folder / "plain.keras"), folder / "eval.keras",
                      _dense_with("kernel_initializer", _function("builtins", "eval")))


HOSTILE = [
    # (name, builder, what the refusal names)
    ("Lambda layer", build_lambda, "a Python lambda"),
    ("unknown class", build_unknown_class, "the class backdoor.layers.Backdoor"),
    ("os.system", build_os_system, "the function os.system"),
    ("subprocess.Popen", build_popen, "the class subprocess.Popen"),
    ("eval", build_eval, "the function builtins.eval"),
]
COMMANDS = {
    "load": None,
    "translate": ["translate", "--model", "{file}", "A dog runs."],
    "classify": ["classify", "--model", "{file}", "{dir}/image.png"],
    "export": ["export", "{file}", "--output", "{dir}/exported"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("name, build, asks_for", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_file_is_refused_in_one_line(name, build, asks_for, command, tmp_path,
                                               capsys):
    from PIL import Image

    sentinel = tmp_path / "ran"
    path = build(tmp_path, sentinel)
    expected = (f"refusing {path}: its config asks for {asks_for}; a model file may name only "
                "Keras' and the zoo's own classes and functions (safe mode runs no code from "
                "it)")
    if command == "load":
        with pytest.raises(zoo.UserError) as refused:
            zoo.load(str(path))
        assert str(refused.value) == expected
    else:
        Image.new("RGB", (8, 8), (200, 30, 30)).save(tmp_path / "image.png")
        argv = [a.format(file=path, dir=tmp_path) for a in COMMANDS[command]]
        status = main(argv)
        out, err = capsys.readouterr()
        assert err.splitlines()[-1] == f"zoo: error: {expected}"
        assert len([line for line in err.splitlines() if line.startswith("zoo:")]) == 1, err
        assert "Traceback" not in err and out == ""
        assert status == 2
        assert not (tmp_path / "exported").exists()
    assert not sentinel.exists()  # nothing of the file ran


def test_a_keras_error_for_a_plain_file_keeps_its_traceback(tmp_path, monkeypatch):
    """A Keras TypeError or ValueError where the config asks for nothing foreign is a bug,
    not a refusal."""
    path = _sequential(tmp_path / "plain.keras")
    assert zoo.load(str(path)).output_shape == (None, 2)

    def broken(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    monkeypatch.setattr(keras.saving, "load_model", broken)
    with pytest.raises(TypeError, match="unsupported operand"):
        zoo.load(str(path))
