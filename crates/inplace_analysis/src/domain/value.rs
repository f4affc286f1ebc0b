//! Objects. One is allocated per evaluation of the expression that makes it; a name maps to a
//! small set of them (it may hold any after branches). Object properties (requires-grad, module
//! attributes) are flow-insensitive.
//!
//! A tensor belongs to a *storage* (the object id of the tensor that allocated it). Views,
//! aliases and `.detach()` share the storage and its version counter; `.data` shares the storage
//! but not the counter (`counter == false`).

use super::graph::NodeId;
use crate::ir::{ClassLoc, DefLoc, Name, Span};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::Arc;

pub(crate) type ObjId = u32;
/// The alternatives a name or expression may hold.
pub(crate) type Vals = SmallVec<[ObjId; 2]>;

/// The object standing for "anything" (allocated first by every interpreter).
pub(crate) const UNKNOWN: ObjId = 0;
/// Known not to be a tensor (numbers, strings, ...).
pub(crate) const OTHER: ObjId = 1;
pub(crate) const TRUE: ObjId = 2;
pub(crate) const FALSE: ObjId = 3;
pub(crate) const NONE: ObjId = 4;
/// A float literal zero (`0.0`): a number whose value, 0, is known (`if p > 0:`, a dropout
/// rate), while `isinstance(p, float)` holds.
pub(crate) const FLOAT_ZERO: ObjId = 5;

/// Three-valued truth, ordered `No < Maybe < Yes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Tri {
    No,
    Maybe,
    Yes,
}

impl Tri {
    pub fn is_possible(self) -> bool {
        self != Tri::No
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TensorObj {
    /// The version-counter group (object id of the tensor that allocated the memory).
    pub storage: ObjId,
    /// False for `.data` aliases: same memory, separate counter.
    pub counter: bool,
    /// A NumPy array sharing the memory (`t.numpy()`, the array given to `torch.from_numpy`),
    /// without a counter either; views of it keep this.
    pub numpy: Option<NumpyShare>,
    pub grad: Tri,
    /// A user-created tensor (or parameter) that requires grad.
    pub leaf: bool,
    /// A view of such a leaf (writing through it is form ②).
    pub view_of_leaf: bool,
    /// Where the view was taken, when this is a view.
    pub view_origin: Option<Span>,
    /// One of the views a function returning several made (`chunk`, `split`, `unbind`, rows
    /// of an iteration), a view made under `no_grad`, or a view of one: autograd refuses to
    /// write it in place while grad mode is on.
    pub refused_view: Option<RefusedView>,
    /// Made under `torch.inference_mode()` (where): an inference tensor, which torch refuses
    /// to write in place outside inference mode; its views and detached aliases are too.
    pub inference: Option<Span>,
    pub node: Option<NodeId>,
    /// Known to be a tensor (not just "maybe", as a function argument is).
    pub known: bool,
    pub origin: Span,
    /// The tensor standing for `.grad` of this one, made on first use.
    pub grad_tensor: Option<ObjId>,
    /// The tensor this one is `.detach()` of: the same memory and counter under another name,
    /// so a write through either changes what the other reads (IP402).
    pub detached_from: Option<ObjId>,
    /// When the grad is only possible: the argument it rests on (the caller must pass one that
    /// requires grad).
    pub grad_if: Option<GradIf>,
    /// When this is a view: the tensor it was taken from and which part of it it shows (a
    /// write into that part changes what a name bound to the view reads: IP402).
    pub view_of: Option<(ObjId, Part)>,
    /// A view whose elements are surely not laid out one after the other (a transpose, a
    /// permute, an expand, a subscript cutting a later dimension, `x[:, :3]`), or a view of one:
    /// `reshape`/`flatten` of it copy (measured with torch 2.15: `y.t().reshape(-1)` written in
    /// place leaves `y` at version 0), where they view a tensor laid out in order. Bit `k`: its
    /// dimension `k` does not follow on from dimension `k - 1` (a slice cut it: merging the two
    /// copies); [`ANY_ORDER`]: not known which (a transpose, or a view of such a view).
    pub strided: u32,
    /// The number of dimensions, where `strided` was computed from a known permutation of a
    /// tensor laid out in order (`x.permute(0, 2, 3, 1)`: 4, dimensions 1 and 3 cut); 0 when not
    /// known. A reshape's merged dimensions are then known to copy or view.
    pub rank: u8,
}

/// [`TensorObj::strided`] of a view whose layout is out of order in ways not followed.
pub(crate) const ANY_ORDER: u32 = u32::MAX;

/// Which part of a tensor a view shows, or an in-place write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    /// All of it (`x.view(-1)`, `x.t()`, `x[:]`; a write through the tensor itself).
    Whole,
    /// What a subscript's index selects, by the index's text: `x[..., :d]` read and
    /// `x[..., :d] = v` written are the same part.
    Index(u64),
    /// A piece a view op cuts (`narrow`, `select`, one output of `chunk`/`unbind`, a row of an
    /// iteration): which elements is not followed.
    Piece,
}

impl Part {
    /// The part a view op (or view attribute) `name` shows.
    pub fn of_view(name: &str) -> Part {
        if crate::ops::WHOLE_VIEWS.contains(&name) {
            Part::Whole
        } else {
            Part::Piece
        }
    }

    /// Whether a view showing `self` certainly sees a write into `written`: where either is
    /// the whole tensor, or both are the same index. Distinct indices are taken to be disjoint
    /// (`x[..., :d]` and `x[..., d:]`), and so are pieces (the outputs of a `chunk`).
    pub fn overlaps(self, written: Part) -> bool {
        match (self, written) {
            (Part::Whole, _) | (_, Part::Whole) => true,
            (Part::Index(a), Part::Index(b)) => a == b,
            _ => false,
        }
    }
}

/// A view autograd refuses to see written in place while grad mode is on: where it was made,
/// and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RefusedView {
    pub op: RefusedBy,
    /// The call (`qkv.chunk(3)`, `w[0]`), or the tensor iterated over.
    pub at: Span,
    /// The tensor viewed required grad (then any write raises; else one whose value does).
    pub grad: bool,
}

/// How such a view was made (measured with torch 2.15; `tensor_split`, `hsplit`, `vsplit` and
/// `unsafe_chunk` views may be written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RefusedBy {
    /// `chunk`, `split` by a size.
    Split,
    /// `split` by a list of sizes, `split_with_sizes`.
    SplitWithSizes,
    /// `unbind`.
    Unbind,
    /// Iterating over a tensor (`for row in x`, `[f(r) for r in x]`), which unbinds its first
    /// dimension. (`a, b = x` is not followed: unpacking a call's result takes it to be a
    /// tuple of results.)
    Iteration,
    /// Any view taken under `torch.no_grad()` (`with torch.no_grad(): v = w[0]`).
    NoGrad,
    /// An input or output of a module with a full backward hook (`BackwardHookFunction`).
    BackwardHook,
    /// An output of a custom `torch.autograd.Function` (named) that is a view made inside its
    /// `forward` (`return out.view(...)`).
    CustomFunction(crate::ir::Name),
    /// An output of a custom `torch.autograd.Function` (named) that is one of its arguments
    /// returned as it is (`forward` ending in `return x`, not marked dirty): torch returns a view
    /// of it made inside the Function.
    ReturnedInput(crate::ir::Name),
    /// `expand`, `expand_as`, `broadcast_to`: elements share memory (a stride of 0), so a
    /// write that computes from the old values, or copies a tensor in, is refused whatever
    /// grad mode says (a scalar fill is allowed; measured with torch 2.15).
    Expand,
    /// A tensor made under `torch.inference_mode()` (or a view of one), written outside it:
    /// refused in any grad mode (measured with torch 2.15).
    Inference,
}

impl RefusedBy {
    /// The op of a method or torch function name; `sizes`: its sizes are given as a list.
    pub fn of(name: &str, sizes: bool) -> Option<RefusedBy> {
        match name {
            "chunk" => Some(RefusedBy::Split),
            "split" if !sizes => Some(RefusedBy::Split),
            "split" | "split_with_sizes" => Some(RefusedBy::SplitWithSizes),
            "unbind" => Some(RefusedBy::Unbind),
            "expand" | "expand_as" | "broadcast_to" => Some(RefusedBy::Expand),
            _ => None,
        }
    }

    /// The autograd node the runtime names for a split's own output (`Output 0 of Split is a
    /// view ...`, torch 2.15); the other kinds have messages of their own.
    pub fn node(self) -> Option<&'static str> {
        match self {
            RefusedBy::Split => Some("Split"),
            RefusedBy::SplitWithSizes => Some("SplitWithSizes"),
            RefusedBy::Unbind | RefusedBy::Iteration => Some("Unbind"),
            RefusedBy::NoGrad
            | RefusedBy::BackwardHook
            | RefusedBy::CustomFunction(_)
            | RefusedBy::ReturnedInput(_)
            | RefusedBy::Expand
            | RefusedBy::Inference => None,
        }
    }
}

/// Where a NumPy array came to share a tensor's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct NumpyShare {
    /// The call: `t.numpy()` or `torch.from_numpy(a)`.
    pub at: Span,
    /// The array was made from the tensor (`t.numpy()`), else the tensor from the array.
    pub from_tensor: bool,
}

/// An argument whose requiring grad a tensor's history rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GradIf {
    /// The parameter.
    pub at: Span,
    /// A parameter of a function other than `forward` (a size, a scale, a grid): not the data
    /// a model computes on, so nothing says a caller ever passes one that requires grad.
    pub non_data: bool,
}

impl TensorObj {
    /// A tensor with a storage of its own (`id` is its object id) and no history.
    pub fn fresh(id: ObjId, grad: Tri, known: bool, origin: Span) -> TensorObj {
        TensorObj {
            storage: id,
            counter: true,
            numpy: None,
            grad,
            leaf: false,
            view_of_leaf: false,
            view_origin: None,
            refused_view: None,
            inference: None,
            node: None,
            known,
            origin,
            grad_tensor: None,
            detached_from: None,
            grad_if: None,
            view_of: None,
            strided: 0,
            rank: 0,
        }
    }

    /// A non-leaf tensor with this one's history (graph node, grad) but a storage of its own
    /// (`id` is its object id): one of several results of an op, or an element standing for many.
    pub fn sibling(&self, id: ObjId) -> TensorObj {
        TensorObj {
            storage: id,
            numpy: None,
            leaf: false,
            view_of_leaf: false,
            view_origin: None,
            refused_view: None,
            grad_tensor: None,
            detached_from: None,
            view_of: None,
            strided: 0,
            rank: 0,
            ..self.clone()
        }
    }

    /// This very tensor under another object: the same memory, counter, history and
    /// leaf status (an element read from a container at an index the analysis cannot pin).
    pub fn alias(&self) -> TensorObj {
        TensorObj {
            detached_from: None,
            ..self.clone()
        }
    }
}

/// `inplace=True` given to a module's constructor: the argument and the constructor call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InplaceArg {
    pub arg: Span,
    pub call: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct ModuleObj {
    /// `ReLU`, `Sequential`, or the local class name.
    pub class: Name,
    pub local: Option<Arc<ClassObj>>,
    pub inplace: Option<InplaceArg>,
    pub attrs: FxHashMap<Name, Vals>,
    /// Positional children (`Sequential`, `ModuleList`), in order.
    pub children: Vec<ObjId>,
    pub origin: Span,
    /// Functions registered with `register_forward_hook`, run after each call.
    pub hooks: Vec<ObjId>,
    /// Those of them registered on one of several modules a receiver may have been
    /// (`self.vgg[i].register_forward_hook(h)` with `i` unknown): maybe not on this one.
    pub maybe_hooks: Vec<ObjId>,
    /// Functions registered with `register_forward_pre_hook`, run before each call on its
    /// positional arguments.
    pub pre_hooks: Vec<ObjId>,
    /// Where `register_full_backward_hook` was called on it: its inputs that require grad and
    /// its outputs are then views a custom Function made.
    pub backward_hook: Option<Span>,
}

/// A class defined in the file.
#[derive(Debug, Clone)]
pub(crate) struct ClassObj {
    pub name: Name,
    pub loc: ClassLoc,
    /// The class definition.
    pub span: Span,
    pub methods: FxHashMap<Name, DefLoc>,
    /// `@x.setter`s, by the attribute they set.
    pub setters: FxHashMap<Name, DefLoc>,
    pub bases: Vec<ObjId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GradCtx {
    NoGrad,
    /// `torch.inference_mode()`: grad off, and the tensors made are inference tensors.
    Inference,
    EnableGrad,
    /// `set_grad_enabled(x)`: `false` disables, `true` / unknown enables.
    Set(bool),
    Anomaly,
    /// `torch.autograd.graph.allow_mutation_on_saved_tensors()`: a tensor saved while it is on
    /// is copied the first time it is written in place, so the backward reads the saved values.
    AllowMutation,
    /// `torch.autocast(...)`, `torch.cuda.amp.autocast()`: surely on, in a lower precision
    /// (the default), or not surely (`enabled=flag`, `dtype=torch.float32`).
    Autocast(bool),
}

#[derive(Debug, Clone)]
pub(crate) enum Obj {
    /// Anything not modelled; may be a tensor.
    Unknown,
    /// Known not to be a tensor (numbers, strings, None, ...).
    Other,
    /// A string's value (`activation="relu"`), compared by `==` and `in`; otherwise like
    /// [`Obj::Other`]. A value with holes ([`crate::ir::STR_HOLE`]) stands for a family of
    /// strings (`f"layer{i}"`): it names attributes (`setattr`, `getattr`) but compares unknown.
    Str(Name),
    Tensor(TensorObj),
    /// A torch namespace or callable by its qualified name (`torch.nn.functional.relu`).
    Path(Name),
    Module(Box<ModuleObj>),
    Optimizer {
        params: Vals,
        origin: Span,
    },
    /// A function or lambda of the file.
    Func(DefLoc),
    Class(Arc<ClassObj>),
    /// A method bound to its instance.
    Bound(ObjId, DefLoc),
    /// `functools.partial(f, *args, **keywords)`: a callable with arguments bound ahead of the
    /// call, which come before the call's own (its keywords give way to the call's).
    Partial {
        func: Vals,
        positional: Vec<Vals>,
        keywords: Vec<(Name, Vals, Span)>,
    },
    /// A list, tuple or dict (its values), in order.
    Seq(Vec<Vals>),
    /// A record type made by a call (`collections.namedtuple("State", "h c")`): calling it
    /// makes a tuple whose slots its field names also name.
    Record(Arc<[Name]>),
    /// `model.parameters()` and friends.
    Params {
        owners: Vals,
        tensors: Vals,
    },
    GradCtx(GradCtx),
    /// A `torch.distributions` object, by the tensors it keeps.
    Dist(Box<DistObj>),
}

/// The distributions whose saves are modelled (measured with torch 2.15): which of the tensors
/// they keep their methods' backwards read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DistKind {
    /// `Normal(loc, scale)`: `first` is `loc`, `second` is `scale` (the tensors given).
    Normal,
    /// `Bernoulli(probs=p)` / `Bernoulli(logits=l)`: `first` the logits, `second` the probs
    /// (one given, the other computed from it).
    Bernoulli,
    /// `Categorical(...)`, `OneHotCategorical(...)`: `first` the normalised logits, `second`
    /// the normalised probs.
    Categorical,
}

#[derive(Debug, Clone)]
pub(crate) struct DistObj {
    pub kind: DistKind,
    pub first: Vals,
    pub second: Vals,
    /// The constructor call.
    pub origin: Span,
    /// `first` is computed on first use (`Bernoulli(probs=p)`'s logits, a lazy property whose
    /// clamp saves `p` when it runs, not when the distribution is made).
    pub lazy_first: bool,
}
