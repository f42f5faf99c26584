"""The registry: listing shipped models without Keras, and loading models from URLs."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import modules_imported_by
from zoo.hub import loader as registry


def test_list_models_imports_neither_keras_nor_tensorflow() -> None:
    loaded = modules_imported_by("import zoo.hub.loader\nassert zoo.hub.loader.list_models()",
                                 backend="tensorflow")
    assert not loaded & {"tensorflow", "keras"}


# ---------------------------------------------------------------------- downloads

@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """(base URL, served folder): an http.server on 127.0.0.1 in a thread; the download
    cache in tmp_path."""
    root = tmp_path / "served"
    root.mkdir()
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args) -> None:  # keep the test output quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def _serve(root: Path, name: str, content: bytes) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return hashlib.sha256(content).hexdigest()


def test_same_file_name_at_two_urls_are_two_downloads(server) -> None:
    base, root = server
    hash_a = _serve(root, "a/model.keras", b"first model")
    hash_b = _serve(root, "b/model.keras", b"second model")
    a = registry.resolve(f"{base}/a/model.keras#sha256={hash_a}")
    b = registry.resolve(f"{base}/b/model.keras#sha256={hash_b}")
    assert a != b and a.name == b.name == "model.keras"
    assert a.read_bytes() == b"first model" and b.read_bytes() == b"second model"
    (root / "a/model.keras").unlink()  # the second load of a comes from the cache
    assert registry.resolve(f"{base}/a/model.keras#sha256={hash_a}").read_bytes() == \
        b"first model"


def test_a_bad_hash_is_deleted_and_refused_and_not_reused(server, monkeypatch) -> None:
    base, root = server
    _serve(root, "m/model.keras", b"tampered")
    with pytest.raises(registry.DownloadError, match="not the expected"):
        registry.resolve(f"{base}/m/model.keras#sha256={'0' * 64}")
    cached = [p for p in registry.downloads_dir().rglob("*") if p.is_file()]
    assert cached == []
    # Without a hash the same URL downloads again (plain http is then refused; pretend the
    # transport was https by serving the same bytes through a patched fetch).
    calls = []
    real_fetch = registry._fetch

    def counting_fetch(url, destination, timeout):
        calls.append(url)
        return real_fetch(url.replace("https://", "http://"), destination, timeout)

    monkeypatch.setattr(registry, "_fetch", counting_fetch)
    https = base.replace("http://", "https://")
    path = registry.resolve(f"{https}/m/model.keras")
    assert calls == [f"{https}/m/model.keras"] and path.read_bytes() == b"tampered"


def test_plain_http_without_hash_is_refused(server) -> None:
    base, root = server
    _serve(root, "model.keras", b"x")
    with pytest.raises(registry.DownloadError, match="plain http"):
        registry.resolve(f"{base}/model.keras")


def test_https_without_hash_warns_on_stderr(server, monkeypatch, capsys) -> None:
    base, root = server
    _serve(root, "model.keras", b"x")
    monkeypatch.setattr(registry, "_fetch", lambda url, dest, timeout: (
        dest.write_bytes(b"x"), hashlib.sha256(b"x").hexdigest())[1])
    registry.resolve("https://example.invalid/model.keras")
    captured = capsys.readouterr()
    assert captured.out == "" and "integrity is unchecked" in captured.err


def test_progress_goes_to_stderr_not_stdout(server, capsys) -> None:
    base, root = server
    digest = _serve(root, "model.keras", b"y" * 3_000_000)
    registry.resolve(f"{base}/model.keras#sha256={digest}")
    captured = capsys.readouterr()
    assert captured.out == "" and "downloading" in captured.err


@pytest.mark.parametrize("suffix, message", [
    ("#sha256=abc", "64 hex digits"),
    ("#md5=abc", "must be #sha256="),
    ("/missing.keras#sha256=" + "0" * 64, "404"),
])
def test_bad_urls_are_one_line_errors(server, suffix, message) -> None:
    base, _ = server
    url = base + (suffix if suffix.startswith("/") else "/model.keras" + suffix)
    with pytest.raises(registry.DownloadError, match=message) as error:
        registry.resolve(url)
    assert "\n" not in str(error.value)


def test_two_urls_load_two_different_models(server, tmp_path) -> None:
    import keras

    import zoo

    base, root = server
    hashes = {}
    for name, units in (("a", 2), ("b", 3)):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(units)])
        model.save(tmp_path / f"{name}.keras")
        hashes[name] = _serve(root, f"{name}/model.keras",
                              (tmp_path / f"{name}.keras").read_bytes())
    a = zoo.load(f"{base}/a/model.keras#sha256={hashes['a']}")
    b = zoo.load(f"{base}/b/model.keras#sha256={hashes['b']}")
    assert a.output_shape == (None, 2) and b.output_shape == (None, 3)


# ---------------------------------------------------------------------- damaged files, kinds
@pytest.mark.parametrize("keep", [0, 100, 0.5, 0.9])
def test_a_truncated_keras_file_is_a_one_line_error(tmp_path, keep):
    import zoo

    shipped = Path(registry.list_models()["vit-cifar10"]["path"]).read_bytes()
    size = int(len(shipped) * keep) if isinstance(keep, float) else keep
    path = tmp_path / "model.keras"
    path.write_bytes(shipped[:size])
    with pytest.raises(ValueError, match="not a readable .keras file") as error:
        zoo.load(str(path))
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_the_wrong_kind_is_refused_before_any_weight_loads(monkeypatch):
    import keras

    import zoo
    from zoo.models.vit.model import VisionTransformer

    def never(*args, **kwargs):
        raise AssertionError("weights were loaded")

    monkeypatch.setattr(keras.saving, "load_model", never)
    with pytest.raises(ValueError, match="is a Translator, not a VisionTransformer"):
        zoo.load("translator-multi30k-en-de", expect=VisionTransformer)
