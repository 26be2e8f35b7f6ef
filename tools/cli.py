"""The `fragflow` command: see what runs.

    fragflow info                      GL backend, driver, limits and cache directories
    fragflow dump TARGET               the graph (--format text|json|dot|svg|html),
                                       or after a pass (--after PASS|all)
    fragflow shaders TARGET -o DIR     one .frag per kernel, numbered in run order (a
                                       loop's or branch's in a folder of its own)
    fragflow profile TARGET            time per user op and scope, compile, upload,
                                       readback and totals
    fragflow export TARGET --webgl -o DIR
                                       a standalone WebGL2 model: model.js, model.bin,
                                       index.html (docs/WEBGL.md); --weights float16
                                       halves the download and prints what it costs;
                                       --dynamic-length MASK: feed the length, not the
                                       attention mask (docs/TRANSFORMERS.md)

TARGET is a graph saved with ff.save_graph (JSON), an ONNX model (`model.onnx`, read by
ff.onnx.load: needs the onnx package), a TF.js graph model (`model.json` or its folder,
read by ff.tfjs.load; --feed-shape fixes its free dims at import) or
`path/model.py:func`, where func() returns the fetches of the graph it built, or a
(fetches, feed_dict) pair. Placeholders
without data get seeded random values; give unknown dimensions with
--feed-shape NAME=D1,D2 (repeatable).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np

import fragflow as ff
from fragflow.frontend.shaders import (
    plan_kernels,
    select,
    shader_text,
    write_plan_shaders,
)
from fragflow.ir.dot import DOT_MISSING, dot_available, dot_to_svg, graph_to_dot
from fragflow.ir.ops.control import has_control_flow
from fragflow.ir.ops.state import RUN_COUNTER
from fragflow.runtime import get_context
from fragflow.runtime.context.egl_devices import other_implementations
from fragflow.runtime.shader_cache import cache_dir

from .compiled import (
    STAGES,
    check_stage,
    compile_target,
    concrete_types,
    graph_after,
    kernel_of,
    node_notes,
    stage_dumps,
)
from .html import render_page
from .target import load_target, parse_feed_shapes

FORMATS = ("text", "json", "dot", "svg", "html")
_EXTENSIONS = {"text": "txt", "json": "json", "dot": "dot", "svg": "svg", "html": "html"}


# -- info ---------------------------------------------------------------------------------
def cmd_devices() -> int:
    """One line per EGL device; '*' marks the one a Session here runs on."""
    try:
        found = ff.devices()
    except ff.BackendError as err:
        print(f"cannot enumerate GL devices:\n{err}", file=sys.stderr)
        return 1
    if not found:
        print("EGL lists no devices here (no EGL_EXT_device_enumeration); a Session uses "
              "the default context (`fragflow info`)")
    for d in found:
        kind = "software" if d.software else "GPU"
        extra = "".join([f"  node {d.node}" if d.node else "",
                         f"  cuda {d.cuda_device}" if d.cuda_device is not None else "",
                         f"  unusable: {d.error}" if d.error else ""])
        print(f"{'*' if d.default else ' '} {d.index}  {kind:8}  {d.renderer}  "
              f"[{d.vendor}; {d.driver}]{extra}")
    print("(* the default; pick another with ff.Session(g, device=i) or FRAGFLOW_DEVICE=i)")
    for impl in other_implementations():
        if impl.error:
            print(f"{impl.name}: not usable here ({impl.error})")
            continue
        for d in impl.devices:
            kind = "software" if d.software else "GPU"
            print(f"  {impl.name}:{d.index}  {kind:8}  {d.renderer}  [{d.vendor}; {d.driver}]")
        print(f"  (select {impl.name}: {impl.environment} in the environment before the "
              f"process starts, e.g. `{impl.environment} python train.py`)")
    return 0


def cmd_info(args) -> int:
    if getattr(args, "devices", False):
        return cmd_devices()
    try:
        ctx = get_context()
    except ff.BackendError as err:
        print(f"no OpenGL backend works here:\n{err}", file=sys.stderr)
        return 1
    # gl_resources imports OpenGL: only once get_context() has made the context
    from fragflow.runtime.gl_resources import MAX_IDLE_SHADERS
    info = dict(ctx.info())
    if not info.get("shader_cache_note"):
        info.pop("shader_cache_note", None)      # shown only when the cache has a problem
    elif not info.get("shader_cache_dir"):
        info["shader_cache_dir"] = "none (see shader_cache_note)"
    info["fragflow_cache_dir"] = str(cache_dir())
    info.setdefault("shader_cache_dir", os.environ.get("MESA_SHADER_CACHE_DIR", ""))
    info["linked_shader_cache"] = (f"in memory, per process, keyed by shader source; "
                                   f"at most {MAX_IDLE_SHADERS} that no live plan uses")
    info["glslangValidator"] = (shutil.which("glslangValidator") or
                                "not found (Debian: glslang-tools)") + \
        ("  [validating: FRAGFLOW_VALIDATE_SHADERS is set]"
         if os.environ.get("FRAGFLOW_VALIDATE_SHADERS") else "")
    info["graphviz_dot"] = shutil.which("dot") or "not found (Debian: graphviz); " \
        "needed only by dump --format svg"
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key.ljust(width)}  {value}")
    for attempt in ctx.failed_attempts:
        print(f"{'tried first'.ljust(width)}  {attempt}")
    return 0


# -- dump ---------------------------------------------------------------------------------
def cmd_dump(args) -> int:
    target = load_target(args.target, parse_feed_shapes(args.feed_shape))
    shapes = parse_feed_shapes(args.feed_shape)
    if args.after is None:
        if args.format in ("text", "json"):
            return _emit(ff.dump(target.graph, format=args.format), args.output)
        return _emit(_render(target, target.graph, args.format, shapes, user_graph=True),
                     args.output)
    check_stage(args.after)
    if args.format == "text":
        stages = stage_dumps(target, shapes)
        if args.after != "all":
            stages = [s for s in stages if s[0] == args.after]
        return _emit("\n\n".join(text for _, text in stages), args.output)
    if args.after != "all":
        graph = graph_after(target, args.after, shapes)
        if args.format == "json":
            return _emit(ff.dump(graph, format="json"), args.output)
        return _emit(_render(target, graph, args.format, shapes,
                             subtitle=f"after {args.after}"), args.output)
    if not args.output:
        raise ff.FragflowError("--after all with --format "
                               f"{args.format} writes one file per pass: give -o DIR")
    os.makedirs(args.output, exist_ok=True)
    for index, stage in enumerate(STAGES):
        graph = graph_after(target, stage, shapes)
        text = ff.dump(graph, format="json") if args.format == "json" else \
            _render(target, graph, args.format, shapes, subtitle=f"after {stage}")
        path = os.path.join(args.output, f"{index:02d}.{stage}.{_EXTENSIONS[args.format]}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(path)
    return 0


def _render(target, graph, fmt, shapes, user_graph=False, subtitle="") -> str:
    """dot, svg or html of graph, with the kernels of a compiled run when one can be
    made (fused groups, shaders, concrete shapes); without, the graph alone."""

    if fmt == "svg" and not dot_available():
        raise ff.FragflowError(DOT_MISSING)
    kernels, texts, compiled_graph, problem = [], [], None, ""
    try:
        run = compile_target(target, shapes)
    except ff.FragflowError as err:
        problem = f"no kernels shown: {err}"
        print(f"fragflow: {problem}", file=sys.stderr)
    else:
        kernels, compiled_graph = run.kernels, run.graph
        if has_control_flow(compiled_graph):
            # the stages around the loops: their kernels exist once the plan has run
            # (the loops' and branches' own are in folders: fragflow shaders)
            run_once(run)
            kernels = [k for path, k in plan_kernels(run.compiled.plan) if not path]
        texts = [shader_text(k) for k in kernels]
        run.close()
    types = concrete_types(target, shapes) if user_graph else {}
    index = kernel_of(graph, kernels)
    if fmt in ("dot", "svg"):
        groups = {}
        for name, i in index.items():
            groups.setdefault(kernels[i].name, []).append(name)
        dot = graph_to_dot(graph, groups, types)
        return dot if fmt == "dot" else dot_to_svg(dot)
    pruned = {name.partition(":")[0] for name in types} if user_graph and types else None
    return render_page(
        graph, title=f"fragflow: {graph.name}", kernels=kernels, shader_texts=texts,
        kernel_index=index, notes=node_notes(graph, kernels, compiled_graph, pruned),
        types=types, problem=problem,
        subtitle=" ".join(p for p in (target.description, subtitle) if p))


def _emit(text: str, output: str | None) -> int:
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        print(output)
    else:
        print(text)
    return 0


# -- shaders ------------------------------------------------------------------------------
def cmd_shaders(args) -> int:
    target = load_target(args.target, parse_feed_shapes(args.feed_shape))
    run = compile_target(target, parse_feed_shapes(args.feed_shape))
    try:
        plan = run.compiled.plan
        if has_control_flow(run.graph):
            run_once(run)          # a loop's or branch's plan is built when it first runs
        every = plan_kernels(plan)
        if args.output:
            paths = write_plan_shaders(plan, args.output, only=args.kernel)
            for path in paths:
                print(path)
            print(f"{len(paths)} shader(s) of {len(every)} kernel(s) in run order",
                  file=sys.stderr)
        else:
            chosen = {id(k) for _, k in select([k for _, k in every], args.kernel)}
            texts = [("" if not path else f"// ---- in {' > '.join(p.label for p in path)}"
                      f" ({path[-1].op} '{path[-1].node}': {path[-1].about})\n")
                     + shader_text(k) for path, k in every if id(k) in chosen]
            print("\n".join(texts))
    finally:
        run.close()
    return 0


def run_once(run) -> None:
    """One run of a compiled TARGET's plan with its feeds (seeded random data where
    it has none), so that the plans of its loops and branches exist; the branches not
    taken stay without one."""
    feeds = {run.compiled.feed_names[v]: np.asarray(a) for v, a in run.feeds.items()
             if v in run.compiled.feed_names}
    feeds[RUN_COUNTER] = np.array(0, np.int32)
    with run.backend.lock:
        run.compiled.plan.run(feeds)


# -- profile ------------------------------------------------------------------------------
def cmd_profile(args) -> int:
    target = load_target(args.target, parse_feed_shapes(args.feed_shape))
    feeds = target.feeds(parse_feed_shapes(args.feed_shape))
    if args.runs < 1:
        raise ff.FragflowError("--runs must be at least 1")
    with ff.Session(target.graph) as sess:
        profile = sess.profile(target.fetches, feeds, runs=args.runs)
        info = ff.gl_info()
    print(f"profile of {target.description} on {info['renderer']} ({info['backend']}): "
          f"{len(profile.kernel_rows)} kernel(s), {args.runs} run(s)")
    print(profile.table(by=args.by))
    return 0


# -- export -------------------------------------------------------------------------------
def cmd_export(args) -> int:
    if not args.webgl:
        raise ff.FragflowError("export: give the format, --webgl (the only one so far; "
                               "ONNX: ff.onnx.export)")
    target = load_target(args.target, parse_feed_shapes(args.feed_shape))
    shapes = parse_feed_shapes(args.feed_shape)
    feeds = {}
    for node in target.placeholders(fed=True):
        value = node.outputs[0]
        given = target.feed_dict.get(value)
        feeds[value] = shapes.get(node.name, None if given is None else np.shape(given))
        if feeds[value] is None:
            feeds[value] = value.shape
    mask = None
    if args.dynamic_length:
        mask = next((v for v in feeds if v.node.name == args.dynamic_length), None)
        if mask is None:
            raise ff.FragflowError(f"export: --dynamic-length {args.dynamic_length}: no "
                                   f"such placeholder; the feeds are "
                                   f"{', '.join(v.node.name for v in feeds)}")
    export = ff.webgl.export(dict(zip(target.labels, target.fetches)), feeds, args.output,
                             max_draw_buffers=_draw_buffers(args.max_draw_buffers),
                             weights=args.weights,
                             dynamic_length=mask)
    for path in export.files.values():
        print(path)
    for line in export.notes:
        print(line, file=sys.stderr)
    print(f"{len(export.kernels)} kernel(s), model.bin {export.bin_bytes} bytes; serve "
          f"{args.output} over HTTP and open index.html", file=sys.stderr)
    return 0


# -- the parser ---------------------------------------------------------------------------
def _draw_buffers(value: str):
    """--max-draw-buffers: 4, 8, or (4, 8) for "4,8"."""
    return tuple(int(v) for v in value.split(",")) if "," in value else int(value)


def _target_args(parser):
    parser.add_argument("target", help="a graph saved with ff.save_graph (JSON), or "
                                       "path/model.py:func")
    parser.add_argument("--feed-shape", action="append", metavar="NAME=D1,D2",
                        help="a placeholder's shape where it has unknown dimensions "
                             "(repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fragflow", description=__doc__.split("\n")[0],
                                     epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="GL backend, vendor, renderer, version, limits, caches")
    info.add_argument("--devices", action="store_true",
                      help="list the GL devices (EGL enumeration) and which one is used")
    dump = sub.add_parser("dump", help="the graph as text, json, dot, svg or html")
    _target_args(dump)
    dump.add_argument("--format", default="text", choices=FORMATS)
    dump.add_argument("--after", metavar="PASS|all",
                      help=f"the graph after a pass of the pipeline ({', '.join(STAGES)}) "
                           f"or after each (all)")
    dump.add_argument("-o", "--output", help="write to this file (a folder for --after all "
                                             "with a format other than text)")
    shaders = sub.add_parser("shaders", help="the generated GLSL, one .frag per kernel")
    _target_args(shaders)
    shaders.add_argument("-o", "--output", metavar="DIR",
                         help="write NN_<kernel>.frag files here (else print them)")
    shaders.add_argument("--kernel", metavar="NAME",
                         help="only this kernel (its name, op or program name, or a node "
                              "it implements)")
    profile = sub.add_parser("profile", help="where the time goes, per user op and scope")
    _target_args(profile)
    profile.add_argument("--runs", type=int, default=10, help="runs to average (10)")
    profile.add_argument("--by", choices=("op", "kernel"), default="op",
                         help="group rows by the user's scope and op (default) or list "
                              "kernels in run order")
    export = sub.add_parser("export", help="a standalone model for another runtime "
                                           "(--webgl: model.js, model.bin, index.html)")
    _target_args(export)
    export.add_argument("--webgl", action="store_true",
                        help="a WebGL2 model: one ES module, its weights, a page")
    export.add_argument("-o", "--output", metavar="DIR", required=True,
                        help="the folder to write into")
    export.add_argument("--max-draw-buffers", choices=("4", "8", "4,8"), default="4,8",
                        help="render targets one kernel may write (4,8, the default: 4, "
                             "safe on every WebGL2 device, and a variant for 8 the "
                             "runtime switches to after the first run where the context "
                             "has them; 4 or 8: that schedule alone)")
    export.add_argument("--weights", choices=("float32", "float16"), default=None,
                        help="how model.bin stores float weights (default: as the model "
                             "stores them); float16 halves a float32 model's download "
                             "and prints the outputs' difference from float32")
    export.add_argument("--dynamic-length", metavar="MASK",
                        help="the attention mask placeholder (..., max_length): the "
                             "model takes `length` in its place (docs/TRANSFORMERS.md)")
    return parser


COMMANDS = {"info": cmd_info, "dump": cmd_dump, "shaders": cmd_shaders,
            "profile": cmd_profile, "export": cmd_export}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ff.FragflowError as err:
        print(f"fragflow: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:          # `fragflow shaders T | head`: the reader has enough
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
