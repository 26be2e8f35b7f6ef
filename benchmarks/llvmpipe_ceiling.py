"""What llvmpipe allows, and where fragflow's matmul sits against it (issue 34; the
figures are in docs/PERFORMANCE.md "Where a matmul's time goes on llvmpipe").

    python benchmarks/llvmpipe_ceiling.py [--repeats N] [--only ceilings,matmul,split,cpu]
        [--variant label:matmul.max_targets=4,... ...]

Ceilings, each a gpgpu_program on fragflow's GL context (kernel time from timer
queries, `Session.profile`: medians of `--repeats` rounds in which every kernel,
ceilings and products, is profiled once, so that the load of the shared cores reaches
them alike):
- texel fetches/s of RGBA32F, texelFetch, textureLod and textureLodOffset (fetch_program),
  from a 64 KB texture (cache-resident) and from a 64 MB one read once (streaming),
  each element a run of 64 texels; 8 independent sums;
- multiply-adds/s of a fragment shader with no fetches (8 independent vec4 chains of
  a * m + d);
- fragments/s of a trivial shader (one RGBA32F texel written each);
- the cost of a draw: a chain of 210 dependent tiny kernels against one of 10, wall
  clock, synced with glFinish.
Then the product at BERT-mini's shapes (128x256 @ 256x256, 128x256 @ 256x1024,
128x1024 @ 1024x256; A fed, B a constant as an ONNX weight is, its panel hoisted) as
matmul.packed (the default at these sizes), as matmul.blocked and under each
`--variant`'s knobs: its kernel's multiply-adds/s and texel fetches/s and its stitch's
time ("matmul"); the packed kernel as compiled beside two edits of its source, one
without its products (each fetched texel added once) and one without its fetches
(values made from the coordinates): where its time goes ("split"); and the CPU's
float32 GEMM (numpy's BLAS, onnxruntime's MatMul) on 1 and 2 threads ("cpu"). A gpgpu
program's body runs once per output element, four a fragment: the counts are per
element, as run."""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import time

import numpy as np

import fragflow as ff
from fragflow.codegen import common as codegen_common
from fragflow.codegen.layout import layout_for
from fragflow.ir.types import TensorType

BERT_MINI = [(128, 256, 256), (128, 256, 1024), (128, 1024, 256)]     # M, K, N
STEPS = 64                  # loop steps per element in the ceiling programs
RESIDENT_TEXELS = 4096      # 64 KB
# output elements of the ceiling programs: 16K fragments, a 128x128 texture, four
# 64x64 tiles (llvmpipe gives each thread whole tiles: one tile would run on one core)
STREAM_ELEMENTS = 1 << 16


def gl_finish() -> None:
    """Wait for everything queued on fragflow's context (inside its GL section)."""
    from OpenGL import GL  # only once fragflow's context exists (PyOpenGL's platform)

    from fragflow.runtime.device import Device  # with OpenGL.GL, after the context
    with Device.get().gl:
        GL.glFinish()


class Side:
    """One kernel to time: its session, fetch and feeds, the kernel's name, the work
    it does (multiply-adds, texel fetches, fragments); `times` collects its GPU
    seconds, one profile's mean a round, and the process CPU seconds of whole runs."""

    def __init__(self, label, sess, fetch, feeds, kernel, work, stitch=None):
        self.label, self.sess, self.fetch, self.feeds = label, sess, fetch, feeds
        self.kernel, self.work, self.stitch = kernel, work, stitch
        self.times = {"kernel": [], "stitch": [], "all": [], "cpu": []}
        self.fn = sess.compile([fetch], feeds=list(feeds))
        self.args = list(feeds.values())

    def profile(self, runs=3):
        for _ in range(runs):
            # process CPU seconds of a synced run (llvmpipe's threads included): what
            # the run costs, where the wall clock also counts other processes' turns
            start = time.process_time()
            self.fn(*self.args)
            gl_finish()
            self.times["cpu"].append(time.process_time() - start)
        prof = self.sess.profile([self.fetch], self.feeds, runs=runs)
        rows = {r["kernel"]: r["seconds"] for r in prof.kernel_rows}
        self.times["kernel"].append(rows[self.kernel])
        self.times["all"].append(sum(rows.values()))
        if self.stitch:
            self.times["stitch"].append(rows[self.stitch])

    def seconds(self, part="kernel") -> float:
        return statistics.median(self.times[part])


def take_turns(sides, repeats: int) -> None:
    """`repeats` rounds, every side profiled once a round: a load that comes and goes
    (the cores are shared) reaches all sides alike."""
    for _ in range(repeats):
        for side in sides:
            side.profile()


def kernel_named(fn, template: str) -> str:
    (name,) = [k.name for k in fn.kernels if k.template == template]
    return name


FETCHES = ("texelFetch", "textureLod", "textureLodOffset")
UNROLL = 8        # the fetch and multiply-add loops' bodies, written out (no arrays)


def fetch_program(texels: int, width: int, fetch: str):
    """Each element sums a run of STEPS texels, (i * STEPS + j) & MASK for element i
    (as a packed matmul's fragment reads its panels), into UNROLL sums: texelFetch or
    textureLod with each texel's coordinates, or textureLodOffset with one coordinate
    per UNROLL texels (the packed kernel's reads; runs never cross a texture row)."""
    height, shift = texels // width, width.bit_length() - 1
    assert width == 1 << shift and texels % width == 0 and width % UNROLL == 0
    body = []
    if fetch == "textureLodOffset":
        body.append("vec2 uv = (vec2(t & (W - 1), t >> SHIFT) + 0.5) * SCALE;")
    for u in range(UNROLL):
        if fetch == "texelFetch":
            read = f"texelFetch(x0, ivec2((t + {u}) & (W - 1), (t + {u}) >> SHIFT), 0)"
        elif fetch == "textureLod":
            read = f"textureLod(x0, (vec2((t + {u}) & (W - 1), (t + {u}) >> SHIFT) + " \
                   f"0.5) * SCALE, 0.0)"
        else:
            read = f"textureLodOffset(x0, uv, 0.0, ivec2({u}, 0))"
        body.append(f"s{u} += {read};")
    sums = " + ".join(f"s{u}" for u in range(UNROLL))
    glsl = f"""
        const int W = {width};
        const int SHIFT = {shift};
        const int MASK = {texels - 1};
        const vec2 SCALE = vec2({1.0 / width}, {1.0 / height});
        vec4 {", ".join(f"s{u} = vec4(0.0)" for u in range(UNROLL))};
        for (int j = 0; j < {STEPS}; j += {UNROLL}) {{
            int t = (ff_i * {STEPS} + j) & MASK;
            {chr(10).join(body)}
        }}
        vec4 a = {sums};
        setOutput(a.x + a.y + a.z + a.w);
    """
    return ff.gpgpu_program(name=f"fetch_{fetch}", inputs=["x"],
                            output=lambda x: ((STREAM_ELEMENTS,), "float32"), glsl=glsl)


FMA_STEPS = 256
# the loop's body: FMA_BODY steps of the UNROLL chains (256 multiply-adds), as long
# as the packed kernel's: with a body of one step (32) the same program measured 3x
# slower, the loop's own cost per iteration, not the arithmetic
FMA_BODY = 8
FMA_PROGRAM = ff.gpgpu_program(
    name="fma", inputs=["x"], output=lambda x: ((STREAM_ELEMENTS,), "float32"),
    glsl=f"""
        vec4 m = vec4(0.999, 0.998, 0.997, 0.996) + getX(0) * 1e-9;
        vec4 d = vec4(1e-3) * float(ff_i & 7);
        vec4 {", ".join(f"a{u} = vec4(float(ff_i + {u}))" for u in range(UNROLL))};
        for (int j = 0; j < {FMA_STEPS}; j += {FMA_BODY}) {{
            {" ".join(f"a{u} = a{u} * m + d;" for u in range(UNROLL)) * FMA_BODY}
        }}
        vec4 r = {" + ".join(f"a{u}" for u in range(UNROLL))};
        setOutput(r.x + r.y + r.z + r.w);
    """)

TRIVIAL_ELEMENTS = 1 << 22     # 1M fragments
TRIVIAL = ff.gpgpu_program(
    name="trivial", inputs=["x"], output=lambda x: ((TRIVIAL_ELEMENTS,), "float32"),
    glsl="setOutput(float(ff_i));")

TINY = ff.gpgpu_program(
    name="tiny", inputs=["x"], output=lambda x: (x.shape, x.dtype),
    glsl="setOutput(getXAtOutCoords() * 0.5 + 1.0);")


def ceiling_sides() -> list:
    """The ceiling programs as Sides (each checked against numpy first)."""
    sides = []
    max_size = ff.gl_info()["max_texture_size"]
    rng = np.random.default_rng(0)
    fetches = STREAM_ELEMENTS * STEPS             # each element STEPS texel reads
    for label, texels in (("resident", RESIDENT_TEXELS),
                          ("streaming", STREAM_ELEMENTS * STEPS)):
        layout = layout_for(TensorType((texels * 4,), "float32"), max_size)
        for fetch in FETCHES:
            g = ff.Graph()
            with g.as_default():
                x = ff.placeholder((texels * 4,), name="x")      # fed: not hoisted
                y = fetch_program(texels, layout.width, fetch)(x)
            sess = ff.Session(g)
            data = rng.standard_normal(texels * 4).astype(np.float32)
            got = sess.run(y, {x: data})
            i = 22                       # element i sums texels i * STEPS + j
            ts = [(i * STEPS + j) & (texels - 1) for j in range(STEPS)]
            want = data.reshape(-1, 4)[ts].astype(np.float64).sum()
            assert abs(got[i] - want) < 1e-3 * (1 + abs(want)), (got[i], want)
            fn = sess.compile([y], feeds=[x])
            sides.append(Side(f"fetch {label} {fetch}", sess, y, {x: data},
                              kernel_named(fn, "program.glsl.j2"), {"fetches": fetches}))
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        y = FMA_PROGRAM(x)
        z = TRIVIAL(x)
    sess = ff.Session(g)
    x0 = np.zeros(4, np.float32)
    got = sess.run(y, {x: x0})
    m = np.array([0.999, 0.998, 0.997, 0.996], np.float64)
    i = 77
    a = np.array([[i + u] * 4 for u in range(UNROLL)], np.float64)
    for _ in range(FMA_STEPS):
        a = a * m + 1e-3 * (i & 7)
    assert abs(got[i] - a.sum()) < 1e-3 * abs(a.sum()), (got[i], a.sum())
    for label, out, work in (
            ("multiply-adds", y, {"macs": STREAM_ELEMENTS * FMA_STEPS * UNROLL * 4}),
            ("trivial", z, {"fragments": TRIVIAL_ELEMENTS // 4})):
        fn = sess.compile([out], feeds=[x])
        sides.append(Side(label, sess, out, {x: x0}, kernel_named(fn, "program.glsl.j2"),
                          work))
    return sides


def report_ceilings(sides) -> dict:
    out = {}
    for side in sides:
        s = side.seconds()
        (what, count), = side.work.items()
        rate = count / s
        out[side.label] = rate
        unit = {"fetches": "texel fetches/s", "macs": "multiply-adds/s (no fetches)",
                "fragments": "fragments/s (one RGBA32F texel written each)"}[what]
        print(f"{side.label}: {rate / 1e9:.3f} G {unit} ({s * 1e3:.2f} ms for {count})")
    return out


def draw_cost(repeats: int) -> float:
    g = ff.Graph()
    chains = {}
    with g.as_default():
        # fed: kernels reading only constants and variables would run once (hoisted)
        x = ff.placeholder((16,), name="x")
        for length in (10, 210):
            y = x
            for _ in range(length):
                y = TINY(y)
            chains[length] = y
    sess = ff.Session(g)
    fns = {n: sess.compile([y], feeds=[x]) for n, y in chains.items()}
    x0 = np.linspace(-1, 1, 16).astype(np.float32)

    def synced(fn):
        fn(x0)
        gl_finish()

    times = {n: [] for n in fns}
    for fn in fns.values():
        synced(fn)
    for _ in range(max(repeats * 4, 10)):
        for n, fn in fns.items():
            t0 = time.perf_counter()
            synced(fn)
            times[n].append(time.perf_counter() - t0)
    sess.close()
    return (statistics.median(times[210]) - statistics.median(times[10])) / 200


def fetches_per_fragment(kernel, k: int) -> tuple:
    """(fragments, texel fetches of one fragment, the blocking) of a blocked or packed
    kernel: R texels of A and 4 CT of B at each step of 4 k of its split."""
    bl = kernel.params["blocking"]
    slab, col_slab = -(-bl["m"] // bl["rows"]), -(-(-(-bl["n"] // 4)) // bl["cols"])
    fragments = bl["batch"] * slab * col_slab * bl["splits"]
    return fragments, (bl["rows"] + 4 * bl["cols"]) * (-(-k // 4)) // bl["splits"], bl


def matmul_sides(variants: dict) -> list:
    """Each BERT-mini shape under each variant (label: tuning knobs) as a Side."""
    rng = np.random.default_rng(1)
    sides = []
    for m, k, n in BERT_MINI:
        a0 = rng.standard_normal((m, k)).astype(np.float32)
        b0 = rng.standard_normal((k, n)).astype(np.float32)
        want = a0.astype(np.float64) @ b0
        for label, knobs in variants.items():
            g = ff.Graph()
            with g.as_default():
                a = ff.placeholder((m, k), name="a")
                y = ff.matmul(a, ff.constant(b0))
            sess = ff.Session(g, tuning=ff.Tuning().with_(knobs))
            got = sess.run(y, {a: a0})
            err = np.max(np.abs(got - want))
            assert err < 1e-3 * np.sqrt(k), (label, err)
            fn = sess.compile([y], feeds=[a])
            (main,) = [kr for kr in fn.kernels if kr.template in
                       ("matmul_packed.glsl.j2", "matmul_blocked.glsl.j2")]
            fragments, per_fragment, bl = fetches_per_fragment(main, k)
            side = Side(f"{m}x{k}@{k}x{n} {label}", sess, y, {a: a0}, main.name,
                        {"macs": m * n * k, "fetches": fragments * per_fragment},
                        kernel_named(fn, "matmul_stitch.glsl.j2"))
            side.shape = (f"{fragments} fragments x {per_fragment} fetches, "
                          f"{bl['rows']}x{bl['cols']} blocking, {bl['splits']} split(s)")
            sides.append(side)
    return sides


PRODUCT = re.compile(r"acc(\d+)_(\d+) \+= av(\d+) \* bm(\d+);")
FETCH = re.compile(r"textureLodOffset\((x[01]), (\w+), 0\.0, ivec2\((\d+), 0\)\)")


def no_products(source: str) -> str:
    """The packed kernel with each product acc += a * B replaced by adding each fetched
    texel once (A's into acc r_0, B's 4 into acc 0_h): its fetches, loop and writes,
    12 vec4 adds a step instead of 128 multiply-adds."""
    def one(match):
        r, h = int(match[1]), int(match[2])
        adds = [f"acc{r}_{h} += av{r};"] if h == 0 else []
        if r == 0:
            adds.append(f"acc0_{h} += bm{h}[0] + bm{h}[1] + bm{h}[2] + bm{h}[3];")
        return " ".join(adds)
    out, count = PRODUCT.subn(one, source)
    assert count, "no products found: the template changed"
    return out


def no_fetches(source: str) -> str:
    """The packed kernel with each textureLodOffset replaced by a value made from its
    coordinates (vec4(uv, uv) + offset: different at each step, so nothing is hoisted):
    its products, loop and writes without the texel fetches."""
    out, count = FETCH.subn(lambda m: f"(vec4({m[2]}, {m[2]}) + {m[3]}.0)", source)
    assert count, "no textureLodOffset found: the template changed"
    return out


@contextlib.contextmanager
def edited(template: str, edit):
    """Kernels rendered from `template` while inside have their source passed through
    `edit` (codegen.common.render, what make_kernel calls)."""
    render = codegen_common.render

    def patched(name, **context):
        source = render(name, **context)
        return edit(source) if name == template else source
    codegen_common.render = patched
    try:
        yield
    finally:
        codegen_common.render = render


def split_sides() -> list:
    """Each BERT-mini shape's packed kernel as compiled, without its products and
    without its fetches (results not checked for the two edits: they compute something
    else)."""
    rng = np.random.default_rng(3)
    sides = []
    for m, k, n in BERT_MINI:
        a0 = rng.standard_normal((m, k)).astype(np.float32)
        b0 = rng.standard_normal((k, n)).astype(np.float32)
        for label, edit in (("as compiled", None), ("no products", no_products),
                            ("no fetches", no_fetches)):
            g = ff.Graph()
            with g.as_default():
                a = ff.placeholder((m, k), name="a")
                y = ff.matmul(a, ff.constant(b0))
            sess = ff.Session(g)
            with edited("matmul_packed.glsl.j2", edit) if edit else contextlib.nullcontext():
                fn = sess.compile([y], feeds=[a])
                fn(a0)
            main = kernel_named(fn, "matmul_packed.glsl.j2")
            sides.append(Side(f"{m}x{k}@{k}x{n} {label}", sess, y, {a: a0}, main,
                              {"macs": m * n * k}))
    return sides


def report_split(sides) -> None:
    """GPU time of the kernel (timer queries) and process CPU of whole runs (the runs
    differ only in that kernel): the shares of its products and of its fetches."""
    for i in range(0, len(sides), 3):
        full, no_products, no_fetches = sides[i:i + 3]
        gpu = [s.seconds() for s in (full, no_products, no_fetches)]
        cpu = [s.seconds("cpu") for s in (full, no_products, no_fetches)]
        shape = full.label.split()[0]
        print(f"{shape} packed kernel: as compiled {gpu[0] * 1e3:.3f} ms, without its "
              f"products {gpu[1] * 1e3:.3f} ms ({gpu[1] / gpu[0]:.0%}), without its "
              f"fetches {gpu[2] * 1e3:.3f} ms ({gpu[2] / gpu[0]:.0%}), "
              f"{full.work['macs'] / gpu[2] / 1e9:.2f} G multiply-adds/s; process CPU a "
              f"run {cpu[0] * 1e3:.3f} ms, without the products "
              f"{(cpu[0] - cpu[1]) * 1e3:.3f} ms less, without the fetches "
              f"{(cpu[0] - cpu[2]) * 1e3:.3f} ms less", flush=True)


def report_matmul(sides, ceiling: dict) -> None:
    base = {}
    for side in sides:
        shape = side.label.split()[0]
        t = {part: side.seconds(part) for part in ("kernel", "stitch", "all", "cpu")}
        base.setdefault(shape, t)
        macs, fetches = side.work["macs"], side.work["fetches"]
        line = (f"{side.label}: kernel {t['kernel'] * 1e3:.3f} ms, stitch "
                f"{t['stitch'] * 1e3:.3f}, all {t['all'] * 1e3:.3f} "
                f"({base[shape]['all'] / t['all']:.2f}x the first's speed), process CPU "
                f"a run {t['cpu'] * 1e3:.3f} ms ({base[shape]['cpu'] / t['cpu']:.2f}x); "
                f"{macs / t['kernel'] / 1e9:.2f} G multiply-adds/s, "
                f"{fetches / t['kernel'] / 1e9:.3f} G texel fetches/s ({side.shape})")
        lod, fma = ceiling.get("fetch resident textureLodOffset"), ceiling.get("multiply-adds")
        if lod and fma:
            # on a CPU the two add up (the same cores run both); the multiply-add
            # ceiling's chains are slower than the kernel's own arithmetic ("split")
            line += (f"; at the ceilings its fetches take {fetches / lod * 1e3:.3f} ms "
                     f"({fetches / lod / t['kernel']:.0%} of the kernel), its "
                     f"multiply-adds {macs / fma * 1e3:.3f} ms "
                     f"({macs / fma / t['kernel']:.0%})")
        print(line, flush=True)


def cpu(repeats: int) -> dict:
    import onnxruntime as ort  # optional packages: "cpu" only
    from onnx import TensorProto, helper
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(2)
    out = {}
    for m, k, n in BERT_MINI:
        a0 = rng.standard_normal((m, k)).astype(np.float32)
        b0 = rng.standard_normal((k, n)).astype(np.float32)
        model = helper.make_model(helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
            [helper.make_tensor("b", TensorProto.FLOAT, [k, n], b0.ravel())]),
            opset_imports=[helper.make_opsetid("", 17)])
        for threads in (1, 2):
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            sess = ort.InferenceSession(model.SerializeToString(), opts,
                                        providers=["CPUExecutionProvider"])
            sides = {"onnxruntime": lambda sess=sess, a0=a0: sess.run(None, {"a": a0}),
                     "numpy": lambda a0=a0, b0=b0: a0 @ b0}
            with threadpool_limits(limits=threads):
                times = {s: [] for s in sides}
                for fn in sides.values():
                    fn()
                for _ in range(max(repeats * 20, 50)):
                    for s, fn in sides.items():
                        t0 = time.perf_counter()
                        fn()
                        times[s].append(time.perf_counter() - t0)
            for s, ts in times.items():
                sec = statistics.median(ts)
                out[f"{m}x{k}@{k}x{n} {s} {threads}"] = m * n * k / sec
                print(f"{m}x{k}@{k}x{n} {s}, {threads} thread(s): {sec * 1e3:.3f} ms, "
                      f"{m * n * k / sec / 1e9:.2f} G multiply-adds/s", flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default="ceilings,matmul,split,cpu")
    parser.add_argument("--variant", action="append", default=[],
                        help="label:knob=value,... a product variant timed beside the "
                             "default (packed) and blocked: 'mt4:matmul.max_targets=4'")
    args = parser.parse_args(argv)
    variants = {"default": {}, "blocked": {"matmul.packed_min_macs": 1 << 40}}
    for spec in args.variant:
        label, _, items = spec.partition(":")
        knobs = {}
        for item in filter(None, items.split(",")):
            name, _, value = item.partition("=")
            knobs[name] = {"true": True, "false": False}[value.lower()] \
                if value.lower() in ("true", "false") else int(value)
        variants[label] = knobs
    parts = args.only.split(",")
    print(f"{ff.gl_info()['renderer']}; load {os.getloadavg()[0]:.1f}; "
          f"LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', '(default: the cores)')}",
          flush=True)
    ceiling = ceiling_sides() if "ceilings" in parts else []
    products = matmul_sides(variants) if "matmul" in parts else []
    split = split_sides() if "split" in parts else []
    take_turns(ceiling + products + split, args.repeats)
    found = report_ceilings(ceiling)
    if "ceilings" in parts:
        print(f"per draw (a tiny dependent kernel, wall): {draw_cost(args.repeats) * 1e6:.1f}"
              f" us", flush=True)
    report_matmul(products, found)
    report_split(split)
    if "cpu" in parts:
        cpu(args.repeats)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
