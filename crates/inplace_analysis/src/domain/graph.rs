//! Autograd history: a DAG of nodes, each listing the saves its op made.

use super::GradIf;
use crate::ir::{BinOp, Name, Span};
use smallvec::SmallVec;

pub(crate) type NodeId = u32;
pub(crate) type SaveId = u32;

#[derive(Debug, Clone, Default)]
pub(crate) struct GraphNode {
    pub saves: SmallVec<[SaveId; 2]>,
    pub parents: SmallVec<[NodeId; 2]>,
    /// The storages of the leaves the op read directly (a layer's parameters): a backward
    /// through the node gives them a `.grad`.
    pub leaves: SmallVec<[u32; 2]>,
}

/// How an op reads in a message; rendered only for findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OpLabel {
    /// `torch.sigmoid`
    Torch(Name),
    /// `F.softmax`
    Functional(Name),
    /// `.sigmoid()`
    Method(Name),
    /// `*`, `@`, ...
    Operator(BinOp),
    /// `sigmoid_` (an in-place op's own save)
    Inplace(Name),
    /// A module call: its constructor as written (`nn.Sigmoid()`), else `nn.Class`.
    Module { origin: Span, class: Name },
    /// Indexing with tensors (`logp[rows, labels]`), as written.
    Indexing(Span),
    /// `-` (negation)
    Static(&'static str),
    /// A custom `torch.autograd.Function` subclass's `apply`, by the class's name.
    Function(Name),
}

#[derive(Debug, Clone)]
pub(crate) struct Save {
    /// The storage (object id of the tensor that allocated it) saved.
    pub storage: u32,
    /// The op saved its own result (else one of its inputs).
    pub output: bool,
    pub op: OpLabel,
    pub range: Span,
    /// The save is made only if this argument requires grad.
    pub assumes: Option<GradIf>,
    /// The statement of the unit's own code that made it (the call that reached the op).
    pub stmt: Option<crate::ir::StmtRef>,
    /// The innermost statement running when it was made (in a called function: its own
    /// statement, where a fix that computes the forward again repeats it).
    pub inner: Option<crate::ir::StmtRef>,
    /// The callers' statements of the calls it was made in, outermost first (`fake =
    /// netG(noise)` of a training function a script calls, where `netG`'s forward made it).
    pub callers: Option<std::sync::Arc<[crate::ir::StmtRef]>>,
    /// Kept by a custom Function's `forward` as this attribute of `ctx` (`ctx.x = x`), not
    /// given to `save_for_backward`: torch checks no version, so a write before the backward
    /// changes the gradient silently.
    pub stash: Option<crate::ir::Name>,
    /// Saved through a `.data` alias (this `.data` expression): the saved tensor has a version
    /// counter of its own, so a write through any other name changes it silently.
    pub through_data: Option<Span>,
}
