"""User-facing functions of the structure op family."""
from __future__ import annotations

__all__: list = []
