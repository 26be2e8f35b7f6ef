"""Errors of the TF.js reader: every one names the node or weight and what is wrong."""
from __future__ import annotations

from ..interop.errors import ModelImportError


class TfjsImportError(ModelImportError):
    """A TF.js model fragflow cannot import: a malformed or over-limit model.json or
    shard, an op, attribute, dtype or quantization it does not support, or a value that
    must be known at import time and is not."""


class UnsupportedTfjsOpError(TfjsImportError):
    """A TF op with no import rule (the message lists the supported ones)."""
