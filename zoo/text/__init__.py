"""Text: the translator's subword tokenizer, Marian's SentencePiece tokenizer (and its TensorFlow graph twin), BERT's WordPiece."""
