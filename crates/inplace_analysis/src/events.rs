//! What the interpreter observes, as plain data with ids: in-place writes, and the events the
//! rules turn into findings (a write clobbering a save a backward needs, a write into a leaf, a
//! stale read, a rebound parameter, ...). No messages, no fixes: the rules render those, once,
//! for the events that survive deduplication.

use crate::domain::{Binding, SaveId};
use crate::ir::{DefLoc, ExprId, Name, Span, StmtRef};
use smallvec::SmallVec;

pub(crate) type WriteId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WriteKind {
    /// `y += 1`
    AugAssign,
    /// `y.mul_(2)`
    Method(Name),
    /// `torch.relu_(h)`
    TorchFn(Name),
    /// `x[i] = v`; `whole`: the write goes into `x` itself rather than into a view of it (the
    /// index selects all of `x`, `x[:] = v`, or indexes with arrays only, `x[mask] = v`).
    Subscript { whole: bool },
    /// `nn.ReLU(inplace=True)` called; `call` is the call of the module (the culprit is the
    /// keyword argument).
    InplaceModule { call: Span, ctor: Span },
    /// `F.relu(x, inplace=True)`
    InplaceFunctional,
    /// `inplace=True` of a function or transform that is not an activation (torchvision's
    /// `normalize`): a plain write whose culprit is the option.
    InplaceOption,
    /// `out=` argument
    OutArg,
    /// `optimizer.step()`
    Step,
    /// `x.data = v`
    DataAssign,
    /// `nn.init.normal_(w)`
    Init(Name),
    /// An `nn.Embedding(..., max_norm=...)` called: it renormalises the rows it looks up in
    /// its weight, in place (under no grad).
    Renorm,
    /// `model.load_state_dict(sd)`: every parameter of the tree copied into in place (under no
    /// grad), meant to be seen by whoever holds them.
    LoadState,
    /// `loss.backward()` accumulating a leaf's new gradient into the `.grad` tensor it has.
    GradAccumulate,
    /// `zero_grad(set_to_none=False)` zeroing the `.grad` tensors in place.
    GradZero,
    /// `F.apply(x)` of a custom Function whose `forward` marks argument `x` (this expression
    /// of the call) dirty with `ctx.mark_dirty`: an in-place op on it, as autograd sees it.
    DirtyArg { arg: Option<crate::ir::ExprId> },
}

impl WriteKind {
    /// A call that writes (a method, a torch function, an in-place layer or option), not a
    /// store (`x[i] = v`, `x += v`).
    pub fn is_inplace_call(self) -> bool {
        matches!(
            self,
            WriteKind::Method(_)
                | WriteKind::TorchFn(_)
                | WriteKind::InplaceModule { .. }
                | WriteKind::InplaceFunctional
                | WriteKind::InplaceOption
        )
    }
}

/// An in-place write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Write {
    /// The culprit.
    pub range: Span,
    /// The whole statement or call (what a message quotes).
    pub site: Span,
    /// The statement it is in.
    pub stmt: Option<StmtRef>,
    /// The call that writes (a method, a torch function), for fixes.
    pub call: Option<ExprId>,
    pub kind: WriteKind,
    /// Where the written object was taken as a view, when it is one.
    pub view_origin: Option<Span>,
    /// The outermost call that led here, when the write is inside an inlined function.
    pub call_site: Option<Span>,
    /// Every inlined call that led here, outermost first (`worker.step()` then `self.pull()`):
    /// a fix moves the one made in the function that runs the backward.
    pub call_path: SmallVec<[Span; 2]>,
    /// The written memory is a NumPy array's, shared with a tensor by this call
    /// (`torch.from_numpy(a)`, `t.numpy()`).
    pub numpy_share: Option<crate::domain::NumpyShare>,
    /// Written through a plain name bound to the tensor (`x += 1`, `x[m] = 0`), not an
    /// attribute (`self.x += 1`) nor an element of a container a name holds (`state[0][:] = h`).
    pub named: bool,
    /// Where the name written through was bound, at the time of the write.
    pub through_bound: Option<Binding>,
    /// Grad mode was off at the write (an out-of-place rewrite would drop the history).
    pub under_no_grad: bool,
    /// The written tensor was read out of a list or dict (`outs[i].add_(1)`): the element is
    /// what a copy replaces, not the container.
    pub element: Option<Span>,
    /// That element may be a tuple's (`feats = backbone(x)` returning `h, y`): no assignment
    /// can replace it.
    pub tuple_element: bool,
    /// That element may be one of a container not known to be a list or dict (a `chunk()`'s
    /// piece, a `zip()` pair's): no assignment is known to replace it.
    pub fixed_element: bool,
    /// A `.grad` tensor written (by a backward or `zero_grad(set_to_none=False)`): where it was
    /// last read as `p.grad`, which a copy there keeps apart (`[p.grad.clone() for p in ...]`).
    pub grad_read: Option<Span>,
    /// Every tensor written is a parameter (a leaf that requires grad, or a frozen one, one
    /// shown another's memory included) or a view of one (not of a detached alias of one): a
    /// copy would not be what the module and the optimizer hold.
    pub into_leaf: bool,
    /// No tensor written can require grad (position ids, a tensor made from a NumPy array): a
    /// rewrite out of place under `no_grad` loses no history.
    pub gradless: bool,
    /// Every tensor written is a parameter's memory (an `nn.Parameter`, a layer's weight, or
    /// a view of one), not a leaf tensor of the program's own (an image being optimised).
    pub param: bool,
    /// Every tensor written is the memory of a leaf a forward hook made of an activation (see
    /// [`crate::exec::Interp::own_leaves`]) and no parameter's.
    pub own_leaf: bool,
    /// The written tensor is a field of a tuple-like record (`state.h` of a `namedtuple` or a
    /// `NamedTuple`), which cannot be assigned: a rewrite replaces the record
    /// (`state = state._replace(h=...)`).
    pub record_field: bool,
    /// The write changes a forward hook's `output` argument in the hook itself (the hook and
    /// the name): an out-of-place rewrite must be returned to replace the module's output.
    pub hook_output: Option<(DefLoc, Name)>,
    /// The write goes through a forward pre-hook's `args` tuple (`args[0].mul_(s)`): its
    /// elements cannot be rebound, so no copy or rewrite can take the write's place there.
    pub hook_args: bool,
    /// The argument of the call at `call_site` that passed the written tensor (an expression of
    /// the call site's item), when one did.
    pub call_arg: Option<ExprId>,
    /// Written through a `.data` alias (or a view of one), taken there, or through a tensor
    /// made to show another's memory (`pk.data = pq.data`), where that tensor was made: a save made through
    /// that same alias sees its own counter move (the backward raises).
    pub data_alias: Option<Span>,
    /// A list, dict or object kept the tensor a raising write wrote (`parts = [gen]` before
    /// `gen.scatter_(...)`): a rewrite out of place would leave it the old tensor.
    pub kept_in_slot: bool,
    /// A raising write whose memory an earlier op saved (`y = x.pow(2)` before a loop writes
    /// the rows of `x`): a fix that lets the write go through would clobber that save.
    pub memory_saved: bool,
    /// The value written requires grad for certain (`t[1:3] = proj(x)`): under `no_grad` the
    /// write would cut its gradient.
    pub value_grad: bool,
    /// The first save its statement made (the saves from there on were made while the
    /// statement ran, by the calls in its value too).
    pub stmt_first_save: crate::domain::SaveId,
}

/// What a name bound from a call's result holds (for a fix that detaches it: a tensor has
/// `.detach()`, a tuple or a `NamedTuple` of tensors is rebuilt from its detached items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Tensor,
    /// A tuple or list of tensors.
    Tensors,
    /// A `NamedTuple` whose fields are tensors.
    NamedTuple,
    /// A dict whose values are tensors.
    Dict,
    /// Anything else, or several of the above.
    Other,
}

/// What makes autograd read the saves: a `backward()`, or a graph a function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Trigger {
    pub range: Span,
    pub backward: bool,
    /// The first calls of the chain of inlined calls that led to it, outermost first (as
    /// [`Write::call_path`]): where it parts from a write's chain, the two calls that made
    /// them.
    pub calls: [Option<Span>; 3],
}

/// Who keeps a tensor that a call wrote in place, so that the next call reads it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Keeper {
    /// A dataset's stored sample, read again by the next `__getitem__` (the next epoch).
    Dataset,
    /// A tensor any other object keeps (a cached mask, a table of anchors), handed out by a
    /// method as if it were new.
    Instance,
}

/// How [`Event::Rebind`] replaced what the optimizer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Replacement {
    /// A new object bound to the name or attribute.
    Replaces,
    /// The new module keeps the old one's parameters but brings trainable ones of its own
    /// that the optimizer does not hold (`model.q = LoRA(model.q)`).
    Wraps,
    /// `load_state_dict(sd, assign=True)` put new parameter objects into the module.
    Loads,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Event {
    /// A write into a leaf that requires grad (`through_view`: into a view of it).
    LeafWrite {
        write: WriteId,
        through_view: bool,
        view: Option<Span>,
    },
    /// An op called with `out=` while autograd records and one of its tensors (an input or the
    /// `out=` tensor) requires grad: it refuses at the call (or, as the op table measured for
    /// `op`, its path below `torch`, leaves the result without a derivative). `writes_grad`:
    /// the `out=` tensor itself requires grad.
    OutArgRefused {
        write: WriteId,
        writes_grad: bool,
        op: Name,
    },
    /// A write, while autograd records, into a view it refuses to rebase (a split's output, a
    /// row of an iteration, a view made under `no_grad`, a hooked layer's input or output);
    /// `plain`: the view does not require grad, the value written does.
    RefusedViewWrite {
        write: WriteId,
        view: crate::domain::RefusedView,
        plain: bool,
    },
    /// One of the views a function returning several made of a tensor that requires grad
    /// (`rows = list(w)`, `a, b = x.chunk(2)`), used by an op autograd records (`read`) after
    /// write `write` changed the tensor it shows in place: autograd refuses it there.
    RefusedViewRead {
        write: WriteId,
        view: crate::domain::RefusedView,
        read: crate::ir::Span,
    },
    /// A write clobbered a save that a backward (or a returned graph) needs.
    Clobber {
        write: WriteId,
        save: SaveId,
        trigger: Trigger,
    },
    /// A write through `.data`; `live`: into something saved for a backward that may run
    /// (`trigger`: that backward, when one was reached); `leaf`: into the memory of a leaf that
    /// requires grad (a parameter).
    DataWrite {
        write: WriteId,
        live: bool,
        leaf: bool,
        trigger: Option<Trigger>,
    },
    /// A write through `.data` of a value that carries the graph of a gradient taken with
    /// `create_graph=True` (at `grad`): `.data` drops that graph (MAML's `p.data -= lr * g`).
    DataDropsGraph { write: WriteId, grad: Span },
    /// A read of `.data` never written through; `kept`: the alias is bound to a name.
    DataRead {
        attr: Span,
        /// Where the name `data` starts (relative to the item).
        name_at: u32,
        kept: bool,
    },
    /// A name read after an in-place write changed its tensor under it; `next_call`: a
    /// dataset's stored tensor, read again by the next `__getitem__` (`read` is where).
    StaleRead {
        write: WriteId,
        name: Name,
        read: Span,
        bindings: SmallVec<[Binding; 2]>,
        next_call: Option<Keeper>,
        /// Where the view `name` is bound to was taken, when it is a view of the tensor
        /// written (not that tensor under another name).
        view: Option<Span>,
        /// A copy where the view is made fixes it (not a piece of a `chunk` or a loop's row).
        view_copyable: bool,
        /// The write is an in-place call nested in the statement that reads the name again
        /// (`lin(torch.relu_(z)) + res(z)`): the name itself was written, not an alias.
        nested: bool,
        /// An optimizer step wrote parameters that `name` holds snapshots of, and this is the
        /// expression that made them (`model.state_dict()`, `p.detach()`, `p.data`).
        snapshot: Option<Span>,
        /// The write changed memory two tensors came to share by `t.data = s.data`: that
        /// statement and its value.
        shared: Option<(Span, Span)>,
    },
    /// A parameter (or a module holding them) replaced by a new object.
    Rebind {
        stmt: StmtRef,
        span: Span,
        target: Span,
        name: Name,
        optimizer: Option<Span>,
        update: bool,
        /// How the parameters were replaced.
        how: Replacement,
        /// The outermost call that led here, when it is inside an inlined function.
        call_site: Option<Span>,
        /// Every inlined call that led here, outermost first: the fix builds the optimizer
        /// again after the one made where it was built (`prune_(m)` in the training script,
        /// when the replacement is inside `prune_`).
        call_path: SmallVec<[Span; 2]>,
    },
    /// A write, in a custom Function's `backward` analysed on its own, into a gradient autograd
    /// passed it (parameter `name`, at `param`), or a view or alias of one; `first`: that
    /// `backward`'s first statement.
    GradOutputWrite {
        write: WriteId,
        name: Name,
        param: Span,
        first: Option<Span>,
    },
    /// A write, in a custom Function's `backward` analysed on its own, into a tensor it read
    /// from `ctx.saved_tensors` (or a view of one).
    BackwardSavedWrite { write: WriteId },
    /// A write through a value of a module's `state_dict()` (made at `made`) that added another
    /// module's parameters, before the module was called at `read`: the module's own
    /// parameters were changed (a soup accumulated into an ingredient).
    StateDictWrite {
        write: WriteId,
        made: Span,
        read: Span,
    },
    /// `set_detect_anomaly(True)`.
    Anomaly { call: Span },
    /// An in-place op whose other operand (`operand`) is a view of elements it writes
    /// (`a -= a[:, :1]`): it reads elements it has already changed, or torch refuses.
    SelfOverlap { write: WriteId, operand: Span },
}
