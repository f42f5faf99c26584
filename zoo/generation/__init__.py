"""Generation: the searches that turn a decoder into text (greedy, sampling, beam)."""
