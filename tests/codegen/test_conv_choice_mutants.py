"""codegen/conv.py's kernel choice, written for the mutants that `make mutation` found
alive (tests/mutation/run.py): which conv2d the direct kernel takes (_direct_fits: its
loop budget, DIRECT_MAX_DEPTH inclusive), which runs blocked whoever reads it
(_blocked_anyway: from blocked_min_macs on), and that a conv2d reading a value as its
filter does not read it from a depthwise kernel's render targets. Hand values from
those rules, on graph nodes built with the public API."""
import fragflow as ff
from fragflow.codegen import conv
from fragflow.codegen.limits import loop_trips
from fragflow.codegen.schedule import graph_facts

KNOBS = ff.Tuning()


def test_direct_kernel_takes_a_sum_of_direct_max_depth_products():
    macs = KNOBS.matmul.blocked_min_macs      # deep enough for the blocked kernel's stitch
    taps = 4                             # a 2 x 2 filter
    c = KNOBS.conv.direct_max_depth // taps   # taps x c = DIRECT_MAX_DEPTH: still direct
    assert conv._direct_fits(taps, c, 8, macs, KNOBS)
    assert not conv._direct_fits(taps, c + 4, 8, macs, KNOBS)
    assert conv._direct_fits(taps, c + 4, 8, macs - 1, KNOBS)   # small: direct whatever its depth


def test_direct_kernel_refuses_a_loop_past_the_budget():
    taps = 9
    c = 4 * (loop_trips() // taps + 1)   # taps x C/4 texel steps > the loop budget
    assert not conv._direct_fits(taps, c, 4, 1000, KNOBS)
    assert conv._direct_fits(taps, 4, 4, 1000, KNOBS)



def test_direct_kernel_loops_its_channels_only_in_one_tap_windows():
    # channel loops (texel steps past direct_inline_steps) in a window of taps: a loop
    # per tap, whose compile took 70 s on llvmpipe for 4x4 taps of 16 steps; generic then
    steps, most = KNOBS.conv.direct_inline_steps, KNOBS.conv.direct_max_looped_taps
    assert most == 9
    assert conv._direct_fits(9, 4 * 16, 4, 1000, KNOBS)                 # 3x3: 9 loops
    assert conv._direct_fits(16, 4 * steps, 4, 1000, KNOBS)             # taps unrolled
    assert not conv._direct_fits(16, 4 * 16, 4, 1000, KNOBS)            # 4x4: 16 loops
    assert not conv._direct_fits(10, steps + 1, 4, 1000, KNOBS)         # scalar C loops
    assert conv._direct_fits(16, 4 * 16, 4, 1000,
                             KNOBS.with_({"conv.direct_max_looped_taps": 16}))

def _conv_node(x_shape, w_shape):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_shape, name="x")
        w = ff.placeholder(w_shape, name="w")
        y = ff.nn.conv2d(x, w, strides=1, padding="SAME")
    return y.value.node


def test_a_small_conv_does_not_run_blocked_anyway():
    # 1x4x4x3 * 3x3x3x5: 720 products (< matmul.blocked_min_macs), and 5 output channels
    # that the direct kernel does not take either: the generic kernel, not blocked
    assert not conv._blocked_anyway(_conv_node((1, 4, 4, 3), (3, 3, 3, 5)), KNOBS)
    # 1x64x64x64 * 3x3x64x64: deep (576 > DIRECT_MAX_DEPTH) and big: blocked
    assert conv._blocked_anyway(_conv_node((1, 64, 64, 64), (3, 3, 64, 64)), KNOBS)


def test_a_conv_reads_depthwise_blocks_as_its_image_only():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 64, 64, 64), name="x")
        d = ff.nn.depthwise_conv2d(x, ff.placeholder((3, 3, 64, 1), name="dw"),
                                   strides=1, padding="SAME")
        image = ff.nn.conv2d(d, ff.placeholder((3, 3, 64, 64), name="w"), 1, "SAME")
        # d's 1x64x64x64 read as a 1 x 64 x 64 x 64 filter of another image
        as_filter = ff.nn.conv2d(ff.placeholder((1, 66, 66, 64), name="other"), d, 1,
                                 "VALID")
        depthwise = ff.nn.depthwise_conv2d(d, ff.placeholder((3, 3, 64, 1), name="dw2"),
                                           strides=1, padding="SAME")
    facts = graph_facts(g)

    def reads(node, value):
        return conv.reads_depthwise_blocks(node, value, facts, KNOBS)
    assert reads(image.value.node, d.value)
    assert not reads(as_filter.value.node, d.value)
    assert not reads(depthwise.value.node, d.value)     # not a conv2d
    assert not reads(image.value.node, x.value)         # not read
