"""SavedModels for TensorFlow Serving: text in, text out; image bytes in, labels out.

`export_model` (`zoo.export`) writes `DIR/<name>/<version>/`, the layout TF Serving watches,
and `DIR/models.config` and `DIR/batching_parameters.txt` for the server's flags, with

- the translator's `serving_default`: `tf.string [batch]` sentences -> `translations`
  (`tf.string`) and `scores`; SentencePiece tokenization (TF Text ops), the encoder, beam
  search (a `while_loop` over the key/value cache) and detokenization run in the graph; and
  `translate_ids`: int32 source ids -> generated ids and scores;
- the ViT's `serving_default`: encoded JPEG/PNG bytes `tf.string [batch]` -> top-k `labels`
  and `probabilities`, with decoding, resizing and normalisation in the graph (an image above
  `MAX_PIXELS`, read from its header, is refused before it is decoded; an image that does
  not decode is named: "image 3 of 8: ..."); and `classify_pixels`: float pixels
  `[batch, H, W, 3]` in 0..255 (a batch with a NaN or infinite pixel is refused, naming the
  image); each takes at most `MAX_IMAGES` (1,024) images and `MAX_REQUEST_BYTES` a request;
  zoo/serving/image_endpoints.py;
- a sentence encoder's `serving_default`: `tf.string [batch]` sentences -> `embeddings`
  (float32 `[batch, dim]`, pooled and normalised as `SentenceEncoder.embed`), with BERT's
  WordPiece tokenization in the graph (`SentenceTokenizer.tokenize_in_graph`, TF Text ops,
  the same ids as the Python tokenizer); and `embed_ids`: int32 `token_ids` and
  `padding_mask` `[batch, length]` -> `embeddings`; each refuses a request of more than
  `MAX_SENTENCES` (1,024) sentences; zoo/serving/text_endpoints.py (with the translator's,
  which take `MAX_TRANSLATOR_SENTENCES`, 64, a request);
- an image captioner's `serving_default`: encoded images `tf.string [batch]` -> `captions`
  and `scores`, with decoding, the encoder, the search and the detokenization in the graph;
  at most `MAX_CAPTION_IMAGES` (32) images a request; zoo/serving/caption_endpoints.py;
- a causal language model's `serving_default`: `tf.string [batch]` prompts (and optional
  `max_new_tokens`, `temperature`, `top_p`, `seed`) -> `completions` and `new_tokens`, with
  byte-pair tokenization, the sampling loop and detokenization in the graph; at most
  `MAX_PROMPTS` (8) prompts a request; zoo/serving/generation_endpoints.py;
- CLIP's `serving_default`: image bytes and candidate `labels` -> `probabilities`
  `[images, labels]`, and `encode_images` / `encode_texts`; zoo/serving/clip_endpoints.py;
- every signature bounded in memory for every request it accepts (refusals are
  InvalidArgument naming the cap; the largest accepted requests' memory is measured in
  docs/benchmarks.md), and an empty request answered with outputs of no rows;
- `assets.extra/tf_serving_warmup_requests`, PredictionLog records that TF Serving replays at
  load time so the first real request does not pay for graph warm-up;
- `assets.extra/zoo_version.txt`, the version of the zoo that wrote the export.

Only TensorFlow and TF Text ops are in the graphs: stock TF Serving runs them, and so does a
process that imports nothing but `tensorflow` and `tensorflow_text`. None needs XLA, which
the server runs without (`export_model` checks the graph it wrote:
`zoo.serving.model_server.xla_only_op_types`).

A version folder is written under a hidden temporary name beside its target and renamed into
place once complete, so TF Serving (which only looks at numeric folder names) never sees a
half-written version, a crash leaves nothing under the version's name, and of two exports of
the same version only one succeeds (`zoo.serving.version_folder`). A full or read-only disk
raises an OSError that names the version folder, and leaves nothing of it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import keras

from zoo.training.errors import UserError
from zoo.layers.validation import positive_int
from zoo.training.files.disk_faults import naming
from zoo.training.files.file_store import refuse_link
from zoo.training.files.output_file import check_output_folder
from zoo.training.files.new_folders import folder_for
from zoo.training.progress import Step
from zoo.version import zoo_version
from zoo.generation.settings import check_search_settings
from zoo.models.captioner.captioner import ImageCaptioner
from zoo.models.causal_lm.causal_lm import CausalLM
from zoo.models.clip.model import CLIP
from zoo.models.surgery import in_dtype
from zoo.models.sentence_encoder.model import SentenceEncoder
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer
from zoo.hub.loader import load, source_name
from zoo.serving.model_server import (check_server_files, write_batching_parameters,
                                      write_models_config, xla_only_op_types)
from zoo.serving.server_messages import message_class
from zoo.serving.clip_endpoints import clip_endpoints
from zoo.serving.version_folder import put_in_place as _put_in_place
from zoo.serving.version_folder import remove_stale_temporaries
from zoo.serving.image_endpoints import (  # noqa: F401  (named here too)
    MAX_IMAGES, MAX_PIXELS, MAX_REQUEST_BYTES, image_header_size, vit_endpoints)
from zoo.serving.caption_endpoints import MAX_CAPTION_IMAGES, captioner_endpoints  # noqa: F401
from zoo.serving.text_endpoints import (  # noqa: F401  (named here too)
    MAX_SENTENCES, MAX_TRANSLATOR_SENTENCES, sentence_encoder_endpoints, translator_endpoints)
from zoo.serving.generation_endpoints import (  # noqa: F401  (MAX_PROMPTS named here too)
    MAX_PROMPTS, causal_lm_endpoints, signature_defaults, write_signature_defaults)

SERVING_SIGNATURE = "serving_default"
PRECISIONS = ("float32", "bfloat16")


def _require_tensorflow_backend() -> None:
    if keras.backend.backend() != "tensorflow":
        raise UserError(
            f"export needs the TensorFlow backend (KERAS_BACKEND=tensorflow); this process "
            f"runs {keras.backend.backend()!r}. Weights trained on another backend load "
            "unchanged: export them from a TensorFlow process")


def write_warmup_requests(export_dir: str | os.PathLike, model_name: str,
                          inputs: dict[str, Any]) -> Path:
    """Writes `assets.extra/tf_serving_warmup_requests` with one PredictRequest (a
    `PredictionLog` record, `zoo.serving.server_messages`)."""
    import tensorflow as tf

    log = message_class("PredictionLog")()
    request = log.predict_log.request
    request.model_spec.name = model_name
    request.model_spec.signature_name = SERVING_SIGNATURE
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    folder = Path(export_dir) / "assets.extra"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tf_serving_warmup_requests"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(log.SerializeToString())
    return path


def _archive(model: keras.Model, beam_size: int, alpha: float, top_k: int
             ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """`(archive, warmup inputs, defaults)`: a `keras.export.ExportArchive` holding the
    model's endpoints, the `serving_default` inputs of its one warm-up request, and the
    values of its optional inputs (`SignatureDef.defaults`)."""
    import tensorflow as tf

    if isinstance(model, (Translator, ImageCaptioner, CausalLM)):
        model.ensure_built()
    # The endpoints capture the variables they use, and the archive saves those; tracking the
    # model as well would save every weight a second time under its Keras name
    # (keras-team/keras#23553). Only the tokenizer's assets need tracking.
    archive, defaults = keras.export.ExportArchive(), {}
    if isinstance(model, Translator):
        translate, translate_ids, tokenizer = translator_endpoints(model, beam_size, alpha)
        archive.track(tokenizer)
        archive.add_endpoint(SERVING_SIGNATURE, translate)
        archive.add_endpoint("translate_ids", translate_ids)
        warmup = {"sentences": tf.constant(["A dog runs on the beach."])}
    elif isinstance(model, ImageCaptioner):
        archive.add_endpoint(SERVING_SIGNATURE, captioner_endpoints(model, beam_size, alpha))
        blank = tf.zeros(list(model.encoder.image_shape[:2]) + [3], tf.uint8)
        warmup = {"images": tf.stack([tf.io.encode_png(blank)])}
    elif isinstance(model, CausalLM):
        generate, tokenizer = causal_lm_endpoints(model)
        archive.track(tokenizer)
        archive.add_endpoint(SERVING_SIGNATURE, generate)
        defaults = signature_defaults(model.backbone.max_positions)
        warmup = {"prompts": tf.constant(["Once upon a time"])}
    elif isinstance(model, CLIP):  # zoo/serving/clip_endpoints.py
        *endpoints, layer = clip_endpoints(model)
        archive.track(layer)  # its lookup tables
        for name, endpoint in zip((SERVING_SIGNATURE, "encode_images", "encode_texts"),
                                  endpoints):
            archive.add_endpoint(name, endpoint)
        size = list(model.preprocessor.image_converter.image_shape[:2])
        warmup = {"images": tf.stack([tf.io.encode_png(tf.zeros(size + [3], tf.uint8))]),
                  "labels": tf.constant(["cat", "dog"])}
    elif isinstance(model, SentenceEncoder):
        embed, embed_ids = sentence_encoder_endpoints(model)
        archive.add_endpoint(SERVING_SIGNATURE, embed)
        archive.add_endpoint("embed_ids", embed_ids)
        warmup = {"sentences": tf.constant(["A man is eating food."])}
    else:
        classify_bytes, classify_pixels = vit_endpoints(model, top_k)
        archive.add_endpoint(SERVING_SIGNATURE, classify_bytes)
        archive.add_endpoint("classify_pixels", classify_pixels)
        blank = tf.zeros(list(model.image_shape[:2]) + [3], tf.uint8)
        warmup = {"images": tf.stack([tf.io.encode_png(blank)])}
    return archive, warmup, defaults


def export_model(model: str | keras.Model, output: str | os.PathLike, version: int = 1,
                 force: bool = False, beam_size: int = 4, alpha: float = 0.6,
                 top_k: int = 5, name: str | None = None, progress: bool = False,
                 precision: str = "float32") -> Path:
    """Exports a zoo model to `output/<name>/<version>/` for TF Serving.

    Args:
        model: a model object (a `Translator`, `VisionTransformer` or `SentenceEncoder`,
            for instance one just fine-tuned), or what `zoo.load` takes: a shipped name, a
            path, a URL or a hub handle.
        output: the model repository folder.
        version: the version number (a positive int).
        force: replace an existing version folder; the old one is swapped out only once the
            new one is complete.
        beam_size, alpha: the translator's (and the captioner's) search, fixed in the graph.
        top_k: how many labels the ViT returns (a sentence encoder ignores these three).
        name: the served model's name; by default the shipped name, the file's stem, the
            handle's model name, or for a model object the name it was loaded as (a
            shipped name, a file's stem; `zoo.hub.loader.source_name`), its architecture's
            name, or else its Keras `name`.
        progress: say the export on stderr as it runs (tracing, writing and checking the
            graph take about a minute for the translator on two cores).
        precision: "float32", or "bfloat16": the graph's products (and the translator's
            key/value cache) in bfloat16 under Keras' `mixed_bfloat16` policy, its weights
            float32, every signature's inputs and outputs as in float32 (logits,
            probabilities and scores are computed in float32). oneDNN runs those products
            on AMX or AVX-512 BF16 where the CPU has them; elsewhere the export runs slower
            than float32 (said once). A sentence encoder is exported in float32 only.

    Returns:
        The version folder written.

    Raises:
        FileExistsError: the version exists (without `force`), or another export wrote it
            meanwhile.
        ValueError: a bad version, name, beam size, alpha or top-k; a sentence encoder
            without a vocabulary; the errors of `zoo.load`.
    """
    _require_tensorflow_backend()
    if isinstance(version, bool) or not str(version).isdigit() or int(version) < 1:
        raise UserError(f"version must be a positive integer; got {version!r}")
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}; expected one of "
                        f"{', '.join(PRECISIONS)}")
    beam_size, _, alpha = check_search_settings(beam_size, alpha=alpha)
    top_k = positive_int(top_k, "top_k", error=UserError)
    if isinstance(model, keras.Model):
        # A loaded model by the name it was loaded as, a built one by its architecture's.
        name = (getattr(model, "preset_name", None) or model.name) if name is None else name
    elif not isinstance(model, (str, os.PathLike)):
        raise UserError(f"model must be a zoo model or a name, path, URL or handle; got "
                        f"{type(model).__name__}")
    elif name is None:
        name = source_name(str(model))
    if not name or name.startswith(".") or "/" in name or os.sep in name:
        raise UserError(f"the served model's name must be a plain folder name; got {name!r}")
    target = check_output_folder(output) / name / str(int(version))  # train's rule too
    for path in (target.parent, target):
        refuse_link(path)  # the export would land, or replace a folder, outside DIR
    check_server_files(output)  # written last: refused before the work, not after
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; pass --force to replace it")
    source = model
    if not isinstance(model, keras.Model):
        model = load(str(model))
    if not isinstance(model, (Translator, SentenceEncoder, VisionTransformer, ImageCaptioner,
                              CausalLM, CLIP)):
        named = "" if isinstance(source, keras.Model) else f" {source} is"
        raise UserError(f"export takes a Translator, VisionTransformer, SentenceEncoder, "
                        f"ImageCaptioner, CausalLM or CLIP;"
                        f"{named or ' got'} a {type(model).__name__}, which the zoo cannot "
                        "serve (export it with model.export(path) instead)")
    if precision == "bfloat16":
        model = in_dtype(model, "mixed_bfloat16")

    with Step(f"exporting {name} to {target}", enabled=progress):
        _write_version(model, target, name, force, beam_size, alpha, top_k)
    write_models_config(Path(output))
    write_batching_parameters(Path(output))
    return target


def _write_version(model: keras.Model, target: Path, name: str, force: bool, beam_size: int,
                   alpha: float, top_k: int) -> None:
    """Traces, writes and checks the export in a temporary folder, then puts it in place."""
    archive, warmup, defaults = _archive(model, beam_size, alpha, top_k)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex}")
    # A failure leaves no folder behind that this export made (DIR, DIR/<name>).
    with folder_for(target.parent):
        remove_stale_temporaries(target.parent)
        try:
            with naming(target, temporary):  # a full disk names the version, not a temporary
                archive.write_out(str(temporary), verbose=False)
                if defaults:
                    write_signature_defaults(temporary, SERVING_SIGNATURE, defaults)
                needs_xla = xla_only_op_types(temporary)
                if needs_xla:  # a bug of ours: the model server would fail on these
                    raise RuntimeError(f"the export holds ops that run only through XLA, "
                                       f"which TF Serving runs without: {sorted(needs_xla)}")
                write_warmup_requests(temporary, name, warmup)
                (temporary / "assets.extra" / "zoo_version.txt").write_text(
                    zoo_version() + "\n")
                _put_in_place(temporary, target, force)
        finally:
            if temporary.exists():
                shutil.rmtree(temporary)
