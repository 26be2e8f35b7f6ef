"""User-facing functions of the random op family."""
from __future__ import annotations

__all__: list = []
