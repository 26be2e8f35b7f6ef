"""User-facing functions of the image op family."""
from __future__ import annotations

__all__: list = []
