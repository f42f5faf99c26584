"""The `zoo` command: models, translate, evaluate, and errors as one clear line."""

import keras
import pytest

import zoo
from zoo.hub import loader as registry
from zoo.cli.main import main
from zoo.models.translator.model import Translator


@pytest.fixture()
def model_repository(small_tokenizer, tmp_path, monkeypatch):
    """A saved_models/ folder holding one small (untrained) translator."""
    keras.utils.set_random_seed(0)
    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=32,
                                   intermediate_dim=64, num_heads=4, max_source_length=32,
                                   max_target_length=16)
    model.ensure_built()
    folder = tmp_path / "saved_models" / "translator-test"
    folder.mkdir(parents=True)
    model.save(folder / "model.keras")
    registry.write_manifest(folder, kind="translator", description="a test model")
    monkeypatch.setattr(registry, "MODELS_DIR", tmp_path / "saved_models")
    return model, folder


def test_models_lists_the_shipped_models(model_repository, capsys):
    assert main(["models"]) == 0
    assert "translator-test\ttranslator\ta test model" in capsys.readouterr().out


def test_models_says_which_is_hybrid_and_lists_architectures(model_repository, capsys):
    _, folder = model_repository
    hybrid = folder.parent / "vit-hybrid-test"
    hybrid.mkdir()
    (hybrid / "model.keras").write_bytes((folder / "model.keras").read_bytes())
    registry.write_manifest(hybrid, kind="vit", description="a hybrid", hybrid=True)
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "vit-hybrid-test\tvit (hybrid: convolutional stem)\ta hybrid" in lines
    assert "translator-test\ttranslator\ta test model" in lines
    kinds = {line.split("\t")[0]: line.split("\t")[1] for line in lines}
    # Every name the help texts send to `zoo models` for: the architectures, marked untrained.
    assert kinds["vit-cifar-vgg"] == kinds["vit-cifar-tiny"] == "vit architecture (untrained)"
    assert kinds["transformer-tiny"] == "translator architecture (untrained)"


def test_translate_arguments_and_stdin(model_repository, capsys, monkeypatch):
    model, _ = model_repository
    texts = ["A dog runs.", "Two men talk."]
    assert main(["translate", "--model", "translator-test", "--beam-size", "2", *texts]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == model.translate(texts, beam_size=2)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("A dog runs.\n"))
    assert main(["translate", "--model", "translator-test", "--beam-size", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == lines[:1]


def test_translate_draws_the_alignment(model_repository, tmp_path):
    picture = tmp_path / "alignment.png"
    assert main(["translate", "--model", "translator-test", "--attention", str(picture),
                 "A dog runs on the beach."]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_prints_bleu_and_chrf(model_repository, shared_data, tmp_path, capsys):
    """Scores against real references, as sacreBLEU scores the model's own translations."""
    import sacrebleu

    from tests.zoo.conftest import read_gz

    model, folder = model_repository
    sources = read_gz(shared_data / "multi30k" / "val.en.gz", 20)
    references = read_gz(shared_data / "multi30k" / "val.de.gz", 20)
    source, reference = tmp_path / "src.txt", tmp_path / "ref.txt"
    source.write_text("\n".join(sources) + "\n")
    reference.write_text("\n".join(references) + "\n")
    assert main(["evaluate", "translator", "--model", str(folder), "--source", str(source),
                 "--reference", str(reference), "--beam-size", "1"]) == 0
    hypotheses = model.translate(sources, beam_size=1)
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    captured = capsys.readouterr()
    assert captured.out.startswith(f"BLEU {bleu:.2f}\tchrF {chrf:.2f}\tsentences 20")
    # The translating is said on stderr, a line as it starts and one as it ends (a log).
    assert "zoo: translating 20 sentences (beam 1) ...\n" in captured.err
    assert "zoo: translating 20 sentences (beam 1): done in " in captured.err


def test_unknown_model_lists_the_shipped_names(model_repository, capsys):
    assert main(["translate", "--model", "no-such-model", "hello"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo: error: unknown model 'no-such-model'")
    assert "translator-test" in err and "Traceback" not in err


def test_missing_data_file_names_the_path(model_repository, tmp_path, capsys):
    _, folder = model_repository
    missing = tmp_path / "nope.en"
    assert main(["evaluate", "translator", "--model", str(folder), "--source", str(missing),
                 "--reference", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err


def test_manifest_sha256_matches_the_file(model_repository):
    _, folder = model_repository
    import hashlib

    info = registry.list_models()["translator-test"]
    assert info["sha256"] == hashlib.sha256((folder / "model.keras").read_bytes()).hexdigest()


def test_a_verb_that_does_not_fit_the_model_is_refused_in_one_line(model_repository, tmp_path,
                                                                    capsys):
    from PIL import Image

    image = tmp_path / "x.png"
    Image.new("RGB", (8, 8)).save(image)
    assert main(["classify", "--model", "translator-test", str(image)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "zoo: error: 'translator-test' is a Translator, not a VisionTransformer"


def test_a_bug_keeps_its_traceback(model_repository, monkeypatch, capsys):
    import zoo.cli.commands
    import zoo.cli.main

    def broken(args):
        raise ValueError("in user code:\n\n    File 'decoding.py', line 1")

    monkeypatch.setattr(zoo.cli.commands, "cmd_models", broken)
    parser = zoo.cli.main.build_parser
    monkeypatch.setattr(zoo.cli.main, "build_parser",
                        lambda recipes=True: _with_func(parser(recipes), broken))
    with pytest.raises(ValueError, match="in user code"):
        main(["models"])


def _with_func(parser, func):
    parser.set_defaults(func=func)
    for action in parser._subparsers._group_actions:
        for sub in action.choices.values():
            sub.set_defaults(func=func)
    return parser


@pytest.mark.parametrize("error, one_line", [
    (PermissionError("cannot write /srv/out: permission denied"), True),
    (zoo.UserError("top_k must be a positive int; got 0"), True),
    (ModuleNotFoundError("loading hub handles needs huggingface_hub (pip install "
                         "huggingface_hub)", name="huggingface_hub"), True),
    (ValueError("Exception encountered when calling layer 'decoder'"), False),
    (ModuleNotFoundError("No module named 'zoo.gone'", name="zoo.gone"), False),
    (TypeError("unsupported operand type(s)"), False),
    (KeyError("missing"), False),
])
def test_user_mistakes_are_one_line_and_bugs_keep_their_traceback(model_repository, monkeypatch,
                                                                  capsys, error, one_line):
    import zoo.cli.main

    def failing(args):
        raise error

    parser = zoo.cli.main.build_parser
    monkeypatch.setattr(zoo.cli.main, "build_parser",
                        lambda recipes=True: _with_func(parser(recipes), failing))
    if one_line:
        assert main(["models"]) == 2
        assert capsys.readouterr().err == f"zoo: error: {error}\n"
    else:
        with pytest.raises(type(error)):
            main(["models"])


def test_use_onednn_asks_for_it_unless_the_environment_chooses():
    from zoo.runtime import use_onednn

    environ: dict = {}
    use_onednn(environ, modules={})
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    chosen = {"TF_ENABLE_ONEDNN_OPTS": "0"}
    use_onednn(chosen, modules={})
    assert chosen == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    loaded: dict = {}  # too late once TensorFlow is loaded: nothing set
    use_onednn(loaded, modules={"tensorflow": object()})
    assert loaded == {}


@pytest.mark.parametrize("choice, enabled", [(None, "True"), ("0", "False")])
def test_the_command_runs_tensorflow_with_onednn(choice, enabled):
    """In a fresh process, as the console script runs it: TensorFlow loaded after a
    command has its oneDNN kernels on (whatever the CPU), unless the environment said 0."""
    import os
    import subprocess
    import sys

    script = ("from zoo.cli.main import main; main(['models']); "
              "from tensorflow.python.util import _pywrap_util_port as port; "
              "print('onednn', port.IsMklEnabled())")
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if choice is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = choice
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"onednn {enabled}" in done.stdout


def test_the_zoo_s_own_warnings_print_as_one_line_and_others_as_python_does():
    """Python's default `showwarning` writes what `warnings.formatwarning` returns (pytest
    records warnings instead, so the formatter is called as that default would)."""
    import warnings
    from pathlib import Path

    from zoo.cli.main import own_warnings_in_one_line

    recipe = str(Path(zoo.__file__).parent / "recipes" / "vit.py")
    slow = UserWarning("bfloat16 is slow here")
    with own_warnings_in_one_line():
        assert warnings.formatwarning(slow, UserWarning, recipe, 300) == (
            "zoo: warning: bfloat16 is slow here\n")
        other = warnings.formatwarning(UserWarning("someone else's"), UserWarning,
                                       "/elsewhere/lib.py", 7)
        assert other.startswith("/elsewhere/lib.py:7: UserWarning: someone else's")
    with own_warnings_in_one_line(active=False):  # --verbose
        verbose = warnings.formatwarning(slow, UserWarning, recipe, 300)
    assert verbose.startswith(f"{recipe}:300: UserWarning: bfloat16 is slow here")
    # And Python's own formatter is back after the block.
    assert warnings.formatwarning(slow, UserWarning, recipe, 300) == verbose


def test_per_class_lines_name_each_class_its_top1_and_its_usual_mistake():
    import numpy as np

    from zoo.cli.commands import per_class_lines

    matrix = np.array([[3, 1, 0], [0, 0, 0], [2, 0, 2]])
    assert per_class_lines(matrix, ["a", "b", "c"]) == [
        "a\ttop-1 0.7500\timages 4\tmost often taken for b (1)",
        "c\ttop-1 0.5000\timages 4\tmost often taken for a (2)",
    ]  # b has no images
    assert per_class_lines(np.array([[2, 0], [0, 1]]), ["x", "y"])[1] == (
        "y\ttop-1 1.0000\timages 1\tno errors")
