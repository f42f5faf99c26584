"""Image-classifier handles against the reference implementations, offline: tiny random
Hugging Face ViTs (ViTForImageClassification with CIFAR-10 labels, from safetensors or a
pickled `pytorch_model.bin`), a timm-layout repository holding a ViT's weights renamed, and
distilled DeiTs (with and without the teacher head), each published into a Hugging Face cache
built in the test (`HF_HUB_OFFLINE=1`) and run on real CIFAR-10 images. The handle's logits
and labels equal Hugging Face's (and timm's, where timm is installed); hub-layout folders,
tags and pinned commits resolve to one converted model each; and the SavedModel exported from
a ViT or DeiT handle maps PNG bytes to Hugging Face's labels.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    DeiTConfig,
    DeiTForImageClassification,
    DeiTForImageClassificationWithTeacher,
)

import zoo  # noqa: E402
import zoo.hub.handles as hub  # noqa: E402
from tests.zoo.conftest import serve  # noqa: E402
from tests.zoo.hub._hub_helpers import (  # noqa: E402
    CIFAR_LABELS,
    COMMIT,
    OTHER_COMMIT,
    hf_logits,
    largest_logit_difference,
    publish,
    randomise,
    timm_state_dict,
    vit_folder,
)


# ---------------------------------------------------------------------- ViT
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
    assert largest_logit_difference(model, cifar_images, expected) < 1e-4


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
    difference = largest_logit_difference(model, cifar_images, expected)
    print(f"max |logits - Hugging Face's| = {difference:.2e}")
    assert difference < 1e-4
    if teacher:  # both heads count: either one alone is far from the mean
        for head in (output.cls_logits, output.distillation_logits):
            assert float(np.max(np.abs(head.numpy() - expected))) > 0.1


def test_distilled_timm_deit_is_refused_in_one_line():
    with pytest.raises(ValueError, match="deit_small_distilled_patch16_224.* not supported"):
        hub.architecture({"architecture": "deit_small_distilled_patch16_224",
                          "num_classes": 1000, "pretrained_cfg": {}})


# ---------------------------------------------------------------------- export
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
