"""Generation: the searches that turn a decoder into text.

`settings` (bounds checked before tracing), `loop` (the shared while loop over a growing
key/value cache), `top_k` (a row's best entries), `greedy` and `beam` (the two searches),
`samplers` (a language model's ways to pick its next token) and `sampling` (the loop that
continues prompts with them).
"""
