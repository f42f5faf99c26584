"""Converters from public checkpoints: each reference model (random weights, tiny config, on
the CPU) against its converted zoo model, logits to 1e-4 and greedy ids exactly."""

from __future__ import annotations

import importlib.util

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from transformers import (  # noqa: E402
    MarianConfig,
    MarianMTModel,
    ViTConfig,
    ViTForImageClassification,
)

from zoo.converters.hf_vit import vit_from_hf, vit_from_timm  # noqa: E402
from zoo.converters.marian import translator_from_marian  # noqa: E402

TOLERANCE = 1e-4


def randomise(model: "torch.nn.Module", seed: int = 0) -> "torch.nn.Module":
    """Every parameter drawn afresh, LayerNorm scales and all biases included (a zero bias
    or a unit scale would hide a mis-mapped tensor); tied parameters stay tied."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_positions" in name:  # Marian's fixed sinusoids
                continue
            if param.ndim == 1 and ("norm" in name) and name.endswith("weight"):
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif param.ndim == 1:
                param.copy_(0.2 * torch.randn_like(param))
            else:
                fan_in = int(np.prod(param.shape[1:]))
                param.copy_(torch.randn_like(param) * fan_in ** -0.5)
    return model.eval()


def state_dict(model: "torch.nn.Module") -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def max_difference(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, "float64") - np.asarray(b, "float64"))))


# ---------------------------------------------------------------------- ViT (Hugging Face)
@pytest.fixture(scope="module")
def hf_vit():
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128, num_labels=10,
                       id2label={i: f"label{i}" for i in range(10)},
                       label2id={f"label{i}": i for i in range(10)})
    return randomise(ViTForImageClassification(config))


@pytest.fixture(scope="module")
def pixel_values():
    torch.manual_seed(1)
    return torch.randn(4, 3, 32, 32)


def test_vit_from_hf_state_dict_matches_logits(hf_vit, pixel_values):
    with torch.no_grad():
        expected = hf_vit(pixel_values=pixel_values).logits.numpy()
    model = vit_from_hf(state_dict(hf_vit), hf_vit.config)
    assert model.layer_norm_epsilon == pytest.approx(1e-12)
    assert model.class_names[3] == "label3"
    logits = np.asarray(model(np.transpose(pixel_values.numpy(), (0, 2, 3, 1))))
    difference = max_difference(logits, expected)
    print(f"ViT (HF state_dict) max |logit difference| = {difference:.3g}")
    assert difference < TOLERANCE
    assert (logits.argmax(-1) == expected.argmax(-1)).all()
    assert np.abs(expected).max() > 1.0  # the comparison is not between near-zero logits


def test_vit_from_hf_saved_files_and_rescaling(hf_vit, tmp_path):
    """The checkpoint-file names (Transformers 4 layout) from `save_pretrained`; and
    `include_rescaling=True` on 0..255 images equals the reference on mean = std = 0.5
    normalised pixels."""
    hf_vit.save_pretrained(tmp_path)
    model = vit_from_hf(tmp_path, include_rescaling=True)
    images = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3)).astype("uint8")
    pixels = torch.from_numpy(images.transpose(0, 3, 1, 2).astype("float32") / 255.0)
    with torch.no_grad():
        expected = hf_vit(pixel_values=(pixels - 0.5) / 0.5).logits.numpy()
    difference = max_difference(model(images), expected)
    print(f"ViT (HF safetensors, uint8 images) max |logit difference| = {difference:.3g}")
    assert difference < TOLERANCE


def test_vit_from_hf_refuses_wrong_shapes_and_unused_tensors(hf_vit):
    tensors = state_dict(hf_vit)
    name = "vit.layers.1.mlp.fc1.weight"
    bad = dict(tensors, **{name: np.zeros((100, 64), "float32")})
    with pytest.raises(ValueError, match=r"vit\.layers\.1\.mlp\.fc1\.weight.*\(100, 64\).*"
                                         r"\(128, 64\)"):
        vit_from_hf(bad, hf_vit.config)
    extra = dict(tensors, **{"vit.pooler.dense.weight": np.zeros((64, 64), "float32")})
    with pytest.raises(ValueError, match="not used.*vit.pooler.dense.weight"):
        vit_from_hf(extra, hf_vit.config)


# ---------------------------------------------------------------------- ViT (timm)
def test_vit_from_timm_matches_logits():
    if importlib.util.find_spec("timm") is None:
        pytest.skip("timm is not installed")
    from zoo.bench.steps import import_timm_vision_transformer

    # timm imports torchvision at module level; where PyPI's torchvision cannot load beside
    # the CPU torch, a stub stands in (VisionTransformer uses none of it).
    VisionTransformer, _ = import_timm_vision_transformer()
    reference = VisionTransformer(
        img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, mlp_ratio=2.0,
        num_classes=10)
    randomise(reference)
    torch.manual_seed(2)
    pixels = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        expected = reference(pixels).numpy()
    model = vit_from_timm(state_dict(reference), num_heads=4)
    logits = np.asarray(model(np.transpose(pixels.numpy(), (0, 2, 3, 1))))
    difference = max_difference(logits, expected)
    print(f"ViT (timm) max |logit difference| = {difference:.3g}")
    assert difference < TOLERANCE
    bad = dict(state_dict(reference), **{"blocks.0.attn.qkv.weight": np.zeros((64, 64))})
    with pytest.raises(ValueError, match=r"blocks\.0\.attn\.qkv\.weight.*\(64, 64\).*"
                                         r"\(192, 64\)"):
        vit_from_timm(bad, num_heads=4)


# ---------------------------------------------------------------------- Marian
PAD, EOS, VOCAB = 99, 0, 100


@pytest.fixture(scope="module")
def hf_marian():
    config = MarianConfig(
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
        decoder_ffn_dim=128, max_position_embeddings=64, activation_function="swish",
        scale_embedding=True, pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS,
        forced_eos_token_id=EOS)
    model = randomise(MarianMTModel(config))
    torch.manual_seed(3)
    with torch.no_grad():
        model.final_logits_bias.copy_(0.5 * torch.randn_like(model.final_logits_bias))
        model.final_logits_bias[0, EOS] = 2.0  # some greedy outputs end before the limit
    return model


@pytest.fixture(scope="module")
def source_ids():
    """Sources ending with </s> (id 0), right-padded with the pad id 99."""
    rng = np.random.default_rng(4)
    lengths = [9, 6, 4, 9]
    ids = np.full((len(lengths), 9), PAD, "int64")
    for row, length in enumerate(lengths):
        ids[row, :length - 1] = rng.integers(1, PAD, length - 1)
        ids[row, length - 1] = EOS
    return ids


def test_translator_from_marian_teacher_forced_logits(hf_marian, source_ids):
    model = translator_from_marian(state_dict(hf_marian), hf_marian.config)
    rng = np.random.default_rng(5)
    targets = np.concatenate([np.full((4, 1), PAD), rng.integers(0, PAD, (4, 7))], axis=1)
    with torch.no_grad():
        expected = hf_marian(
            input_ids=torch.from_numpy(source_ids),
            attention_mask=torch.from_numpy(source_ids != PAD).long(),
            decoder_input_ids=torch.from_numpy(targets)).logits.numpy()
    logits = np.asarray(model({"source_ids": source_ids.astype("int32"),
                               "target_ids": targets.astype("int32")}))
    difference = max_difference(logits, expected)
    print(f"Marian teacher-forced max |logit difference| = {difference:.3g}")
    assert difference < TOLERANCE
    assert np.abs(expected).max() > 1.0


@pytest.mark.parametrize("from_files", [False, True])
def test_translator_from_marian_greedy_ids(hf_marian, source_ids, tmp_path, from_files):
    if from_files:
        hf_marian.save_pretrained(tmp_path)
        model = translator_from_marian(tmp_path)
    else:
        model = translator_from_marian(state_dict(hf_marian), hf_marian.config)
    steps = 12
    with torch.no_grad():
        expected = hf_marian.generate(
            input_ids=torch.from_numpy(source_ids),
            attention_mask=torch.from_numpy(source_ids != PAD).long(),
            num_beams=1, do_sample=False, max_new_tokens=steps,
            bad_words_ids=[[PAD]]).numpy()
    assert (expected[:, 0] == PAD).all()  # the start token
    expected = expected[:, 1:]
    tokens, _ = model.search(source_ids.astype("int32"), beam_size=1, max_length=steps)
    width = expected.shape[1]
    np.testing.assert_array_equal(tokens[:, :width], expected)
    assert (tokens[:, width:] == PAD).all()
    ended_early = [(row[:-1] == EOS).any() for row in tokens]
    assert any(ended_early) and not all(ended_early)  # both kinds of ending were compared


def test_translator_from_marian_refuses_wrong_shapes_and_unused_tensors(hf_marian):
    tensors = state_dict(hf_marian)
    name = "model.decoder.layers.1.encoder_attn.k_proj.weight"
    bad = dict(tensors, **{name: np.zeros((64, 32), "float32")})
    with pytest.raises(ValueError, match=r"encoder_attn\.k_proj\.weight.*\(64, 32\).*\(64, 64\)"):
        translator_from_marian(bad, hf_marian.config)
    extra = dict(tensors, **{"model.encoder.layernorm_embedding.weight": np.ones(64)})
    with pytest.raises(ValueError, match="not used.*layernorm_embedding"):
        translator_from_marian(extra, hf_marian.config)
    untied = dict(tensors, **{"lm_head.weight": tensors["lm_head.weight"] + 1.0})
    with pytest.raises(ValueError, match="lm_head.weight differs"):
        translator_from_marian(untied, hf_marian.config)


def test_concatenated_sinusoids_equal_marians_table():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    from zoo.layers.sinusoidal_position_encoding import sinusoidal_position_encoding

    expected = MarianSinusoidalPositionalEmbedding(512, 64).create_weight().numpy()
    ours = np.asarray(sinusoidal_position_encoding(512, 64, layout="concatenated"))
    assert max_difference(ours, expected) < 1e-4
    interleaved = np.asarray(sinusoidal_position_encoding(512, 64))
    assert max_difference(interleaved, expected) > 0.5  # the default layout is another table


def test_converted_translator_saves_and_loads(hf_marian, source_ids, tmp_path):
    import keras

    model = translator_from_marian(state_dict(hf_marian), hf_marian.config)
    path = tmp_path / "marian.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    for key in ("pad_id", "start_id", "end_id", "position_layout", "suppressed_token_ids",
                "force_end_at_max_length", "output_bias", "scale_embedding", "activation"):
        assert loaded.get_config()[key] == model.get_config()[key]
    inputs = {"source_ids": source_ids.astype("int32"),
              "target_ids": np.full((4, 3), PAD, "int32")}
    np.testing.assert_allclose(np.asarray(loaded(inputs)), np.asarray(model(inputs)),
                               atol=1e-6)
    tokens, _ = loaded.search(source_ids.astype("int32"), beam_size=1, max_length=12)
    expected, _ = model.search(source_ids.astype("int32"), beam_size=1, max_length=12)
    np.testing.assert_array_equal(tokens, expected)
    beams, scores = loaded.search(source_ids.astype("int32"), beam_size=3, max_length=12)
    assert beams.shape == (4, 3, 12) and not (beams == PAD)[:, :, 0].any()


# ---------------------------------------------------------------------- `zoo convert`
def test_zoo_convert_hf_vit_writes_a_loadable_model_folder(hf_vit, tmp_path, capsys):
    import zoo
    from zoo.cli.main import main

    hf_vit.save_pretrained(tmp_path / "hf")
    out = tmp_path / "converted"
    assert main(["convert", "hf-vit", str(tmp_path / "hf"), "--output", str(out),
                 "--include-rescaling"]) == 0
    model = zoo.load(str(out))
    images = np.random.default_rng(2).integers(0, 256, (2, 32, 32, 3)).astype("uint8")
    pixels = torch.from_numpy(images.transpose(0, 3, 1, 2).astype("float32") / 255.0)
    with torch.no_grad():
        expected = hf_vit(pixel_values=(pixels - 0.5) / 0.5).logits.numpy()
    assert max_difference(model.predict(images, verbose=0), expected) < TOLERANCE
    assert '"kind": "vit"' in (out / "manifest.json").read_text()
    # A second conversion into the same folder needs --force; a missing source is named.
    assert main(["convert", "hf-vit", str(tmp_path / "hf"), "--output", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["convert", "marian", "--output", str(tmp_path / "m")]) == 2
    assert "convert marian needs SOURCE" in capsys.readouterr().err



def test_a_killed_convert_force_keeps_the_model_it_would_replace(tmp_path, monkeypatch):
    """`zoo convert --force` renames the new model into place once whole: a kill while it
    saves leaves the old file as it was, and no temporary file beside it."""
    from zoo import converters
    from zoo.cli.main import main

    out = tmp_path / "converted"
    out.mkdir()
    old = b"PK\x03\x04 the model that was there"
    (out / "model.keras").write_bytes(old)

    class HalfSaved:
        def save(self, path):
            Path(path).write_bytes(b"PK\x03\x04 half")  # killed in the middle of the write
            raise KeyboardInterrupt

    monkeypatch.setattr(converters, "vit_from_hf", lambda *a, **k: HalfSaved())
    (tmp_path / "hf").mkdir()
    assert main(["convert", "hf-vit", str(tmp_path / "hf"), "--output", str(out),
                 "--force"]) == 130
    assert (out / "model.keras").read_bytes() == old
    assert sorted(p.name for p in out.iterdir()) == ["model.keras"]


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_marian_folder_with_opus_mt_tokenizer_files_translates_text(hf_marian, tmp_path,
                                                                    capsys):
    """A checkpoint folder holding source.spm, target.spm and vocab.json (`</s>` 0, `<unk>`
    1, `<pad>` last) converts into a translator of text, equal to MarianMTModel.generate
    decoded by MarianTokenizer, before and after a .keras round trip and `zoo convert`."""
    import copy
    import io
    import json

    import keras
    import sentencepiece
    from transformers import MarianTokenizer as ReferenceTokenizer

    import zoo
    from zoo.cli.main import main
    from zoo.text.marian import MarianTokenizer

    rng = np.random.default_rng(6)
    words = ["a", "dog", "runs", "the", "man", "rides", "red", "bike", "in", "park",
             "woman", "sings", "blue", "car", "street", "child", "plays", "ball"] + [
        "".join(rng.choice(list("abcdefghiklmnoprstuwyz"), rng.integers(3, 8)))
        for _ in range(150)]
    texts = [" ".join(rng.choice(words, rng.integers(3, 9))) + "." for _ in range(1000)]
    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=proto, vocab_size=150,
        model_type="unigram", input_sentence_size=0, shuffle_input_sentence=False,
        num_threads=1, minloglevel=2, hard_vocab_limit=False)
    processor = sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
              if not (processor.is_control(i) or processor.is_unknown(i))]
    vocab = {"</s>": EOS, "<unk>": 1}
    for piece in pieces[:VOCAB - 3]:
        vocab[piece] = len(vocab)
    for i in range(len(vocab), PAD):  # the model's vocabulary is larger than the pieces
        vocab[f"<extra_{i}>"] = i
    vocab["<pad>"] = PAD
    hf_marian = copy.deepcopy(hf_marian)
    with torch.no_grad():
        hf_marian.final_logits_bias[0, EOS] = 0.0  # no translation ends at once
    hf_marian.save_pretrained(tmp_path / "opus")
    for name in ("source.spm", "target.spm"):
        (tmp_path / "opus" / name).write_bytes(proto.getvalue())
    (tmp_path / "opus" / "vocab.json").write_text(json.dumps(vocab))

    sentences = ["a dog runs in the park.", "the woman sings.", "a red car plays ball."]
    reference = ReferenceTokenizer.from_pretrained(str(tmp_path / "opus"))
    with torch.no_grad():
        output = hf_marian.generate(**reference(sentences, return_tensors="pt", padding=True),
                                    num_beams=1, do_sample=False, max_new_tokens=12,
                                    bad_words_ids=[[PAD]])
    expected = reference.batch_decode(output, skip_special_tokens=True)
    assert all(expected)

    model = translator_from_marian(tmp_path / "opus")
    assert isinstance(model.tokenizer, MarianTokenizer)
    assert model.translate(sentences, beam_size=1, max_length=12) == expected
    model.save(tmp_path / "marian.keras")
    loaded = keras.saving.load_model(tmp_path / "marian.keras")
    assert isinstance(loaded.tokenizer, MarianTokenizer)
    assert loaded.translate(sentences, beam_size=1, max_length=12) == expected
    assert main(["convert", "marian", str(tmp_path / "opus"), "--output",
                 str(tmp_path / "converted")]) == 0
    capsys.readouterr()
    converted = zoo.load(str(tmp_path / "converted"))
    assert converted.translate(sentences, beam_size=1, max_length=12) == expected


@pytest.mark.parametrize("id2label, expected, warns", [
    ({0: "cat", 1: "dog", 2: "bird"}, ["cat", "dog", "bird"], False),
    ({"0": "cat", "1": "dog", "2": "bird"}, ["cat", "dog", "bird"], False),
    ({0: "cat", 1: "dog"}, None, True),                   # fewer labels than the head
    ({0: "cat", 1: "dog", 2: "bird", 3: "fish"}, None, True),
    ({"a": "cat"}, None, True),                            # ids that are not numbers
    ({}, None, False),                                     # no labels: nothing dropped
])
def test_id2label_that_does_not_fit_the_head_is_dropped_with_a_warning(id2label, expected,
                                                                       warns):
    import warnings

    from zoo.converters.hf_vit import _class_names

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _class_names({"id2label": id2label}, 3) == expected
    said = [str(w.message) for w in caught]
    assert bool(said) == warns
    if warns:
        assert "does not fit the head's 3 classes" in said[0] and "dropped" in said[0]
