"""A value active while a lowering runs: its limits (codegen/limits.py), its tuning
(codegen/tuning) and the scheduling step's facts (codegen/schedule.py). lower() makes
each the active one for its run; a context variable, so each thread sees its own."""
from __future__ import annotations

import contextlib
import contextvars


class Active:
    def __init__(self, name: str, default):
        self._var = contextvars.ContextVar(name, default=default)

    def get(self):
        """The value of the lowering in progress (the default outside one)."""
        return self._var.get()

    @contextlib.contextmanager
    def using(self, value):
        """Make value the active one for the block."""
        token = self._var.set(value)
        try:
            yield value
        finally:
            self._var.reset(token)
