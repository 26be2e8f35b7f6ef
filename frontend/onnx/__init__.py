"""fragflow's ONNX bridge: ff.onnx.load (import a model as a graph you can run, read
and fine-tune) and ff.onnx.export (write a graph as ONNX). Needs the `onnx` package
(pip install 'fragflow[onnx]'); importing this module does not. See docs/ONNX.md."""
from . import control_flow as _control_flow  # noqa: F401 (Loop, If, Scan: rules into op_table)
from .errors import OnnxExportError, OnnxImportError, OnnxNotInstalledError, UnsupportedOnnxOpError
from .exporter import export, exportable_ops
from .importer import ImportedModel, load
from .op_table import RULES as _RULES


def supported_ops() -> list:
    """The ONNX op types ff.onnx.load imports, sorted."""
    return sorted(_RULES)


__all__ = ["load", "export", "exportable_ops", "ImportedModel", "supported_ops", "OnnxImportError",
           "UnsupportedOnnxOpError", "OnnxExportError", "OnnxNotInstalledError"]
