#!/usr/bin/env python3
"""Generate the analyzer's op table from a real torch.

For every op it measures, in the forms the analyzer understands (``torch.X``, ``Tensor.X``,
``torch.nn.functional.X``, ``nn.Module`` classes), what autograd really needs:

* ``result``: writing the op's output in place and then calling ``backward()`` raises;
* ``self`` / ``other``: writing that input in place after the op raises at ``backward()``.

Each flag is *confirmed by running*: the write happens, backward runs, and only the runtime's
own "modified by an inplace operation" error sets the flag. ``grad_fn`` introspection
(``_saved_result``, ``_saved_self``, ``_saved_other``) is recorded beside it as a cross-check.

Usage: gen_op_table.py OUT.json          write the table
       gen_op_table.py --check OUT.json  fail (exit 1) when the committed table differs
"""
import inspect
import json
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
INPLACE_ERR = "modified by an inplace operation"

UNARY = """exp exp2 expm1 sigmoid tanh relu sqrt rsqrt reciprocal abs log log1p log2 log10 sin cos
tan asin acos atan sinh cosh asinh erf erfc erfinv square neg clone sum mean cumsum cumprod prod max
min amax amin norm std var logsumexp sign floor ceil round trunc frac logit softmax log_softmax
mish silu gelu elu selu celu leaky_relu hardtanh relu6 softplus hardsigmoid hardswish logsigmoid
tanhshrink softsign softshrink hardshrink sinc deg2rad rad2deg angle positive t flatten squeeze
contiguous float double normalize layer_norm dropout cummax cummin sort topk median var_mean
std_mean log_sigmoid glu threshold silu_ erf_ sigmoid_ tanh_ exp_
relu_ leaky_relu_ elu_ selu_ celu_ rrelu_ hardtanh_ threshold_ sqrt_ rsqrt_ reciprocal_ expm1_
exp2_ abs_ log_ sin_ cos_ neg_ square_ clamp_ clip_ vector_norm matrix_norm pdist
max_pool2d avg_pool2d adaptive_avg_pool2d adaptive_max_pool2d interpolate pixel_shuffle
max_pool1d avg_pool1d adaptive_avg_pool1d adaptive_max_pool1d
local_response_norm group_norm clamp clip clamp_min clamp_max nan_to_num atanh acosh lgamma digamma
softmin expit ndtr log_ndtr i0 entr erfcx cholesky inv det matrix_exp gather inverse rms_norm
batch_norm instance_norm logcumsumexp renorm svdvals eigvalsh eigvals
scaled_dot_product_attention
fft ifft rfft irfft hfft ihfft fft2 ifft2 rfft2 irfft2 fftn ifftn rfftn irfftn fftshift ifftshift
""".split()
# (Ops of `torch.fft` are keyed by their last name too: `torch.fft.rfft` -> `rfft`; their
# outputs are complex, measured through their real part.)
# (`special.X` ops are keyed by their last name too: `torch.special.expit` -> `expit`.)
# (Ops of `torch.linalg` are keyed by their last name, as the analyzer looks them up:
# `torch.linalg.vector_norm` -> `vector_norm`.)
# (`X_` entries are the in-place kernels: what they save is not always what `X` saves; e.g.
# `leaky_relu` saves its input, `leaky_relu_` its result.)

BINARY = """add sub mul div true_divide floor_divide matmul mm bmm pow atan2 maximum minimum fmax fmin
dot vdot outer cross hypot linear mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy
binary_cross_entropy_with_logits kl_div cosine_similarity pairwise_distance where remainder fmod
xlogy copysign lerp logaddexp logaddexp2 conv1d conv2d prelu cdist dist grid_sample mv ger inner tensordot vecdot
kron""".split()

# Ops that add a product of two operands to a base, `op(base, a, b)` (`addmm(bias, x, w)`): the
# base is only added, and is measured as a constant. Measured like a binary op on `a` and `b`,
# and marked `base_first`: the table's `self` and `other` are the call's second and third
# operands (`torch.addmm(bias, x, w)`, `bias.addmm(x, w)`).
BASED = "addmm addmv addr baddbmm addbmm addcmul addcdiv".split()
BINARY += BASED

# Ops that combine a source into `self` at indices: `op(self, dim, index, source, *extra)`
# (the method form `self.op(dim, index, source, ...)`), keyed to the source's keyword. Measured
# as `indexed`: `self` is the first operand, `other` the source. (`scatter_reduce` and
# `index_reduce` save self, source and result whatever `reduce=` and `include_self=` say:
# measured for every reduction with torch 2.15.)
INDEXED = {
    "scatter": ("src", ()), "scatter_add": ("src", ()), "scatter_reduce": ("src", ("amax",)),
    "index_add": ("source", ()), "index_copy": ("source", ()),
    "index_reduce": ("source", ("amax",)),
}

# Decompositions and other ops with several outputs (keyed by their last name: `torch.svd` and
# `torch.linalg.svd` alike), each output measured on its own: `saved[k]` is whether writing
# output `k` in place makes backward raise, `grad[k]` whether it requires grad (not pivots or an
# error code); `self` whether writing the input does. Given what they are used on: a symmetric
# positive definite matrix where the op needs one. (Not `lu`: `torch.linalg.lu` returns
# `(P, L, U)`, `torch.lu` and `Tensor.lu` `(LU, pivots)`, under one last name.)
def _spd(t):
    return t @ t.mT + 3 * torch.eye(t.shape[-1])


SEVERAL = {
    "svd": (torch.linalg.svd, None),
    "qr": (torch.linalg.qr, None),
    "eigh": (torch.linalg.eigh, _spd),
    "eig": (torch.linalg.eig, _spd),
    "slogdet": (torch.linalg.slogdet, _spd),
    "lu_factor": (torch.linalg.lu_factor, _spd),
    "cholesky_ex": (torch.linalg.cholesky_ex, _spd),
    "inv_ex": (torch.linalg.inv_ex, _spd),
}


def measure_several(f, prep):
    def build():
        torch.manual_seed(0)
        x = (torch.rand(3, 3) * 0.6 + 0.2).requires_grad_() * 1.0
        x = prep(x) if prep is not None else x
        return x, tuple(f(x))

    def backward_raises(outs):
        grads = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        try:
            sum((o.real if o.is_complex() else o).sum() for o in grads).backward()
        except RuntimeError as e:
            return INPLACE_ERR in str(e)
        return False

    saved, grad = [], []
    for k in range(len(build()[1])):
        x, outs = build()
        grad.append(bool(isinstance(outs[k], torch.Tensor) and outs[k].requires_grad))
        # (An output without grad, pivots, may be saved all the same: `lu_factor`'s are.)
        outs[k].mul_(1)
        saved.append(backward_raises(outs))
    x, outs = build()
    x.mul_(1)
    return {"saved": saved, "grad": grad, "self": backward_raises(outs)}


# Reductions whose `dim=` overload returns (values, indices) and saves only the indices.
UNARY_DIM = "max min median mode kthvalue sort topk cummax cummin amax amin logsumexp std var norm prod".split()
DIM_ARGS = {"kthvalue": (1, 0), "topk": (1, 0), "norm": (2, 0)}

MODULES = """Sigmoid Tanh ReLU Softmax LogSoftmax GELU SiLU ELU SELU CELU LeakyReLU Hardtanh ReLU6
Softplus Mish Hardsigmoid Hardswish LogSigmoid Softsign Tanhshrink Softshrink Hardshrink Threshold
PReLU Linear Conv1d Conv2d BatchNorm1d BatchNorm2d LayerNorm GroupNorm Dropout Identity Flatten
GLU Softmin RReLU RNN LSTM GRU RNNCell LSTMCell GRUCell Embedding Bilinear
Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d BatchNorm3d InstanceNorm1d InstanceNorm2d
InstanceNorm3d LocalResponseNorm MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d
AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d
ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d
ZeroPad1d ZeroPad2d ConstantPad1d ConstantPad2d ConstantPad3d CircularPad1d CircularPad2d
Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle ChannelShuffle
Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout Softmax2d Unflatten
MultiheadAttention RMSNorm""".split()
# Loss modules, called with an input and a target (`criterion(logits, labels)`).
LOSSES = """MSELoss L1Loss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss KLDivLoss
CrossEntropyLoss NLLLoss SoftMarginLoss MultiLabelSoftMarginLoss PoissonNLLLoss
HingeEmbeddingLoss MultiMarginLoss""".split()
MODULES += LOSSES


def loss_target(name, shape):
    """A target for loss `name` and an input of `shape` (class ids, signs, or values in (0, 1))."""
    if name in ("CrossEntropyLoss", "NLLLoss", "MultiMarginLoss"):
        return torch.tensor([0, 2])[: shape[0]]
    if name in ("SoftMarginLoss", "HingeEmbeddingLoss"):
        return torch.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
    return torch.rand(shape) * 0.6 + 0.2

MODULE_ARGS = {
    "Softmax": dict(dim=-1), "LogSoftmax": dict(dim=-1), "Softmin": dict(dim=-1),
    "Threshold": dict(threshold=0.5, value=0.0), "Linear": (3, 3), "Conv1d": (2, 2, 1),
    "Conv2d": (2, 2, 1), "BatchNorm1d": (3,), "BatchNorm2d": (2,), "LayerNorm": (3,),
    "GroupNorm": (1, 2), "Dropout": dict(p=0.5), "RReLU": dict(),
    "RNN": (3, 3), "LSTM": (3, 3), "GRU": (3, 3), "RNNCell": (3, 3), "LSTMCell": (3, 3),
    "GRUCell": (3, 3), "Embedding": (10, 3), "Bilinear": (3, 3, 2), "MultiheadAttention": (4, 2),
    "Conv3d": (2, 2, 1), "ConvTranspose1d": (2, 2, 1), "ConvTranspose2d": (2, 2, 1),
    "ConvTranspose3d": (2, 2, 1), "BatchNorm3d": (2,), "InstanceNorm1d": (2,),
    "InstanceNorm2d": (2,), "InstanceNorm3d": (2,), "LocalResponseNorm": (2,),
    "Upsample": dict(scale_factor=2), "UpsamplingNearest2d": dict(scale_factor=2),
    "UpsamplingBilinear2d": dict(scale_factor=2), "PixelShuffle": (2,), "PixelUnshuffle": (2,),
    "ChannelShuffle": (2,), "Dropout1d": dict(p=0.5), "Dropout2d": dict(p=0.5),
    "Dropout3d": dict(p=0.5), "AlphaDropout": dict(p=0.5), "FeatureAlphaDropout": dict(p=0.5),
    "Unflatten": (1, (3, 1)), "RMSNorm": (3,),
    **{f"{k}{d}d": (2,) for k in ("MaxPool", "AvgPool") for d in (1, 2, 3)},
    **{f"Adaptive{k}Pool{d}d": (2,) for k in ("Avg", "Max") for d in (1, 2, 3)},
    **{f"{k}Pad{d}d": (1,) for k in ("Reflection", "Replication", "Zero", "Circular")
       for d in (1, 2, 3)},
    **{f"ConstantPad{d}d": (1, 0.5) for d in (1, 2, 3)},
}
# Inputs by the number of spatial dimensions a module's name ends with (`...2d`: (N, C, H, W)).
SPATIAL_SHAPE = {"1d": (1, 2, 4), "2d": (1, 4, 4, 4), "3d": (1, 2, 4, 4, 4)}
# Modules the one-input call cannot measure: `Embedding` takes indices (what it saves is
# modelled from its ids), `Bilinear` takes two inputs (taken to save nothing).
UNMEASURED_MODULES = {"Embedding", "Bilinear"}

MODULE_SHAPE = {
    "Conv1d": (2, 2, 3), "Conv2d": (1, 2, 3, 3), "BatchNorm2d": (2, 2, 3, 3),
    "InstanceNorm1d": (2, 2, 4), "InstanceNorm2d": (2, 2, 3, 3), "InstanceNorm3d": (2, 2, 3, 3, 3),
    "BatchNorm3d": (2, 2, 3, 3, 3), "Conv3d": (1, 2, 3, 3, 3), "ConvTranspose2d": (1, 2, 3, 3),
    "LocalResponseNorm": (1, 2, 3, 3), "Upsample": (1, 2, 3, 3),
    "UpsamplingNearest2d": (1, 2, 3, 3), "UpsamplingBilinear2d": (1, 2, 3, 3),
    "GroupNorm": (2, 2, 3, 3), "BatchNorm1d": (2, 3, 4), "GLU": (2, 4),
    "PixelShuffle": (1, 4, 2, 2), "PixelUnshuffle": (1, 2, 4, 4), "ChannelShuffle": (1, 4, 2, 2),
    "Dropout1d": (2, 3, 4), "Dropout2d": (2, 3, 4, 4), "Dropout3d": (2, 3, 4, 4, 4),
    "FeatureAlphaDropout": (2, 3, 4, 4), "Softmax2d": (1, 2, 3, 3),
    # Recurrent layers on a batch, `(seq, batch, feature)` (the default `batch_first=False`):
    # an unbatched input's output is a view (squeezed back), which would hide what is saved.
    "RNN": (5, 2, 3), "LSTM": (5, 2, 3), "GRU": (5, 2, 3),
    "MultiheadAttention": (5, 2, 4),
}
# Called as self-attention, `attn(x, x, x)`.
ATTENTION = {"MultiheadAttention"}


def call_module(m, cls_name, x, shape):
    """A module called on input `x` as code calls it (a loss with a target; attention as
    self-attention)."""
    if cls_name in LOSSES:
        return m(x, loss_target(cls_name, shape))
    if cls_name in ATTENTION:
        return m(x, x, x)
    return m(x)
EXTRA = {  # extra positional args some ops need
    "softmax": (-1,), "log_softmax": (-1,), "cumsum": (0,), "cumprod": (0,), "logsumexp": (0,),
    "glu": (), "threshold": (0.5, 0.0), "layer_norm": ((3,),), "cummax": (0,), "cummin": (0,),
    "topk": (1,), "amax": (0,), "amin": (0,), "threshold_": (0.5, 0.0), "clamp_": (0.3, 0.6),
    "clamp": (0.3, 0.6), "clip": (0.3, 0.6), "clamp_min": (0.3,), "clamp_max": (0.6,),
    "clip_": (0.3, 0.6), "max_pool2d": (2,), "avg_pool2d": (2,), "adaptive_avg_pool2d": (2,), "adaptive_max_pool2d": (2,),
    # (Adaptive pools to a size other than 1: pooling to 1 is a mean, which saves nothing.)
    "max_pool1d": (2,), "avg_pool1d": (2,), "adaptive_avg_pool1d": (2,),
    "adaptive_max_pool1d": (2,),
    "interpolate": (None, 2.0, "bilinear"), "pixel_shuffle": (2,), "local_response_norm": (2,),
    "group_norm": (1,), "softmin": (-1,), "rms_norm": ((3,),),
    "batch_norm": (None, None, None, None, True), "logcumsumexp": (0,), "renorm": (2, 0, 0.5), "gather": (1, torch.tensor([[0, 2], [1, 1]])),
}
# Inputs some ops need made from the measured tensor (which is then the op's input, written in
# place by the measure): a symmetric positive definite matrix for `cholesky`, an invertible one
# for `inv` and `det`.
PREP = {
    # (The inverse transforms are given what they are used on: a spectrum, complex.)
    **{n: (lambda t: torch.complex(t, t * 0.5)) for n in
       ("ifft", "ifft2", "ifftn", "irfft", "irfft2", "irfftn", "hfft")},
    "cholesky": lambda t: t @ t.mT * 1.0 + 3 * torch.eye(3),
    "inv": lambda t: t + 3 * torch.eye(3),
    "inverse": lambda t: t + 3 * torch.eye(3),
    "det": lambda t: t + 3 * torch.eye(3),
    "eigvalsh": lambda t: t @ t.mT + 3 * torch.eye(3),
    "eigvals": lambda t: t @ t.mT + 3 * torch.eye(3),
}
# Ops called with more operands than the measured one: the others are tensors of their own that
# require grad (`scaled_dot_product_attention(q, k, v)` measured on `q`).
CALL = {
    # (`torch.cholesky` is removed; `torch.linalg.cholesky` is the op.)
    "cholesky": torch.linalg.cholesky,
    # (`torch.batch_norm` and `torch.instance_norm` take other arguments: the functional ones.)
    "batch_norm": F.batch_norm,
    "instance_norm": F.instance_norm,
    "scaled_dot_product_attention": lambda q: F.scaled_dot_product_attention(
        q, torch.rand(1, 4, 3).requires_grad_(), torch.rand(1, 4, 3).requires_grad_()),
}
# Input shapes of the unary ops that need more dimensions than (2, 3).
UNARY_SHAPE = {
    "max_pool1d": (1, 2, 4), "avg_pool1d": (1, 2, 4), "adaptive_avg_pool1d": (1, 2, 3),
    "adaptive_max_pool1d": (1, 2, 3),
    "max_pool2d": (1, 2, 4, 4),
    "avg_pool2d": (1, 2, 4, 4), "adaptive_avg_pool2d": (1, 2, 3, 3),
    "adaptive_max_pool2d": (1, 2, 3, 3), "interpolate": (1, 2, 3, 3), "pixel_shuffle": (1, 4, 2, 2),
    "local_response_norm": (1, 2, 3, 3), "group_norm": (2, 2, 3),
    "cholesky": (3, 3), "inv": (3, 3), "inverse": (3, 3), "instance_norm": (2, 2, 3), "det": (3, 3), "matrix_exp": (3, 3),
    "svdvals": (3, 3), "eigvalsh": (3, 3), "eigvals": (3, 3),
    "scaled_dot_product_attention": (1, 2, 3), "glu": (2, 4),
    "fft2": (2, 3, 4), "ifft2": (2, 3, 4), "rfft2": (2, 3, 4), "irfft2": (2, 3, 4),
}


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return getattr(out, "values", None)


def raises_after(build, write, inplace=False):
    """build() -> (output, tensors dict); write(name, tensors, out) writes in place; returns
    True when backward raises the in-place error, False when it runs, None when not applicable."""
    torch.manual_seed(0)
    try:
        out, ts = build()
        out = first_tensor(out)
        if out is None or not out.requires_grad or out.grad_fn is None:
            return None
        inputs = [t for t in ts.values() if isinstance(t, torch.Tensor)]
        shares = any(out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
                     for t in inputs)
        if shares and not inplace:
            return None  # views share the input's storage: not an op that saves anything
        # (A result that is a view of an intermediate (`max_pool1d` pools an unsqueezed copy and
        # squeezes the result) is the op's own.)
        write(ts, out)
    except Exception:
        return None
    try:
        out.float().sum().backward()
    except RuntimeError as e:
        return INPLACE_ERR in str(e)
    return False


def saved_attrs(out):
    out = first_tensor(out)
    fn = getattr(out, "grad_fn", None)
    if fn is None:
        return []
    return sorted(a for a in dir(fn) if a.startswith("_saved_") and isinstance(
        getattr(fn, a, None), torch.Tensor))


def leafs(shape=(2, 3)):
    a0 = (torch.rand(shape) * 0.6 + 0.2).requires_grad_()
    return a0, a0 * 1.0  # a0 is a leaf; a0 * 1.0 saves nothing and may be written in place


def measure_unary(f, extra=(), shape=(2, 3), prep=None):
    def build():
        _, x = leafs(shape)
        if prep is not None:
            x = prep(x)
        return f(x, *extra), {"self": x}
    flags = {}
    for name in ("result", "self"):
        def write(ts, out, name=name):
            (out if name == "result" else ts[name]).data  # noqa: B018 (touch)
            (out if name == "result" else ts[name]).mul_(1)
        # (An in-place kernel, `relu_`, returns its input.)
        r = raises_after(build, write, inplace=f.__name__.endswith("_"))
        if r is None:
            return None
        flags[name] = r
    try:
        torch.manual_seed(0)
        _, x = leafs(shape)
        if prep is not None:
            x = prep(x)
        flags["saved_attrs"] = saved_attrs(f(x, *extra))
    except Exception:
        flags["saved_attrs"] = []
    return flags


def binary_config(f, cfg):
    """cfg: tensor_tensor, tensor_const, const_tensor, tensor_scalar, scalar_tensor."""
    def make(kind):
        if kind == "tensor":
            return leafs()[1]
        if kind == "const":
            return torch.rand(2, 3) * 0.6 + 0.2
        return 2.0

    kinds = cfg.split("_")

    def shaped(t, how):
        """`t` reshaped as the op needs, still a tensor of its own (written by the measure)."""
        if not isinstance(t, torch.Tensor):
            return t
        return how(t) * 1.0 if t.requires_grad else how(t).clone()

    op = f.__name__

    def build():
        a, b = make(kinds[0]), make(kinds[1])
        if op in ("mm", "matmul", "addmm"):
            b = shaped(b, lambda t: t.t())
        if op in ("bmm", "baddbmm", "addbmm"):
            a = shaped(a, lambda t: t.unsqueeze(0))
            b = shaped(b, lambda t: t.t().unsqueeze(0))
        if op in ("dot", "vdot", "outer", "ger", "addr"):
            a = shaped(a, lambda t: t.flatten())
            b = shaped(b, lambda t: t.flatten())
        if op in ("mv", "addmv"):
            b = shaped(b, lambda t: t[0])
        if op in BASED:
            # The base, of the result's shape.
            base = {"addmm": (2, 2), "addmv": (2,), "addr": (6, 6), "baddbmm": (1, 2, 2),
                    "addbmm": (2, 2)}.get(op, (2, 3))
            return f(torch.rand(base), a, b), {"self": a, "other": b}
        if f in (torch.cross, torch.Tensor.cross):
            a = a[:, :3] * 1.0 if isinstance(a, torch.Tensor) else a
        if f is torch.where:
            return torch.where(torch.tensor([[True, False, True]] * 2), a, b), {"self": a, "other": b}
        if f in (torch.lerp, torch.Tensor.lerp):
            return f(a, b, 0.3), {"self": a, "other": b}
        if f is F.conv1d:
            return f(a.reshape(1, 2, 3), b.reshape(3, 2, 1)), {"self": a, "other": b}
        if f is F.conv2d:
            return f(a.reshape(1, 1, 2, 3), b.reshape(6, 1, 1, 1)), {"self": a, "other": b}
        if f is F.grid_sample:
            # A (1, 1, 2, 3) image sampled at a (1, 3, 1, 2) grid.
            return f(a.reshape(1, 1, 2, 3), b.reshape(1, 3, 1, 2), align_corners=False), {"self": a, "other": b}
        if f is F.prelu:
            return f(a, b.flatten()[:1] * 1.0 if b.requires_grad else b.flatten()[:1]), {"self": a, "other": b}
        return f(a, b), {"self": a, "other": b}

    flags = {}
    names = ["result"] + [n for n, k in zip(("self", "other"), kinds) if k != "scalar"]
    for name in names:
        def write(ts, out, name=name):
            t = out if name == "result" else ts[name]
            if not isinstance(t, torch.Tensor):
                raise TypeError
            t.mul_(1)
        r = raises_after(build, write)
        if r is None:
            return None
        flags[name] = r
    return flags


def measure_indexed(name, extra):
    """What `self.op(0, index, source, *extra)` saves, and its in-place `op_` (result, source)."""
    def build(inplace=False):
        def run():
            _, s = leafs((4,))
            _, src = leafs((4,))
            index = torch.tensor([0, 1, 1, 3])
            out = getattr(s, name + ("_" if inplace else ""))(0, index, src, *extra)
            return out, {"self": s, "other": src}
        return run

    flags = {}
    for which in ("result", "self", "other"):
        def write(ts, out, which=which):
            (out if which == "result" else ts[which]).mul_(1)
        r = raises_after(build(), write)
        if r is None:
            return None
        flags[which] = r
    # The in-place `op_` saves what the op does (its new value as the result, the source),
    # which is how the analyzer reads this entry for both forms.
    for which in ("result", "other"):
        def write(ts, out, which=which):
            (out if which == "result" else ts[which]).mul_(1)
        if raises_after(build(inplace=True), write, inplace=True) != flags[which]:
            raise SystemExit(f"gen_op_table: {name}_ saves its {which} unlike {name}")
    return flags


def forms(name):
    out = ["linalg"] if hasattr(torch.linalg, name) else []
    if callable(getattr(torch.fft, name, None)):
        out.append("fft")
    if hasattr(torch.special, name):
        out.append("special")
    if hasattr(torch, name) and callable(getattr(torch, name)):
        out.append("torch")
    if hasattr(torch.Tensor, name):
        out.append("method")
    if hasattr(F, name):
        out.append("functional")
    return out


def resolve(name):
    if name in CALL:
        return CALL[name]
    for owner in (torch, torch.Tensor, F, torch.linalg, torch.special, torch.fft):
        fn = getattr(owner, name, None)
        if callable(fn):
            return fn
    return None


def param_saved(new, shape, cls_name, param):
    """Whether the layer's backward reads parameter `param` as it was: written in place (under
    `no_grad`, as an optimizer's step does) between the call and `backward()`, it raises. With an
    input that requires grad and with one that does not: "always", "input_grad" (only when the
    input requires grad: the weight is read for the input's gradient) or "never"."""
    def raises(input_grad):
        torch.manual_seed(0)
        m = new()
        x = (torch.rand(shape) * 0.6 + 0.2).requires_grad_(input_grad)
        out = call_module(m, cls_name, x, shape)
        out = first_tensor(out)
        if out is None or not out.requires_grad:
            return False
        with torch.no_grad():
            dict(m.named_parameters())[param].add_(1.0)
        try:
            out.float().sum().backward()
        except RuntimeError as e:
            return INPLACE_ERR in str(e)
        return False
    if raises(False):
        return "always"
    return "input_grad" if raises(True) else "never"


def measure_module(cls_name):
    cls = getattr(nn, cls_name)
    args = MODULE_ARGS.get(cls_name, ())
    shape = MODULE_SHAPE.get(cls_name) or SPATIAL_SHAPE.get(cls_name[-2:], (2, 3))

    def new():
        return cls(**args) if isinstance(args, dict) else cls(*args)

    def build():
        torch.manual_seed(0)
        m = new()
        _, x = leafs(shape)
        if cls_name in LOSSES:
            # The target too: a label tensor written in place between the loss and backward.
            target = loss_target(cls_name, shape)
            return m(x, target), {"self": x, "target": target}
        return call_module(m, cls_name, x, shape), {"self": x}

    if cls_name not in UNMEASURED_MODULES:
        # A call that fails (an input of the wrong shape) would read as "saves nothing".
        try:
            build()
        except Exception as e:
            raise SystemExit(f"gen_op_table: {cls_name} could not be called: {e}")
    flags = {}
    for name in ("result", "self", "target"):
        if name == "target" and cls_name not in LOSSES:
            continue

        def write(ts, out, name=name):
            (out if name == "result" else ts[name]).mul_(1)
        raised = raises_after(build, write)
        if raised is None and name == "self" and cls_name in LOSSES:
            # (A loss whose call failed, a target of the wrong kind, would read as "saves nothing".)
            raise SystemExit(f"gen_op_table: {cls_name}(input, target) could not be measured")
        flags[name] = bool(raised)
    params = [n for n, _ in new().named_parameters()]
    flags["params"] = params
    if params and cls_name not in UNMEASURED_MODULES:
        flags["saved_params"] = {n: param_saved(new, shape, cls_name, n) for n in params}
    flags["inplace_kw"] = "inplace" in inspect.signature(cls.__init__).parameters
    if flags["inplace_kw"]:
        # Built with `inplace=True`: the in-place kernel runs, and may save its result where the
        # out-of-place one saves its input (`nn.LeakyReLU`, `nn.ELU`).
        kw = dict(args) if isinstance(args, dict) else {}

        def build_inplace():
            torch.manual_seed(0)
            m = cls(*(() if isinstance(args, dict) else args), **kw, inplace=True)
            _, x = leafs(shape)
            return m(x), {"self": x}

        def write_result(ts, out):
            out.mul_(1)
        flags["inplace_result"] = bool(raises_after(build_inplace, write_result, inplace=True))
    return flags


# What `out=` does when an input requires grad, for every measured op in each of its function
# forms (keyed as the analyzer spells the call below `torch`: `mul`, `linalg.norm`,
# `nn.functional.normalize`): `call` (refused at the call, naming `op` in the message, which is
# not always the function's own name: `F.normalize` -> `div`, `torch.hstack` -> `cat`),
# `backward` (the call works and its result has no derivative: `backward()` through it raises
# "derivative for `op` is not implemented"), or `never` (a composite that records the copy:
# `torch.tensordot`, `torch.inner`, `torch.linalg.norm`).
JOINS = "cat concat concatenate stack hstack vstack dstack column_stack row_stack".split()
# (Ops measured for `out=` alone.)
OUT_ONLY = "diag tril triu diff index_select masked_select take".split()
OUT_EXTRA = {
    "index_select": (0, torch.tensor([1, 0])),
    "masked_select": (torch.tensor([[True, False, True], [False, True, True]]),),
    "take": (torch.tensor([0, 4]),),
}
OUT_ERR = "functions with out=... arguments don't support automatic differentiation"


def out_forms(name):
    owners = [("", torch), ("linalg.", torch.linalg), ("special.", torch.special),
              ("fft.", torch.fft), ("nn.functional.", F)]
    return [(prefix + name, getattr(owner, name)) for prefix, owner in owners
            if callable(getattr(owner, name, None))]


def out_operands(name):
    """The positional operands an op is measured with: fresh tensors that require grad."""
    def grad(*shape):
        torch.manual_seed(0)
        return (torch.rand(*shape) + 0.5).requires_grad_()
    if name in JOINS:
        return ([grad(2, 3), grad(2, 3)],)
    if name in BASED:
        if name == "addmv":
            return grad(3), grad(3, 3), grad(3)
        if name == "addr":
            return grad(3, 3), grad(3), grad(3)
        if name in ("baddbmm", "addbmm"):
            return grad(2, 3, 3) if name == "baddbmm" else grad(3, 3), grad(2, 3, 3), grad(2, 3, 3)
        return grad(3, 3), grad(3, 3), grad(3, 3)
    if name in BINARY:
        if name in ("dot", "vdot", "outer", "ger", "inner"):
            return grad(3), grad(3)
        if name in ("mv",):
            return grad(3, 3), grad(3)
        if name == "bmm":
            return grad(2, 3, 3), grad(2, 3, 3)
        return grad(3, 3), grad(3, 3)
    x = grad(*UNARY_SHAPE.get(name, (2, 3)))
    if name in PREP:
        x = PREP[name](x.detach()).requires_grad_()
    return (x, *EXTRA.get(name, OUT_EXTRA.get(name, ())))


def measure_out(fn, operands):
    def empty_like(r):
        if isinstance(r, torch.Tensor):
            return torch.empty_like(r.detach())
        if isinstance(r, (tuple, list)) and r and all(isinstance(t, torch.Tensor) for t in r):
            return tuple(torch.empty_like(t.detach()) for t in r)
        return None
    try:
        result = fn(*operands)
        out = empty_like(result)
    except Exception:
        return None
    if out is None or not first_tensor(result).requires_grad:
        return None
    try:
        made = fn(*operands, out=out)
    except TypeError:
        return None  # no `out=` in this form
    except RuntimeError as e:
        if OUT_ERR not in str(e):
            return None
        return {"raises": "call", "op": str(e).split("()")[0]}
    made = first_tensor(made)
    if made is None or not made.requires_grad:
        return None
    try:
        made.float().sum().backward()
    except RuntimeError as e:
        msg = str(e)
        if "derivative for" in msg and "is not implemented" in msg:
            return {"raises": "backward", "op": msg.split("derivative for ")[1].split(" is not")[0]}
        return None
    return {"raises": "never"}


def measure_out_args():
    table = {}
    names = sorted(set(UNARY + UNARY_DIM + BINARY + JOINS + OUT_ONLY) - set(CALL))
    for name in names:
        if name.endswith("_"):
            continue
        for key, fn in out_forms(name):
            flags = measure_out(fn, out_operands(name))
            if flags is not None:
                table[key] = flags
    return table


def main(argv):
    check = argv[:1] == ["--check"]
    path = argv[-1]
    ops = {}
    for name in UNARY:
        f = resolve(name)
        if f is None:
            continue
        flags = measure_unary(f, EXTRA.get(name, ()), UNARY_SHAPE.get(name, (2, 3)),
                              PREP.get(name))
        if flags is not None:
            ops[name] = {"forms": forms(name), "unary": flags}
    for name in UNARY_DIM:
        f = resolve(name)
        if f is None:
            continue
        flags = measure_unary(f, DIM_ARGS.get(name, (0,)))
        if flags is not None:
            ops[name + ".dim"] = {"forms": forms(name), "unary": flags}
    for name in BINARY:
        f = resolve(name)
        if f is None:
            continue
        entry = ops.setdefault(name, {"forms": forms(name)})
        for cfg in ("tensor_tensor", "tensor_const", "const_tensor", "tensor_scalar", "scalar_tensor"):
            flags = binary_config(f, cfg)
            if flags is not None:
                entry[cfg] = flags
        if len(entry) == 1:
            del ops[name]
        elif name in BASED:
            entry["base_first"] = True
    for name, (f, prep) in SEVERAL.items():
        ops.setdefault(name, {"forms": forms(name)})["outputs"] = measure_several(f, prep)
    for name, (_, extra) in INDEXED.items():
        flags = measure_indexed(name, extra)
        if flags is not None:
            ops.setdefault(name, {"forms": forms(name)})["indexed"] = flags
    modules = {n: measure_module(n) for n in MODULES if hasattr(nn, n)}
    # Every in-place method a tensor has (`add_`, `clamp_`, `uniform_`, ...): a method of that
    # shape that is not among them (`td.clear_refs_for_compile_()` of a TensorDict) is not a
    # tensor's.
    inplace_methods = sorted(n for n in dir(torch.Tensor)
                             if n.endswith("_") and not n.startswith("_"))
    table = {
        "generated_by": "tests/oracle/gen_op_table.py",
        "torch_version": torch.__version__.split("+")[0],
        "ops": ops,
        "modules": modules,
        "inplace_methods": inplace_methods,
        "out_args": measure_out_args(),
    }
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if check:
        with open(path) as fh:
            old = json.load(fh)
        if old != json.loads(text):
            diff = sorted(k for k in set(old["ops"]) | set(ops)
                          if old["ops"].get(k) != ops.get(k))
            mdiff = sorted(k for k in set(old["modules"]) | set(modules)
                           if old["modules"].get(k) != modules.get(k))
            methods = old.get("inplace_methods") != inplace_methods
            if old.get("out_args") != table["out_args"]:
                print("out= behaviour differs")
            print(f"op table differs from torch {torch.__version__}: ops {diff} modules {mdiff}"
                  f"{' in-place methods' if methods else ''}")
            return 1
        print(f"op table matches torch {torch.__version__}: {len(ops)} ops, {len(modules)} modules")
        return 0
    with open(path, "w") as fh:
        fh.write(text)
    print(f"wrote {path}: {len(ops)} ops, {len(modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
