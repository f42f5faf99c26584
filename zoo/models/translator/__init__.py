"""The translator family: its backbone (backbone.py, the encoder-decoder network), its
preprocessor (preprocessor.py, the tokenizer) and its task (model.py, `Translator`), with its
searches, text and surgery methods and its architectures."""
