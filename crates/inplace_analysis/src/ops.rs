//! The op table: what autograd saves for each op, measured on a real torch.
//!
//! `data/ops.json` is written by `tests/oracle/gen_op_table.py` (run by `cargo xtask gen-ops`),
//! which calls every op, writes its result or an input in place, runs `backward()` and records
//! whether the runtime raised. The analyzer embeds it. Lists that are not measured (views,
//! factories, methods that return no tensor) follow HAZARDS.md.

use rustc_hash::FxHashMap;
use serde::Deserialize;
use std::sync::LazyLock;

/// Ops of several tensor operands measured on the first one (`gen_op_table.py`'s `CALL`, and
/// the norms given statistics and affine tensors): `scaled_dot_product_attention(q, k, v)`
/// saves `q` and its result, `batch_norm(x, mean, var, w, b)` saves `x`, whatever the others
/// are.
const MEASURED_ON_FIRST: &[&str] = &[
    "scaled_dot_product_attention",
    "batch_norm",
    "instance_norm",
    "rms_norm",
    "layer_norm",
    "group_norm",
];

/// Methods that reduce a tensor to a statistic (what a normalising chain divides or shifts by).
pub const REDUCTIONS: &[&str] = &[
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "norm",
    "std",
    "var",
    "logsumexp",
    "prod",
    "median",
];

/// Torch functions that read every tensor of the list or tuple they are given.
pub const JOINS_LIST: &[&str] = &[
    "stack",
    "cat",
    "concat",
    "concatenate",
    "hstack",
    "vstack",
    "dstack",
    "column_stack",
];

/// Ops that save their source for its own gradient but are as often applied to integer tensors
/// (token ids, labels): the source is saved only when it surely requires grad (an op's result
/// over parameters), not when that is an argument's assumption.
pub const INTEGER_SOURCES: &[&str] = &["gather"];

/// Which tensors an op's backward reads: writing one of them in place after the op and then
/// calling `backward()` raises form ③.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub struct Saves {
    #[serde(default)]
    pub result: bool,
    #[serde(default, rename = "self")]
    pub input: bool,
    #[serde(default)]
    pub other: bool,
}

#[derive(Debug, Deserialize)]
pub struct OpSpec {
    pub forms: Vec<String>,
    pub unary: Option<Saves>,
    pub tensor_tensor: Option<Saves>,
    pub tensor_const: Option<Saves>,
    pub const_tensor: Option<Saves>,
    pub tensor_scalar: Option<Saves>,
    pub scalar_tensor: Option<Saves>,
    /// An op that combines a source into its first operand at indices (`scatter_reduce`,
    /// `index_add`; see [`INDEXED_SOURCE`]): `other` is the source. Its in-place form saves the
    /// same (measured by the generator).
    pub indexed: Option<Saves>,
    /// An op that adds a product to a base, `op(base, a, b)` (`addmm`, `addcmul`): the table's
    /// `self` and `other` are `a` and `b`; the base is only added.
    #[serde(default)]
    pub base_first: bool,
    /// An op with several outputs (`svd`, `qr`, `eigh`), each measured on its own.
    pub outputs: Option<Outputs>,
}

/// What an op with several outputs saves (see [`OpSpec::outputs`]).
#[derive(Debug, Deserialize)]
pub struct Outputs {
    /// Per output, whether its backward reads it (writing it in place then raises at
    /// `backward()`): `lu_factor`'s pivots are read too, though they have no grad.
    pub saved: Vec<bool>,
    /// Per output, whether it has grad (not pivots, not an error code).
    pub grad: Vec<bool>,
    /// Whether its backward reads the input.
    #[serde(rename = "self")]
    pub input: bool,
}

#[derive(Debug, Deserialize)]
pub struct ModuleSpec {
    pub result: bool,
    #[serde(rename = "self")]
    pub input: bool,
    /// A loss whose backward reads its target (`criterion(output, label)`: a label written in
    /// place before `backward()` makes it raise); measured per loss.
    #[serde(default)]
    pub target: bool,
    pub params: Vec<String>,
    pub inplace_kw: bool,
    /// Built with `inplace=True`, its in-place kernel saves its result (`nn.LeakyReLU`,
    /// `nn.ELU` do, though their out-of-place forms save the input).
    #[serde(default)]
    pub inplace_result: bool,
    /// When its backward reads each parameter as it was (written in place between the call and
    /// `backward()`, it raises), by parameter name; measured per layer.
    #[serde(default)]
    pub saved_params: FxHashMap<String, ParamSaved>,
}

/// When a layer's backward reads a parameter (see [`ModuleSpec::saved_params`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamSaved {
    /// On every call (a convolution's or a norm's weight, a `LayerNorm`'s bias, every weight
    /// of an `LSTM`).
    Always,
    /// When the input requires grad: read for the input's gradient (a `Linear`'s weight).
    InputGrad,
    /// Never (a bias added to the result; a cell's hidden weights when no state is given).
    Never,
}

#[derive(Debug, Deserialize)]
pub struct OpTable {
    pub torch_version: String,
    pub ops: FxHashMap<String, OpSpec>,
    pub modules: FxHashMap<String, ModuleSpec>,
    /// Every in-place method of `torch.Tensor` (`add_`, `clamp_`, `uniform_`, ...), sorted.
    pub inplace_methods: Vec<String>,
    /// What `out=` does when an input requires grad, by the call's path below `torch`
    /// (`mul`, `linalg.norm`, `nn.functional.normalize`).
    #[serde(default)]
    pub out_args: FxHashMap<String, OutArg>,
}

/// What an op called with `out=` does when one of its inputs requires grad (measured).
#[derive(Debug, Clone, Deserialize)]
pub struct OutArg {
    pub raises: OutRaises,
    /// The op the error names: `div` for `F.normalize`, `aten::softmax` for a missing
    /// derivative.
    pub op: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutRaises {
    /// Refused at the call: "`op`(): functions with out=... arguments don't support automatic
    /// differentiation".
    Call,
    /// The call works; `backward()` through its result raises "derivative for `op` is not
    /// implemented".
    Backward,
    /// The call records a copy autograd follows (a composite: `tensordot`, `linalg.norm`).
    Never,
}

/// How an argument takes part in an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A tensor that requires grad (or may).
    Grad,
    /// A tensor that does not require grad.
    Const,
    /// A Python number or anything that is no tensor.
    Scalar,
}

static TABLE: LazyLock<OpTable> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../data/ops.json")).expect("embedded op table is valid")
});

pub fn table() -> &'static OpTable {
    &TABLE
}

impl OpTable {
    /// Whether `torch.Tensor` has an in-place method of this name.
    pub fn is_inplace_method(&self, name: &str) -> bool {
        self.inplace_methods
            .binary_search_by(|m| m.as_str().cmp(name))
            .is_ok()
    }

    /// The out-of-place name of a tensor's in-place method (`add` of `add_`); `None` for a name
    /// no tensor method has (`clear_refs_for_compile_` of a TensorDict).
    pub fn inplace_method_base<'n>(&self, name: &'n str) -> Option<&'n str> {
        self.is_inplace_method(name)
            .then(|| name.strip_suffix('_'))
            .flatten()
    }

    /// What `out=` does in a call of `path` (below `torch`) when an input requires grad.
    pub fn out_arg(&self, path: &str) -> Option<&OutArg> {
        self.out_args.get(path)
    }

    pub fn op(&self, name: &str) -> Option<&OpSpec> {
        self.ops.get(name)
    }

    /// What `name` saves when called with arguments of these kinds (first two tensor slots).
    pub fn saves(&self, name: &str, a: ArgKind, b: Option<ArgKind>) -> Saves {
        let Some(spec) = self.ops.get(name) else {
            return Saves::default();
        };
        if let Some(s) = spec.indexed {
            return s;
        }
        // (Of an op with several outputs: the first output and the input.)
        if let (Some(o), ArgKind::Grad) = (&spec.outputs, a) {
            return Saves {
                result: o.saved.first() == Some(&true) && o.grad.first() == Some(&true),
                input: o.input,
                other: false,
            };
        }
        use ArgKind::*;
        let pick = match (a, b) {
            (Grad, Some(_)) if MEASURED_ON_FIRST.contains(&name) => spec.unary,
            (Grad, None) | (Grad, Some(Scalar)) if spec.unary.is_some() && b.is_none() => {
                spec.unary
            }
            (Grad, Some(Grad)) => spec.tensor_tensor,
            (Grad, Some(Const)) => spec.tensor_const,
            (Const, Some(Grad)) => spec.const_tensor,
            (Grad, Some(Scalar)) => spec.tensor_scalar.or(spec.unary),
            (Scalar, Some(Grad)) => spec.scalar_tensor,
            (Grad, None) => spec.unary.or(spec.tensor_scalar),
            _ => None,
        };
        pick.unwrap_or_default()
    }

    pub fn module(&self, class: &str) -> Option<&ModuleSpec> {
        self.modules.get(class)
    }
}

/// Methods and functions whose result is a view: it shares storage and version counter.
pub fn is_view_op(name: &str) -> bool {
    WHOLE_VIEWS.contains(&name) || PIECE_VIEWS.contains(&name)
}

/// View ops (and view attributes) that show every element of their input, rearranged: a write
/// into any part of the input is seen through them.
pub const WHOLE_VIEWS: &[&str] = &[
    "view",
    "view_as",
    "t",
    "transpose",
    "permute",
    "unsqueeze",
    "squeeze",
    "expand",
    "expand_as",
    "broadcast_to",
    "reshape",
    "flatten",
    "unflatten",
    "movedim",
    "moveaxis",
    "swapaxes",
    "swapdims",
    "alias",
    "T",
    "mT",
    "H",
    "mH",
];

/// View ops (and view attributes) whose result is taken not to be laid out in order: its
/// elements are rearranged or repeated (`x.t()`, `x.permute(...)`, `x.expand(...)`; not where a
/// dimension has size 1, which sizes do not tell here).
pub const STRIDED_VIEWS: &[&str] = &[
    "t",
    "transpose",
    "permute",
    "movedim",
    "moveaxis",
    "swapaxes",
    "swapdims",
    "expand",
    "expand_as",
    "broadcast_to",
    "T",
    "mT",
    "H",
    "mH",
];

/// View ops that show a piece of their input.
pub const PIECE_VIEWS: &[&str] = &[
    "narrow",
    "select",
    "diagonal",
    "unbind",
    "split",
    "chunk",
    "as_strided",
    "unfold",
    "real",
    "imag",
    "detach",
    "view_as_real",
    "view_as_complex",
    "tensor_split",
    "hsplit",
    "vsplit",
    "split_with_sizes",
    "indices",
    "values",
];

/// View ops that give several views at once (a list of them).
pub const SPLITS: &[&str] = &[
    "unbind",
    "split",
    "chunk",
    "tensor_split",
    "split_with_sizes",
    "hsplit",
    "vsplit",
];

/// Ops that, given `out=`, do not refuse an input that requires grad (measured with torch 2.15),
/// besides those of [`INDEX_RESULT`]: their result has no gradient.
pub const NO_GRAD_OUT: &[&str] = &["histc", "floor_divide", "isin", "randperm"];

/// Methods that draw from a value no tensor is: a distribution's `sample()` (`sample_n`), which
/// `torch.distributions` runs under `no_grad` (`rsample()` is the differentiable draw). The
/// result never requires grad, whatever history the distribution has.
pub const NO_GRAD_DRAWS: &[&str] = &["sample", "sample_n"];

/// Ops whose result holds integers or booleans: it never requires grad, whatever the inputs.
pub const INDEX_RESULT: &[&str] = &[
    "argmax",
    "argmin",
    "argsort",
    "one_hot",
    "nonzero",
    "argwhere",
    "bucketize",
    "searchsorted",
    "count_nonzero",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "isnan",
    "isinf",
    "isfinite",
    "isclose",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "long",
    "int",
    "bool",
    "byte",
    "short",
];

/// The fields of the named tuples ops with several outputs return, by position:
/// `x.max(dim=1).values`, `torch.linalg.svd(a).U` (`torch.svd`'s third is `V`), `.Q`/`.R`
/// of `qr`, `.eigenvalues`/`.eigenvectors` of `eigh`/`eig`, `.logabsdet` of `slogdet`, `.LU`/
/// `.pivots` of `lu_factor`, `.L`/`.info` of `cholesky_ex`, `.inverse` of `inv_ex`.
pub fn result_field(name: &str) -> Option<usize> {
    Some(match name {
        "values" | "U" | "Q" | "eigenvalues" | "sign" | "LU" | "L" | "inverse" => 0,
        "indices" | "S" | "R" | "eigenvectors" | "logabsdet" | "pivots" | "info" => 1,
        "Vh" | "V" => 2,
        _ => return None,
    })
}

/// Whether `name` is the in-place form of a function of a tensor's values alone (`tanh_`,
/// `sigmoid_`, `clamp_`, `F.leaky_relu_`): its base is a measured unary op that takes no second
/// tensor. Used inline as a value (`o * c.tanh_()`), it reads as its out-of-place twin.
pub fn is_value_function_inplace(name: &str) -> bool {
    name.strip_suffix('_')
        .and_then(|base| table().op(base))
        .is_some_and(|s| {
            s.unary.is_some()
                && [
                    s.tensor_tensor,
                    s.tensor_const,
                    s.const_tensor,
                    s.tensor_scalar,
                ]
                .iter()
                .all(Option::is_none)
                && s.scalar_tensor.is_none()
                && s.indexed.is_none()
        })
}

/// Ops that return `(values, indices)`: always, or (the others) when given a dimension.
pub const VALUES_INDICES_ALWAYS: &[&str] =
    &["topk", "sort", "kthvalue", "mode", "cummax", "cummin"];
pub const VALUES_INDICES_WITH_DIM: &[&str] = &["max", "min", "median", "nanmedian"];

/// The method names a module's data arguments come in through (its activations are made
/// there).
pub fn is_forward_name(name: &str) -> bool {
    matches!(name, "forward" | "__call__" | "_forward" | "_forward_impl")
}

/// NumPy methods that return a view of the array, not a copy (of a row a dataset keeps,
/// contiguous: `reshape` and `ravel` copy nothing either).
pub const NUMPY_VIEW_METHODS: &[&str] = &[
    "transpose",
    "reshape",
    "squeeze",
    "swapaxes",
    "view",
    "ravel",
];

/// NumPy functions that return a view of their first argument, an array.
pub const NUMPY_VIEW_FUNCTIONS: &[&str] = &[
    "transpose",
    "moveaxis",
    "rollaxis",
    "swapaxes",
    "expand_dims",
    "squeeze",
    "reshape",
    "ravel",
    "asarray",
    "atleast_3d",
];

/// A size a layer's constructor keeps: its position, its name, its default when it has one.
pub type LayerSize = (usize, &'static str, Option<i64>);

/// The sizes a torch layer's constructor keeps as attributes of the same name (`rnn.num_layers`,
/// `fc.in_features`), by class.
pub const LAYER_SIZES: &[(&[&str], &[LayerSize])] = &[
    (
        &["RNN", "LSTM", "GRU"],
        &[
            (0, "input_size", None),
            (1, "hidden_size", None),
            (2, "num_layers", Some(1)),
        ],
    ),
    (
        &["RNNCell", "LSTMCell", "GRUCell"],
        &[(0, "input_size", None), (1, "hidden_size", None)],
    ),
    (
        &["Linear"],
        &[(0, "in_features", None), (1, "out_features", None)],
    ),
    (
        &["Bilinear"],
        &[
            (0, "in1_features", None),
            (1, "in2_features", None),
            (2, "out_features", None),
        ],
    ),
    // (`nn.LazyLinear(out_features)`: its `in_features` is known at the first call.)
    (&["LazyLinear"], &[(0, "out_features", None)]),
    (
        &[
            "Conv1d",
            "Conv2d",
            "Conv3d",
            "ConvTranspose1d",
            "ConvTranspose2d",
            "ConvTranspose3d",
        ],
        &[(0, "in_channels", None), (1, "out_channels", None)],
    ),
    (
        &[
            "BatchNorm1d",
            "BatchNorm2d",
            "BatchNorm3d",
            "InstanceNorm1d",
            "InstanceNorm2d",
        ],
        &[(0, "num_features", None)],
    ),
    (
        &["Embedding"],
        &[(0, "num_embeddings", None), (1, "embedding_dim", None)],
    ),
];

/// Modules whose weights are saved for backward even when no input requires grad: the steps of
/// a whole-sequence RNN feed each other (measured with torch 2.15: writing `weight_hh_l0` in place
/// after the call makes `backward()` raise; the `*Cell` modules do not).
pub const SAVES_WEIGHTS_ALWAYS: &[&str] = &["RNN", "LSTM", "GRU"];

/// Recurrent modules, which save the state they are given (the second argument or `hx=`; both
/// tensors of an LSTM's `(h, c)`) for their backward: measured with torch 2.15, writing the
/// state in place after the call makes `backward()` raise for each of them, whether or not the
/// input or the state requires grad (the weights' gradients read it), also with
/// `batch_first=True`, two layers or `bidirectional=True`. With frozen weights only `LSTM` (both
/// states) and `LSTMCell` (its cell state) still save them.
pub const SAVES_STATE: &[&str] = &["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"];

/// Modules whose input is indices, which never require grad: their weights are never saved
/// for an input's gradient (an embedding's backward reads the indices only).
pub const INDEX_INPUT: &[&str] = &["Embedding", "EmbeddingBag"];

/// Index and target operands an op's backward reads, by op: their position in the function
/// form (`torch.gather(input, dim, index)`; a method's receiver is position 0) and keyword.
/// Measured with torch 2.15: writing the index in place after the op (`labels[labels ==
/// -100] = 0` after `F.cross_entropy(logits, labels)`) makes `backward()` raise with
/// `[torch.LongTensor [6]] is at version 1`. (`take_along_dim` saves an expanded copy.)
/// These are tensor ops (`torch.gather`, `x.gather`, `torch.embedding(weight, indices)`); the
/// functional ones follow.
pub const INDEX_OPERANDS: &[(&str, usize, &str)] = &[
    ("gather", 2, "index"),
    ("index_select", 2, "index"),
    ("take", 1, "index"),
    ("masked_select", 1, "mask"),
    ("embedding", 1, "indices"),
    ("masked_fill", 1, "mask"),
    ("masked_scatter", 1, "mask"),
    // (`torch.where(condition, a, b)`; the method form `a.where(condition, b)` is not followed.)
    ("where", 0, "condition"),
    ("scatter", 2, "index"),
    ("scatter_add", 2, "index"),
    ("scatter_reduce", 2, "index"),
    ("index_reduce", 2, "index"),
    ("index_add", 2, "index"),
    ("index_fill", 2, "index"),
    ("index_copy", 2, "index"),
    ("put", 1, "index"),
    // (`x.index_put_((rows, cols), v)`: the tensors of the tuple.)
    ("index_put", 1, "indices"),
];

/// Where the source operand of an [`OpSpec::indexed`] op is: `torch.op(self, dim, index,
/// source)` (a method's receiver is position 0), or its keyword.
pub const INDEXED_SOURCE: (usize, [&str; 2]) = (3, ["src", "source"]);

/// In-place ops whose value is not the first operand after the target: the op, the value's
/// position in the function form (the target at 0) and its keyword (`x.index_put_(indices,
/// values)`, `x.masked_scatter_(mask, source)`, `x.masked_fill_(mask, v)`).
pub const VALUE_OPERANDS: &[(&str, usize, &str)] = &[
    ("index_put", 2, "values"),
    ("masked_scatter", 2, "source"),
    ("put", 2, "source"),
    ("masked_fill", 2, "value"),
    ("index_fill", 3, "value"),
];

/// The same for `torch.nn.functional` (`F.embedding(input, weight)`: its ids come first, where
/// `torch.embedding(weight, input)` has its weight).
pub const FUNCTIONAL_INDEX_OPERANDS: &[(&str, usize, &str)] = &[
    ("cross_entropy", 1, "target"),
    ("nll_loss", 1, "target"),
    ("embedding", 0, "input"),
];

/// The same for modules, by the position of the call's argument: an embedding's indices, a
/// classification loss's target.
pub const MODULE_INDEX_OPERANDS: &[(&str, usize)] = &[
    ("Embedding", 0),
    ("EmbeddingBag", 0),
    ("CrossEntropyLoss", 1),
    ("NLLLoss", 1),
];

/// A weighted embedding bag's per-sample weights (see `save_weighted_bag`): their keyword, and
/// their position in `F.embedding_bag(input, weight, offsets, max_norm, norm_type,
/// scale_grad_by_freq, mode, sparse, per_sample_weights)` and in the call of an
/// `nn.EmbeddingBag` (`bag(input, offsets, per_sample_weights)`).
pub const PER_SAMPLE_WEIGHTS: &str = "per_sample_weights";
pub const FUNCTIONAL_BAG_WEIGHTS_AT: usize = 8;
pub const MODULE_BAG_WEIGHTS_AT: usize = 2;

/// Tensor attributes (no call) that are views.
pub const VIEW_ATTRS: &[&str] = &["T", "mT", "H", "mH", "real", "imag"];

/// `torch.*` factories: they make a new leaf; `requires_grad=True` makes it require grad.
pub const FACTORIES: &[&str] = &[
    "tensor",
    "as_tensor",
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "from_numpy",
    "randperm",
    "normal",
    "Tensor",
    "FloatTensor",
    "LongTensor",
    "DoubleTensor",
    "empty_strided",
    "frombuffer",
    "asarray",
    "bernoulli",
    "multinomial",
    "tril_indices",
    "triu_indices",
    "load",
];

/// Layers autocast runs in float16 or bfloat16 (torch's lower-precision lists for CUDA and the
/// CPU): their float32 weights go in as cast copies, which is what they save.
pub const AUTOCAST_LOWER: &[&str] = &[
    "Linear",
    "LazyLinear",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "PReLU",
];

/// Tensor methods that make a new tensor of the receiver's dtype and device, with no history
/// (`logprobs.new_zeros(n)`, `w.data.new(h)`): a leaf that requires grad only where
/// `requires_grad=True` says so (measured with torch 2.15: `tmp.scatter_(1, index, v)` on
/// `x.new_zeros(...)` of a tensor that requires grad saves nothing).
pub const NEW_FACTORIES: &[&str] = &[
    "new",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty",
    "new_tensor",
    "new_empty_strided",
];

/// Methods of the op table that NumPy arrays, pandas series and frames, or SciPy's sparse
/// matrices have too: called on a value the analysis only takes for a tensor (what an unseen
/// call returned), they do not tell that it is one. Any other op of the table called as a
/// method (`deg.rsqrt()`, `x.sigmoid()`, `a.clamp(0)`) does: its result is a tensor.
pub const ARRAY_METHODS: &[&str] = &[
    // NumPy
    "sum", "mean", "max", "min", "clip", "round", "std", "var", "cumsum", "cumprod", "prod", "dot",
    "sort", // pandas
    "abs", "add", "sub", "mul", "div", "pow", "where", "median", "cummax", "cummin",
    // SciPy sparse
    "sqrt", "sign", "floor", "ceil", "maximum", "minimum", "log1p", "expm1", "sin", "tan", "tanh",
    "sinh", "trunc", "deg2rad", "rad2deg",
];

/// Tensor methods and attributes whose result is no tensor.
pub const NON_TENSOR: &[&str] = &[
    "item",
    "tolist",
    "numpy",
    "size",
    "dim",
    "numel",
    "shape",
    "dtype",
    "device",
    "is_leaf",
    "requires_grad",
    "grad_fn",
    "data_ptr",
    "element_size",
    "nelement",
    "ndim",
    "ndimension",
    "is_contiguous",
    "is_cuda",
    "stride",
    "storage_offset",
    "_version",
    "__len__",
    "is_floating_point",
    "nbytes",
    "itemsize",
    "get_device",
    "untyped_storage",
    "equal",
    "allclose",
];

/// Tensor attributes and methods that read metadata, not values.
pub const METADATA: &[&str] = &[
    "shape",
    "dtype",
    "device",
    "data_ptr",
    "size",
    "dim",
    "ndim",
    "numel",
    "_version",
    "is_leaf",
    "requires_grad",
    "grad_fn",
    // (The gradient is a tensor of its own: `x.grad` reads none of `x`'s values.)
    "grad",
    "stride",
    "is_contiguous",
    "element_size",
    "storage_offset",
    "nelement",
    "ndimension",
    "is_cuda",
    "get_device",
    "nbytes",
    "itemsize",
    "untyped_storage",
];

/// Whether attribute `attr` of a tensor reads only its metadata: `x.shape`, or a factory that
/// takes only its dtype and device (`x.new_zeros(n)`).
pub fn metadata_attr(attr: &str) -> bool {
    METADATA.contains(&attr) || attr.starts_with("new_")
}

/// Whether attribute `attr` of a tensor names an in-place method (`mul_`, not `__iadd__`) or
/// reads only its metadata: a later use of the tensor that computes nothing from its values.
pub fn inplace_or_metadata(attr: &str) -> bool {
    (attr.ends_with('_') && !attr.ends_with("__")) || metadata_attr(attr)
}

/// Whether a call of `func` (its last name) reads only the metadata of its first positional
/// argument: `torch.zeros_like(x)`, `y.view_as(x)`, `len(x)`.
pub fn metadata_arg(func: &str) -> bool {
    func.ends_with("_like")
        || matches!(
            func,
            "len" | "view_as" | "expand_as" | "reshape_as" | "type_as"
        )
}

/// Calls that take tensors for which they are, not for their values: a custom Function's
/// `ctx.mark_dirty(...)` and `ctx.mark_non_differentiable(...)`.
pub fn identity_args(func: &str) -> bool {
    matches!(func, "mark_dirty" | "mark_non_differentiable")
}

/// Module methods that return the module itself.
pub const MODULE_RETURNS_SELF: &[&str] = &[
    "to",
    "cuda",
    "cpu",
    "train",
    "eval",
    "float",
    "double",
    "half",
    "bfloat16",
    "requires_grad_",
    "apply",
    "share_memory",
    "to_empty",
    "type",
    "xpu",
    "mps",
];

/// The activations (modules and functions) that take `inplace` among their positional parameters.
pub const INPLACE_ACTIVATIONS: &[&str] = &[
    "relu",
    "relu6",
    "selu",
    "silu",
    "mish",
    "hardsigmoid",
    "hardswish",
    "leaky_relu",
    "elu",
    "celu",
    "hardtanh",
    "threshold",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
    "rrelu",
    "ReLU",
    "ReLU6",
    "SELU",
    "SiLU",
    "Mish",
    "Hardsigmoid",
    "Hardswish",
    "LeakyReLU",
    "ELU",
    "CELU",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "AlphaDropout",
    "FeatureAlphaDropout",
    "Hardtanh",
    "Threshold",
    "RReLU",
];

/// Where `inplace` stands among the positional parameters of a `torch.nn.functional` function
/// (`F.leaky_relu(x, 0.2, True)`), for the functions that have one.
pub fn functional_inplace_position(name: &str) -> Option<usize> {
    Some(match name {
        "relu" | "relu6" | "selu" | "silu" | "mish" | "hardsigmoid" | "hardswish" => 1,
        "leaky_relu" | "elu" | "celu" => 2,
        "hardtanh"
        | "threshold"
        | "dropout"
        | "dropout1d"
        | "dropout2d"
        | "dropout3d"
        | "alpha_dropout"
        | "feature_alpha_dropout" => 3,
        "rrelu" => 4,
        _ => return None,
    })
}

/// The dropout functions of `torch.nn.functional` and whether each trains by default
/// (`F.alpha_dropout(x, p)` does not). With `p` zero, or not training, they return their input
/// itself, and write nothing even with `inplace=True` (measured with torch 2.15; `dropout1d`
/// and `dropout3d` return a view of it, taken for the input itself: the same memory and
/// version counter).
pub fn functional_dropout_trains(name: &str) -> Option<bool> {
    match name {
        "dropout" | "dropout1d" | "dropout2d" | "dropout3d" => Some(true),
        "alpha_dropout" | "feature_alpha_dropout" => Some(false),
        _ => None,
    }
}

/// In-place methods that change a tensor's shape or flags, not its values (`x.unsqueeze_(0)`):
/// a later read sees the same numbers.
pub const SHAPE_ONLY_INPLACE: &[&str] = &[
    "unsqueeze_",
    "squeeze_",
    "t_",
    "transpose_",
    "swapdims_",
    "swapaxes_",
    "as_strided_",
    "resize_",
    "resize_as_",
    "requires_grad_",
    "share_memory_",
];

/// The dropout layers of `torch.nn`: `nn.Dropout(0.0)(x) is x` (see
/// [`functional_dropout_trains`]).
pub const MODULE_DROPOUTS: &[&str] = &[
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "AlphaDropout",
    "FeatureAlphaDropout",
];

/// Where `inplace` stands among the positional parameters of an `nn` module's constructor
/// (`nn.ReLU(True)`, `nn.LeakyReLU(0.2, True)`).
pub fn module_inplace_position(class: &str) -> Option<usize> {
    Some(match class {
        "ReLU" | "ReLU6" | "SELU" | "SiLU" | "Mish" | "Hardsigmoid" | "Hardswish" => 0,
        "LeakyReLU"
        | "ELU"
        | "CELU"
        | "Dropout"
        | "Dropout1d"
        | "Dropout2d"
        | "Dropout3d"
        | "AlphaDropout"
        | "FeatureAlphaDropout" => 1,
        "Hardtanh" | "Threshold" | "RReLU" => 2,
        _ => return None,
    })
}

/// `nn` modules that hold parameters although the table has no entry for them.
pub fn module_has_params(class: &str) -> bool {
    const PARAMETRIC: &[&str] = &[
        "Linear",
        "Bilinear",
        "Conv",
        "Norm",
        "Embedding",
        "LSTM",
        "GRU",
        "RNN",
        "Attention",
        "Transformer",
        "PReLU",
        "LazyLinear",
    ];
    PARAMETRIC.iter().any(|p| class.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inplace_activations_are_those_with_a_position() {
        for a in INPLACE_ACTIVATIONS {
            assert!(
                module_inplace_position(a).is_some() || functional_inplace_position(a).is_some(),
                "{a}"
            );
        }
        let modules = [
            "ReLU",
            "ReLU6",
            "SELU",
            "SiLU",
            "Mish",
            "Hardsigmoid",
            "Hardswish",
        ];
        for m in modules {
            assert!(INPLACE_ACTIVATIONS.contains(&m));
        }
    }
}

/// Which operands of `torch.einsum(equation, ...)` its backward reads as they are: `None` when
/// the equation is not one this decides (more than two operands, an ellipsis, no `->`, or not
/// as many operands as given), then every operand is taken as saved.
///
/// Two operands are contracted by a batched matrix product. An operand whose letters of one kind
/// (batch: in both operands and the output; contracted: in both, not the output; free: its own)
/// cannot be merged into one dimension as a view is first copied (permuted and reshaped), and
/// the copy is what is saved: measured with torch 2.15, `"bqhd,bkhd->bhqk"` saves neither
/// operand (the batch letters `b`, `h` are apart), `"bhqd,bhkd->bhqk"` both, `"hbqd,bhkd->bhqk"`
/// only the second (`h`, `b` in the other order than the output's), `"qbd,kbd->bqk"` both (one
/// batch letter needs no merge), `"bhqd,bkhd->bqhd"` only the first (the second's `k` is summed
/// first; with no letter to contract, the rest is a broadcast multiply). One operand (`"ii->i"`, `"bij->bji"`): a view or a reduction,
/// nothing saved.
pub fn einsum_operands(equation: &str, operands: usize) -> Option<Vec<EinsumOperand>> {
    let (ins, out) = einsum_parts(equation, operands)?;
    match ins.as_slice() {
        [_] => Some(vec![EinsumOperand::default()]),
        [a, b] => {
            let product = contracts(a, b, &out);
            let operand = |this: &str, other: &str| {
                let groups = einsum_groups(this, other, &out);
                let merged: Vec<Vec<u8>> = (groups.iter())
                    .filter(|g| product && g.chars().count() >= 2)
                    .map(|g| {
                        g.chars()
                            .filter_map(|c| this.find(c))
                            .map(|i| i as u8)
                            .collect()
                    })
                    .collect();
                // A letter of this operand alone that the output drops is summed first: what
                // goes on is that sum. Each group is one run of the operand's letters, batch
                // letters in the output's order (a group of one letter always is).
                let summed = this.chars().any(|c| !other.contains(c) && !out.contains(c));
                let runs =
                    (groups.iter()).all(|g| g.chars().count() < 2 || this.contains(g.as_str()));
                EinsumOperand {
                    saved: !summed && (!product || runs),
                    merged,
                }
            };
            Some(vec![operand(a, b), operand(b, a)])
        }
        _ => None,
    }
}

/// What [`einsum_operands`] tells of one operand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EinsumOperand {
    /// Its backward reads it as it is (no copy made on the way, where laid out in order).
    pub saved: bool,
    /// Its groups of two letters or more, merged into one dimension on the way to the product
    /// (of a two-operand einsum that contracts), each as the operand's dimensions in the order
    /// merged. A merge is a view only where each of these dimensions follows on from the one
    /// before it in memory: of an operand not laid out in order, a slice cut in the second of
    /// two merged dimensions, the merge copies, and the copy is what is saved (measured with
    /// torch 2.15: FNO's 2-D `"bixy,ioxy->boxy"` over `x_ft[:, :, :m1, :m2]` leaves the
    /// spectrum free to be written, where the 1-D `"bix,iox->box"` over `x_ft[:, :, :m]`, the
    /// 2-D over `x_ft[:, :, :m1]` and `"bnd,de->bne"` over `x[:, :, :3]` save the slice).
    pub merged: Vec<Vec<u8>>,
}

impl EinsumOperand {
    /// Whether merging its groups copies an operand laid out as `strided` says
    /// ([`crate::domain::TensorObj::strided`]): some merged dimension does not follow on from
    /// the one before it.
    pub fn copies(&self, strided: u32) -> bool {
        strided != 0
            && (self.merged.iter()).any(|g| {
                g.windows(2)
                    .any(|w| w[1] != w[0] + 1 || w[1] >= 32 || strided & (1u32 << w[1]) != 0)
            })
    }
}

/// An einsum equation without whitespace, split into its operands' letters and the output's;
/// `None` for one this does not decide (an ellipsis, no `->`, other than `operands` operands).
fn einsum_parts(equation: &str, operands: usize) -> Option<(Vec<String>, String)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (ins, out) = eq.split_once("->")?;
    if eq.contains('.')
        || !eq
            .chars()
            .all(|c| c.is_ascii_alphabetic() || ",->".contains(c))
    {
        return None;
    }
    let ins: Vec<String> = ins.split(',').map(str::to_owned).collect();
    (ins.len() == operands).then(|| (ins, out.to_owned()))
}

/// Letters in both operands but not the output are contracted by a product; with none, the
/// einsum is a broadcast multiply, which saves its operands.
fn contracts(a: &str, b: &str, out: &str) -> bool {
    a.chars().any(|c| b.contains(c) && !out.contains(c))
}

/// An operand's letters by kind: batch (in both operands and the output, in the output's
/// order), contracted (in both, not the output), free (its own).
fn einsum_groups(this: &str, other: &str, out: &str) -> [String; 3] {
    let batch: String = out
        .chars()
        .filter(|c| this.contains(*c) && other.contains(*c))
        .collect();
    let contracted: String = this
        .chars()
        .filter(|c| other.contains(*c) && !out.contains(*c))
        .collect();
    let free: String = this.chars().filter(|c| !other.contains(*c)).collect();
    [batch, contracted, free]
}

#[cfg(test)]
mod einsum_tests {
    use super::einsum_operands;
    use crate::domain::ANY_ORDER;

    fn saved(eq: &str, n: usize) -> Option<Vec<bool>> {
        Some(einsum_operands(eq, n)?.iter().map(|o| o.saved).collect())
    }

    /// Each expectation measured with torch 2.15 (write the operand in place, then backward).
    #[test]
    fn einsum_saves_operands_that_need_no_copy() {
        let cases = [
            ("bqd,bkd->bqk", [true, true]),
            ("bqhd,bkhd->bhqk", [false, false]),
            ("bhqd,bhkd->bhqk", [true, true]),
            ("bhqk,bhkd->bhqd", [true, true]),
            ("bhqk,bkhd->bqhd", [true, false]),
            ("ij,jk->ik", [true, true]),
            ("bchw,bc->bhw", [true, true]),
            ("nhwc,nhwc->nhw", [true, true]),
            ("hbqd,bhkd->bhqk", [false, true]),
            ("bqhd,bhkd->bhqk", [false, true]),
            ("qbd,kbd->bqk", [true, true]),
            ("blhd,bhde->blhe", [false, true]),
            ("bhqd,bkhd->bqhd", [true, false]),
            ("i,j->ij", [true, true]),
            ("bi,bi->b", [true, true]),
        ];
        for (eq, want) in cases {
            assert_eq!(saved(eq, 2), Some(want.to_vec()), "{eq}");
        }
        assert_eq!(saved("ii->i", 1), Some(vec![false]));
        assert_eq!(saved("...d,de->...e", 2), None);
        assert_eq!(saved("ij,jk,kl->il", 3), None);
        assert_eq!(saved("ij,jk->ik", 3), None);
    }

    /// Measured with torch 2.15 on operands not laid out in order (write the base in place,
    /// then backward). Copied (no raise): `"bixy,ioxy->boxy"` over a corner `y[:, :, :4, :4]`,
    /// `"bhqd,bhkd->bhqk"` over `y.transpose(1, 2)` or `y[:, :2]`, `"bnd,de->bne"` over
    /// `y[:, :2]`. The view saved (raise): `"bix,iox->box"` over `y[:, :, :4]`,
    /// `"bixy,ioxy->boxy"` over `y[:, :, :4]` or `y[:, :2]`, `"bnd,de->bne"` over `y[:, :, :3]`,
    /// `"bhqd,bhkd->bhqk"` over `y[:, :, :3]` or `y[..., :3]`, `"bqd,bkd->bqk"` over
    /// `y.transpose(1, 2)`, `"ij,jk->ik"` over `y.t()`.
    #[test]
    fn einsum_merges_copy_where_a_merged_dimension_is_cut() {
        let copies =
            |eq: &str, k: usize, strided: u32| einsum_operands(eq, 2).unwrap()[k].copies(strided);
        assert!(copies("bixy,ioxy->boxy", 0, 0b1100));
        assert!(copies("bhqd,bhkd->bhqk", 0, ANY_ORDER));
        assert!(copies("bhqd,bhkd->bhqk", 0, 0b10));
        assert!(copies("bnd,de->bne", 0, 0b10));
        assert!(!copies("bix,iox->box", 0, 0b100));
        assert!(!copies("bixy,ioxy->boxy", 0, 0b100));
        assert!(!copies("bixy,ioxy->boxy", 0, 0b10));
        assert!(!copies("bnd,de->bne", 0, 0b100));
        assert!(!copies("bhqd,bhkd->bhqk", 0, 0b100));
        assert!(!copies("bhqd,bhkd->bhqk", 0, 0b1000));
        assert!(!copies("bqd,bkd->bqk", 0, ANY_ORDER));
        assert!(!copies("ij,jk->ik", 0, ANY_ORDER));
        assert!(!copies("bixy,ioxy->boxy", 0, 0));
        assert!(!copies("i,j->ij", 0, ANY_ORDER));
    }
}

/// The in-place operators of Python's `operator` module and the tensor method each stands for
/// (`operator.iadd(y, 1)` and `y.__iadd__(1)` are `y.add_(1)`).
const INPLACE_OPERATORS: &[(&str, &str)] = &[
    ("iadd", "add_"),
    ("isub", "sub_"),
    ("imul", "mul_"),
    ("itruediv", "div_"),
    ("ipow", "pow_"),
    ("iand", "bitwise_and_"),
    ("ior", "bitwise_or_"),
    ("ixor", "bitwise_xor_"),
];

/// The in-place method an `operator` function stands for on a tensor (`operator.iadd` is
/// `add_`).
pub fn inplace_operator(name: &str) -> Option<&'static str> {
    INPLACE_OPERATORS
        .iter()
        .find(|(op, _)| *op == name)
        .map(|(_, m)| *m)
}

/// The in-place method an in-place operator dunder stands for (`__iadd__` is `add_`).
pub fn inplace_dunder(name: &str) -> Option<&'static str> {
    inplace_operator(name.strip_prefix("__")?.strip_suffix("__")?)
}

#[cfg(test)]
mod operator_tests {
    use super::*;

    #[test]
    fn operator_functions_and_dunders_share_one_table() {
        assert_eq!(inplace_operator("iadd"), Some("add_"));
        assert_eq!(inplace_dunder("__iadd__"), Some("add_"));
        assert_eq!(inplace_operator("iand"), Some("bitwise_and_"));
        assert_eq!(inplace_dunder("__ixor__"), Some("bitwise_xor_"));
        assert_eq!(inplace_dunder("__add__"), None);
        assert_eq!(inplace_dunder("iadd"), None);
        assert_eq!(inplace_operator("add"), None);
    }
}

#[cfg(test)]
mod array_methods_tests {
    /// Each name is an op of the table: the list only takes back what the table would say.
    #[test]
    fn every_array_method_is_a_table_op() {
        for m in super::ARRAY_METHODS {
            assert!(super::table().op(m).is_some(), "{m}");
        }
    }
}
