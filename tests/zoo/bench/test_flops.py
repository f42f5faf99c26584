"""The works' FLOP counts (`zoo.bench.flops`, `zoo.bench.works.flops_per_unit`) against
PyTorch's own count of the products (`torch.utils.flop_counter.FlopCounterMode`) that timm's
VisionTransformer and Hugging Face's MarianMTModel run, at tiny shapes: references nobody here
wrote, counted from the operations they execute rather than from a formula."""

from __future__ import annotations

import importlib.util

import pytest

from zoo.bench import flops
from zoo.bench.works import FAMILY_WORKS, GROUPS, MT, SETTINGS, VIT_TINY, WORKS, flops_per_unit

torch = pytest.importorskip("torch")
flop_counter = pytest.importorskip("torch.utils.flop_counter")

VIT = dict(image_size=16, patch_size=4, num_layers=2, hidden_dim=32, num_heads=2,
           intermediate_dim=64, num_classes=10)
TRANSLATOR = dict(vocabulary_size=100, hidden_dim=32, num_encoder_layers=2,
                  num_decoder_layers=3, num_heads=2, intermediate_dim=64)


def _counted(run) -> int:
    with flop_counter.FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm not installed")
def test_vit_counts_equal_timms_products():
    from zoo.bench.steps import timm_vit_model

    model, _ = timm_vit_model(VIT)
    for block in model.blocks:  # plain matmuls, which the counter sees on every PyTorch
        block.attn.fused_attn = False
    images = torch.randn(3, 3, 16, 16)
    assert _counted(lambda: model(images)) == 3 * flops.vit_forward_flops(VIT)
    # Training: three times the forward pass, less the patch embedding's gradient with
    # respect to the images, which no one computes (about 2% here, 0.5% for ViT-tiny).
    train = _counted(lambda: model(images).sum().backward())
    patch_input_gradient = 3 * 2 * 16 * (4 * 4 * 3) * 32
    assert train == 3 * flops.vit_train_flops(VIT) - patch_input_gradient


@pytest.mark.parametrize("beam", [1, 2])
def test_generation_counts_equal_hugging_faces_generate(beam):
    pytest.importorskip("transformers")
    from zoo.bench.steps import random_marian_model

    model = random_marian_model(TRANSLATOR, 100, pad_id=99, end_id=0, max_positions=64)
    model.config._attn_implementation = "eager"  # plain matmuls, as above
    source = torch.randint(2, 98, (3, 5))
    counted = _counted(lambda: model.eval().generate(
        source, attention_mask=torch.ones_like(source), num_beams=beam, do_sample=False,
        max_new_tokens=6, min_new_tokens=6))
    assert counted == flops.generation_flops(TRANSLATOR, 3, 5, 6, beam)


def test_translation_training_counts_equal_marians_forward_and_backward():
    pytest.importorskip("transformers")
    from zoo.bench.steps import random_marian_model

    model = random_marian_model(TRANSLATOR, 100, pad_id=99, end_id=0, max_positions=64)
    model.config._attn_implementation = "eager"
    source, target = torch.randint(2, 98, (3, 5)), torch.randint(2, 98, (3, 7))
    counted = _counted(lambda: model(input_ids=source, decoder_input_ids=target)
                       .logits.sum().backward())
    assert counted == flops.translation_train_flops(TRANSLATOR, 3, 5, 7)


def test_every_timed_work_has_a_count_from_its_shapes():
    # ViT-tiny's training step: ~0.75 GFLOP an image (docs/benchmarks.md); the decoding works
    # per generated token, beam 4 more than greedy but less than four times (one encoder).
    assert flops_per_unit("vit-tiny-train") == 3 * flops.vit_forward_flops(VIT_TINY)
    assert 0.74e9 < flops_per_unit("vit-tiny-train") < 0.76e9
    greedy, beam = flops_per_unit("mt-greedy"), flops_per_unit("mt-beam4")
    assert greedy == flops.generation_flops(
        MT, SETTINGS["mt_sentences"], SETTINGS["mt_source_tokens"], SETTINGS["mt_new_tokens"]
    ) / (SETTINGS["mt_sentences"] * SETTINGS["mt_new_tokens"])
    assert 3 * greedy < beam < 4 * greedy
    # ViT-B/16: 17.6 GMACs a forward pass (timm's and the ViT paper's count).
    assert round(flops_per_unit("vit-b16-infer-512") / 2e9, 1) == 17.6
    # Not counted (no fraction of the peak): int8 works, the served translator, the peak
    # itself, and the GPT-2, CLIP and captioner works, whose counts are not written yet.
    uncounted = GROUPS["int8"] + ("mt-served", "peak") + FAMILY_WORKS
    for work in WORKS:
        counted = flops_per_unit(work) is not None
        assert counted == (work not in uncounted), work
        if work in GROUPS["gpu"] and counted:  # a dry run counts its tiny shapes
            assert flops_per_unit(work, dry_run=True) < flops_per_unit(work)
