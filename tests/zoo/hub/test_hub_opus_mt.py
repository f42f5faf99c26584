"""OPUS-MT handles (`hf://Helsinki-NLP/opus-mt-...`) against transformers' MarianMTModel and
MarianTokenizer, offline: a tiny random-weight Marian checkpoint, with SentencePiece files
trained here on real Multi30k text and laid out as OPUS-MT ships them, is published into a
Hugging Face cache built in the test (`HF_HUB_OFFLINE=1`). The handle's tokenizer gives the
reference's ids and text, its greedy translations equal the reference's, a second load neither
downloads nor converts, and the SavedModel exported from the handle translates strings as the
Python API does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sentencepiece = pytest.importorskip("sentencepiece")

from transformers import MarianConfig, MarianMTModel  # noqa: E402

import zoo  # noqa: E402
import zoo.hub.handles as hub  # noqa: E402
from tests.zoo.conftest import (  # noqa: E402
    read_gz,
    serve,
    train_unigram_spm,
)
from tests.zoo.hub._hub_helpers import publish, randomise  # noqa: E402


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
