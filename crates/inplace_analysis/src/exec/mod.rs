//! The abstract interpreter: executes lowered bodies over the domain and records events.
//!
//! One [`Interp`] runs one *unit*: the module body, or one function on its own (its arguments
//! unknown, `self` an instance of its class). A function unit starts from the module unit's
//! final heap and graph (shared, see [`crate::domain::Layered`]) and its final environment (the
//! globals), so units do not depend on each other's order and each can be reused on its own.
//!
//! Split by concern: [`stmt`] statements and control flow, [`assign`] binding targets,
//! [`expr`] expressions, [`call`] calls and inlining of the file's functions and classes,
//! [`torch`] torch functions and builtins, [`tensor`] tensor methods, ops and their saves,
//! [`module`] `nn` modules, [`class_body`] class attributes, `NamedTuple`s and dataclasses, [`optim`] optimizers
//! and rebinding, [`write`] in-place writes, [`backward`] what a backward reaches,
//! [`transforms`] torchvision's transforms on tensors.

mod argparse;
mod assign;
mod backward;
mod branch_attrs;
mod call;
mod expr;
mod function;
mod imports;
mod module;
pub(crate) use module::Container;
pub(crate) use write::attr_is_masking;
mod class_body;
mod dataset;
mod distributions;
mod new_params;
mod optim;
mod overlap;
mod stmt;
mod tensor;
mod torch;
mod transforms;
mod unswitch;
mod write;

use crate::domain::*;
use crate::events::{Event, Shape, Write};
use crate::ir::*;
use crate::program::{MethodRole, Program};
use crate::syntax::outline::ItemKind;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::{smallvec, SmallVec};
use std::sync::Arc;

/// Deepest expression or statement nesting that is walked; deeper code is unknown.
const MAX_DEPTH: usize = 200;
/// Deepest chain of inlined calls.
const MAX_INLINE: usize = 6;
/// Most runs of one function on the chain of inlined calls: a builder that builds the parts
/// of what it builds (`MODELS.build(cfg)` in the `__init__` of a class `MODELS.build` made)
/// runs again inside itself; deeper recursion is not followed.
const MAX_REENTRY: usize = 3;
/// Loop bodies run this many times (enough for a write in one iteration to meet a backward in
/// the next; saves are fresh each iteration, so more runs find nothing new).
const LOOP_RUNS: usize = 2;
/// Most values a container slot keeps.
const MAX_SEQ: usize = 32;
/// Most alternatives an expression's value set keeps; a larger set is unknown.
const MAX_VALUES: usize = 256;
/// Most positions a list keeps apart; later appends share the last one.
const MAX_SLOTS: usize = 64;

/// Python's position `i` (negative: from the end) in a sequence of `n`, if it is inside.
fn position_in(i: i64, n: usize) -> Option<usize> {
    let at = if i < 0 { n as i64 + i } else { i };
    (0..n as i64).contains(&at).then_some(at as usize)
}

/// The position a known index names in a sequence of `n`.
fn index_at(index: Index, n: usize) -> Option<usize> {
    match index {
        Index::At(i) => position_in(i, n),
        _ => None,
    }
}

/// Python's slice `[lo:hi]` of a sequence of `n`, clamped as Python clamps it.
fn slice_bounds(lo: Option<i64>, hi: Option<i64>, n: usize) -> (usize, usize) {
    let bound = |b: i64| {
        if b < 0 {
            (n as i64 + b).max(0) as usize
        } else {
            (b as usize).min(n)
        }
    };
    let lo = lo.map_or(0, bound);
    (lo, hi.map_or(n, bound).max(lo))
}

/// Steps allowed for a scope of `lines` lines: enough to inline and unroll ordinary code,
/// bounded so that a file's analysis stays linear in its size.
pub(crate) fn budget_for(lines: usize) -> u64 {
    2_000 + 30 * lines as u64
}

/// The body being executed, and its item.
#[derive(Clone, Copy)]
pub(crate) struct Code<'b> {
    pub body: &'b Body,
    pub item: ItemId,
}

impl Code<'_> {
    pub fn span(&self, e: ExprId) -> Span {
        Span::new(self.item, self.body.expr_span(e))
    }
    pub fn stmt_span(&self, s: StmtId) -> Span {
        Span::new(self.item, self.body.stmt_span(s))
    }
    pub fn expr(&self, e: ExprId) -> &Expr {
        self.body.expr(e)
    }
}

pub(crate) struct Frame {
    /// A function analysed on its own (its arguments unknown): a returned graph flows out.
    pub standalone: bool,
    pub returns: Vals,
    /// What a generator yields (the elements of what it yields `from`).
    pub yields: Vals,
    pub ret_state: State,
    /// (break states, continue states) of the loops being run.
    pub loops: Vec<(State, State)>,
    /// IP403 events waiting for an optimizer's next use that rebinding one of this called
    /// function's own names made: they lapse when it returns (its names are gone; what the
    /// caller binds the result to is checked there).
    pub local_rebinds: Vec<Event>,
    /// A closure's view of the function it was defined in (its names when it was defined).
    pub captured: Option<Arc<Env>>,
    /// Names made stale by a call that wrote what they hold (`img = denormalize(batch[0])`
    /// leaves `batch` stale): when one is a parameter, the caller's names of it are stale too.
    pub call_stale: Vec<Name>,
    /// Where this call's optimizer steps (and those of the calls it made) start in
    /// [`Interp::step_log`].
    pub steps_from: usize,
}

impl Frame {
    fn new(standalone: bool) -> Frame {
        Frame {
            standalone,
            returns: Vals::new(),
            yields: Vals::new(),
            ret_state: State::dead(),
            loops: Vec::new(),
            local_rebinds: Vec::new(),
            captured: None,
            call_stale: Vec::new(),
            steps_from: 0,
        }
    }
}

/// A call's evaluated arguments; the expressions are the caller's (none, or `ExprId::NONE`,
/// for arguments bound ahead by `functools.partial`).
#[derive(Default, Clone)]
pub(crate) struct Args {
    pub positional: Vec<(Vals, Option<ExprId>)>,
    pub keywords: Vec<(Name, Vals, ExprId, Span)>,
    /// Some were spread (`f(*xs)`, `f(**opts)`): which parameter each fills is not known.
    pub spread: bool,
}

impl Args {
    pub fn keyword(&self, name: Name) -> Option<(&Vals, ExprId, Span)> {
        self.keywords
            .iter()
            .find(|(n, ..)| *n == name)
            .map(|(_, v, e, s)| (v, *e, *s))
    }
    pub fn first(&self) -> Option<&Vals> {
        self.positional.first().map(|(v, _)| v)
    }
    /// The argument given by keyword `kw`, else at position `at` (`nn.Dropout(p=0.0)`,
    /// `nn.Dropout(0.0)`).
    pub fn named_or_at(&self, kw: Name, at: usize) -> Option<&Vals> {
        self.keyword(kw)
            .map(|(v, ..)| v)
            .or_else(|| self.positional.get(at).map(|(v, _)| v))
    }
    pub fn all_values(&self) -> impl Iterator<Item = &Vals> {
        self.positional
            .iter()
            .map(|(v, _)| v)
            .chain(self.keywords.iter().map(|(_, v, ..)| v))
    }
    /// The arguments with the keywords that name an op's tensor operands moved to their
    /// positions (`F.linear(input=x, weight=w)`, `torch.mm(input=a, mat2=b)`, `x.add(other=y)`):
    /// the op table reads operands by position. `method`: the receiver is the first operand.
    /// `None` when no keyword moves.
    pub fn operands_by_position(&self, method: bool) -> Option<Args> {
        /// Names of the second operand, across torch's signatures.
        const SECOND: &[Name] = &[
            known::OTHER,
            known::MAT2,
            known::WEIGHT,
            known::TARGET,
            known::EXPONENT,
            known::VEC,
        ];
        let first = (!method && self.positional.is_empty())
            .then(|| self.keyword(known::INPUT).map(|_| known::INPUT))
            .flatten();
        let second_at = usize::from(!method);
        let second = |n: usize| {
            (n == second_at)
                .then(|| SECOND.iter().copied().find(|k| self.keyword(*k).is_some()))
                .flatten()
        };
        let moved = self.positional.len() + usize::from(first.is_some());
        if first.is_none() && second(moved).is_none() {
            return None;
        }
        let mut out = self.clone();
        for name in first.into_iter().chain(second(moved)) {
            if let Some(i) = out.keywords.iter().position(|(n, ..)| *n == name) {
                let (_, v, e, _) = out.keywords.remove(i);
                out.positional.push((v, Some(e)));
            }
        }
        Some(out)
    }
    pub fn one(v: Vals) -> Args {
        Args {
            positional: vec![(v, None)],
            keywords: Vec::new(),
            spread: false,
        }
    }
}

/// What a `.data` read was: whether its alias was bound to a name, and whether it was written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataRead {
    /// Where the attribute's name (`data`) starts.
    pub name_at: u32,
    pub kept: bool,
    pub written: bool,
}

/// An instance the program made of a class: the object, the call that made it and the
/// arguments the call gave.
#[derive(Clone)]
pub(crate) struct MadeBy {
    pub obj: ObjId,
    pub call: Span,
    pub args: Args,
}

/// The instances the program made of each class (the first few).
pub(crate) type Made = FxHashMap<ClassLoc, SmallVec<[MadeBy; 2]>>;

/// The module unit's final heap, graph and environment: where function units start.
#[derive(Clone, Default)]
pub(crate) struct Frozen {
    pub heap: Arc<Vec<Obj>>,
    pub nodes: Arc<Vec<GraphNode>>,
    pub saves: Arc<Vec<Save>>,
    pub globals: Arc<Env>,
    pub loose_attrs: Arc<FxHashMap<(ObjId, Name), ObjId>>,
    /// The instance each class's methods run on (built once, after the module).
    pub instances: Arc<FxHashMap<ClassLoc, ObjId>>,
    /// [`Interp::made`] of the module unit.
    pub made: Arc<Made>,
    /// The globals of each imported project module, by its dotted name.
    pub modules: Arc<FxHashMap<Name, Arc<Env>>>,
    /// The integer constants' objects and values (`base = [64, "M", 128]` read by a function
    /// unit keeps its numbers).
    pub ints: Arc<FxHashMap<i64, ObjId>>,
    pub int_values: Arc<FxHashMap<ObjId, i64>>,
    /// [`Interp::parameters`], [`Interp::frozen`] and [`Interp::shown_memory`] of the heap
    /// above.
    pub parameters: Arc<FxHashSet<ObjId>>,
    pub frozen: Arc<FxHashSet<ObjId>>,
    pub shown_memory: Arc<FxHashMap<ObjId, (Span, Span)>>,
    /// [`Interp::own_leaves`].
    pub own_leaves: Arc<FxHashSet<ObjId>>,
}

/// What one unit observed.
/// What a name bound by a plain assignment held, on every path through the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Tensors, each carrying an autograd graph (`.detach()` cuts it).
    Graph,
    /// An object keeping such tensors, which is no tensor itself (a `Categorical(logits=..)`:
    /// it has no `.detach()`), on some path.
    GraphInObject,
    /// Anything else: tensors without a graph, numbers, objects that keep no graph.
    Plain,
}

impl Held {
    /// What the name held over two paths through the statement.
    pub(crate) fn join(self, other: Held) -> Held {
        match (self, other) {
            (a, b) if a == b => a,
            (Held::GraphInObject, _) | (_, Held::GraphInObject) => Held::GraphInObject,
            _ => Held::Plain,
        }
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct UnitOutput {
    pub events: Vec<Event>,
    pub writes: Vec<Write>,
    pub saves: FxHashMap<SaveId, Save>,
    /// Every in-place write: its range and the names sharing the written version counter.
    pub sites: Vec<(Span, Vec<Name>)>,
    /// What the names bound from a call's result held (by the name's span in the target).
    pub shapes: FxHashMap<Span, Shape>,
    /// Whether the names bound by a plain assignment held tensors carrying an autograd graph,
    /// on every path through the statement (by the name's span in the target).
    pub graphs: FxHashMap<Span, Held>,
    /// The calls from the unit's own code (by call site, see [`Interp::call_site`]) under which
    /// a `backward()` or `autograd.grad` ran: they train, and cannot run under `no_grad`.
    pub training_calls: FxHashSet<Span>,
    /// Parameters of the functions the unit called (by the parameter's span), and whether a
    /// value that may require grad was passed to them in some call. A `forward`'s data
    /// arguments count only from a unit that runs a `backward()` (a smoke test that calls the
    /// model on a constant says nothing of how it trains).
    pub passed_grad: FxHashMap<Span, bool>,
    /// Parameters (the first) given what a function analysed on its own was given as its
    /// parameter (the second): they get grad where it does.
    pub passed_through: Vec<(Span, Span)>,
    pub steps: u64,
    /// The budget ran out: the rest of the unit was not analysed.
    pub exhausted: bool,
    /// What the unit read: it can be reused while all of it holds.
    pub deps: Deps,
}

/// What a unit read, beyond its own text.
#[derive(Debug, Default, Clone)]
pub(crate) struct Deps {
    /// Items whose bodies ran, at their versions.
    pub items: FxHashMap<ItemId, crate::program::Version>,
    /// Class items whose methods were looked up, and a fingerprint of their method table.
    pub classes: FxHashMap<ItemId, u64>,
    /// Globals read from the module's final state.
    pub globals: FxHashSet<Name>,
    /// Globals of imported project modules read (module, name).
    pub module_globals: FxHashSet<(Name, Name)>,
    /// The class whose prebuilt instance a method ran on.
    pub instance: Option<ClassLoc>,
    /// Attributes whose assignments anywhere in the text were read (`self._mask_value` judged
    /// a masking value by every `._mask_value = ...` of the file), with what was found: a
    /// subclass's `__init__` setting it otherwise changes the answer.
    pub masking_attrs: Vec<(String, bool)>,
    /// The budget the unit had.
    pub budget: u64,
}

/// How many container slots stored by calls are remembered (see [`Interp::call_stored`]).
pub(crate) const MAX_CALL_STORED: usize = 32;

/// What a custom Function's `backward`, run as a unit, is given by autograd.
#[derive(Default)]
pub(crate) struct CustomBackward {
    /// The memory of each gradient autograd passes it, with the parameter that names it (see
    /// [`Event::GradOutputWrite`]).
    pub grad_outputs: Vec<(ObjId, Name, Span)>,
    /// Its first statement (after a docstring), where a copy of a gradient goes.
    pub first: Option<Span>,
    /// The memory of what it reads from `ctx.saved_tensors` that `forward`'s caller holds (see
    /// [`Event::BackwardSavedWrite`]).
    pub saved: FxHashSet<ObjId>,
}

/// What was saved of the tensor a name keeps on one path of an `if`, and the key of its
/// condition (see [`CertainWrites::branch_pairs`]).
pub(crate) type BranchPair = (SmallVec<[SaveId; 4]>, u64);

/// Where a write through a name that holds several tensors reaches each, or one of them for
/// certain on some path (see [`Interp::write`]).
#[derive(Debug, Default)]
pub(crate) struct CertainWrites {
    /// Loops over a known list of tensors running (`for p in model.parameters():`,
    /// `for name, p in model.named_parameters():`, `for t in (a, b):`): a loop name and the
    /// tensors it takes in turn. A write through the name writes each of them, for certain,
    /// not one of several alternatives. (With the span of the loop's target: the names of one
    /// tuple target take their tensors in step.)
    pub each_element: Vec<(Name, Vals, Span)>,
    /// Pairs of tensors (the smaller id first) a name held after an `if` without `else` whose
    /// body rebound it to what an op made of the tensor it held (`if t != 1.0: x = x / t`), with
    /// the saves of that tensor live where the body did not run: a write through the name
    /// clobbers them whenever the body does not run.
    /// (With the key of the `if`'s condition: a later `if` testing the same condition, or
    /// its negation, follows which path ran, and the pairs made on that condition no longer
    /// stand for a path the write may take.)
    pub branch_pairs: FxHashMap<(ObjId, ObjId), BranchPair>,
}

/// `with` blocks that change what the ops run in them save.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SaveModes {
    /// Inside `with torch.autograd.graph.allow_mutation_on_saved_tensors():` (see
    /// [`GradCtx::AllowMutation`]): what is saved there is not live for a write to clobber.
    pub mutation_allowed: bool,
    /// Inside `with torch.autocast(...):` surely on in a lower precision: the layers that
    /// run in it there (`ops::AUTOCAST_LOWER`) save cast copies of their weights, not the
    /// parameters (measured with torch 2.15: `opt.step()` before the backward of a linear
    /// layer run under bfloat16 autocast does not raise).
    pub autocast_low: bool,
}

/// The parameters' memory `state_dict()` calls handed out, and the writes through them that
/// added the weights of another module (see [`Event::StateDictWrite`]).
#[derive(Default)]
pub(crate) struct StateDictsOut {
    /// Each parameter's memory, with the module whose `state_dict()` handed it out and the call.
    pub params: FxHashMap<ObjId, (ObjId, Span)>,
    /// Writes through a module's `state_dict()` value adding another module's (a soup
    /// accumulated into an ingredient's state): with that module, the call, and whether the dict
    /// was since loaded into another module; until the module is called.
    pub writes: Vec<(crate::events::WriteId, ObjId, Span, bool)>,
    /// Whether one list holds both modules, once decided per pair (a scan of the heap).
    pub listed: FxHashMap<(ObjId, ObjId), bool>,
}

/// Values that stand for several objects made at one place (a comprehension's element slot).
#[derive(Default)]
pub(crate) struct Summaries {
    /// Never taken for one object by `is` or `data_ptr()`.
    pub objs: FxHashSet<ObjId>,
    /// A comprehension's list (not unrolled) and the first object its element made: what the
    /// element made from there on, each element makes anew.
    pub made_per_element: FxHashMap<ObjId, ObjId>,
}

pub(crate) struct Interp<'p, 't> {
    pub prog: &'p Program<'t>,
    pub names: &'p mut Interner,
    pub heap: Layered<Obj>,
    pub nodes: Layered<GraphNode>,
    pub saves: Layered<Save>,
    pub writes: Vec<Write>,
    /// The (first) object each write wrote.
    pub write_targets: Vec<ObjId>,
    /// Whether each write (by id) wrote one memory only: through a name holding one tensor,
    /// or several views of one (a clobber counts only then).
    pub write_sole: Vec<bool>,
    pub events: Vec<Event>,
    seen_events: FxHashSet<Event>,
    pub state: State,
    /// Environments of the functions being inlined (the first is the outermost scope's).
    pub outer_envs: Vec<Env>,
    /// Functions defined inside a function, with the names they close over.
    pub closures: FxHashMap<ObjId, Arc<Env>>,
    /// The closed-over names of the function about to be inlined (taken by its frame).
    pub next_capture: Option<Arc<Env>>,
    /// The module's final environment, for functions analysed on their own.
    pub globals: Arc<Env>,
    pub grad_enabled: bool,
    /// Grad mode is off because torch runs the code so, not because the program asked: a
    /// custom `Function`'s `forward`, a checkpointed block. A write there may be rewritten out
    /// of place (the `Function` or the recomputation gives the result its history).
    pub implicit_no_grad: bool,
    pub frames: Vec<Frame>,
    pub inlining: Vec<DefLoc>,
    /// The call that led to the code running now: the outermost one; in a file that imports
    /// project modules, the innermost one made from the file's own code (where a write inside
    /// a module is reported, the same whichever unit ran the call).
    pub call_site: Option<Span>,
    /// Every inlined call running now, outermost first.
    pub call_path: SmallVec<[Span; 2]>,
    /// Inside `torch.inference_mode()` (a block, or a function decorated with it): the
    /// tensors made are inference tensors.
    pub inference_mode: bool,
    /// The backward running gives the leaves new `.grad` tensors (`create_graph=True`)
    /// instead of adding into the ones they have.
    pub new_grads: bool,
    /// The tensors the call at `call_site` passed as positional arguments: their storages and
    /// argument expressions.
    pub call_site_args: SmallVec<[(ObjId, ExprId); 2]>,
    pub steps: u64,
    pub budget: u64,
    pub depth: usize,
    /// The statement being executed.
    pub stmt: Option<StmtRef>,
    /// The simple statement of the unit's own code being executed (the caller's statement
    /// while a call is inlined): where a save is made, for a fix that computes it again.
    unit_stmt: Option<StmtRef>,
    /// The callers' statements of the calls being inlined, outermost first, and (built when a
    /// save needs it) the same as one shared list.
    caller_stmts: Vec<StmtRef>,
    caller_chain: Option<Arc<[StmtRef]>>,
    /// The tensors (by storage) that requires grad of which functions returning several views
    /// made views while grad mode was on; of those, the ones a write has changed since, with
    /// the last such write, how many objects existed then (the views made before it are
    /// refused as inputs from then on) and the tensor it wrote through; and the views reported.
    split_storages: FxHashSet<ObjId>,
    /// The `maxlen` of each `deque` made with a known one: it keeps its last `maxlen` items.
    deque_maxlen: FxHashMap<ObjId, usize>,
    split_written: FxHashMap<ObjId, (crate::events::WriteId, ObjId, ObjId)>,
    refused_reported: FxHashSet<ObjId>,
    /// How many calls are being inlined when the unit's own code runs (a function unit runs
    /// its function as one).
    unit_depth: usize,
    /// The span of the simple statement being executed (an expression, an assignment, a
    /// `return`), and the names an in-place call nested in it made stale for the rest of it
    /// (see [`Interp::mark_stale_in_statement`]).
    stmt_span: Option<Span>,
    stmt_stale: SmallVec<[(Name, crate::events::WriteId); 1]>,
    /// Of those, the names an in-place function of their values used as a value made stale
    /// past the statement (`h = o * c.tanh_()`: a later `c` means the cell state, not its
    /// tanh); see [`Interp::expire_stmt_stale`].
    stale_past_stmt: FxHashMap<(Name, crate::events::WriteId), SmallVec<[Name; 2]>>,
    /// While a `return` of a tuple runs: the plain names it holds, where (`return h, c`).
    returned_names: SmallVec<[(Span, Name); 2]>,
    /// The run of the statement executing now (each execution of a statement is a new run) and
    /// the count of runs so far.
    stmt_run: u64,
    stmt_runs: u64,
    /// How many saves there were when the innermost running statement began: saves from
    /// there on were made by it (by the calls it makes, too).
    stmt_first_save: u32,
    /// The statement run whose write raised at that line (forms ①, ②, refused views, `out=`):
    /// it stops there, so its later writes (`torch.arange(n, out=w).mul_(pi)`) do nothing.
    raised_in: Option<u64>,
    pub sites: FxHashMap<Span, Vec<Name>>,
    pub shapes: FxHashMap<Span, Shape>,
    pub graphs: FxHashMap<Span, Held>,
    pub training_calls: FxHashSet<Span>,
    /// See [`UnitOutput::passed_grad`]: with whether the parameter is a `forward`'s data.
    pub passed_grad: FxHashMap<Span, (bool, bool)>,
    /// See [`UnitOutput::passed_through`].
    pub passed_through: Vec<(Span, Span)>,
    /// A `backward()` ran in the unit.
    pub ran_backward: bool,
    /// The tensors a `backward()` ran from in this unit: a function that returns one after
    /// (`return d_loss, g_loss`, for logging) hands over a graph already differentiated.
    pub backpropagated: FxHashSet<ObjId>,
    /// Every optimizer step run, with the parameters it wrote and the first object made after
    /// it: when an inlined call returns, its caller's snapshots of those parameters made before
    /// the step (`state = model.state_dict()` before `fit(model, opt)`) are stale.
    pub step_log: Vec<(Vals, crate::events::WriteId, ObjId)>,
    /// The nodes of gradients taken with `create_graph=True`, and where they were taken.
    pub(crate) second_order: FxHashMap<NodeId, Span>,
    pub data_reads: FxHashMap<Span, DataRead>,
    /// Tensors made to show another's memory by `t.data = s.data`, whether or not they still
    /// require grad (a teacher's parameters then set `requires_grad_(False)`): the statement
    /// that did it and its value.
    pub shown_memory: FxHashMap<ObjId, (Span, Span)>,
    /// Parameters (leaves) made not to require grad (`p.requires_grad_(False)`): still their
    /// module's parameters, which an optimizer's step skips (they get no `.grad`).
    /// Tensors made as parameters (`nn.Parameter(...)`, a layer's weights): only those are
    /// frozen by `requires_grad_(False)` (a plain leaf made not to require grad is no
    /// parameter).
    pub parameters: FxHashSet<ObjId>,
    pub frozen: FxHashSet<ObjId>,
    /// Leaves the program made of its activations, not parameters: `output.requires_grad_()`
    /// in a forward hook (`enable_input_require_grads`). By memory.
    pub own_leaves: FxHashSet<ObjId>,
    /// Attributes of objects that are not modelled (`self.h` of an unknown `self`).
    pub loose_attrs: FxHashMap<(ObjId, Name), ObjId>,
    /// What was stored by subscript into objects that are not modelled (`outputs["x"] = t` of
    /// a dict given as an argument), by object and constant key (`None`: any other key).
    pub loose_items: FxHashMap<(ObjId, Option<Name>), Vals>,
    /// The element read at a known position of a container's slot that stands for many
    /// (`xs[0]` of a comprehension's list), by container, position and the slot's value: the
    /// same tensor each time it is read.
    pub elements_at: FxHashMap<(ObjId, i64, ObjId), ObjId>,
    /// Each tensor read out of a slot as another object (a stand-in of [`Self::elements_at`],
    /// with its position; an element at an unknown index): the container and the slot.
    /// Written in place, it is what the slot then holds too (the element is that tensor in
    /// the program).
    pub read_from_slot: FxHashMap<ObjId, (ObjId, usize, Option<i64>)>,
    pub instances: FxHashMap<ClassLoc, ObjId>,
    /// Whether an attribute or name read as a fill value holds a masking constant, by the
    /// expression's span ([`Interp::masking_value`]).
    pub masking_consts: FxHashMap<Span, bool>,
    /// The instances of each class of the program that its own code made (the first few),
    /// with the calls that made them.
    pub made: Made,
    /// Imported project modules whose body has run: their globals.
    pub modules: FxHashMap<Name, Arc<Env>>,
    /// Modules whose body is running, with the depth of `outer_envs` it runs at.
    pub running_modules: Vec<(Name, usize)>,
    /// The right-hand side of the plain assignment being evaluated and its target names (one
    /// name, or the names a tuple target unpacks it into: `x_pred, c = step(x, c)`).
    pub assign_rhs: Option<(Span, SmallVec<[Name; 2]>)>,
    /// The integers a `for k in range(...)` loop over a container's positions binds (objects
    /// that are plain values otherwise; their values are in `int_values`): `self.layers[k]`
    /// is then that child.
    pub positions: FxHashSet<ObjId>,
    /// Of those, the ones a loop over a `range` of known bounds binds, run turn by turn: each
    /// is the position's true value at its turn, so an ordering of it can be decided (`if i <
    /// final_relu_layer` in a loop of one turn). (A position bound while running a summary
    /// slot, or a comprehension's element at its first position, is a sample.)
    pub every_position: FxHashSet<ObjId>,
    /// Subscripts that read an element out of a list or dict (for fixes: the element is the
    /// place a copy replaces).
    pub element_reads: FxHashSet<Span>,
    /// Of those, the subscripts that may read an element out of a tuple (a display, `tuple()`,
    /// `*args`, or what a function returned as `return a, b`): an element that no assignment
    /// can replace.
    pub tuple_element_reads: FxHashSet<Span>,
    /// Tuples (a display, `tuple(...)`, a function's `*args`): their slots cannot be assigned.
    pub tuples: FxHashSet<ObjId>,
    /// Lists and dicts made as such (a display, a list or dict comprehension, `list(...)`):
    /// their slots can be assigned.
    pub lists: FxHashSet<ObjId>,
    /// Subscripts that may read an element out of a container neither known to be a list or
    /// dict nor known to be a tuple: an element no fix replaces.
    pub fixed_element_reads: FxHashSet<Span>,
    /// A leaf rebound to a computed update of itself (`w = w - lr * w.grad`), by the new
    /// tensor: reported when the new tensor's `.grad` is read (the next update finds `None`),
    /// whether it is a leaf, or whether it requires grad where it does not, or when an
    /// optimizer is given it; not after `retain_grad()`;
    /// a name made a new leaf first (`x_adv = x_adv.detach().requires_grad_()`), or an update
    /// that is the last one (a one-step attack), is fine.
    pub leaf_rebinds: FxHashMap<ObjId, Event>,
    /// Lists of a model's parameter objects (`list(model.parameters())`), where each was made:
    /// the parameters themselves, no snapshot of them.
    pub param_lists: FxHashMap<ObjId, Span>,
    /// Container slots read since they were last stored: the code works on their tensors
    /// through them (IP402 does not take them for kept copies). With the [`Interp::slot_clock`]
    /// of when each was last read (a slot a callee read works through it, see
    /// [`Interp::mark_stale_slots`]).
    pub taken_slots: FxHashMap<(ObjId, Slot), usize>,
    /// When each container slot was last stored ([`Interp::slot_clock`]).
    pub stored_slots: FxHashMap<(ObjId, Slot), usize>,
    /// Container slots last stored while an inlined call ran (a forward hook's `feats[name] =
    /// out` into a dict no name of the running code reaches): a later write of what they hold
    /// makes them stale wherever the container lives. The latest [`MAX_CALL_STORED`], oldest
    /// first (a helper's short-lived dicts would otherwise pile up, scanned at every write).
    pub call_stored: Vec<(ObjId, Slot)>,
    /// How many writes had been made when each container slot was last stored: a write made
    /// before cannot have changed what the slot holds now.
    pub slot_stored_at: FxHashMap<(ObjId, Slot), usize>,
    /// Where each `.grad` tensor was last read as `p.grad` (a fix keeping a copy there, when
    /// that read put it into a list: `[p.grad for p in params]`).
    pub grad_reads: FxHashMap<ObjId, Span>,
    /// The loops over an iterable running, innermost last: the values their target takes (one
    /// abstract row for every element), when the loop began and when the running iteration
    /// did. A slot stored in an earlier iteration holds another element than the one written
    /// now.
    pub loop_rows: Vec<(Vals, usize, usize)>,
    /// Counts slot reads and inlined calls: orders a read against a call's start.
    pub slot_clock: usize,
    /// Evaluating what only metadata is read of (`x.shape`, `x is None`).
    pub metadata_read: bool,
    /// Rebindings an optimizer missed, reported where it was read (not used: passed to a
    /// helper, its `param_groups` read), with the optimizer: taken back if it is then re-synced.
    pub read_reported: Vec<(ObjId, Event)>,
    /// The parameters that replaced those each waiting rebinding took from an optimizer.
    pub rebind_news: Vec<(Event, Vals)>,
    /// Rebindings an optimizer missed and was then given the new parameters for (its
    /// `param_groups` re-synced, `add_param_group`) on some path: not reported where a path
    /// that skipped the loop doing it joins.
    pub given_back: Vec<Event>,
    /// Dicts (made by a literal or `dict(...)`; their slots are their values).
    pub dict_objs: FxHashSet<ObjId>,
    /// Dicts a module's `state_dict()` made (its parameters' memory), by that call.
    pub state_dicts: FxHashMap<ObjId, Span>,
    /// `collections.defaultdict(list)` (true) or `defaultdict(dict)` (false): a key read that is
    /// not there is added with a new empty list or dict.
    pub default_factories: FxHashMap<ObjId, bool>,
    /// Lists and tuples whose slots are their elements one by one (a literal without `*`, the
    /// sum of two such): their `len()` is known until one is changed.
    pub exact_seqs: FxHashSet<ObjId>,
    /// The receiver of the module method being called is one of several alternatives.
    pub uncertain_receiver: bool,
    /// Such a hook is running: what it stores may not be stored.
    pub storing_maybe: bool,
    /// Container slots stored by such a hook: not taken to hold what it stored (IP402).
    pub maybe_slots: FxHashMap<(ObjId, Slot), ()>,
    /// Subscripts of tensors indexed by arrays only ([`expr::IndexOf::arrays_only`]).
    pub array_indexed: FxHashSet<Span>,
    /// Writes into several tensors at once that reach each of them, or the one on a path.
    pub certain: CertainWrites,
    /// A comprehension is being unrolled child by child (one inside it is not: at most 32
    /// evaluations of an element per comprehension).
    pub unrolling_comprehension: bool,
    /// How many loops run as a whole (their body twice, not once per known element) are
    /// running: a counter stepped in one has more values than the runs see.
    pub rolled_loops: u32,
    /// The forward hook running (its definition and the name of its `output` parameter).
    pub running_hook: Option<(DefLoc, Name)>,
    /// The target of an augmented assignment is being read (`x[idx] += v` writes `x` itself
    /// through `__setitem__`: its subscript is taken as a view even with a tensor index).
    pub index_target: bool,
    /// While a forward pre-hook runs: its `args` tuple.
    pub running_pre_hook: Option<ObjId>,
    /// While a custom Function's `backward` runs as a unit: what autograd passes it.
    pub custom_backward: CustomBackward,
    /// The `with` blocks around that change what ops save.
    pub save_modes: SaveModes,

    /// What `state_dict()` handed out and what was written through it.
    pub state_dicts_out: StateDictsOut,
    /// Where a field of a tuple-like record was read (`state.h`): it cannot be assigned.
    pub field_reads: FxHashSet<Span>,
    /// Per `for ... in range(...)` (its iterable's span): whether its body indexes with the loop
    /// variable (decided once: a scan of the body's expressions).
    pub position_bodies: FxHashMap<Span, bool>,
    /// Per comprehension element read by position: the names whose rows it subscripts (`None`
    /// for another base), found once (see `rows_by_position`).
    pub row_bases: FxHashMap<Span, SmallVec<[Option<Name>; 2]>>,
    /// Packed sequences (`pack_padded_sequence(x, lengths)`, `pack_sequence(xs)`).
    pub packed: FxHashSet<ObjId>,
    /// Tuples and lists displayed with one starred item (`(x, *kv)`): the slot it fills, which
    /// stands for however many elements it spreads (the others are one element each).
    pub starred_slots: FxHashMap<ObjId, usize>,
    /// Per loop body (its first statement's span): the condition it may be unswitched on.
    pub invariant_bodies: FxHashMap<Span, unswitch::Invariant>,
    /// Conditions decided for the loop running (see [`unswitch`]): where, at which frame
    /// depth, and the value assumed.
    pub assumed: Vec<(Span, usize, bool)>,
    /// How many `if`s are running, and the module attributes their arms replaced, with the
    /// values before (see [`branch_attrs`]).
    pub branching: u32,
    pub attr_log: Vec<(ObjId, Name, Vals)>,
    /// One object per string value (they are never written).
    pub strings: FxHashMap<Name, ObjId>,
    /// Integer constants by value, and the value of every object known to be an integer
    /// (constants, loop positions, sums of them): loop bounds and `range(...)` arguments.
    pub ints: FxHashMap<i64, ObjId>,
    pub int_values: FxHashMap<ObjId, i64>,
    /// Record fields' defaults, evaluated once per class (see `field_default`).
    pub field_defaults: FxHashMap<(ItemId, ExprId), Vals>,
    /// The keys of dicts whose keys are known strings (`{"relu_type": r}`, `dict(a=1)`, a
    /// function's `**kwargs`), slot by slot, with where each value was written (`None`: a key
    /// that is not such a string).
    pub dict_keys: FxHashMap<ObjId, Vec<Option<(Name, Span)>>>,
    /// The modules and tensors a dict was given as keys (`self.names[module] = name`), in
    /// the order they were stored: iterating the dict gives them.
    pub object_keys: FxHashMap<ObjId, Vals>,
    /// A dataset's `self` while its `__getitem__` runs on its own: what it keeps outlives the
    /// call, and the next call reads it again.
    pub getitem_self: Option<ObjId>,
    /// Storage of the tensors `__getitem__` read out of `self` (or made share memory with,
    /// `torch.from_numpy(self.arr[i])`): the attribute and where it was read.
    pub stored_reads: FxHashMap<ObjId, (Name, Span)>,
    /// What `t.data_ptr()` gave, by the tensor `t` (not a view; the tensor a `.data` or
    /// `.detach()` alias was taken of) it is the address of.
    pub data_ptrs: FxHashMap<ObjId, ObjId>,
    /// The `argparse.ArgumentParser` objects made (dicts of their options' defaults), with
    /// their options.
    pub arg_parsers: FxHashMap<ObjId, Vec<argparse::ParserOption>>,
    /// What stands for the several objects a comprehension's element makes.
    pub summaries: Summaries,
    /// Values `__getitem__` read out of `self` that the analysis does not model (arrays), and
    /// their elements: `torch.from_numpy` of one, wherever it is called, shares stored memory.
    pub stored_arrays: FxHashMap<ObjId, (Name, Span)>,
    /// The instance of a method analysed on its own (not its constructor, nor a dataset's
    /// `__getitem__`): what it keeps outlives the call, as a dataset's samples do.
    pub method_self: Option<ObjId>,
    /// Storage of the tensors that method read out of its instance: the attribute, where, and
    /// how deep in inlined calls.
    pub kept_reads: FxHashMap<ObjId, (Name, Span, usize)>,
    /// The size of the heap when that method was entered: what it kept before the call.
    pub method_heap: usize,
    /// Writes into that storage, from its own values, through a local name: `(write, storage,
    /// the write went through a view the name was bound to)` (see `check_kept_writes`).
    pub kept_writes: Vec<(crate::events::WriteId, ObjId, bool)>,
    /// Whether the function of a write (by its range) reads the name written through after
    /// it (see `read_after_write`): decided once per write site.
    pub read_after: FxHashMap<Span, bool>,
    pub deps: Deps,
    exhausted: bool,
}

impl<'p, 't> Interp<'p, 't> {
    /// An interpreter for a unit starting from `frozen` (the module unit starts from nothing).
    pub fn new(prog: &'p Program<'t>, names: &'p mut Interner, frozen: &Frozen) -> Self {
        let mut it = Interp {
            prog,
            names,
            heap: Layered::on(frozen.heap.clone()),
            nodes: Layered::on(frozen.nodes.clone()),
            saves: Layered::on(frozen.saves.clone()),
            writes: Vec::new(),
            write_targets: Vec::new(),
            write_sole: Vec::new(),
            events: Vec::new(),
            seen_events: FxHashSet::default(),
            state: State::default(),
            outer_envs: Vec::new(),
            closures: FxHashMap::default(),
            next_capture: None,
            globals: frozen.globals.clone(),
            grad_enabled: true,
            implicit_no_grad: false,
            frames: vec![Frame::new(false)],
            inlining: Vec::new(),
            call_site: None,
            call_path: SmallVec::new(),
            inference_mode: false,
            new_grads: false,
            call_site_args: SmallVec::new(),
            steps: 0,
            budget: 0,
            depth: 0,
            stmt: None,
            unit_stmt: None,
            caller_stmts: Vec::new(),
            caller_chain: None,
            split_storages: FxHashSet::default(),
            deque_maxlen: FxHashMap::default(),
            split_written: FxHashMap::default(),
            refused_reported: FxHashSet::default(),
            unit_depth: 0,
            stmt_span: None,
            stmt_stale: SmallVec::new(),
            stale_past_stmt: FxHashMap::default(),
            returned_names: SmallVec::new(),
            stmt_run: 0,
            stmt_runs: 0,
            stmt_first_save: 0,
            raised_in: None,
            sites: FxHashMap::default(),
            shapes: FxHashMap::default(),
            graphs: FxHashMap::default(),
            training_calls: FxHashSet::default(),
            passed_grad: FxHashMap::default(),
            passed_through: Vec::new(),
            ran_backward: false,
            backpropagated: FxHashSet::default(),
            step_log: Vec::new(),
            second_order: FxHashMap::default(),
            data_reads: FxHashMap::default(),
            loose_attrs: (*frozen.loose_attrs).clone(),
            loose_items: FxHashMap::default(),
            elements_at: FxHashMap::default(),
            read_from_slot: FxHashMap::default(),
            instances: (*frozen.instances).clone(),
            made: FxHashMap::default(),
            masking_consts: FxHashMap::default(),
            modules: (*frozen.modules).clone(),
            running_modules: Vec::new(),
            assign_rhs: None,
            positions: FxHashSet::default(),
            every_position: FxHashSet::default(),
            element_reads: FxHashSet::default(),
            tuple_element_reads: FxHashSet::default(),
            tuples: FxHashSet::default(),
            lists: FxHashSet::default(),
            fixed_element_reads: FxHashSet::default(),
            leaf_rebinds: FxHashMap::default(),
            param_lists: FxHashMap::default(),
            taken_slots: FxHashMap::default(),
            stored_slots: FxHashMap::default(),
            call_stored: Vec::new(),
            slot_stored_at: FxHashMap::default(),
            grad_reads: FxHashMap::default(),
            loop_rows: Vec::new(),
            slot_clock: 0,
            metadata_read: false,
            read_reported: Vec::new(),
            rebind_news: Vec::new(),
            given_back: Vec::new(),
            exact_seqs: FxHashSet::default(),
            default_factories: FxHashMap::default(),
            dict_objs: FxHashSet::default(),
            state_dicts: FxHashMap::default(),
            uncertain_receiver: false,
            storing_maybe: false,
            maybe_slots: FxHashMap::default(),
            array_indexed: FxHashSet::default(),
            certain: CertainWrites::default(),
            running_hook: None,
            unrolling_comprehension: false,
            rolled_loops: 0,
            running_pre_hook: None,
            custom_backward: CustomBackward::default(),
            save_modes: SaveModes::default(),
            state_dicts_out: StateDictsOut::default(),
            index_target: false,
            field_reads: FxHashSet::default(),
            position_bodies: FxHashMap::default(),
            row_bases: FxHashMap::default(),
            packed: FxHashSet::default(),
            starred_slots: FxHashMap::default(),
            invariant_bodies: FxHashMap::default(),
            assumed: Vec::new(),
            branching: 0,
            attr_log: Vec::new(),
            strings: FxHashMap::default(),
            ints: (*frozen.ints).clone(),
            int_values: (*frozen.int_values).clone(),
            parameters: (*frozen.parameters).clone(),
            frozen: (*frozen.frozen).clone(),
            shown_memory: (*frozen.shown_memory).clone(),
            own_leaves: (*frozen.own_leaves).clone(),
            field_defaults: FxHashMap::default(),
            dict_keys: FxHashMap::default(),
            object_keys: FxHashMap::default(),
            getitem_self: None,
            stored_reads: FxHashMap::default(),
            data_ptrs: FxHashMap::default(),
            arg_parsers: FxHashMap::default(),
            summaries: Summaries::default(),
            stored_arrays: FxHashMap::default(),
            method_self: None,
            kept_reads: FxHashMap::default(),
            method_heap: 0,
            kept_writes: Vec::new(),
            read_after: FxHashMap::default(),
            deps: Deps::default(),
            exhausted: false,
        };
        if it.heap.len() == 0 {
            // UNKNOWN, OTHER, TRUE, FALSE, NONE, FLOAT_ZERO.
            for obj in [
                Obj::Unknown,
                Obj::Other,
                Obj::Other,
                Obj::Other,
                Obj::Other,
                Obj::Other,
            ] {
                it.heap.push(obj);
            }
            it.int_values.insert(FLOAT_ZERO, 0);
        }
        it
    }

    pub fn alloc(&mut self, mut obj: Obj) -> ObjId {
        // Every object is charged: containers read element by element could otherwise
        // allocate without bound inside one statement.
        self.steps += 1;
        // (A fresh result: a view, `.detach()` or `.data` of a normal tensor stays normal, and
        // takes its base's status when it is made.)
        if let (true, Obj::Tensor(t)) = (self.inference_mode, &mut obj) {
            if t.view_of.is_none() && t.detached_from.is_none() && t.counter {
                t.inference.get_or_insert(t.origin);
            }
        }
        self.heap.push(obj)
    }

    #[inline]
    pub fn obj(&self, id: ObjId) -> &Obj {
        self.heap.get(id)
    }

    #[inline]
    pub fn obj_mut(&mut self, id: ObjId) -> &mut Obj {
        self.heap.get_mut(id)
    }

    pub fn tensor(&self, id: ObjId) -> Option<&TensorObj> {
        match self.obj(id) {
            Obj::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub fn tensor_mut(&mut self, id: ObjId) -> Option<&mut TensorObj> {
        match self.obj_mut(id) {
            Obj::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub fn name(&self, n: Name) -> &str {
        self.names.resolve(n)
    }

    pub fn intern(&mut self, s: &str) -> Name {
        self.names.intern(s)
    }

    /// `a.b` as a name, interned once per pair.
    pub fn path_join(&mut self, a: Name, b: Name) -> Name {
        self.names.join(a, b)
    }

    /// The body of an item, noting that this unit depends on it.
    pub fn body_of(&mut self, item: ItemId) -> Option<Arc<Body>> {
        let version = self.prog.version(item)?;
        self.deps.items.insert(item, version);
        self.prog.body(item, self.names)
    }

    /// The methods of a class item, noting that this unit depends on them.
    pub fn class_methods(&mut self, item: ItemId) -> Vec<(Name, ItemId, MethodRole)> {
        self.note_class(item);
        self.prog.class_methods(item)
    }

    /// The statement items of a class item, noting that this unit depends on them.
    pub fn class_statements(&mut self, item: ItemId) -> Vec<ItemId> {
        self.note_class(item);
        self.prog.class_statements(item)
    }

    /// The classes nested in a class item's body, noting that this unit depends on them.
    pub fn nested_classes(&mut self, item: ItemId) -> Vec<(Name, ItemId)> {
        self.note_class(item);
        self.prog.nested_classes(item)
    }

    /// This unit read a class item's body: its result holds while the body's methods and
    /// statements are the same.
    fn note_class(&mut self, item: ItemId) {
        if !self.deps.classes.contains_key(&item) {
            let key = self.prog.class_fingerprint(item);
            self.deps.classes.insert(item, key);
        }
    }

    pub fn exhausted(&self) -> bool {
        self.steps > self.budget
    }

    /// True once the budget is spent, after which the unit stops (what it found is kept).
    pub fn out_of_budget(&mut self) -> bool {
        if self.steps > self.budget {
            self.exhausted = true;
            return true;
        }
        false
    }

    /// A copy of the state for another path, charged to the budget by its size.
    pub fn fork(&mut self) -> State {
        self.steps += self.state.weight();
        self.state.clone()
    }

    /// Merge `other` into `into`, charged to the budget.
    pub fn join(&mut self, into: &mut State, other: &State) {
        self.steps += other.weight();
        into.join(other);
    }

    /// Merge `other` into the current state, charged to the budget.
    pub fn join_here(&mut self, other: &State) {
        self.steps += other.weight();
        self.state.join(other);
    }

    pub fn report(&mut self, e: Event) {
        if self.seen_events.insert(e.clone()) {
            self.events.push(e);
        }
    }

    /// Add values to slot `slot` of a container. Only what can matter (tensors, modules,
    /// parameters, containers, and code to call: a hook appended to a list a module runs, a
    /// torch function by its path) is
    /// kept, and at most `MAX_SEQ` values per slot.
    pub fn seq_insert(&mut self, seq: ObjId, slot: usize, vals: &Vals) {
        // (A dict written to no longer has the keys it was built with.)
        self.dict_keys.remove(&seq);
        self.exact_seqs.remove(&seq);
        self.store_slot(seq, Slot::At(slot as u32));
        let keep: Vals = vals
            .iter()
            .copied()
            .filter(|v| {
                matches!(
                    self.obj(*v),
                    Obj::Tensor(_)
                        | Obj::Module(_)
                        | Obj::Params { .. }
                        | Obj::Seq(_)
                        | Obj::Optimizer { .. }
                        | Obj::Func(_)
                        | Obj::Bound(..)
                        | Obj::Partial { .. }
                        | Obj::Class(_)
                        | Obj::Path(_)
                )
            })
            .collect();
        if let Obj::Seq(items) = self.obj_mut(seq) {
            while items.len() <= slot {
                items.push(Vals::new());
            }
            for v in keep {
                if items[slot].len() >= MAX_SEQ {
                    break;
                }
                if !items[slot].contains(&v) {
                    items[slot].push(v);
                }
            }
        }
    }

    /// A value set of more than [`MAX_VALUES`] alternatives is unknown.
    pub fn bounded(&self, v: Vals) -> Vals {
        if v.len() > MAX_VALUES {
            smallvec![UNKNOWN]
        } else {
            v
        }
    }

    pub fn heap_origin(&self, v: ObjId) -> Option<Span> {
        match self.obj(v) {
            Obj::Tensor(t) => Some(t.origin),
            Obj::Module(m) => Some(m.origin),
            _ => None,
        }
    }

    /// Whether `e` is the plain name `what` (`range`, `len`, `isinstance`).
    pub fn is_name(&self, c: Code<'_>, e: ExprId, what: &str) -> bool {
        matches!(*c.expr(e), Expr::Name { name, .. } if self.name(name) == what)
    }

    pub fn maybe_tensor(&self, v: ObjId) -> bool {
        matches!(self.obj(v), Obj::Tensor(_))
    }

    pub fn is_module(&self, v: ObjId) -> bool {
        match self.obj(v) {
            Obj::Module(m) => m.local.as_ref().is_none_or(|c| self.class_is_module(c)),
            _ => false,
        }
    }

    /// Everything reachable inside containers (for backward roots and optimizer params).
    pub fn flatten(&self, vals: &Vals, out: &mut Vals, seen: &mut FxHashSet<ObjId>) {
        for v in vals {
            if !seen.insert(*v) {
                continue;
            }
            match self.obj(*v) {
                Obj::Seq(items) => {
                    for i in items {
                        self.flatten(i, out, seen);
                    }
                }
                Obj::Params { tensors, .. } => self.flatten(tensors, out, seen),
                // (A distribution given to an opaque call: the tensors it keeps.)
                Obj::Dist(d) => {
                    self.flatten(&d.first, out, seen);
                    self.flatten(&d.second, out, seen);
                }
                _ => out.push(*v),
            }
        }
    }

    /// The values of `vals` and inside their containers, in order, each as often as it appears
    /// (the same layer twice in a `Sequential` runs twice); a container holding itself is not
    /// entered again. (The values of one slot, a choice, are all kept, one after the other: a
    /// loop of unknown length leaves its layers so, and taking them for one unknown layer lost
    /// five fixtures' findings.)
    pub fn flatten_in_order(&self, vals: &Vals, out: &mut Vals, open: &mut Vec<ObjId>) {
        for v in vals {
            let inner = match self.obj(*v) {
                Obj::Seq(items) => items.iter().collect::<Vec<_>>(),
                Obj::Params { tensors, .. } => vec![tensors],
                _ => {
                    out.push(*v);
                    continue;
                }
            };
            if open.contains(v) {
                continue;
            }
            open.push(*v);
            for i in inner {
                self.flatten_in_order(i, out, open);
            }
            open.pop();
        }
    }

    /// The tensors among `vals` and inside their containers.
    pub fn flat_tensors(&self, vals: &Vals) -> Vals {
        let mut flat = Vals::new();
        self.flatten(vals, &mut flat, &mut FxHashSet::default());
        flat.retain(|v| self.maybe_tensor(*v));
        flat
    }

    // ------------------------------------------------------------------------------- units

    /// Run the module's items in order (an imported module's run when an import does).
    pub fn run_module(&mut self) {
        self.budget = budget_for(self.prog.text.lines().count());
        for i in self.prog.entry_items() {
            if self.state.dead || self.out_of_budget() {
                break;
            }
            self.run_top_item(i);
        }
    }

    /// Run a module-level item (by position): define a function, or execute the statement or
    /// class definition.
    fn run_top_item(&mut self, i: usize) {
        let item = &self.prog.items[i];
        if item.parent().is_some() {
            return;
        }
        let id = item.id;
        if let (ItemKind::Function, Some(name)) = (item.kind(), item.name) {
            // Defining a function binds its name; its body is read when it is called, or now
            // when a decorator of the program's own code registers it (`@register_model`).
            let decorated = self.decorated_by_own_code(i);
            let o = self.alloc(Obj::Func(self.prog.item_def(id)));
            self.state.env.insert(name, smallvec![o]);
            self.state.bound_at.remove(&name);
            self.state.stale.remove(&name);
            if let Some(body) = decorated.then(|| self.body_of(id)).flatten() {
                if let Some(f) = body.root_def() {
                    let c = Code {
                        body: &body,
                        item: id,
                    };
                    self.apply_decorators(c, body.func(f).applied, o);
                }
            }
            return;
        }
        let Some(body) = self.body_of(id) else {
            return;
        };
        let c = Code {
            body: &body,
            item: id,
        };
        self.exec_block(c, body.root);
    }

    /// How many times the program's text names each word (`Backbone(`, `models.Backbone(`,
    /// `make = Backbone`, `factory=Backbone`), not counting a class's definition or
    /// `super(Backbone, self)`, nor in a comment (`# Detect layer`): for a class, each may make
    /// an instance (an alias or a factory called where the module's run does not reach; a name
    /// in a string too, which `eval` may call). One pass over the text, however many classes
    /// ask.
    fn class_mentions(text: &str) -> FxHashMap<&str, usize> {
        use crate::syntax::ident_char;
        let mut counts: FxHashMap<&str, usize> = FxHashMap::default();
        let bytes = text.as_bytes();
        // (The string being read: its quote and whether it is a triple one. Words in strings
        // count, `eval("Detect")` may make one; words in comments do not.)
        let mut string: Option<(u8, bool)> = None;
        let mut at = 0;
        while at < bytes.len() {
            let b = bytes[at];
            match string {
                Some((q, triple)) => {
                    if b == b'\\' {
                        at += 2;
                        continue;
                    }
                    if b == q && (!triple || bytes[at..].starts_with(&[q, q, q])) {
                        at += if triple { 3 } else { 1 };
                        string = None;
                        continue;
                    }
                    if b == b'\n' && !triple {
                        string = None;
                    }
                }
                None if b == b'#' => {
                    at = text[at..].find('\n').map_or(bytes.len(), |n| at + n);
                    continue;
                }
                None if b == b'"' || b == b'\'' => {
                    let triple = bytes[at..].starts_with(&[b, b, b]);
                    string = Some((b, triple));
                    at += if triple { 3 } else { 1 };
                    continue;
                }
                None => {}
            }
            let Some(ch) = text.get(at..).and_then(|r| r.chars().next()) else {
                at += 1;
                continue;
            };
            if !ident_char(ch) {
                at += ch.len_utf8();
                continue;
            }
            let len = text[at..]
                .find(|ch: char| !ident_char(ch))
                .unwrap_or(text.len() - at);
            let before = text[..at].trim_end_matches(' ');
            if !before.ends_with("class") && !before.ends_with("super(") {
                *counts.entry(&text[at..at + len]).or_default() += 1;
            }
            at += len;
        }
        counts
    }

    /// Whether a module-level function item (by position) has a decorator whose first name
    /// holds the program's own code (a function, class or instance of it), read from the
    /// item's text without lowering it: most decorators are torch's or a library's.
    fn decorated_by_own_code(&self, i: usize) -> bool {
        let o = &self.prog.items[i].outline;
        let text = &self.prog.text[o.start as usize..o.end as usize];
        (text.lines())
            .map(str::trim_start)
            .take_while(|l| l.starts_with('@'))
            .any(|l| {
                let root = l[1..].trim_start();
                let end = root
                    .find(|ch: char| !crate::syntax::ident_char(ch))
                    .unwrap_or(root.len());
                (self.names.get(&root[..end]))
                    .and_then(|n| self.state.env.get(&n))
                    .is_some_and(|vals| vals.iter().any(|v| self.own_code(*v)))
            })
    }

    /// A function, class or instance of the program's own code.
    fn own_code(&self, v: ObjId) -> bool {
        match self.obj(v) {
            Obj::Func(_) | Obj::Bound(..) | Obj::Class(_) => true,
            Obj::Module(m) => m.local.is_some(),
            _ => false,
        }
    }

    /// What the module unit leaves for the function units, and what it observed.
    pub fn finish_module(mut self) -> (Frozen, UnitOutput) {
        let out = self.output();
        let globals = Arc::new(std::mem::take(&mut self.state.env));
        (self.freeze(globals), out)
    }

    /// The state function units start from, with `globals`.
    fn freeze(mut self, globals: Arc<Env>) -> Frozen {
        Frozen {
            globals,
            loose_attrs: Arc::new(std::mem::take(&mut self.loose_attrs)),
            instances: Arc::new(std::mem::take(&mut self.instances)),
            made: Arc::new(std::mem::take(&mut self.made)),
            modules: Arc::new(std::mem::take(&mut self.modules)),
            ints: Arc::new(std::mem::take(&mut self.ints)),
            int_values: Arc::new(std::mem::take(&mut self.int_values)),
            parameters: Arc::new(std::mem::take(&mut self.parameters)),
            frozen: Arc::new(std::mem::take(&mut self.frozen)),
            shown_memory: Arc::new(std::mem::take(&mut self.shown_memory)),
            own_leaves: Arc::new(std::mem::take(&mut self.own_leaves)),
            heap: self.heap.freeze(),
            nodes: self.nodes.freeze(),
            saves: self.saves.freeze(),
        }
    }

    /// Build the instances of the class items `classes` (their methods run on them), on top of
    /// `frozen`, which keeps its globals.
    pub fn build_instances(mut self, classes: &[ItemId], frozen: &Frozen) -> (Frozen, UnitOutput) {
        // (The words the text names, counted once when a class needs them.)
        let mut mentions: Option<FxHashMap<&str, usize>> = None;
        for &item in classes {
            let Some(body) = self.body_of(item) else {
                continue;
            };
            let Some(k) = body.root_class() else {
                continue;
            };
            let c = Code { body: &body, item };
            let class = Arc::new(self.class_ref(c, k));
            // Each instance gets the budget of its `__init__`.
            let init_lines = self
                .find_method(&class, known::INIT)
                .and_then(|d| self.resolve_def(d))
                .map_or(0, |(b, f)| b.func(f).lines as usize);
            self.budget = self.steps + budget_for(init_lines);
            // Every instance of it the program makes, when the module's run made them all: as
            // many calls as its text names the class (a call the run did not reach, in a
            // function only a CLI runs, or an alias, may make another kind of instance).
            let made = frozen
                .made
                .get(&class.loc)
                .map_or(&[][..], |m| m.as_slice());
            let mut calls: SmallVec<[Span; 4]> = made.iter().map(|m| m.call).collect();
            calls.sort_unstable();
            calls.dedup();
            if mentions.is_none() && !made.is_empty() {
                mentions = Some(Self::class_mentions(self.prog.text));
            }
            let named = (mentions.as_ref())
                .and_then(|m| m.get(self.name(class.name)).copied())
                .unwrap_or(0);
            let all_made = !made.is_empty() && calls.len() >= named;
            // Their constructors' constant arguments (`activation="lrelu"` at every call) are
            // those of the instance the methods run on: a branch no instance takes is not.
            let settings = if all_made {
                self.constant_init_args(&class, made)
            } else {
                Env::default()
            };
            let instance = self.instance_for_with(&class, &settings);
            // A method analysed on its own may be called in either mode, whatever the
            // constructor set (`self.encoder.eval()` to freeze it, then `model.train()`).
            self.forget_training_mode(instance);
            // Every instance frozen (a backbone under an adapter, a teacher): its methods run
            // frozen too, no backward reaches its parameters.
            if all_made && made.iter().all(|m| self.all_frozen(m.obj)) {
                self.set_tree_requires_grad(instance, false);
            }
        }
        let out = self.output();
        (self.freeze(frozen.globals.clone()), out)
    }

    /// The events of the unit, with the writes and saves they name.
    pub fn output(&mut self) -> UnitOutput {
        let mut reads: Vec<(Span, DataRead)> = self
            .data_reads
            .iter()
            .filter(|(_, r)| !r.written)
            .map(|(s, r)| (*s, *r))
            .collect();
        // `x.data.data`, `f(x.data).data`: one read, the outermost (its fix replaces every
        // `.data` in it). In order of start (the longest first), a read lies inside an earlier
        // one of its item exactly when one of them ends at or after it.
        reads.sort_by_key(|(s, _)| (s.item, s.rel.start, std::cmp::Reverse(s.rel.end)));
        let mut reach: Option<(ItemId, u32)> = None;
        reads.retain(|(s, _)| {
            let inside = reach.is_some_and(|(item, end)| item == s.item && end >= s.rel.end);
            if !inside {
                reach = Some((s.item, s.rel.end));
            }
            !inside
        });
        for (attr, r) in reads {
            self.report(Event::DataRead {
                attr,
                name_at: r.name_at,
                kept: r.kept,
            });
        }
        let mut saves = FxHashMap::default();
        for e in &self.events {
            if let Event::Clobber { save, .. } = e {
                saves.insert(*save, self.saves.get(*save).clone());
            }
        }
        let mut sites: Vec<(Span, Vec<Name>)> =
            self.sites.iter().map(|(s, n)| (*s, n.clone())).collect();
        sites.sort_by_key(|(s, _)| *s);
        UnitOutput {
            events: std::mem::take(&mut self.events),
            writes: std::mem::take(&mut self.writes),
            saves,
            sites,
            shapes: std::mem::take(&mut self.shapes),
            graphs: std::mem::take(&mut self.graphs),
            training_calls: std::mem::take(&mut self.training_calls),
            passed_grad: {
                // (A unit cut short by its budget made only some of its calls: no evidence.)
                let complete = !self.exhausted();
                let trained = self.ran_backward;
                (std::mem::take(&mut self.passed_grad).into_iter())
                    .filter(|(_, (_, data))| complete && (trained || !*data))
                    .map(|(at, (maybe, _))| (at, maybe))
                    .collect()
            },
            passed_through: std::mem::take(&mut self.passed_through),
            steps: self.steps,
            exhausted: self.exhausted,
            deps: Deps {
                budget: self.budget,
                ..std::mem::take(&mut self.deps)
            },
        }
    }
}

pub(crate) type Saves = SmallVec<[SaveId; 2]>;
