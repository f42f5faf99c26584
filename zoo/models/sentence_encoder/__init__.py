"""The BERT-style sentence encoder (all-MiniLM-L6-v2's shape)."""
