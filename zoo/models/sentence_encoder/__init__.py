"""The BERT-style sentence encoder (all-MiniLM-L6-v2's shape): its backbone (backbone.py), its
WordPiece preprocessor (preprocessor.py) and its task (model.py, `SentenceEncoder`)."""
