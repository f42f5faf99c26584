"""Multi30k task 1 (WMT16 multimodal translation): English-German image captions.

Two ways in:

- `load_multi30k(split, data_dir=None)` returns (source, target) string pairs, read from a
  folder of raw files or downloaded once into the Keras cache. Needs no TensorFlow.
- `Multi30k`, a TensorFlow Datasets builder (`tfds.load`-style), for tf.data pipelines. It
  reads the raw files from a local folder when one is given and downloads them otherwise.
  TFDS is imported only when `Multi30k` or `Multi30kConfig` is first used, so that
  importing this module works on machines without TensorFlow.

The raw files are those of the multi30k/dataset repository, data/task1/raw:
{split}.{lang}.gz with split train (29,000 pairs), val (1,014) or test_2016_flickr (1,000),
one sentence per line, aligned by line. Downloads are checked against SHA-256 sums.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from training.text_data import MULTI30K_SPLITS, read_multi30k, read_parallel
from zoo.errors import UserError

RAW_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{split}.{lang}.gz"
CITATION = """@inproceedings{elliott-etal-2016-multi30k,
  title = {Multi30K: Multilingual English-German Image Descriptions},
  author = {Elliott, Desmond and Frank, Stella and Sima'an, Khalil and Specia, Lucia},
  booktitle = {Proceedings of the 5th Workshop on Vision and Language},
  year = {2016},
  pages = {70--74},
}"""

# SHA-256 of the raw files at multi30k/dataset commit a3d2e0d2.
SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
}


def download_multi30k(
    cache_dir: str | os.PathLike | None = None, languages: tuple[str, ...] = ("en", "de")
) -> Path:
    """Downloads the raw Multi30k files once (all three splits) and returns their folder.

    Args:
        cache_dir: Keras cache root (default ~/.keras or $KERAS_HOME); files land in
            `cache_dir/multi30k`.
        languages: language codes to fetch.

    Returns:
        The folder holding {split}.{lang}.gz, ready for `load_multi30k(data_dir=...)`.

    Raises:
        ConnectionError: a file could not be fetched.
        ValueError: a fetched file does not have the expected SHA-256.
    """
    import keras  # keras.utils.get_file caches, resumes and checks hashes; no TF needed.

    if cache_dir is not None:
        # Keras falls back to /tmp/.keras when the cache root is not a writable folder.
        os.makedirs(cache_dir, exist_ok=True)
    folder = None
    for split in MULTI30K_SPLITS:
        for lang in languages:
            name = f"{split}.{lang}.gz"
            url = RAW_URL.format(split=split, lang=lang)
            try:
                path = keras.utils.get_file(
                    fname=name,
                    origin=url,
                    file_hash=SHA256.get(name),
                    hash_algorithm="sha256",
                    cache_subdir="multi30k",
                    cache_dir=None if cache_dir is None else os.fspath(cache_dir),
                )
            except ValueError as error:  # Keras: the SHA-256 does not match.
                raise UserError(f"downloaded {name} from {url} is corrupt: {error}") from None
            except Exception as error:  # Keras raises a bare Exception for fetch failures.
                raise ConnectionError(
                    f"could not download Multi30k file {name} from {url} ({error}); pass "
                    "data_dir= a folder that holds the raw files instead"
                ) from error
            folder = Path(path).parent
    return folder


def load_multi30k(
    split: str,
    data_dir: str | os.PathLike | None = None,
    source_lang: str = "en",
    target_lang: str = "de",
    cache_dir: str | os.PathLike | None = None,
) -> list[tuple[str, str]]:
    """Returns the (source, target) sentence pairs of one Multi30k split.

    Args:
        split: "train", "val" or "test_2016_flickr".
        data_dir: folder of raw files {split}.{lang}.gz (or uncompressed); when None the
            files are downloaded once into the Keras cache.
        source_lang: source language code.
        target_lang: target language code.
        cache_dir: Keras cache root for the download (default ~/.keras or $KERAS_HOME).

    Returns:
        Pairs in file order.

    Example:
    >>> pairs = load_multi30k("val", data_dir="/data/multi30k")
    >>> len(pairs)
    1014

    Raises:
        ValueError: `split` is unknown.
        FileNotFoundError: `data_dir` lacks a file of the split.
    """
    if split not in MULTI30K_SPLITS:
        raise UserError(f"unknown Multi30k split {split!r}; expected one of {MULTI30K_SPLITS}")
    if data_dir is None:
        data_dir = download_multi30k(cache_dir, languages=(source_lang, target_lang))
    elif not Path(data_dir).is_dir():
        raise FileNotFoundError(f"Multi30k data_dir {os.fspath(data_dir)!r} is not a folder")
    return read_multi30k(data_dir, split, source_lang, target_lang)


def _check_sha256(path: str | os.PathLike, name: str) -> None:
    expected = SHA256.get(name)
    if expected is None:
        return
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != expected:
        raise UserError(
            f"downloaded {name} ({os.fspath(path)!r}) has SHA-256 {digest}, expected "
            f"{expected}; the upstream file changed or the download is corrupt"
        )


def _define_tfds_builder() -> dict[str, type]:
    """Defines the TFDS config and builder classes (TFDS must be imported to subclass it)."""
    import dataclasses

    import tensorflow_datasets as tfds

    @dataclasses.dataclass
    class Multi30kConfig(tfds.core.BuilderConfig):
        """A Multi30k language pair, and optionally a local folder of raw files.

        Attributes:
            source_lang: language code of the "source" feature.
            target_lang: language code of the "target" feature.
            raw_dir: folder holding {split}.{lang}.gz; None to use manual_dir or download.
        """

        source_lang: str = "en"
        target_lang: str = "de"
        raw_dir: str | None = None

    class Multi30k(tfds.core.GeneratorBasedBuilder):
        """Multi30k task 1 sentence pairs with text features "source" and "target".

        The raw files come from the first of: the constructor's `raw_dir`, the config's
        `raw_dir`, the download config's `manual_dir` (when it holds the files), and
        otherwise a download from the multi30k/dataset repository.

        Args:
            raw_dir: folder of raw files {split}.{lang}.gz (or uncompressed).
            **kwargs: `tfds.core.DatasetBuilder` arguments: `data_dir` (where the prepared
                TFRecords go), `config`, `version`.

        Example:
        >>> builder = Multi30k(raw_dir="/data/multi30k", data_dir="/tmp/tfds")
        >>> builder.download_and_prepare()
        >>> train = builder.as_dataset(split="train", as_supervised=True)
        """

        VERSION = tfds.core.Version("1.0.0")
        RELEASE_NOTES = {"1.0.0": "Task 1 raw text: train, val and test_2016_flickr."}
        BUILDER_CONFIGS = [
            Multi30kConfig(
                name="en-de",
                description="English source, German target.",
                source_lang="en",
                target_lang="de",
            )
        ]
        MANUAL_DOWNLOAD_INSTRUCTIONS = (
            "Optional. Put the raw files {split}.{lang}.gz of multi30k/dataset data/task1/raw "
            "(splits train, val, test_2016_flickr) in manual_dir; without them the builder "
            "downloads the files."
        )

        def __init__(self, *, raw_dir: str | os.PathLike | None = None, **kwargs):
            self.raw_dir = None if raw_dir is None else os.fspath(raw_dir)
            super().__init__(**kwargs)
            # Pickling rebuilds the builder from this state; keep raw_dir in it.
            self._original_state["raw_dir"] = self.raw_dir

        def _info(self):
            return self.dataset_info_from_configs(
                description=(
                    "Multi30k (WMT16 multimodal task 1): Flickr30k image captions with "
                    "professional translations, aligned sentence pairs."
                ),
                features=tfds.features.FeaturesDict(
                    {"source": tfds.features.Text(), "target": tfds.features.Text()}
                ),
                supervised_keys=("source", "target"),
                # Keep file order, so test outputs line up with the reference files.
                disable_shuffling=True,
                homepage="https://github.com/multi30k/dataset",
                citation=CITATION,
            )

        def _local_raw_dir(self, dl_manager) -> Path | None:
            config = self.builder_config
            for folder in (self.raw_dir, config.raw_dir):
                if folder is not None:
                    if not Path(folder).is_dir():
                        raise FileNotFoundError(f"Multi30k raw_dir {folder!r} is not a folder")
                    return Path(folder)
            try:
                manual = Path(dl_manager.manual_dir)
            except AssertionError:  # TFDS: the manual folder is absent or empty.
                return None
            if any(manual.glob(f"train.{config.source_lang}*")):
                return manual
            return None

        def _split_generators(self, dl_manager):
            config = self.builder_config
            languages = (config.source_lang, config.target_lang)
            folder = self._local_raw_dir(dl_manager)
            if folder is not None:
                return {
                    split: self._generate_examples(read_multi30k(folder, split, *languages))
                    for split in MULTI30K_SPLITS
                }
            urls = {
                f"{split}.{lang}.gz": RAW_URL.format(split=split, lang=lang)
                for split in MULTI30K_SPLITS
                for lang in languages
            }
            paths = dl_manager.download(urls)
            for name, path in paths.items():
                _check_sha256(path, name)
            return {
                split: self._generate_examples(
                    read_parallel(
                        paths[f"{split}.{languages[0]}.gz"], paths[f"{split}.{languages[1]}.gz"]
                    )
                )
                for split in MULTI30K_SPLITS
            }

        def _generate_examples(self, pairs):
            for index, (source, target) in enumerate(pairs):
                yield index, {"source": source, "target": target}

    # Defined in a function but importable as zoo.multi30k.Multi30k (pickle looks it up).
    Multi30kConfig.__qualname__, Multi30k.__qualname__ = "Multi30kConfig", "Multi30k"
    return {"Multi30kConfig": Multi30kConfig, "Multi30k": Multi30k}


def __getattr__(name: str):
    # PEP 562: the TFDS classes are defined on first access, so TFDS (and TensorFlow) load
    # only for users of the builder.
    if name in ("Multi30k", "Multi30kConfig"):
        classes = _define_tfds_builder()
        globals().update(classes)
        return classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
