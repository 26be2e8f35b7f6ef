"""Errors of fragflow.distributed (FragflowError subclasses, like every fragflow error)."""
from fragflow import FragflowError


class RayNotInstalledError(FragflowError, ImportError):
    """fragflow.distributed was used where Ray is not installed."""


class WorkerLostError(FragflowError, RuntimeError):
    """Training workers kept dying: recovery gave up after max_recoveries."""


def require_ray():
    """The ray module; RayNotInstalledError saying what to install if it is missing."""
    try:
        import ray  # optional (fragflow[ray]): this is the check
    except ImportError as err:
        raise RayNotInstalledError(
            f"fragflow.distributed needs Ray ({err}); install it with "
            f"pip install 'fragflow[ray]'") from None
    return ray
