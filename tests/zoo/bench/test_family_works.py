"""The new families' works of `zoo bench` (GPT-2 decoding, CLIP, the captioner): their
settings are the registered architectures' and the same for every system, the zoo's model
never chooses the end token, and each work's zoo job runs at its tiny dry-run size and gives a
positive rate (the peers are run by `zoo bench --dry-run` and the GPU command's dry run)."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.bench import decoding, workers
from zoo.bench.works import (DRY_RUN, FAMILY_WORKS, GROUPS, WORKS, family_work_settings,
                             gpu_work_settings)


def test_settings_are_the_issue_shapes_and_a_dry_run_the_tiny_architectures():
    from zoo.models.architectures import ARCHITECTURES

    greedy, top_p = (family_work_settings(w) for w in ("gpt2-greedy", "gpt2-top-p"))
    assert greedy["architecture"] == "gpt2-small" and greedy["batches"] == [1, 16]
    assert greedy["sampler"] == "greedy" and "top_p" not in greedy
    assert (top_p["sampler"], top_p["top_p"], top_p["temperature"]) == ("top_p", 0.9, 1.0)
    # The same prompts and new tokens for both samplers.
    for key in ("architecture", "prompt_tokens", "new_tokens", "batches"):
        assert greedy[key] == top_p[key]
    assert family_work_settings("clip-b32-images")["architecture"] == "clip-vit-b32"
    assert family_work_settings("captioner-greedy")["architecture"] == "vit-gpt2-captioner"
    # The GPU works are in the group the GPU command picks from, at their GPU sizes.
    assert gpu_work_settings("gpt2-greedy-64")["batches"] == [64]
    assert gpu_work_settings("clip-b32-embed-256")["batch"] == 256
    assert {"gpt2-greedy-64", "clip-b32-embed-256"} <= set(GROUPS["gpu"])
    for work in FAMILY_WORKS:
        full, tiny = family_work_settings(work), family_work_settings(work, dry_run=True)
        decoding.architecture(full["architecture"])  # registered (KeyError otherwise)
        assert tiny["architecture"].endswith("tiny") and tiny["architecture"] in ARCHITECTURES
        assert set(tiny) == set(full) and (tiny["warmup"], tiny["timed"]) == (1, 1)
        assert tiny.get("batches", [tiny.get("batch")]) == [DRY_RUN["batch"]]
    with pytest.raises(ValueError, match="'mt-greedy' is no work of the new families"):
        family_work_settings("mt-greedy")
    # keras-hub has no captioner: the work says so and plans no keras-hub job.
    assert "keras-hub has no captioner" in WORKS["captioner-greedy"].description
    assert all(system != "keras-hub" for system, _ in WORKS["captioner-greedy"].runs)


def test_the_end_token_is_never_the_zoos_choice():
    # (Every dry run below asserts that each row got all its new tokens.)
    from zoo.models.causal_lm.causal_lm import CausalLM

    class PrefersEnd(CausalLM):  # a model whose every greedy choice is the end token
        def logits(self, hidden):
            logits = super().logits(hidden)
            bonus = np.zeros((logits.shape[-1],), "float32")
            bonus[self.end_id] = 1e3
            return logits + bonus

    never = decoding.end_never_chosen(PrefersEnd).from_architecture("gpt2-tiny")
    inputs = {"token_ids": np.array([[1, 2, 3], [4, 5, 6]]), "padding_mask": np.ones((2, 3))}
    preferred = np.asarray(PrefersEnd.logits(never, never.backbone(inputs)))
    assert (preferred.argmax(-1) == never.end_id).all()
    logits = np.asarray(never(inputs))
    assert (logits.argmax(-1) != never.end_id).all()
    np.testing.assert_allclose(logits[..., never.end_id], preferred[..., never.end_id] - 1e9)


@pytest.mark.parametrize("work", FAMILY_WORKS)
def test_each_work_of_the_zoo_runs_at_its_dry_run_size(work):
    import keras

    results = workers.run(work, "zoo", 0.0, dry_run=True, backend=keras.backend.backend())
    assert results and all(r["rate"] > 0 for r in results), results
    assert all(r["unit"] == WORKS[work].unit for r in results)
    assert all(r["settings"] == family_work_settings(work, dry_run=True) for r in results)
    variants = [r.get("variant") for r in results]
    if work.startswith("gpt2"):
        assert variants == [f"batch {DRY_RUN['batch']}"]
    elif work == "clip-b32-embed-256":
        assert variants == ["images", "texts"]
    else:
        assert variants == [None]
