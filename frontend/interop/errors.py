"""The base of every importer's error: ff.onnx.OnnxImportError, ff.tfjs.TfjsImportError
(and the Keras file reader's) are ModelImportErrors, so one except clause catches any
model that does not import."""
from __future__ import annotations

from ...ir.errors import FragflowError


class ModelImportError(FragflowError):
    """A model file fragflow cannot import: malformed, over a limit, or holding an op,
    dtype or value the importer does not support. The message names the node or weight."""


def short(text, n: int = 120) -> str:
    """text cut at n characters (names from a file may be of any length)."""
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."
