"""Errors of the ONNX bridge: every one names the ONNX node, its op type and what is
missing, so that a model that does not import says why in one line."""
from __future__ import annotations

from ...ir.errors import FragflowError
from ..interop.errors import ModelImportError


class OnnxImportError(ModelImportError):
    """An ONNX model fragflow cannot import: an op, attribute, dtype or value it does
    not support, or a value that must be known at import time and is not."""


class UnsupportedOnnxOpError(OnnxImportError):
    """An ONNX op type with no import rule."""


class OnnxExportError(FragflowError):
    """A fragflow graph that cannot be written as ONNX (an op without a counterpart)."""


class OnnxNotInstalledError(FragflowError, ImportError):
    """The `onnx` package is missing: pip install 'fragflow[onnx]'."""


def where(node) -> str:
    """"Conv node 'conv1/Conv'" for an onnx NodeProto (long names cut at 120 characters)."""
    name = node.name or "(unnamed)"
    name = name if len(name) <= 120 else name[:120] + "..."
    op = node.op_type if len(node.op_type) <= 60 else node.op_type[:60] + "..."
    return f"{op} node '{name}'"


def require_onnx():
    """The onnx module, or OnnxNotInstalledError saying how to install it."""
    try:
        import onnx  # optional (fragflow[onnx]): this is the check
    except ImportError:
        raise OnnxNotInstalledError(
            "the ONNX bridge needs the 'onnx' package: pip install 'fragflow[onnx]' "
            "(or pip install onnx)") from None
    return onnx
