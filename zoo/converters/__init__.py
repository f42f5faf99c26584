"""Converters from public checkpoints into zoo models.

Each converter reads a checkpoint's tensors as NumPy arrays (no PyTorch needed at run time for
safetensors files), maps the names onto a zoo model's weights and checks every shape on the way.
"""
