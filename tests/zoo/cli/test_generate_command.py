"""`zoo generate` on a tiny saved language model: each prompt and its continuation on a line,
the same text as `CausalLM.generate` (greedy, and a seeded top-p draw), prompts from stdin
lines, and a bad flag refused in one line that names it (exit status 2)."""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.zoo.text._byte_pair_files import saved_tiny_lm
from zoo.cli.main import main
from zoo.generation.samplers import TopPSampler


@pytest.fixture(scope="module")
def saved_lm(tmp_path_factory):
    return saved_tiny_lm(tmp_path_factory.mktemp("lm"), max_positions=48, sequence_length=24)


@pytest.mark.slow
def test_generate_streams_what_the_model_generates(saved_lm, capsys, monkeypatch):
    lm, path = saved_lm
    assert main(["generate", "Once upon", "The cat", "--model", path,
                 "--max-new-tokens", "6"]) == 0
    assert capsys.readouterr().out.splitlines() == lm.generate(["Once upon", "The cat"], 6)
    assert main(["generate", "Once upon", "--model", path, "--max-new-tokens", "6",
                 "--top-p", "0.9", "--seed", "7"]) == 0
    expected = lm.generate(["Once upon"], 6, sampler=TopPSampler(p=0.9), seed=7)
    assert capsys.readouterr().out == expected[0] + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"The cat\n")))
    assert main(["generate", "--model", path, "--max-new-tokens", "6"]) == 0
    assert capsys.readouterr().out.splitlines() == lm.generate(["The cat"], 6)


@pytest.mark.parametrize("flags,message", [
    (["--top-p", "0"], "argument --top-p: must lie in (0, 1]; got 0"),
    (["--temperature", "nan"], "argument --temperature"),
    (["--top-k", "0"], "argument --top-k"),
    (["--max-new-tokens", "5000"], "--max-new-tokens must be at most 47"),
    (["--num-beams", "2", "--top-p", "0.5"], "--num-beams searches"),
])
def test_bad_flags_are_one_line(saved_lm, capsys, flags, message):
    _, path = saved_lm
    with pytest.raises(SystemExit) if "argument" in message else contextlib.nullcontext():
        assert main(["generate", "x", "--model", path, *flags]) == 2
    assert message in capsys.readouterr().err

