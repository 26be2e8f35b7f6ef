"""ONNX's RNN, GRU and LSTM: unrolled over a static sequence length, else (a sequence
length or batch known only at feed time) one scan per direction (frontend/rnn.py
`recurrence`: the same steps, sequence_lens as a tensor too).

Each direction computes x_t W^T for every step in one matmul, then per step
h_{t-1} R^T, the gates (ONNX's order: LSTM i, o, f, c; GRU z, r, h) and the new state,
with the activations the node names (alpha and beta taken by position in its list).
sequence_lens shorter than the sequence freeze a batch entry's state and give zeros in
Y after its end (forward direction; equal lengths are no-ops). Everything is ordinary
fragflow ops, so gradients flow and fine-tuning an imported recurrent model works.
"""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F

from ..rnn import recurrence
from .checks import MAX_UNROLL

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                       "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def activation(ctx, name, alpha, beta):
    """ONNX's recurrent activation by name (its alpha and beta where it takes them)."""
    table = {
        "Sigmoid": F.sigmoid, "Tanh": F.tanh, "Relu": F.relu, "Softplus": F.softplus,
        "Softsign": lambda t: t / (F.abs(t) + 1.0),
        "LeakyRelu": lambda t: F.leaky_relu(t, alpha=0.01 if alpha is None else alpha),
        "ThresholdedRelu": lambda t: F.where(F.greater(t, 1.0 if alpha is None else alpha),
                                             t, F.zeros_like(t)),
        "HardSigmoid": lambda t: F.clip_by_value(
            t * (0.2 if alpha is None else alpha) + (0.5 if beta is None else beta), 0.0, 1.0),
        "Elu": lambda t: F.where(F.greater(t, 0.0), t,
                                 (F.exp(t) - 1.0) * (1.0 if alpha is None else alpha)),
        "Affine": lambda t: t * (1.0 if alpha is None else alpha) + (0.0 if beta is None
                                                                      else beta),
        "ScaledTanh": lambda t: F.tanh(t * (1.0 if beta is None else beta)) *
        (1.0 if alpha is None else alpha),
    }
    key = next((k for k in table if k.lower() == str(name).lower()), None)
    if key is None:
        raise ctx.error(f"recurrent activation {name!r} is not supported "
                        f"({', '.join(sorted(table))} are)")
    return table[key]


def _row(t, index, width):
    """t[index] of a (n, ...) tensor as (...): a slice and a reshape (no kernel)."""
    rest = list(t.shape[1:])
    return F.reshape(F.slice(t, [index] + [0] * len(rest), [1] + [-1] * len(rest)), rest)


def _cols(t, k, hidden):
    """Gate k's columns of a (batch, G * hidden) tensor."""
    return F.slice(t, [0, k * hidden], [-1, hidden])


def recurrent(ctx, node, x, a, kind):
    G = GATES[kind]
    X = ctx.tensor(x[0])
    layout = int(a.get("layout", 0))
    if layout:
        X = F.transpose(X, (1, 0, 2))
    seq, batch, features = X.shape
    if seq is not None and seq > MAX_UNROLL:
        raise ctx.error(f"{kind} over {seq} steps: fragflow unrolls the sequence, at most "
                        f"{MAX_UNROLL} steps")
    dynamic = seq is None or batch is None      # known at feed time: one scan per direction
    W, R = ctx.tensor(x[1]), ctx.tensor(x[2])
    hidden = int(a.get("hidden_size", R.shape[-1]))
    direction = a.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.error(f"direction {direction!r} is not one of forward, reverse, "
                        f"bidirectional")
    dirs = 2 if direction == "bidirectional" else 1
    given = lambda k: len(x) > k and x[k] is not None                      # noqa: E731
    B = ctx.tensor(x[3]) if given(3) else None
    lens = None
    if given(4) and dynamic and not ctx.is_static(x[4]):
        lens = ctx.tensor(x[4])
    elif given(4):
        lens = np.asarray(ctx.static(x[4], "sequence_lens")).reshape(-1)
        if seq is not None and np.all(lens == seq):
            lens = None
        elif direction != "forward" and not dynamic:
            raise ctx.error(f"{kind} {direction} with sequence_lens shorter than the "
                            f"sequence is not supported")
    h0 = ctx.tensor(x[5]) if given(5) else None
    c0 = ctx.tensor(x[6]) if kind == "LSTM" and given(6) else None
    P = ctx.tensor(x[7]) if kind == "LSTM" and given(7) else None
    if layout and h0 is not None:
        h0 = F.transpose(h0, (1, 0, 2))
    if layout and c0 is not None:
        c0 = F.transpose(c0, (1, 0, 2))
    if kind == "LSTM" and a.get("input_forget", 0):
        raise ctx.error("LSTM with input_forget=1 is not supported")
    clip = a.get("clip")
    linear_before_reset = bool(a.get("linear_before_reset", 0)) if kind == "GRU" else False
    names = [n.decode() if isinstance(n, bytes) else n
             for n in a.get("activations", DEFAULT_ACTIVATIONS[kind] * dirs)]
    alphas, betas = list(a.get("activation_alpha", [])), list(a.get("activation_beta", []))
    per_dir = len(DEFAULT_ACTIVATIONS[kind])
    if len(names) != per_dir * dirs:
        raise ctx.error(f"{kind} takes {per_dir * dirs} activations here, got {names}")
    acts = [activation(ctx, n, alphas[i] if i < len(alphas) else None,
                       betas[i] if i < len(betas) else None) for i, n in enumerate(names)]
    clipped = (lambda t: F.clip_by_value(t, -float(clip), float(clip))) if clip else \
        (lambda t: t)
    if dynamic:
        return _scan_recurrent(kind, X, W, R, B, h0, c0, P, lens, layout, direction, dirs,
                               hidden, acts, per_dir, clipped, linear_before_reset)
    masks = None if lens is None else [
        F.constant((t < lens).reshape(-1, 1)) for t in range(seq)]

    ys, hs, cs = [], [], []
    for d in range(dirs):
        f, g = acts[d * per_dir], acts[d * per_dir + 1] if per_dir > 1 else None
        h_act = acts[d * per_dir + 2] if kind == "LSTM" else None
        if per_dir == 1:
            f = acts[d]
        Wd, Rd = _row(W, d, None), _row(R, d, None)
        xw = F.reshape(F.matmul(F.reshape(X, [seq * batch, features]), Wd, transpose_b=True),
                       [seq, batch, G * hidden])
        if B is not None:
            Bd = _row(B, d, None)
            wb, rb = F.slice(Bd, [0], [G * hidden]), F.slice(Bd, [G * hidden], [G * hidden])
        else:
            wb = rb = None
        H = _row(h0, d, None) if h0 is not None else F.fill([batch, hidden], 0.0, "float32")
        C = None
        if kind == "LSTM":
            C = _row(c0, d, None) if c0 is not None else F.fill([batch, hidden], 0.0,
                                                                "float32")
            peep = [None] * 3 if P is None else [
                F.slice(_row(P, d, None), [k * hidden], [hidden]) for k in range(3)]
        order = range(seq) if (direction == "forward" or (dirs == 2 and d == 0)) \
            else range(seq - 1, -1, -1)
        outs = {}
        for t in order:
            xt = _row(xw, t, None)
            hr = F.matmul(H, Rd, transpose_b=True)
            if kind == "GRU":
                H_new = _gru_step(xt, hr, H, Rd, wb, rb, hidden, f, g, clipped,
                                  linear_before_reset)
            elif kind == "LSTM":
                H_new, C_new = _lstm_step(xt, hr, C, wb, rb, hidden, f, g, h_act, clipped,
                                          peep)
            else:
                pre = xt + hr
                if wb is not None:
                    pre = pre + wb + rb
                H_new = f(clipped(pre))
            if masks is not None:
                H_new = F.where(masks[t], H_new, H)
                if kind == "LSTM":
                    C_new = F.where(masks[t], C_new, C)
                outs[t] = F.where(masks[t], H_new, F.zeros_like(H_new))
            else:
                outs[t] = H_new
            H = H_new
            if kind == "LSTM":
                C = C_new
        ys.append(F.stack([outs[t] for t in range(seq)], axis=0))    # (seq, batch, hidden)
        hs.append(H)
        cs.append(C)
    return _outputs(kind, ys, hs, cs, layout)


def _gru_step(xt, hr, H, Rd, wb, rb, hidden, f, g, clipped, linear_before_reset):
    if wb is not None:
        z = f(clipped(_cols(xt, 0, hidden) + _cols(hr, 0, hidden) + _cols1(wb, 0, hidden)
                      + _cols1(rb, 0, hidden)))
        r = f(clipped(_cols(xt, 1, hidden) + _cols(hr, 1, hidden) + _cols1(wb, 1, hidden)
                      + _cols1(rb, 1, hidden)))
    else:
        z = f(clipped(_cols(xt, 0, hidden) + _cols(hr, 0, hidden)))
        r = f(clipped(_cols(xt, 1, hidden) + _cols(hr, 1, hidden)))
    Rh = F.slice(Rd, [2 * hidden, 0], [hidden, -1])                      # (hidden, hidden)
    if linear_before_reset:
        recur = _cols(hr, 2, hidden)
        if rb is not None:
            recur = recur + _cols1(rb, 2, hidden)
        pre = _cols(xt, 2, hidden) + r * recur
    else:
        pre = _cols(xt, 2, hidden) + F.matmul(r * H, Rh, transpose_b=True)
        if rb is not None:
            pre = pre + _cols1(rb, 2, hidden)
    if wb is not None:
        pre = pre + _cols1(wb, 2, hidden)
    h = g(clipped(pre))
    return (1.0 - z) * h + z * H


def _lstm_step(xt, hr, C, wb, rb, hidden, f, g, h_act, clipped, peep):
    def gate(k):
        pre = _cols(xt, k, hidden) + _cols(hr, k, hidden)
        if wb is not None:
            pre = pre + _cols1(wb, k, hidden) + _cols1(rb, k, hidden)
        return pre
    p_i, p_o, p_f = peep
    i = gate(0) if p_i is None else gate(0) + p_i * C
    fg = gate(2) if p_f is None else gate(2) + p_f * C
    i, fg = f(clipped(i)), f(clipped(fg))
    c = g(clipped(gate(3)))
    C_new = fg * C + i * c
    o = gate(1) if p_o is None else gate(1) + p_o * C_new
    o = f(clipped(o))
    return o * h_act(C_new), C_new


def _cols1(v, k, hidden):
    """Gate k's entries of a (G * hidden,) bias vector."""
    return F.slice(v, [k * hidden], [hidden])


def _scan_recurrent(kind, X, W, R, B, h0, c0, P, lens, layout, direction, dirs, hidden,
                    acts, per_dir, clipped, linear_before_reset):
    """The recurrence as one scan per direction over X (seq, batch, features), whose
    sequence length and batch may be unknown until the feed."""
    G = GATES[kind]
    first = F.gather(X, 0)                                               # (batch, features)
    zeros = F.zeros_like(F.slice(first, [0, 0], [-1, 1])) + F.zeros([hidden])
    lengths = None if lens is None else F.cast(
        lens if isinstance(lens, F.Tensor) else F.constant(np.asarray(lens)), "int32")
    ys, hs, cs = [], [], []
    for d in range(dirs):
        f = acts[d * per_dir]
        g = acts[d * per_dir + 1] if per_dir > 1 else None
        h_act = acts[d * per_dir + 2] if kind == "LSTM" else None
        Wd, Rd = _row(W, d, None), _row(R, d, None)
        xw = F.matmul(X, F.transpose(Wd))                                # (seq, batch, G h)
        wb = rb = None
        if B is not None:
            Bd = _row(B, d, None)
            wb, rb = F.slice(Bd, [0], [G * hidden]), F.slice(Bd, [G * hidden], [G * hidden])
        H = _row(h0, d, None) if h0 is not None else zeros
        peep = None
        if kind == "LSTM":
            C = _row(c0, d, None) if c0 is not None else zeros
            peep = [None] * 3 if P is None else [
                F.slice(_row(P, d, None), [k * hidden], [hidden]) for k in range(3)]
        reverse = direction == "reverse" or (dirs == 2 and d == 1)

        def step(xt, state, f=f, g=g, h_act=h_act, Rd=Rd, wb=wb, rb=rb, peep=peep):
            Hs = state[0] if kind == "LSTM" else state
            hr = F.matmul(Hs, Rd, transpose_b=True)
            if kind == "GRU":
                new = _gru_step(xt, hr, Hs, Rd, wb, rb, hidden, f, g, clipped,
                                linear_before_reset)
                return new, new
            if kind == "LSTM":
                new_h, new_c = _lstm_step(xt, hr, state[1], wb, rb, hidden, f, g, h_act,
                                          clipped, peep)
                return new_h, (new_h, new_c)
            pre = xt + hr
            if wb is not None:
                pre = pre + wb + rb
            new = f(clipped(pre))
            return new, new
        state = (H, C) if kind == "LSTM" else H
        out, final = recurrence(step, xw, state, lengths, reverse=reverse, name=kind.lower())
        ys.append(out)
        hs.append(final[0] if kind == "LSTM" else final)
        cs.append(final[1] if kind == "LSTM" else None)
    return _outputs(kind, ys, hs, cs, layout)


def _outputs(kind, ys, hs, cs, layout) -> list:
    """[Y, Y_h] (and Y_c for LSTM) from each direction's (seq, batch, hidden) outputs
    and final states; layout 1: batch first, as ONNX's layout attribute says."""
    Y = F.stack(ys, axis=1)                                              # (seq, dirs, b, h)
    Y_h = F.stack(hs, axis=0)                                            # (dirs, b, h)
    Y_c = F.stack(cs, axis=0) if kind == "LSTM" else None
    if layout:
        Y = F.transpose(Y, (2, 0, 1, 3))
        Y_h = F.transpose(Y_h, (1, 0, 2))
        Y_c = F.transpose(Y_c, (1, 0, 2)) if Y_c is not None else None
    return [Y, Y_h] + ([Y_c] if kind == "LSTM" else [])
