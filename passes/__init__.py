"""fragflow.passes: graph → graph transformations, registered by name."""
from .manager import DEFAULT_PIPELINE, PASSES, PassManager, register_pass
from .prune import prune
from .verify import VerificationError, verify

__all__ = ["PASSES", "DEFAULT_PIPELINE", "PassManager", "register_pass", "prune", "verify",
           "VerificationError"]
