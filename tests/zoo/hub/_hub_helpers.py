"""A hub of our own for the hub-handle tests: tiny random-weight checkpoints written by
`transformers`, put into a `huggingface_hub` cache as snapshots of a repository, and the checks
the tests share. Import it after `pytest.importorskip` of torch and transformers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import ViTConfig, ViTForImageClassification  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
CIFAR_LABELS = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                "ship", "truck"]


# ---------------------------------------------------------------------- a hub of our own
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


# ---------------------------------------------------------------------- checkpoints
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


def largest_logit_difference(model, images: list, expected: np.ndarray) -> float:
    """Checks that `model` labels the CIFAR `images` as the reference logits `expected` do
    (and not all alike), and returns the largest difference between its logits and them."""
    pixels = np.stack([np.asarray(image) for image in images])  # uint8, 0..255
    labels = [top[0][0] for top in model.classify(pixels, top_k=1)]
    assert labels == [CIFAR_LABELS[i] for i in expected.argmax(-1)]
    assert len(set(labels)) > 1
    logits = np.asarray(model.predict(pixels, verbose=0))
    return float(np.max(np.abs(logits - expected)))


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


# ---------------------------------------------------------------------- one-line errors
def one_line_error(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and error.value.__cause__ is None
    return message
