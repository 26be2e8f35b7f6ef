"""Every knob that steers which kernel a node gets, in one frozen record per device kind.

A `Tuning` holds a section per kernel family (`conv`, `elementwise`, `matmul`,
`reduce`, `structure`: the frozen dataclasses of codegen/tuning/<family>.py), the
strategy names to prefer or leave out and `max_loop_trips`. Profiles: "llvmpipe" (Mesa's CPU
rasterisers: 64x64 tiles shaded by a few threads, fetches about as dear as ALU ops,
dependent draws dear; measured, docs/PERFORMANCE.md), "gpu" (thousands of lanes, cheap
launches, cached fetches) and "webgl" (a browser's WebGL2 on such GPUs; its 4 render
targets come from Limits).

`Tuning.for_device(info)` picks one from a context's renderer when the device is made;
FRAGFLOW_TUNING overrides it for experiments (`from_env`: "gpu,matmul.packed_min_macs=
1024,prefer=conv.direct"); `ff.Session(g, tuning=...)` overrides both. Lowering reads
the active one (`active()`, set by codegen/lower.py) and the plan cache keys on it.

>>> t = Tuning.named("llvmpipe")
>>> t.profile, t == Tuning(), t.with_(prefer=("conv.direct",)).prefer
('llvmpipe', True, ('conv.direct',))
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from ...ir.errors import FragflowError
from ..active import Active
from . import (
    conv as _conv,
    elementwise as _elementwise,
    matmul as _matmul,
    reduce as _reduce,
    structure as _structure,
)
from .conv import ConvTuning
from .elementwise import ElementwiseTuning
from .matmul import MatmulTuning
from .reduce import ReduceTuning
from .structure import StructureTuning

PROFILES = ("llvmpipe", "gpu", "webgl")
SECTIONS = {"conv": _conv, "elementwise": _elementwise, "matmul": _matmul,
            "reduce": _reduce, "structure": _structure}

# renderer strings of the CPU rasterisers the llvmpipe profile was measured on
_CPU_RENDERERS = ("llvmpipe", "lavapipe", "softpipe", "swiftshader")


class TuningError(FragflowError):
    """A Tuning, a profile name or a FRAGFLOW_TUNING setting that does not exist."""


@dataclass(frozen=True)
class Tuning:
    profile: str = "llvmpipe"
    conv: ConvTuning = field(default_factory=ConvTuning)
    elementwise: ElementwiseTuning = field(default_factory=ElementwiseTuning)
    matmul: MatmulTuning = field(default_factory=MatmulTuning)
    reduce: ReduceTuning = field(default_factory=ReduceTuning)
    structure: StructureTuning = field(default_factory=StructureTuning)
    # strategy names ("conv.direct", "matmul.packed") tried before the rest of their
    # family's table where they apply, and names never tried
    prefer: tuple = ()
    exclude: tuple = ()
    # the most loop iterations one kernel plans for (codegen/limits.py loop_trips);
    # None: the device's limit's half (Limits.loop_trips). Tests shrink it to reach
    # unrolled paths with small inputs.
    max_loop_trips: int | None = None
    # a scan body's kernels read its element slices and write its ys in place (windows,
    # codegen/windows.py); False: a copy draw per slice and per ys each step
    scan_windows: bool = True
    # weights stored as float16 that no kernel writes (an imported float16 model's, a
    # WebGL export's weights="float16") are half-float textures (RGBA16F: half the GPU
    # memory, read as exactly the same numbers); False: RGBA32F like every other value.
    # A WebGL export marks them `half`; its runtime takes RGBA16F unless the renderer
    # is a CPU rasteriser (load()'s halfTextures, docs/WEBGL.md "Half-size weights")
    half_weight_textures: bool = True

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise TuningError(f"unknown tuning profile {self.profile!r}; use one of "
                              f"{', '.join(PROFILES)}")
        for name in ("prefer", "exclude"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise TuningError(f"Tuning.{name} must be a tuple of strategy names, "
                                  f"not {value!r}")
            object.__setattr__(self, name, tuple(value))
        for name in ("scan_windows", "half_weight_textures"):
            if not isinstance(getattr(self, name), bool):
                raise TuningError(f"Tuning.{name} must be True or False, not "
                                  f"{getattr(self, name)!r}")
        trips = self.max_loop_trips
        if trips is not None and (not isinstance(trips, int) or isinstance(trips, bool)
                                  or trips < 1):
            raise TuningError(f"Tuning.max_loop_trips must be a positive int or None, "
                              f"not {trips!r}")

    @classmethod
    def named(cls, profile: str) -> Tuning:
        """The profile's defaults ("llvmpipe", "gpu", "webgl")."""
        if profile not in PROFILES:
            raise TuningError(f"unknown tuning profile {profile!r}; use one of "
                              f"{', '.join(PROFILES)}")
        return cls(profile=profile, **{name: module.PROFILES[profile]
                                       for name, module in SECTIONS.items()})

    @classmethod
    def for_device(cls, info: dict) -> Tuning:
        """The profile for a context (GLContext.info()): llvmpipe's for Mesa's and
        Google's CPU rasterisers, the GPU's otherwise; then FRAGFLOW_TUNING."""
        renderer = str(info.get("renderer", "")).lower()
        cpu = any(name in renderer for name in _CPU_RENDERERS)
        return cls.named("llvmpipe" if cpu else "gpu").from_env()

    def from_env(self, text: str | None = None) -> Tuning:
        """This tuning with FRAGFLOW_TUNING (or `text`) applied: comma-separated items,
        each a profile name (its defaults, replacing what came before it),
        section.field=value, max_loop_trips=N, or prefer=/exclude= strategy names joined
        by "+" ("prefer=conv.direct+matmul.lanes")."""
        text = os.environ.get("FRAGFLOW_TUNING", "") if text is None else text
        tuning = self
        for item in filter(None, (part.strip() for part in text.split(","))):
            if "=" not in item:
                tuning = Tuning.named(item)
                continue
            name, _, raw = (part.strip() for part in item.partition("="))
            if name in ("prefer", "exclude"):
                value = tuple(filter(None, (n.strip() for n in raw.split("+"))))
            else:
                value = _parse(raw, name)
            tuning = tuning.with_({name: value})
        return tuning

    def with_(self, changes: dict | None = None, **fields) -> Tuning:
        """A copy with some knobs changed: dotted names in `changes`
        ({"matmul.blocked_min_macs": 1}), sections as dicts or top-level fields as
        keywords (prefer=("conv.direct",), conv={"split_rows": False})."""
        updates = dict(fields)
        for dotted, value in (changes or {}).items():
            section, _, knob = dotted.partition(".")
            if not knob:
                updates[section] = value
                continue
            updates.setdefault(section, {})
            if not isinstance(updates[section], dict):
                raise TuningError(f"Tuning: {section} given both whole and by field")
            updates[section][knob] = value
        out = {}
        for name, value in updates.items():
            if name not in self.__dataclass_fields__:
                raise TuningError(f"Tuning has no section or field {name!r}; it has "
                                  f"{', '.join(self.__dataclass_fields__)}")
            if isinstance(value, dict):
                section = getattr(self, name)
                known = {f.name for f in dataclasses.fields(section)}
                for knob, given in value.items():
                    if knob not in known:
                        raise TuningError(f"Tuning.{name} has no knob {knob!r}; it has "
                                          f"{', '.join(sorted(known)) or 'none'}")
                    _check_kind(f"{name}.{knob}", getattr(section, knob), given)
                value = dataclasses.replace(section, **value)
            out[name] = value
        return dataclasses.replace(self, **out)

    def key(self) -> str:
        """The whole record as text (the plan cache's key)."""
        return repr(self)


def _check_kind(name: str, current, given) -> None:
    """A knob keeps its kind: a bool stays a bool, an int an int (not a bool), a float
    takes an int or a float; TuningError naming the knob otherwise."""
    if isinstance(current, bool):
        ok = isinstance(given, bool)
    elif isinstance(current, int):
        ok = isinstance(given, int) and not isinstance(given, bool)
    elif isinstance(current, float):
        ok = isinstance(given, (int, float)) and not isinstance(given, bool)
    else:
        ok = True                 # None or a record: the section checks it, if at all
    if not ok:
        raise TuningError(f"Tuning.{name} is a {type(current).__name__} knob, not "
                          f"{given!r}")


def _parse(raw: str, name: str):
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    raise TuningError(f"FRAGFLOW_TUNING: {name}={raw!r} is not a number or true/false")


LLVMPIPE = Tuning()

_ACTIVE = Active("fragflow_tuning", LLVMPIPE)
active = _ACTIVE.get          # the value of the lowering in progress
tuning_with = _ACTIVE.using    # lower() wraps itself in it

