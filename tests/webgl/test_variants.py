"""An export's variant for 8 render targets (tools/webgl/export.py schedule_variant,
runtime.js variantFor): with max_draw_buffers=(4, 8) an export keeps to WebGL2's 4
targets and adds, as a patch of that schedule, the kernels and slots that change where
8 are allowed; the runtime applies it on a context that has them. In the browser both
schedules run against the numpy executor (test_browser.py
test_the_four_target_schedule_matches_too); here, without one: the patch gives exactly
the schedule an export for 8 alone has, the weights stay one copy, and what cannot be a
patch is left out."""
from __future__ import annotations

import copy
import os

import pytest

import fragflow as ff
from fragflow.tools.webgl.export import (
    WebGLExportError,
    kernel_source,
    read_schedule,
    schedule_for,
    schedule_variant,
)
from tests.webgl.cases import nested_loops, rgb_stems, small_cnn


def _export(case, directory, **kw):
    return ff.webgl.export(case.fetches, list(case.feeds), directory, page=False, **kw)


def _comparable(schedule) -> dict:
    """A schedule with each kernel's program as its text (indices differ by design)."""
    out = {k: v for k, v in schedule.items() if k not in ("programs", "variants")}
    out["kernels"] = [{**k, "program": kernel_source(schedule, k)} for k in schedule["kernels"]]
    return out


@pytest.mark.parametrize("build", [small_cnn, rgb_stems])
def test_the_variant_is_the_eight_target_export_and_the_base_the_four(tmp_path, build):
    case = build()
    both = _export(case, tmp_path / "both", max_draw_buffers=(4, 8))
    four = _export(case, tmp_path / "four", max_draw_buffers=4)
    eight = _export(case, tmp_path / "eight", max_draw_buffers=8)
    (variant,) = both.schedule["variants"]
    assert variant["drawBuffers"] == 8 and variant["kernels"]
    assert "variants" not in four.schedule and "variants" not in eight.schedule
    assert _comparable(schedule_for(both.schedule, 4)) == _comparable(four.schedule)
    assert _comparable(schedule_for(both.schedule, 7)) == _comparable(four.schedule)
    assert _comparable(schedule_for(both.schedule, 8)) == _comparable(eight.schedule)
    assert _comparable(schedule_for(both.schedule, 16)) == _comparable(eight.schedule)
    # one copy of the weights: model.bin is the 4-target export's, byte for byte
    assert open(both.files["model.bin"], "rb").read() == \
        open(four.files["model.bin"], "rb").read()
    # what model.js carries reads back as the schedule, variant and all
    text = open(both.files["model.js"], encoding="utf-8").read()
    assert read_schedule(text) == both.schedule
    # a header that keeps its line count is patched line by line, not written again
    patched = [c["header"] for _, c in variant["kernels"] if "header" in c]
    assert patched and all(isinstance(h, list) and 0 < len(h) <= 8 for h in patched)


def test_max_draw_buffers_4_or_8_writes_that_schedule_alone(tmp_path):
    case = small_cnn()
    default = _export(case, tmp_path / "d").schedule
    assert default["drawBuffers"] == 4 and default["variants"][0]["drawBuffers"] == 8
    assert _export(case, tmp_path / "a", max_draw_buffers=4).schedule["drawBuffers"] == 4
    assert _export(case, tmp_path / "b", max_draw_buffers=8).schedule["drawBuffers"] == 8
    for wrong in (6, (4, 6), (8, 4), None):
        with pytest.raises(WebGLExportError, match=r"max_draw_buffers=.*: use 4 \(WebGL2"):
            _export(case, tmp_path / "c", max_draw_buffers=wrong)


def test_the_cli_writes_the_variant_with_4_comma_8(tmp_path):
    from fragflow.tools.cli import main
    targets = os.path.join(os.path.dirname(__file__), "..", "tools", "cli_targets.py")
    for flag, variants in (("4", False), ("4,8", True), (None, True)):
        out = tmp_path / str(flag)
        flags = ["--max-draw-buffers", flag] if flag else []
        assert main(["export", f"{targets}:heavy", "--webgl", "-o", str(out), *flags]) == 0
        schedule = read_schedule(open(out / "model.js", encoding="utf-8").read())
        assert bool(schedule.get("variants")) is variants and schedule["drawBuffers"] == 4


def test_a_graph_with_control_flow_has_one_schedule(tmp_path):
    export = _export(nested_loops(), tmp_path, max_draw_buffers=(4, 8))
    assert "variants" not in export.schedule and export.schedule["version"] == 2


def test_a_lowering_that_differs_in_more_than_sizes_is_no_variant(tmp_path):
    case = small_cnn()
    four = _export(case, tmp_path / "four", max_draw_buffers=4).schedule
    eight = _export(case, tmp_path / "eight", max_draw_buffers=8).schedule
    assert schedule_variant(copy.deepcopy(four), copy.deepcopy(eight)) is not None
    assert schedule_variant(copy.deepcopy(four), copy.deepcopy(four)) is None   # no change
    fewer = copy.deepcopy(eight)
    fewer["kernels"].pop()
    assert schedule_variant(copy.deepcopy(four), fewer) is None
    inputs = copy.deepcopy(eight)
    inputs["kernels"][0]["inputs"] = list(reversed(inputs["kernels"][0]["inputs"]))
    assert inputs["kernels"][0]["inputs"] != four["kernels"][0]["inputs"]
    assert schedule_variant(copy.deepcopy(four), inputs) is None
    data = copy.deepcopy(eight)
    stored = next(s for s in data["slots"] if "data" in s)
    stored["data"] = [stored["data"][0] + 16, stored["data"][1]]
    assert schedule_variant(copy.deepcopy(four), data) is None
    # None leaves the base's programs as they were
    base = copy.deepcopy(four)
    schedule_variant(base, fewer)
    assert base == four
