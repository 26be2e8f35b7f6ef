"""User-facing functions of the conv op family."""
from __future__ import annotations

__all__: list = []
