"""References for the recurrent-layer tests: torch modules' weights in Keras's and
TF1's layouts, and Keras's SimpleRNN / LSTM / GRU as float64 numpy loops written from
Keras's equations, with its masking and dropout rules (a masked step keeps the states
and repeats the previous output, or outputs zeros with zero_output; dropout masks are
one per sequence, per gate when given per gate)."""
from __future__ import annotations

import numpy as np


def _order_gru(a):
    """torch's GRU gates (r, z, n) in Keras's order (z, r, h), along axis 0."""
    r, z, n = np.split(a, 3, axis=0)
    return np.concatenate([z, r, n], 0)


def keras_weights(kind, m, suffix=""):
    """Keras's (kernel, recurrent_kernel, bias) from torch module m's layer 0
    (suffix '_reverse': its backward direction)."""
    get = lambda name: getattr(m, f"{name}_l0{suffix}").detach().numpy()  # noqa: E731
    wih, whh, bih, bhh = get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")
    if kind == "GRU":
        return (_order_gru(wih).T, _order_gru(whh).T,
                np.stack([_order_gru(bih), _order_gru(bhh)]))
    return wih.T, whh.T, bih + bhh


def keras_grads(kind, m, suffix=""):
    """torch's gradients of kernel and recurrent_kernel, in Keras's layout."""
    wih = getattr(m, f"weight_ih_l0{suffix}").grad.numpy()
    whh = getattr(m, f"weight_hh_l0{suffix}").grad.numpy()
    if kind == "GRU":
        return _order_gru(wih).T, _order_gru(whh).T
    return wih.T, whh.T


def tf1_lstm_weights(m, suffix=""):
    """torch's (i, f, g, o) LSTM as TF1's [x, h] kernel (i, j, f, o) and bias (the
    forget_bias of 1 taken out)."""
    def reorder(a):
        i, f, g, o = np.split(a, 4, axis=-1)
        return np.concatenate([i, g, f, o], -1)
    get = lambda name: getattr(m, f"{name}_l0{suffix}").detach().numpy()  # noqa: E731
    kernel = reorder(np.concatenate([get("weight_ih").T, get("weight_hh").T], 0))
    bias = reorder(get("bias_ih") + get("bias_hh"))
    n = kernel.shape[1] // 4
    bias[2 * n:3 * n] -= 1.0
    return kernel, bias


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _per_gate(value, masks, count):
    if masks is None:
        return [value] * count
    masks = list(masks)
    return [value * masks[g if len(masks) > 1 else 0] for g in range(count)]


def keras_loop(kind, x, weights, mask=None, go_backwards=False, zero_output=False,
               in_masks=None, rec_masks=None, reset_after=True, initial=None):
    """Keras's layer `kind` over x (batch, time, features) in float64. Returns
    (outputs in processing order (batch, time, units), h, c) (c None but for LSTM)."""
    k, r, b = (np.asarray(w, np.float64) for w in weights)
    x = np.asarray(x, np.float64)
    batch, time = x.shape[:2]
    units = r.shape[0]
    gates = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3}[kind]
    h = np.zeros((batch, units)) if initial is None else np.asarray(initial[0], np.float64)
    c = np.zeros((batch, units)) if initial is None or kind != "LSTM" else \
        np.asarray(initial[1], np.float64)
    prev = np.zeros((batch, units))
    col = lambda w, g: w[..., g * units:(g + 1) * units]                 # noqa: E731
    outs = []
    for t in (range(time)[::-1] if go_backwards else range(time)):
        xs = _per_gate(x[:, t], in_masks, gates)
        hs = _per_gate(h, rec_masks, gates)
        if kind == "SimpleRNN":
            new_h = np.tanh(xs[0] @ k + b + hs[0] @ r)
            new_c = c
        elif kind == "LSTM":
            z = [xs[g] @ col(k, g) + hs[g] @ col(r, g) + col(b, g) for g in range(4)]
            new_c = _sig(z[1]) * c + _sig(z[0]) * np.tanh(z[2])
            new_h = _sig(z[3]) * np.tanh(new_c)
        else:
            bx, bh = (b[0], b[1]) if reset_after else (b, np.zeros(3 * units))
            xg = [xs[g] @ col(k, g) + col(bx, g) for g in range(3)]
            zg = _sig(xg[0] + hs[0] @ col(r, 0) + col(bh, 0))
            rg = _sig(xg[1] + hs[1] @ col(r, 1) + col(bh, 1))
            if reset_after:
                cand = np.tanh(xg[2] + rg * (hs[2] @ col(r, 2) + col(bh, 2)))
            else:
                cand = np.tanh(xg[2] + (rg * hs[2]) @ col(r, 2))
            new_h = zg * h + (1 - zg) * cand
            new_c = c
        if mask is None:
            h, c, y = new_h, new_c, new_h
        else:
            on = np.asarray(mask, bool)[:, t][:, None]
            h, c = np.where(on, new_h, h), np.where(on, new_c, c)
            y = np.where(on, new_h, 0.0 if zero_output else prev)
        prev = y
        outs.append(y)
    return np.stack(outs, 1), h, (c if kind == "LSTM" else None)
