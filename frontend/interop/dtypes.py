"""Foreign dtypes as fragflow's three: float32, int32 and bool."""
from __future__ import annotations

import numpy as np

INT32_MIN, INT32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def int32_problem(array: np.ndarray) -> str | None:
    """Why an integer array does not fit int32 (None when it does)."""
    if array.size and (array.min() < INT32_MIN or array.max() > INT32_MAX):
        bad = array[(array < INT32_MIN) | (array > INT32_MAX)].reshape(-1)[0]
        return (f"an int64 tensor holds {int(bad)}, which does not fit in int32 "
                f"(fragflow's integer type)")
    return None


def supported_problem(array: np.ndarray) -> str | None:
    """Why array cannot become a fragflow tensor (None when it can)."""
    if array.dtype == np.bool_ or np.issubdtype(array.dtype, np.floating):
        return None
    if np.issubdtype(array.dtype, np.integer):
        return int32_problem(array)
    return (f"dtype {array.dtype} is not supported (fragflow has float32, int32 and "
            f"bool)")


def to_supported_array(array) -> np.ndarray:
    """array as float32, int32 or bool (call supported_problem first)."""
    array = np.asarray(array)
    if array.dtype == np.bool_:
        return array
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32)
    return array.astype(np.int32) if array.dtype != np.int32 else array
