//! The abstract domain.
//!
//! * Objects live in a heap (`Interp::heap`), one per evaluation of the expression that made
//!   them; a name maps to a small *set* of objects (it may point to any of them after branches).
//!   Object properties (requires-grad, module attributes) are flow-insensitive.
//! * A tensor belongs to a **storage** (the object id of the tensor that allocated it). Views,
//!   aliases and `.detach()` share the storage and its version counter; `.data` shares the
//!   storage but not the counter (`counter == false`).
//! * Autograd history is a DAG of [`GraphNode`]s; each node lists the [`Save`]s its op made.
//! * The flow-sensitive [`State`] holds the environment, which saves are live on which storage,
//!   which saves an in-place write has clobbered, names made stale by a write (IP402) and which
//!   parameters an optimizer holds.

use crate::finding::TextRange;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::rc::Rc;
use tree_sitter::Node;

pub(crate) type ObjId = u32;
pub(crate) type NodeId = u32;
pub(crate) type SaveId = u32;
pub(crate) type WriteId = u32;
pub(crate) type Vals = SmallVec<[ObjId; 2]>;
pub(crate) type Name = Rc<str>;
pub(crate) type Env = FxHashMap<Name, Vals>;

/// Three-valued truth, ordered `No < Maybe < Yes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    pub grad: Tri,
    /// A user-created tensor (or parameter) that requires grad.
    pub leaf: bool,
    /// A view of such a leaf (writing through it is form ②).
    pub view_of_leaf: bool,
    /// Where the view was taken, when this is a view.
    pub view_origin: Option<TextRange>,
    pub node: Option<NodeId>,
    /// Known to be a tensor (not just "maybe", as a function argument is).
    pub known: bool,
    pub origin: TextRange,
    /// The tensor standing for `.grad` of this one, made on first use.
    pub grad_tensor: Option<ObjId>,
}

impl TensorObj {
    /// A tensor with a storage of its own (`id` is its object id) and no history.
    pub fn fresh(id: ObjId, grad: Tri, known: bool, origin: TextRange) -> TensorObj {
        TensorObj {
            storage: id,
            counter: true,
            grad,
            leaf: false,
            view_of_leaf: false,
            view_origin: None,
            node: None,
            known,
            origin,
            grad_tensor: None,
        }
    }

    /// A non-leaf tensor with this one's history (graph node, grad) but a storage of its own
    /// (`id` is its object id): one of several results of an op, or an element standing for many.
    pub fn sibling(&self, id: ObjId) -> TensorObj {
        TensorObj {
            storage: id,
            leaf: false,
            view_of_leaf: false,
            view_origin: None,
            grad_tensor: None,
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ModuleObj<'t> {
    /// `ReLU`, `Sequential`, or the local class name.
    pub class: Name,
    pub local: Option<ClassRef<'t>>,
    /// The `inplace=True` keyword argument, when the module was built with one.
    pub inplace: Option<TextRange>,
    pub attrs: FxHashMap<Name, Vals>,
    /// Positional children (`Sequential`, `ModuleList`), in order.
    pub children: Vec<ObjId>,
    pub origin: TextRange,
    /// Functions registered with `register_forward_hook`, run after each call.
    pub hooks: Vec<ObjId>,
}

#[derive(Debug, Clone)]
pub(crate) struct ClassRef<'t> {
    pub name: Name,
    pub methods: Rc<FxHashMap<Name, Node<'t>>>,
    pub base_classes: Vec<ObjId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GradCtx {
    NoGrad,
    EnableGrad,
    /// `set_grad_enabled(x)`: `Some(false)` disables, `Some(true)` / unknown enables.
    Set(bool),
    Anomaly,
}

#[derive(Debug, Clone)]
pub(crate) enum Obj<'t> {
    /// Anything not modelled; may be a tensor.
    Unknown,
    /// Known not to be a tensor (numbers, strings, None, ...).
    Other,
    Tensor(TensorObj),
    /// A torch namespace or callable by its qualified name (`torch.nn.functional.relu`).
    Path(Name),
    Module(ModuleObj<'t>),
    Optimizer {
        params: Vals,
        origin: TextRange,
    },
    /// A local function or lambda.
    Func(Node<'t>),
    Class(ClassRef<'t>),
    Bound(ObjId, Node<'t>),
    /// A list, tuple or dict (its values), in order.
    Seq(Vec<Vals>),
    /// `model.parameters()` and friends.
    Params {
        owners: Vals,
        tensors: Vals,
    },
    GradCtx(GradCtx),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct GraphNode {
    pub saves: SmallVec<[SaveId; 2]>,
    pub parents: SmallVec<[NodeId; 2]>,
}

#[derive(Debug, Clone)]
pub(crate) struct Save {
    pub storage: ObjId,
    /// The op saved its own result (else one of its inputs).
    pub output: bool,
    /// How the op reads in the source (`torch.sigmoid`, `nn.Sigmoid()`, `*`).
    pub op: String,
    pub range: TextRange,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// `y += 1`
    AugAssign,
    /// `y.mul_(2)`
    Method(Name),
    /// `torch.relu_(h)`
    TorchFn(Name),
    /// `x[i] = v`
    Subscript,
    /// `nn.ReLU(inplace=True)` called (the culprit is the keyword argument).
    InplaceModule { call: TextRange },
    /// `F.relu(x, inplace=True)`
    InplaceFunctional,
    /// `out=` argument
    OutArg,
    /// `optimizer.step()`
    Step,
    /// `x.data = v`
    DataAssign,
}

#[derive(Debug, Clone)]
pub(crate) struct Write {
    /// The culprit range.
    pub range: TextRange,
    /// The whole statement or call (for fixes).
    pub site: TextRange,
    pub kind: WriteKind,
    /// The (first) object written.
    pub target: ObjId,
    /// Where the written object was taken as a view, when it is one.
    pub view_origin: Option<TextRange>,
    /// The outermost call that led here, when the write is inside an inlined function.
    pub call_site: Option<TextRange>,
    /// Where the name written through was bound, at the time of the write.
    pub through_bound: Option<TextRange>,
    /// Grad mode was off at the write (an out-of-place rewrite would drop the history).
    pub under_no_grad: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    pub env: Env,
    /// Where each name was last bound by a plain `name = expr`.
    pub bound_at: FxHashMap<Name, TextRange>,
    pub live: FxHashMap<ObjId, SmallVec<[SaveId; 4]>>,
    pub clobbered: FxHashMap<SaveId, SmallVec<[WriteId; 2]>>,
    pub stale: FxHashMap<Name, SmallVec<[WriteId; 1]>>,
    /// Parameter (or module) object -> optimizer object holding it.
    pub held: FxHashMap<ObjId, ObjId>,
    /// IP403 findings waiting for the optimizer that holds the orphan to be used again.
    pub orphaned: FxHashMap<ObjId, SmallVec<[crate::finding::Finding; 1]>>,
    /// Control never reaches here (after return, raise, break, continue).
    pub dead: bool,
}

/// Most alternatives kept per key when paths merge. Nested loops and branches allocate fresh
/// objects on every path, so without a bound the sets grow exponentially with nesting (a real
/// checkpoint-conversion script of transformers took minutes).
pub(crate) const MAX_ALTERNATIVES: usize = 64;

/// The object standing for "anything" (allocated first by every interpreter).
pub(crate) const UNKNOWN: ObjId = 0;

/// Adds `from`'s alternatives to `into`'s. A set that would exceed [`MAX_ALTERNATIVES`] becomes
/// `overflow` when one is given (the value is unknown), else keeps the first ones.
fn union_into<K: Clone + Eq + std::hash::Hash, A: smallvec::Array>(
    into: &mut FxHashMap<K, SmallVec<A>>,
    from: &FxHashMap<K, SmallVec<A>>,
    overflow: Option<A::Item>,
) where
    A::Item: PartialEq + Clone,
{
    for (k, vs) in from {
        let entry = into.entry(k.clone()).or_default();
        for v in vs {
            if entry.contains(v) {
                continue;
            }
            if entry.len() >= MAX_ALTERNATIVES {
                if let Some(o) = &overflow {
                    entry.clear();
                    entry.push(o.clone());
                }
                break;
            }
            entry.push(v.clone());
        }
    }
}

thread_local! {
    /// Work done by joins since the interpreter last collected it (see [`take_join_work`]).
    static JOIN_WORK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The work joins did since the last call: charged to the interpreter's step budget, so that
/// states growing across inlined methods and nested loops cannot run on unbounded.
pub(crate) fn take_join_work() -> u64 {
    JOIN_WORK.with(|w| w.replace(0))
}

impl State {
    /// Merge another path into this one.
    pub fn join(&mut self, other: &State) {
        if other.dead {
            return;
        }
        let size = other.env.len() + other.live.len() + other.clobbered.len() + other.stale.len();
        JOIN_WORK.with(|w| w.set(w.get() + 1 + size as u64 / 8));
        if self.dead {
            *self = other.clone();
            return;
        }
        union_into(&mut self.env, &other.env, Some(UNKNOWN));
        union_into(&mut self.live, &other.live, None);
        union_into(&mut self.clobbered, &other.clobbered, None);
        union_into(&mut self.stale, &other.stale, None);
        for (k, v) in &other.bound_at {
            self.bound_at.entry(k.clone()).or_insert(*v);
        }
        for (k, v) in &other.held {
            self.held.entry(*k).or_insert(*v);
        }
        for (k, v) in &other.orphaned {
            for f in v {
                self.orphan(*k, f.clone());
            }
        }
    }

    /// Keep a finding until optimizer `opt` is used again; once per place.
    pub fn orphan(&mut self, opt: ObjId, f: crate::finding::Finding) {
        let e = self.orphaned.entry(opt).or_default();
        if !e.iter().any(|g| g.rule == f.rule && g.range == f.range) {
            e.push(f);
        }
    }

    pub fn dead() -> State {
        State {
            dead: true,
            ..State::default()
        }
    }
}
