"""ff.tfjs: TF.js graph models and layers models (model.json and its weight shards) as
fragflow graphs you can run, read, compile and fine-tune. No TF.js, no node needed. See
docs/TFJS.md."""
from . import control_ops  # noqa: F401 -- registers the staged ops' rules in RULES
from .errors import TfjsImportError, UnsupportedTfjsOpError
from .importer import TfjsModel, load
from .op_table import RULES as _RULES
from .staged import StagedTfjsModel


def supported_ops() -> list:
    """The TF op types ff.tfjs.load imports, sorted (Const and Placeholder besides)."""
    return sorted(_RULES)


__all__ = ["load", "TfjsModel", "StagedTfjsModel", "TfjsImportError", "UnsupportedTfjsOpError",
           "supported_ops"]
