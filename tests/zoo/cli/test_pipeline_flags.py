"""`zoo translate --pipeline` and `zoo classify --pipeline` print the file they wrote, and
refuse the search flags that the export fixed in its graph. The Beam run itself stands in
(tests/zoo/pipelines run it for real)."""

from __future__ import annotations

import pytest

import zoo.cli.pipeline_commands as pipeline_commands
from zoo.cli.main import main


class _Corpus:
    """Stands in for zoo.pipelines.corpus: records its call, reports `failed` failures."""

    def __init__(self, failed):
        self.failed, self.calls = failed, []

    def _report(self, output):
        from types import SimpleNamespace

        return SimpleNamespace(elements=3, failed=self.failed, output=output,
                               errors=output + ".errors")

    def translate_file(self, model, source, output, **options):
        self.calls.append(("translate", source, output))
        return self._report(output)

    def classify_folder(self, model, folder, output, **options):
        self.calls.append(("classify", folder, output))
        return self._report(output)


@pytest.fixture()
def corpus(monkeypatch):
    def make(failed=0):
        stand_in = _Corpus(failed)
        monkeypatch.setattr(pipeline_commands, "_corpus_module", lambda: stand_in)
        return stand_in
    return make


@pytest.mark.parametrize("command, what", [("translate", "source.en"), ("classify", "photos")])
def test_a_pipeline_prints_the_file_it_wrote(corpus, tmp_path, capsys, command, what):
    stand_in = corpus()
    out = str(tmp_path / "out.txt")
    assert main([command, "--pipeline", what, "--output", out, "--model", "exports/m/1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == out + "\n" and captured.err == ""
    assert stand_in.calls == [(command, what, out)]


def test_with_failures_it_prints_the_file_and_names_the_errors(corpus, tmp_path, capsys):
    corpus(failed=1)
    out = str(tmp_path / "out.de")
    assert main(["translate", "--pipeline", "in.en", "--output", out, "--model", "e/1"]) == 1
    captured = capsys.readouterr()
    assert captured.out == out + "\n" and f"{out}.errors" in captured.err


@pytest.mark.parametrize("flag", ["--beam-size", "--max-length"])
def test_the_exports_search_flags_are_refused(corpus, capsys, flag):
    stand_in = corpus()
    assert main(["translate", "--pipeline", "in.en", "--output", "out.de", "--model", "e/1",
                 flag, "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"zoo: error: {flag} does not apply with --pipeline") and \
        f"got {flag} 2" in err and err.count("\n") == 1
    assert stand_in.calls == []
