"""Render targets that follow their slots: the framebuffer a kernel with several
outputs draws into, for whatever textures its outputs' slots hold now.

A plan swaps an assigned variable's texture with the one its new value was computed
into when a run ends (runtime/gl_plan.py), so the next run computes into the
variable's old texture. A framebuffer is bound to textures, not slots: a kernel that
writes several assigned values in one draw (an optimizer's update, codegen/update.py)
needs, after each swap, the framebuffer of the textures its slots hold then. There are
two such sets when one plan swaps every run, a few more when several plans assign the
same variables; each framebuffer is made once and kept."""
from __future__ import annotations

from .gl_resources import RenderTargets

KEPT = 8         # framebuffers kept per kernel; more, and they are made again


class SlotTargets:
    """Stands where a Slot stands as a launch's output: `.texture` is the RenderTargets
    (with `fbo` and readback()) of the textures the slots hold now."""
    __slots__ = ("_framebuffers", "slots")

    def __init__(self, slots):
        self.slots = tuple(slots)
        self._framebuffers: dict = {}      # texture ids -> RenderTargets

    @property
    def texture(self) -> RenderTargets:
        key = tuple(s.texture.id for s in self.slots)
        targets = self._framebuffers.get(key)
        if targets is None:
            if len(self._framebuffers) >= KEPT:
                self.delete()
            # made (and left bound) here: draw() then binds it or finds it bound
            targets = RenderTargets(s.texture for s in self.slots)
            self._framebuffers[key] = targets
        return targets

    def delete(self) -> None:
        for targets in self._framebuffers.values():
            targets.delete()
        self._framebuffers.clear()
