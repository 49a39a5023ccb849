"""Serving a kerasbert LiteRT export from raw text, without TensorFlow (see model.py)."""

from kerasbert.lite.model import LiteError, LiteModel

__all__ = ["LiteError", "LiteModel"]
