"""User-facing math functions beyond the spine's (activations, inverse trig, ...)."""
from __future__ import annotations

__all__: list = []
