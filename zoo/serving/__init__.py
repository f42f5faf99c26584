"""Serving: SavedModels that the stock TensorFlow Serving runs (`zoo.export`)."""
