"""SavedModels for TensorFlow Serving: text in, text out; image bytes in, labels out.

`export_model` (`zoo.export`) writes `DIR/<name>/<version>/`, the layout TF Serving watches,
and `DIR/models.config` and `DIR/batching_parameters.txt` for the server's flags, with

- the translator's `serving_default`: `tf.string [batch]` sentences -> `translations`
  (`tf.string`) and `scores`; SentencePiece tokenization (TF Text ops), the encoder, beam
  search (a `while_loop` over the key/value cache) and detokenization run in the graph; and
  `translate_ids`: int32 source ids -> generated ids and scores;
- the ViT's `serving_default`: encoded JPEG/PNG bytes `tf.string [batch]` -> top-k `labels`
  and `probabilities`, with decoding, resizing and normalisation in the graph (an image above
  `MAX_PIXELS`, read from its header, is refused before it is decoded); and
  `classify_pixels`: float pixels `[batch, H, W, 3]` in 0..255;
- a sentence encoder's `serving_default`: `tf.string [batch]` sentences -> `embeddings`
  (float32 `[batch, dim]`, pooled and normalised as `SentenceEncoder.embed`), with BERT's
  WordPiece tokenization in the graph (`SentenceTokenizer.tokenize_in_graph`, TF Text ops,
  the same ids as the Python tokenizer); and `embed_ids`: int32 `token_ids` and
  `padding_mask` `[batch, length]` -> `embeddings`;
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

from zoo.errors import UserError
from zoo.layers.validation import positive_int
from zoo.training.disk_faults import naming
from zoo.training.progress import Step
from zoo.version import zoo_version
from zoo.serving.model_server import (write_batching_parameters, write_models_config,
                                      xla_only_op_types)
from zoo.serving.version_folder import put_in_place as _put_in_place
from zoo.serving.version_folder import remove_stale_temporaries

SERVING_SIGNATURE = "serving_default"


def _require_tensorflow_backend() -> None:
    if keras.backend.backend() != "tensorflow":
        raise UserError(
            f"export needs the TensorFlow backend (KERAS_BACKEND=tensorflow); this process "
            f"runs {keras.backend.backend()!r}. Weights trained on another backend load "
            "unchanged: export them from a TensorFlow process")


def translator_endpoints(model: Any, beam_size: int = 4, alpha: float = 0.6
                         ) -> tuple[Any, Any, Any]:
    """The two `tf.function`s of an exported translator and the tokenizer layer they use."""
    import tensorflow as tf

    tokenizer = model.tokenizer.to_keras_hub()
    tokenizer(tf.constant(["build"]))  # builds the layer (an export must track built layers)
    end_id, pad_id = model.tokenizer.end_id, model.tokenizer.pad_id

    def budget(source_ids: tf.Tensor) -> tf.Tensor:
        # The output budget of this batch's source length, as `Translator.translate` gives
        # it (`default_max_length` of the length rounded up to a multiple of 8, as
        # `encode_texts` pads it), not of the longest source the model takes: the key/value
        # cache, and every step's attention over it and beam reorder of it, are that long.
        padded = tf.minimum(model.max_source_length, (tf.shape(source_ids)[1] + 7) // 8 * 8)
        return tf.minimum(model.max_target_length,
                          tf.cast(tf.floor(1.5 * tf.cast(padded, tf.float32) + 10.0), tf.int32))

    def search(source_ids: tf.Tensor, max_length: Any) -> tuple[tf.Tensor, tf.Tensor]:
        tokens, scores = model.generate(source_ids, beam_size=beam_size,
                                        max_length=max_length, alpha=alpha)
        if beam_size > 1:
            tokens, scores = tokens[:, 0], scores[:, 0]
        # Everything after the first end token becomes padding.
        ended = tf.cumsum(tf.cast(tf.equal(tokens, end_id), tf.int32), axis=1, exclusive=True)
        return tf.where(ended > 0, pad_id, tokens), scores

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def translate(sentences: tf.Tensor) -> dict:
        pieces = tokenizer(sentences)  # ragged (batch, None)
        if isinstance(pieces, tf.Tensor):
            pieces = tf.RaggedTensor.from_tensor(pieces, padding=pad_id)
        pieces = pieces[:, : model.max_source_length - 1]  # long inputs are truncated
        ends = tf.fill([tf.shape(sentences)[0], 1], end_id)
        source_ids = tf.concat([tf.cast(pieces, tf.int32), ends], axis=1).to_tensor(pad_id)
        tokens, scores = search(source_ids, budget(source_ids))
        texts = tokenizer.detokenize(tokens)
        blank = tf.equal(tf.strings.length(tf.strings.strip(sentences)), 0)
        return {
            "translations": tf.where(blank, tf.constant(""), tf.reshape(texts, [-1])),
            "scores": tf.where(blank, 0.0, scores),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")])
    def translate_ids(source_ids: tf.Tensor) -> dict:
        # Ids may come padded to any width: the budget of the longest source the model takes.
        tokens, scores = search(source_ids, model.default_max_length(model.max_source_length))
        return {"target_ids": tokens, "scores": scores}

    return translate, translate_ids, tokenizer


def sentence_encoder_endpoints(model: Any) -> tuple[Any, Any]:
    """The two `tf.function`s of an exported `SentenceEncoder`: sentences and token ids.

    Raises:
        ValueError: the encoder has no vocabulary (it cannot tokenize text).
    """
    import tensorflow as tf

    tokenizer = model.tokenizer

    def embeddings(batch: dict) -> dict:
        return {"embeddings": tf.cast(model(batch, training=False), tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def embed(sentences: tf.Tensor) -> dict:
        return embeddings(tokenizer.tokenize_in_graph(sentences))

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids"),
                                  tf.TensorSpec([None, None], tf.int32, name="padding_mask")])
    def embed_ids(token_ids: tf.Tensor, padding_mask: tf.Tensor) -> dict:
        return embeddings({"token_ids": token_ids, "padding_mask": padding_mask})

    return embed, embed_ids


# The most pixels (height x width) an exported ViT decodes from one image: 40 megapixels,
# e.g. 8000 x 5000 (a large phone photo), about 120 MB as uint8 RGB. Larger images are
# refused from their header, before decoding.
MAX_PIXELS = 40_000_000


def image_header_size(data: Any) -> tuple[Any, Any, Any]:
    """`(known, height, width)` of one encoded image, read from its header with TF ops only.

    JPEG sizes come from `tf.io.extract_jpeg_shape` (the frame header); PNG, GIF and BMP
    sizes from their fixed header fields. `known` is False for bytes in none of these
    formats (height and width are then 0).
    """
    import tensorflow as tf

    head = tf.strings.substr(data, 0, 32)
    padded = tf.strings.substr(tf.strings.join([head, tf.constant(b"\0" * 32)]), 0, 32)
    b = tf.cast(tf.io.decode_raw(padded, tf.uint8), tf.int64)  # 32 header bytes

    def big_endian(start: int) -> Any:
        return b[start] * 16777216 + b[start + 1] * 65536 + b[start + 2] * 256 + b[start + 3]

    def little_endian_32(start: int) -> Any:
        value = b[start] + b[start + 1] * 256 + b[start + 2] * 65536 + b[start + 3] * 16777216
        return tf.where(value >= 2 ** 31, 2 ** 32 - value, value)  # BMP heights may be < 0

    is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")
    is_png = tf.equal(tf.strings.substr(data, 0, 8), b"\x89PNG\r\n\x1a\n")
    is_gif = tf.equal(tf.strings.substr(data, 0, 3), b"GIF")
    is_bmp = tf.equal(tf.strings.substr(data, 0, 2), b"BM")
    jpeg = tf.cond(is_jpeg,
                   lambda: tf.cast(tf.io.extract_jpeg_shape(data)[:2], tf.int64),
                   lambda: tf.zeros([2], tf.int64))
    zero = tf.constant(0, tf.int64)
    height = tf.where(is_jpeg, jpeg[0], tf.where(is_png, big_endian(20), tf.where(
        is_gif, b[8] + b[9] * 256, tf.where(is_bmp, little_endian_32(22), zero))))
    width = tf.where(is_jpeg, jpeg[1], tf.where(is_png, big_endian(16), tf.where(
        is_gif, b[6] + b[7] * 256, tf.where(is_bmp, little_endian_32(18), zero))))
    known = is_jpeg | is_png | is_gif | is_bmp
    return known, height, width


def vit_endpoints(model: Any, top_k: int = 5) -> tuple[Any, Any]:
    """The two `tf.function`s of an exported ViT: image bytes and float pixels."""
    import tensorflow as tf

    size = list(model.image_shape[:2])
    names = list(model.class_names or [f"class_{i}" for i in range(model.num_classes)])
    k = min(top_k, len(names))

    def top(pixels: tf.Tensor) -> dict:
        probabilities = tf.nn.softmax(tf.cast(model(pixels, training=False), tf.float32))
        best, indices = tf.math.top_k(probabilities, k=k)
        return {"labels": tf.gather(tf.constant(names), indices), "probabilities": best,
                "class_ids": indices}

    def decode(data: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        # The size comes from the header first: an image above MAX_PIXELS fails this request
        # with InvalidArgument before it is decoded (a 1.5 MB JPEG can hold 10000 x 10000
        # pixels, 300 MB decoded and 1.2 GB as floats). Bytes in no known format fail the
        # same way; both messages name the image's index in the batch.
        known, height, width = image_header_size(data)
        checks = [
            tf.debugging.Assert(known, ["image", index, "is not a JPEG, PNG, GIF or BMP"]),
            tf.debugging.Assert(height * width <= MAX_PIXELS, [
                "image", index, "has", height, "x", width, "pixels, more than the limit of",
                MAX_PIXELS]),
        ]
        with tf.control_dependencies(checks):
            # JPEGs with the accurate integer DCT: the pixels PIL gives training and
            # `classify` (tests/training/test_jpeg_decoding.py); decode_image's default fast
            # DCT differs by up to 4 levels. decode_image reads PNG, GIF and BMP; corrupt
            # bytes fail this request with InvalidArgument. Grayscale and RGBA become RGB,
            # 16-bit PNGs 8-bit.
            image = tf.cond(
                tf.io.is_jpeg(data),
                lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
                lambda: tf.io.decode_image(data, channels=3, dtype=tf.uint8,
                                           expand_animations=False))
        return tf.image.resize(tf.cast(image, tf.float32), size, antialias=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def classify_bytes(images: tf.Tensor) -> dict:
        indices = tf.range(tf.shape(images, out_type=tf.int64)[0])
        pixels = tf.map_fn(lambda args: decode(*args), (images, indices),
                           fn_output_signature=tf.TensorSpec(size + [3], tf.float32))
        return top(pixels)

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32,
                                                name="pixels")])
    def classify_pixels(pixels: tf.Tensor) -> dict:
        return top(tf.image.resize(pixels, size, antialias=True))

    return classify_bytes, classify_pixels


def write_warmup_requests(export_dir: str | os.PathLike, model_name: str,
                          inputs: dict[str, Any]) -> Path:
    """Writes `assets.extra/tf_serving_warmup_requests` with one PredictRequest."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SERVING_SIGNATURE))
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request))
    folder = Path(export_dir) / "assets.extra"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tf_serving_warmup_requests"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(log.SerializeToString())
    return path


def _archive(model: keras.Model, beam_size: int, alpha: float, top_k: int
             ) -> tuple[Any, dict[str, Any]]:
    """`(archive, warmup inputs)`: a `keras.export.ExportArchive` holding the model's two
    endpoints, and the `serving_default` inputs of its one warm-up request."""
    import tensorflow as tf

    from zoo.models.sentence_encoder.model import SentenceEncoder
    from zoo.models.translator.model import Translator

    if hasattr(model, "ensure_built"):
        model.ensure_built()
    # The endpoints capture the variables they use, and the archive saves those; tracking the
    # model as well would save every weight a second time under its Keras name
    # (keras-team/keras#23553). Only the tokenizer's assets need tracking.
    archive = keras.export.ExportArchive()
    if isinstance(model, Translator):
        translate, translate_ids, tokenizer = translator_endpoints(model, beam_size, alpha)
        archive.track(tokenizer)
        archive.add_endpoint(SERVING_SIGNATURE, translate)
        archive.add_endpoint("translate_ids", translate_ids)
        warmup = {"sentences": tf.constant(["A dog runs on the beach."])}
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
    return archive, warmup


def export_model(model: str | keras.Model, output: str | os.PathLike, version: int = 1,
                 force: bool = False, beam_size: int = 4, alpha: float = 0.6,
                 top_k: int = 5, name: str | None = None, progress: bool = False) -> Path:
    """Exports a zoo model to `output/<name>/<version>/` for TF Serving.

    Args:
        model: a model object (a `Translator`, `VisionTransformer` or `SentenceEncoder`,
            for instance one just fine-tuned), or what `zoo.load` takes: a shipped name, a
            path, a URL or a hub handle.
        output: the model repository folder.
        version: the version number (a positive int).
        force: replace an existing version folder; the old one is swapped out only once the
            new one is complete.
        beam_size, alpha: the translator's search, fixed in the graph.
        top_k: how many labels the ViT returns (a sentence encoder ignores these three).
        name: the served model's name; by default the shipped name, the file's stem, the
            handle's model name, or a model object's `name`.
        progress: say the export on stderr as it runs (tracing, writing and checking the
            graph take about a minute for the translator on two cores).

    Returns:
        The version folder written.

    Raises:
        FileExistsError: the version exists (without `force`), or another export wrote it
            meanwhile.
        ValueError: a bad version, name, beam size, alpha or top-k; a sentence encoder
            without a vocabulary; the errors of `zoo.load`.
    """
    import zoo
    from zoo.generation.settings import check_search_settings
    from zoo.models.sentence_encoder.model import SentenceEncoder
    from zoo.models.translator.model import Translator
    from zoo.models.vit.model import VisionTransformer

    _require_tensorflow_backend()
    if isinstance(version, bool) or not str(version).isdigit() or int(version) < 1:
        raise UserError(f"version must be a positive integer; got {version!r}")
    beam_size, _, alpha = check_search_settings(beam_size, alpha=alpha)
    top_k = positive_int(top_k, "top_k", error=UserError)
    from zoo.hub.handles import is_handle, model_name

    if isinstance(model, keras.Model):
        name = model.name if name is None else name
    elif not isinstance(model, (str, os.PathLike)):
        raise UserError(f"model must be a zoo model or a name, path, URL or handle; got "
                        f"{type(model).__name__}")
    elif name is None and is_handle(str(model)):
        name = model_name(str(model))  # hf://Helsinki-NLP/opus-mt-en-de -> opus-mt-en-de
    elif name is None:
        path = Path(str(model).partition("#")[0])  # no URL fragment (#sha256=...)
        name = path.parent.name if path.name == "model.keras" else path.stem
    if not name or name.startswith(".") or "/" in name or os.sep in name:
        raise UserError(f"the served model's name must be a plain folder name; got {name!r}")
    target = Path(output) / name / str(int(version))
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; pass --force to replace it")
    if not isinstance(model, keras.Model):
        model = zoo.load(str(model))
    elif not isinstance(model, (Translator, SentenceEncoder, VisionTransformer)):
        raise UserError(f"export takes a Translator, VisionTransformer or SentenceEncoder; "
                        f"got a {type(model).__name__}")

    with Step(f"exporting {name} to {target}", enabled=progress):
        _write_version(model, target, name, force, beam_size, alpha, top_k)
    write_models_config(Path(output))
    write_batching_parameters(Path(output))
    return target


def _write_version(model: keras.Model, target: Path, name: str, force: bool, beam_size: int,
                   alpha: float, top_k: int) -> None:
    """Traces, writes and checks the export in a temporary folder, then puts it in place."""
    archive, warmup = _archive(model, beam_size, alpha, top_k)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        with naming(target, temporary):  # a full disk names the version, not a temporary file
            archive.write_out(str(temporary), verbose=False)
            needs_xla = xla_only_op_types(temporary)
            if needs_xla:  # a bug of ours: the model server would fail on these
                raise RuntimeError(f"the export holds ops that run only through XLA, which "
                                   f"TF Serving runs without: {sorted(needs_xla)}")
            write_warmup_requests(temporary, name, warmup)
            (temporary / "assets.extra" / "zoo_version.txt").write_text(zoo_version() + "\n")
            _put_in_place(temporary, target, force)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary)
