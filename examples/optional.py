"""What the examples say when an optional package is missing: what to install, instead
of a ModuleNotFoundError traceback. Only the standard library, so it runs before the
packages it checks are imported."""
import importlib.util
import sys


def require(script, packages, extra):
    """Exit with what to install when a module of packages ({module: pip name}) is
    missing; extra: the fragflow extra that brings them."""
    missing = [pip for module, pip in packages.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        sys.exit(f"{script} needs {', '.join(missing)}, which {verb} "
                 f"not installed here: pip install {' '.join(missing)} "
                 f"(or pip install -e \".[{extra}]\")")
