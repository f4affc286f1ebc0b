//! In-place writes: what each one does to the state (clobbered saves, stale names, a leaf
//! written) and the events it raises at once (forms ① and ②, `.data` writes).

use super::*;
use crate::events::{Event, Write, WriteId, WriteKind};
use crate::ops;

/// What a write is, for [`Interp::write`].
pub(crate) struct WriteSpec<'v> {
    pub kind: WriteKind,
    /// The culprit.
    pub range: Span,
    /// The whole statement or call.
    pub site: Span,
    /// The call that writes (a method or torch function).
    pub call: Option<ExprId>,
    /// The name written through.
    pub through: Option<Name>,
    /// The name that rightly sees the new value.
    pub keep: Option<Name>,
    /// The value written, when there is one.
    pub value: Option<&'v Vals>,
    /// Forms ① and ② apply (not for `optimizer.step()`, `nn.init`, `.data`).
    pub checks_leaf: bool,
    /// The receiver, when it is an element read out of a list or dict.
    pub element: Option<Span>,
    /// Where the `.grad` tensor written was last read as `p.grad` ([`Write::grad_read`]).
    pub grad_read: Option<Span>,
    /// The receiver was read as a field of a tuple-like record.
    pub record_field: bool,
    /// Which part of each target it writes (`x[..., :d] = v`: that index; else all of it).
    pub part: Part,
    /// It writes a masking value (`-inf`, `-1e9`, `finfo(dtype).min`): what a softmax or an
    /// exponential after it turns into zeros and zero gradients.
    pub masking: bool,
    /// A store computed from the values it replaces (`im[i] = (im[i] - m) / s`, `x[0] += 1`):
    /// done again, it changes them again.
    pub compounds: bool,
}

impl<'v> WriteSpec<'v> {
    pub fn new(kind: WriteKind, range: Span, site: Span) -> WriteSpec<'v> {
        WriteSpec {
            kind,
            range,
            site,
            call: None,
            through: None,
            keep: None,
            value: None,
            checks_leaf: true,
            element: None,
            grad_read: None,
            record_field: false,
            part: Part::Whole,
            masking: false,
            compounds: false,
        }
    }
    pub fn masking(mut self, masking: bool) -> Self {
        self.masking = masking;
        self
    }
    pub fn part(mut self, part: Part) -> Self {
        self.part = part;
        self
    }
    pub fn element(mut self, e: Option<Span>) -> Self {
        self.element = e;
        self
    }
    pub fn record_field(mut self, f: bool) -> Self {
        self.record_field = f;
        self
    }
    pub fn through(mut self, through: Option<Name>, keep: Option<Name>) -> Self {
        self.through = through;
        self.keep = keep;
        self
    }
    pub fn value(mut self, v: Option<&'v Vals>) -> Self {
        self.value = v;
        self
    }
    pub fn call(mut self, e: ExprId) -> Self {
        self.call = Some(e);
        self
    }
    pub fn no_leaf_check(mut self) -> Self {
        self.checks_leaf = false;
        self
    }
}

impl Interp<'_, '_> {
    /// Some of `targets` is an element of the list or tuple `seq`, or was read out of it.
    fn is_element_of(&self, seq: ObjId, targets: &Vals) -> bool {
        let direct = match self.obj(seq) {
            Obj::Seq(items) => items.iter().flatten().any(|v| targets.contains(v)),
            _ => false,
        };
        direct
            || self
                .elements_at
                .iter()
                .any(|((s, ..), o)| *s == seq && targets.contains(o))
    }

    /// Elements read out of a slot as objects of their own (see [`Interp::read_from_slot`]),
    /// written: the slot holds them too from now on, with the history the write gave them
    /// (`toks[i] /= toks[i].norm()` on a list a loop appended to, then `sum(t.sum() for t in
    /// toks).backward()`: the backward goes through the division).
    fn rejoin_slots(&mut self, targets: &Vals) {
        for t in targets {
            let Some(&(seq, k, _)) = self.read_from_slot.get(t) else {
                continue;
            };
            if let Obj::Seq(items) = self.obj_mut(seq) {
                if let Some(slot) = items.get_mut(k) {
                    if !slot.contains(t) && slot.len() < MAX_VALUES {
                        slot.push(*t);
                    }
                }
            }
        }
    }

    /// `receiver` when it was read as an element out of a list or dict.
    pub(super) fn element_read(&self, receiver: Span) -> Option<Span> {
        Some(receiver).filter(|r| self.element_reads.contains(r))
    }

    /// An in-place write into `targets`.
    pub fn write(&mut self, targets: &Vals, w: WriteSpec<'_>) -> WriteId {
        self.steps += targets.len() as u64;
        let no_grad = !self.grad_enabled || !w.checks_leaf;
        let first = targets.first().copied().unwrap_or(UNKNOWN);
        // A write through a name that may point to several tensors counts only where every
        // possibility agrees: all are leaves (forms ①②), all carry a live save (form ③), or
        // there is just one (IP402).
        let tensors: SmallVec<[TensorObj; 2]> = targets
            .iter()
            .filter_map(|t| self.tensor(*t).cloned())
            .collect();
        let all_leaf = tensors.iter().all(|t| t.leaf || t.view_of_leaf);
        let wid = self.record_write(targets, &w, &tensors);
        self.write_targets.push(first);
        self.write_sole
            .push(tensors.windows(2).all(|p| p[0].storage == p[1].storage));
        if self.raised() {
            // The statement stopped at an earlier write: this one never runs.
            return wid;
        }
        self.record_site(w.range, targets);
        self.note_grad_output_write(wid, &tensors);
        self.note_state_dict_write(wid, &tensors, w.value);
        self.rejoin_slots(targets);
        self.refuse_views_of(&tensors, wid, targets);
        let value_grad = w.value.map(|v| {
            v.iter()
                .fold(Tri::No, |g, x| self.tensor(*x).map_or(g, |t| g.max(t.grad)))
        });
        // (A gradient taken with `create_graph=True` carries the graph it was taken through:
        // MAML's `val.sub_(lr * grad)` writes a value that requires grad.)
        let graph_gradient = value_grad == Some(Tri::Maybe)
            && w.value.is_some_and(|v| self.second_order_in(v).is_some());
        self.writes[wid as usize].value_grad = value_grad == Some(Tri::Yes) || graph_gradient;
        let single = tensors.len() == 1;
        let one_storage = tensors.iter().all(|t| t.storage == tensors[0].storage);
        // (Or through detached aliases of those elements, `targ.detach().mul_(rate)`: the same
        // memory and counter.)
        let detached = |t: &ObjId| self.tensor(*t).and_then(|tt| tt.detached_from);
        let each = self.certain.each_element.iter().any(|(name, ps, _)| {
            w.through == Some(*name) && targets.iter().all(|t| ps.contains(t))
                || targets
                    .iter()
                    .all(|t| detached(t).is_some_and(|b| ps.contains(&b)))
        });
        // A buffer without grad (`torch.zeros(...)`) filled with tensors that have history.
        let plain_buffer = !tensors.is_empty()
            && tensors
                .iter()
                .all(|t| t.grad == Tri::No && t.node.is_none() && t.counter);
        let all_saved = tensors.iter().all(|t| {
            self.state
                .live
                .get(&t.storage)
                .is_some_and(|s| !s.is_empty())
        });
        // (A name an `if` without `else` rebound to what an op made of its tensor: where the
        // body does not run, the write reaches the tensor itself.)
        let on_a_path = match targets.as_slice() {
            [a, b] => (self.certain.branch_pairs.get(&(*a.min(b), *a.max(b))))
                .map(|(saves, _)| saves.clone()),
            _ => None,
        };
        let all_refused = !tensors.is_empty() && tensors.iter().all(|t| t.refused_view.is_some());
        let all_inference = !tensors.is_empty() && tensors.iter().all(|t| t.inference.is_some());
        // (A value carrying a `create_graph=True` gradient, written through `.data`.)
        let mut second_order = match tensors.iter().any(|t| !t.counter) {
            true => w.value.and_then(|v| self.second_order_in(v)),
            false => None,
        };
        for t in targets {
            let Some(tt) = self.tensor(*t).cloned() else {
                continue;
            };
            let all = (no_grad, all_leaf, all_refused, all_inference);
            if self.report_raising(*t, wid, &tt, &w, all, value_grad) {
                // (The statement stops here: nothing after this write runs. A fix needs to
                // know whether a list or dict keeps the tensor: the write is meant to reach
                // it.)
                let t = *t;
                let kept = single
                    && !(self
                        .slots_keeping(wid, Taken::Any, false, |it, x| it.same_or_detached(x, t)))
                    .is_empty();
                let saved = (self.state.live.get(&tt.storage)).is_some_and(|s| !s.is_empty());
                let write = &mut self.writes[wid as usize];
                (write.kept_in_slot, write.memory_saved) = (kept, saved);
                break;
            }
            if !tt.counter {
                let second_order = second_order.take();
                self.write_into_data_alias(wid, (*t, &tt), &w, (single, targets), second_order);
                continue;
            }
            // A step writes every parameter for certain (they are not alternatives), and so
            // does a loop over a known list of tensors.
            let every = matches!(w.kind, WriteKind::Step | WriteKind::LoadState);
            let must = single || all_saved || every || each;
            let live = self
                .state
                .live
                .get(&tt.storage)
                .cloned()
                .unwrap_or_default();
            for s in live {
                // (Or, on the path where an `if` left the name on this tensor, what was saved
                // of it before the `if`.)
                let on_path = (on_a_path.as_ref()).is_some_and(|before| before.contains(&s));
                if must || on_path {
                    note_write(self.state.clobbered.entry(s).or_default(), wid);
                }
            }
            // IP402: other names bound to this very object now see the new value (an optimizer
            // step is meant to be seen).
            if tt.known
                && !matches!(
                    w.kind,
                    WriteKind::Step | WriteKind::Renorm | WriteKind::LoadState
                )
            {
                if single {
                    self.mark_stale_aliases(*t, &tt, wid, &w);
                }
                // (Rows of one stored tensor, `yield self.x[i]` in a loop, are alternatives
                // of one storage: the stored data changes whichever it is.)
                if single || (one_storage && *t == first) {
                    self.check_stored_write(wid, tt.storage, w.compounds);
                }
                if single {
                    self.note_kept_write(wid, &tt, &w);
                }
            }
            let grad_on = self.grad_enabled;
            if let (Some(g), Some(tm)) = (value_grad, self.tensor_mut(*t)) {
                if g.is_possible() && grad_on && tm.grad == Tri::No {
                    tm.grad = g;
                }
            }
        }
        self.link_value_history(targets, &tensors, &w, plain_buffer);
        wid
    }

    /// A write into a gradient autograd passed the running custom `backward` (every tensor
    /// written is one, or a view or alias of one), or into what it read from
    /// `ctx.saved_tensors`.
    fn note_grad_output_write(&mut self, wid: WriteId, tensors: &[TensorObj]) {
        if tensors.is_empty() {
            return;
        }
        if !self.custom_backward.saved.is_empty()
            && (tensors.iter()).all(|t| self.custom_backward.saved.contains(&t.storage))
        {
            self.report(Event::BackwardSavedWrite { write: wid });
        }
        if self.custom_backward.grad_outputs.is_empty() {
            return;
        }
        let given = |t: &TensorObj| {
            self.custom_backward
                .grad_outputs
                .iter()
                .find(|(s, ..)| *s == t.storage)
        };
        if !tensors.iter().all(|t| given(t).is_some()) {
            return;
        }
        if let Some(&(_, name, param)) = given(&tensors[0]) {
            let first = self.custom_backward.first;
            self.report(Event::GradOutputWrite {
                write: wid,
                name,
                param,
                first,
            });
        }
    }

    /// A write through the `state_dict()` values of one module (each tensor written is one)
    /// whose value holds another module's parameters (`soup[k] += v` over another's
    /// `state_dict().items()`): kept until the module is called after the dict was loaded into
    /// another module (the code took the dict for a new state of its own).
    fn note_state_dict_write(&mut self, wid: WriteId, tensors: &[TensorObj], value: Option<&Vals>) {
        let (Some(value), Some(first)) = (value, tensors.first()) else {
            return;
        };
        if self.state_dicts_out.params.is_empty() {
            return;
        }
        let owner_of = |t: &TensorObj| self.state_dicts_out.params.get(&t.storage).copied();
        let Some((owner, made)) = owner_of(first) else {
            return;
        };
        if !tensors
            .iter()
            .all(|t| owner_of(t).is_some_and(|(o, _)| o == owner))
        {
            return;
        }
        let mut flat = Vals::new();
        self.flatten(value, &mut flat, &mut FxHashSet::default());
        // (A value of the state dict of another module kept in one list with it: the first
        // of the models averaged, not a model of its own meant to change, a global model, an
        // EMA, an SWA average.)
        let others: SmallVec<[ObjId; 2]> = (flat.iter())
            .filter_map(|v| self.tensor(*v))
            .filter_map(|t| self.state_dicts_out.params.get(&t.storage).map(|(o, _)| *o))
            .filter(|o| *o != owner)
            .collect();
        let another = others.into_iter().any(|o| self.listed_together(owner, o));
        if another && !self.state_dicts_out.writes.iter().any(|(w, ..)| *w == wid) {
            self.state_dicts_out.writes.push((wid, owner, made, false));
        }
    }

    /// Whether one list holds both modules (`clients = [copy.deepcopy(net) for _ in ...]`),
    /// decided once per pair: a scan of the heap.
    fn listed_together(&mut self, a: ObjId, b: ObjId) -> bool {
        if let Some(known) = self.state_dicts_out.listed.get(&(a, b)) {
            return *known;
        }
        let found = (0..self.heap.len() as ObjId).any(|o| match self.obj(o) {
            Obj::Seq(items) => {
                let has = |m: ObjId| items.iter().any(|slot| slot.contains(&m));
                has(a) && has(b)
            }
            _ => false,
        });
        self.state_dicts_out.listed.insert((a, b), found);
        found
    }

    /// The write's record, before its effects.
    fn record_write(
        &mut self,
        targets: &Vals,
        w: &WriteSpec<'_>,
        tensors: &[TensorObj],
    ) -> WriteId {
        let first = targets.first().copied().unwrap_or(UNKNOWN);
        // (Where every tensor the name may hold was taken as that view: a view taken in one
        // branch only is not where a copy goes.)
        let view_origin = (self.tensor(first).and_then(|t| t.view_origin)).filter(|v| {
            (targets.iter()).all(|o| self.tensor(*o).is_none_or(|t| t.view_origin == Some(*v)))
        });
        let through_bound = w.through.and_then(|n| self.state.bound_at.get(&n).copied());
        self.writes.push(Write {
            range: w.range,
            site: w.site,
            stmt: self.stmt,
            call: w.call,
            kind: w.kind,
            view_origin,
            call_site: self.call_site,
            call_path: self.call_path.clone(),
            numpy_share: tensors.iter().find_map(|t| t.numpy),
            named: (w.through.and_then(|n| self.state.env.get(&n)))
                .is_some_and(|vs| vs.iter().any(|v| self.tensor(*v).is_some())),
            through_bound,
            under_no_grad: !self.grad_enabled && !self.implicit_no_grad,
            element: w.element,
            tuple_element: w
                .element
                .is_some_and(|e| self.tuple_element_reads.contains(&e)),
            fixed_element: w
                .element
                .is_some_and(|e| self.fixed_element_reads.contains(&e)),
            grad_read: w.grad_read,
            // (Or through a parameter's `.detach()` made in the write, `targ.detach().mul_(r)`:
            // that means to change the parameter.)
            into_leaf: !tensors.is_empty()
                && (targets.iter()).all(|o| {
                    self.tensor(*o).is_none_or(|t| {
                        self.parameter_memory(*o, t)
                            || t.counter
                                && (t.detached_from).is_some_and(|b| self.is_param(b))
                                && self.made_in_write(*o, w.site)
                    })
                }),
            gradless: !tensors.is_empty() && tensors.iter().all(|t| !t.grad.is_possible()),
            param: !tensors.is_empty()
                && (tensors.iter()).all(|t| self.parameters.contains(&t.storage)),
            own_leaf: !tensors.is_empty()
                && (tensors.iter()).all(|t| {
                    self.own_leaves.contains(&t.storage) && !self.parameters.contains(&t.storage)
                }),
            record_field: w.record_field,
            call_arg: self.call_site.and(tensors.first()).and_then(|t| {
                self.call_site_args
                    .iter()
                    .find(|(storage, _)| *storage == t.storage)
                    .map(|(_, e)| *e)
            }),
            hook_args: self
                .running_pre_hook
                .is_some_and(|args| self.is_element_of(args, targets)),
            hook_output: self.running_hook.filter(|(def, name)| {
                w.through == Some(*name) && self.stmt.is_some_and(|s| s.item == def.item)
            }),
            data_alias: self
                .data_alias_at(first)
                .or_else(|| self.shown_counter(first)),
            kept_in_slot: false,
            memory_saved: false,
            value_grad: false,
            stmt_first_save: self.stmt_first_save,
        });
        (self.writes.len() - 1) as WriteId
    }

    /// A write into a `.data` alias (no version counter of its own to bump): form ④ (and a
    /// `create_graph=True` gradient's graph dropped), and IP402 where the alias was bound to a
    /// name first or was made to show a parameter.
    fn write_into_data_alias(
        &mut self,
        wid: WriteId,
        (t, tt): (ObjId, &TensorObj),
        w: &WriteSpec<'_>,
        (single, targets): (bool, &Vals),
        second_order: Option<Span>,
    ) {
        self.write_through_data(wid, (t, tt), w.kind, w.masking);
        if let Some(grad) = second_order {
            self.report(Event::DataDropsGraph { write: wid, grad });
        }
        // IP402: a `.data` alias bound to a name first (`x_adv = x.data; x_adv += eps`)
        // changes what the tensor's other names read, as a `.detach()` alias does. (Not
        // a parameter's: `.data` is how older code updates one where it is kept.)
        let plain = !matches!(
            w.kind,
            WriteKind::Step | WriteKind::Renorm | WriteKind::LoadState | WriteKind::Init(_)
        );
        if tt.known
            && single
            && self.names_data_of_non_leaf(tt)
            && plain
            && !self.made_in_write(t, w.site)
        {
            self.mark_stale(t, wid, w.keep);
        }
        // (A parameter's own update through `.data` changes another's memory when it
        // was made to show it.)
        if let Some((b, bt)) = (tt.detached_from)
            .filter(|_| plain && w.kind != WriteKind::DataAssign)
            .filter(|_| single || self.each_data_loop(targets))
            .and_then(|b| Some((b, self.tensor(b)?.clone())))
        {
            self.mark_shown_memory(b, &bt, wid);
        }
    }

    /// Whether every target is the `.data` of a tensor a loop over a known list takes (`for p
    /// in ...: p.data.mul_(a)`).
    fn each_data_loop(&self, targets: &Vals) -> bool {
        self.certain.each_element.iter().any(|(_, ps, _)| {
            (targets.iter()).all(|x| {
                (self.tensor(*x).and_then(|t| t.detached_from)).is_some_and(|b| ps.contains(&b))
            })
        })
    }

    /// Copying a tensor with history into another (`buf[t] = h`, `buf.copy_(h)`) makes that
    /// history part of the target's (autograd's CopySlices), whether or not the target had
    /// one: a later backward through the target reaches what the value's ops saved.
    fn link_value_history(
        &mut self,
        targets: &Vals,
        tensors: &[TensorObj],
        w: &WriteSpec<'_>,
        plain_buffer: bool,
    ) {
        if let Some(v) = w.value {
            // (A leaf that requires grad, or a view of one, starts a history too.)
            let carries = v.iter().any(|x| {
                self.tensor(*x).is_some_and(|t| {
                    t.node.is_some() || ((t.leaf || t.view_of_leaf) && t.grad == Tri::Yes)
                })
            });
            // (A target with no history of its own that is not a plain buffer is an argument
            // the analysis only assumes to be a tensor: often a list, `x[i] = conv(x[i])`.)
            let in_graph = tensors.iter().all(|t| t.node.is_some());
            let subscript = matches!(w.kind, WriteKind::Subscript { .. });
            if carries && (plain_buffer || (subscript && in_graph)) && self.grad_enabled {
                let tensors: Vals = targets
                    .iter()
                    .copied()
                    .filter(|t| self.tensor(*t).is_some_and(|tt| tt.counter && !tt.leaf))
                    .collect();
                self.extend_history(&tensors, Saves::new(), Some(v));
            }
        }
    }

    /// Form ④: a write through `.data` does not bump the counter autograd checks.
    fn write_through_data(
        &mut self,
        wid: WriteId,
        (id, t): (ObjId, &TensorObj),
        kind: WriteKind,
        masking: bool,
    ) {
        // (Through a view of the alias, `d = x.data; d[1:].add_(1)`, the alias is written.)
        let alias = self.data_alias_at(id);
        for at in [Some(t.origin), alias].into_iter().flatten() {
            if let Some(r) = self.data_reads.get_mut(&at) {
                r.written = true;
            }
        }
        // `x.data = v` swaps the storage of the tensor `x` itself: an op that saved `x` as an
        // input keeps that tensor and reads the new values in its backward (measured with torch
        // 2.15: `s = (a * w).sum(); a.data = b; s.backward()` gives `w.grad == b`), while one
        // that saved it as its output keeps a tensor of its own over the old storage. A save of
        // a parameter or plain tensor the write changes is harmful only once a backward reads
        // it: the event waits for that (`check_graph`); a target network updated through
        // `.data` whose graph no backward reaches is fine.
        // A tensor with a history of its own (an op's result) is written by a step autograd
        // never sees: a backward through it (`check_graph` reaches its node) gives silently
        // wrong gradients.
        let leaf = self.tensor(t.storage).is_some_and(|b| b.leaf);
        let mut saves = self.state.live.get(&t.storage).cloned().unwrap_or_default();
        if kind == WriteKind::DataAssign {
            saves.retain(|s| self.saves_tensor_itself(*s));
        }
        for s in &saves {
            // (Saved through this very alias, `d = x.data; y = d * w; d.add_(1)`, or a view of
            // it: its own counter moves, and the backward raises: the write's `data_alias`
            // tells the rules.)
            if alias.is_some() && self.saves.get(*s).through_data == alias {
                note_write(self.state.clobbered.entry(*s).or_default(), wid);
                continue;
            }
            let entry = self.state.data_clobbered.entry(*s).or_default();
            if !entry.contains(&(wid, leaf)) {
                entry.push((wid, leaf));
            }
        }
        // The history of the tensor `.data` was taken from. (Masking it, `scores.data
        // .masked_fill_(mask, -inf)` before a softmax, gives the gradient the out-of-place
        // fill gives: zero at the masked places, as the softmax's own is zero there.)
        let node = t
            .detached_from
            .filter(|_| !masking)
            .and_then(|b| self.tensor(b))
            .and_then(|b| b.node);
        if let (Some(n), false, true) = (node, leaf, kind != WriteKind::DataAssign) {
            let entry = self.state.data_written.entry(n).or_default();
            if !entry.contains(&(wid, leaf)) {
                entry.push((wid, leaf));
            }
        }
        self.report(Event::DataWrite {
            write: wid,
            live: false,
            leaf,
            trigger: None,
        });
    }

    /// Whether save `s` keeps the tensor given itself, which `x.data = v` changes under it: an
    /// input (an output is kept as a tensor of its own), and not a weight `linear` keeps as
    /// its transpose, a view over the old storage (measured with torch 2.15: `nn.Linear`'s and
    /// `F.linear`'s gradients do not change; `conv2d`'s, `@`'s, `*`'s, `LayerNorm`'s do).
    fn saves_tensor_itself(&self, s: crate::domain::SaveId) -> bool {
        let save = self.saves.get(s);
        let linear = match save.op {
            OpLabel::Module { class, .. } => self.name(class) == "Linear",
            OpLabel::Torch(n) | OpLabel::Functional(n) => {
                self.name(n).rsplit('.').next() == Some("linear")
            }
            _ => false,
        };
        // (Its weight: `F.linear` saves the transpose, a view over the old memory; its input
        // it saves itself.)
        !(save.output || linear && self.is_param(save.storage))
    }

    /// Whether the statement running now already raised at a write (forms ① and ②, a refused
    /// view, `out=` under autograd): it stops there, so its later writes never run.
    pub(super) fn raised(&self) -> bool {
        self.raised_in == Some(self.stmt_run)
    }

    /// The statement running now raises at this write.
    fn raise_here(&mut self, ev: Event) {
        self.raised_in = Some(self.stmt_run);
        self.report(ev);
    }

    /// Report a write that raises at once: into a view autograd refuses to rebase, or into a
    /// leaf that requires grad (or a view of one), while autograd records. True when it raises.
    #[allow(clippy::too_many_arguments)]
    fn report_raising(
        &mut self,
        t: ObjId,
        wid: WriteId,
        tt: &TensorObj,
        w: &WriteSpec<'_>,
        (no_grad, all_leaf, all_refused, all_inference): (bool, bool, bool, bool),
        value_grad: Option<Tri>,
    ) -> bool {
        // A view autograd refuses to rebase (a split's, one made under `no_grad`, a hooked
        // layer's), written while autograd records: it raises at once when the tensor viewed or
        // the value requires grad, a leaf's included (measured with torch 2.15).
        // An expanded view (`x.unsqueeze(1).expand(b, n, d)`): a write computing from its
        // values, or copying a tensor in, raises in any mode, once autograd's own checks
        // (a leaf's view, below) have passed.
        // (The expanded view itself: a piece or a reshaped copy of it may not overlap.)
        let expanded = (tt.refused_view)
            .filter(|v| v.op == RefusedBy::Expand && tt.counter && all_refused)
            .filter(|v| tt.view_origin == Some(v.at))
            .filter(|_| self.overlap_refused(w.kind));
        // An inference tensor (or a view of one) written outside inference mode: refused first,
        // in any grad mode (measured with torch 2.15).
        if let (Some(at), false, true) = (tt.inference, self.inference_mode, all_inference) {
            // (Reported once: the fix, an out-of-place write or a copy, makes it a normal tensor
            // for the writes after it.)
            if let Some(t) = self.tensor_mut(t) {
                t.inference = None;
            }
            self.raise_here(Event::RefusedViewWrite {
                write: wid,
                view: RefusedView {
                    op: RefusedBy::Inference,
                    at,
                    grad: false,
                },
                plain: false,
            });
            return true;
        }
        let leaf_first = !no_grad && all_leaf && (tt.leaf || tt.view_of_leaf);
        if let (Some(view), false) = (expanded, leaf_first) {
            self.raise_here(Event::RefusedViewWrite {
                write: wid,
                view,
                plain: false,
            });
            return true;
        }
        let refused = match (tt.refused_view)
            .filter(|v| v.op != RefusedBy::Expand)
            .filter(|_| !no_grad && tt.counter && all_refused)
        {
            // (Only where it is certain: an argument split in a helper may be an index or a
            // mask, which never requires grad.)
            Some(view) if view.grad || tt.grad == Tri::Yes => Some((view, false)),
            Some(view) if value_grad == Some(Tri::Yes) => Some((view, tt.grad == Tri::No)),
            _ => None,
        };
        if let Some((view, plain)) = refused {
            self.raise_here(Event::RefusedViewWrite {
                write: wid,
                view,
                plain,
            });
            return true;
        }
        // (`out=` refuses before it writes: IP102, reported by the call.)
        if no_grad || !tt.counter || !all_leaf || w.kind == WriteKind::OutArg {
            return false;
        }
        // Forms ① and ②: a leaf that requires grad, written while grad mode is on. `x[i] = v`
        // on a leaf writes a view of it (form ②); `x[:] = v` copies into the leaf itself
        // (form ①, measured with torch 2.15).
        // `fill_diagonal_` writes through a view of its own (the diagonal): form ② too.
        let diagonal = matches!(w.kind, WriteKind::Method(m) if self.name(m) == "fill_diagonal_");
        let through_view = tt.view_of_leaf
            || (tt.leaf && (w.kind == WriteKind::Subscript { whole: false } || diagonal));
        if !(through_view || tt.leaf) {
            return false;
        }
        self.raise_here(Event::LeafWrite {
            write: wid,
            through_view,
            view: tt.view_origin,
        });
        true
    }

    /// What write `wid` into `t` (one tensor for certain) makes stale (IP402): other names of
    /// it, names of views of the part it writes, and slots of containers that keep it.
    fn mark_stale_aliases(&mut self, t: ObjId, tt: &TensorObj, wid: WriteId, w: &WriteSpec<'_>) {
        // (A write through a detached alias made in the write itself, `b.detach()[:, 4] += v`,
        // `w.detach().mul_(s)`, names the tensor it means to change: its names and views are
        // meant to see it. One bound to a name first, `d = c.detach(); d += 1`, is the
        // mistake of taking `detach()` for a copy.)
        if tt.detached_from.is_some() && self.made_in_write(t, w.site) {
            return;
        }
        self.mark_stale(t, wid, w.keep);
        self.mark_stale_in_statement(t, wid, w);
        self.mark_stale_views(t, w.part, wid);
        // Writing all of a view writes its part of the tensor it shows.
        if let (Part::Whole, Some((base, part))) = (w.part, tt.view_of) {
            self.mark_stale_views(base, part, wid);
            // A view taken in the write itself through a name (`returns[t] += g * returns[t +
            // 1]`) writes the tensor the name holds: its other names see it, as after
            // `returns[t] = v`. (Not through a chain of view calls, `out.narrow(0, 0, 1).zero_()`,
            // whose name is not known here: that is meant to fill `out`.)
            if w.keep.is_some() && self.view_made_in(tt, w.site) {
                self.mark_stale(base, wid, w.keep);
            }
        }
        // (A parameter or other leaf is meant to be updated where it is kept; so is what
        // `nn.init` fills.)
        // (Nor is a masking fill, `log_probs[ended] = -inf` on a tensor a list keeps: the list
        // is meant to see it.)
        if !(self.is_param(t) || tt.view_of_leaf || matches!(w.kind, WriteKind::Init(_))) {
            if !w.masking {
                self.mark_stale_slots(t, wid, Taken::Any);
                self.mark_accumulated_slots(t, wid, w);
                self.mark_stale_called_slots(t, wid);
                self.mark_stale_view_slots(t, w.part, wid);
            }
        } else {
            // ... but not a parameter made to show another's memory.
            self.mark_shown_memory(t, tt, wid);
        }
        self.mark_param_through_activation(tt, wid, w);
    }

    /// A write with grad off, outside a module, into an activation its `forward` made as a view
    /// of a parameter (TransformerLens's `PosEmbed` returns `W_pos[:n].unsqueeze(0).expand(...)`,
    /// and a hook zeroes it under `torch.no_grad()`): the parameter changes for good, which the
    /// code did not mean (it writes an activation); where the module keeps it is stale.
    fn mark_param_through_activation(&mut self, tt: &TensorObj, wid: WriteId, w: &WriteSpec<'_>) {
        let (Some(view), Some((_, _))) = (tt.view_origin, tt.view_of) else {
            return;
        };
        if self.grad_enabled || view.item == w.site.item || !self.is_param(tt.storage) {
            return;
        }
        let forward = (self.prog.item(view.item))
            .and_then(|i| i.outline.name)
            .and_then(|(s, e)| self.prog.text.get(s as usize..e as usize))
            .is_some_and(ops::is_forward_name);
        if forward {
            let param = tt.storage;
            self.mark_stale_slots_where(wid, Taken::None, true, |_, x| x == param);
        }
    }

    /// A parameter made to show another's memory (`t_p.data = s_p.data`), written in place
    /// (`t_p.mul_(a)`, or through `.data` as an EMA does), changes that other one too, where it
    /// is kept (the student's weights under a teacher's update).
    fn mark_shown_memory(&mut self, t: ObjId, tt: &TensorObj, wid: WriteId) {
        let shown = tt.leaf || self.shown_memory.contains_key(&t);
        let Some(src) = tt.detached_from.filter(|s| *s != t && shown) else {
            return;
        };
        if self.is_param(src) {
            self.mark_stale_slots_where(wid, Taken::None, true, |_, x| x == src);
        }
    }

    /// An in-place call whose result is used inside a larger expression (`lin1(torch.relu_(z)) +
    /// lin_res(z)`, `self.conv(self.act(x)) + x` with an in-place `act`) is taken for an
    /// out-of-place one: the name written through is stale for the rest of the statement, whose
    /// later reads mean the value before the write (VRCNet's residual read its input after an
    /// in-place ReLU rectified it: a silently wrong sum). After the statement the name keeps
    /// its new value, as a statement of its own (`torch.relu_(z)`) means.
    fn mark_stale_in_statement(&mut self, t: ObjId, wid: WriteId, w: &WriteSpec<'_>) {
        let (Some(name), Some(stmt)) = (w.keep, self.stmt_span) else {
            return;
        };
        // (`x.unsqueeze_(0)` changes the shape, not the values a later read sees.)
        let values = match w.kind {
            WriteKind::Method(m) | WriteKind::TorchFn(m) => {
                !ops::SHAPE_ONLY_INPLACE.contains(&self.name(m))
            }
            _ => true,
        };
        let nested = w.kind.is_inplace_call()
            && values
            && w.keep == w.through
            && w.site != stmt
            && stmt.contains(w.site)
            && self
                .assign_rhs
                .as_ref()
                .is_none_or(|(rhs, _)| *rhs != w.site);
        let holds = (self.state.env.get(&name)).is_some_and(|vs| vs.contains(&t));
        if nested && holds {
            self.mark_stmt_stale(&[(name, wid)]);
        }
    }

    /// Make `entries` stale for the rest of the running statement (again, after the other arm
    /// of a conditional expression).
    pub(super) fn mark_stmt_stale(&mut self, entries: &[(Name, WriteId)]) {
        for (name, wid) in entries {
            note_write(self.state.stale.entry(*name).or_default(), *wid);
            self.stmt_stale.push((*name, *wid));
        }
    }

    /// Forget the staleness the statement's nested in-place calls gave (after its first
    /// `keep` entries): at the end of the statement, before its targets are bound (a store into
    /// `z[0]` or `z += ...` reads no values of `z` the code means to be the old ones), or at
    /// the end of one arm of a conditional expression.
    pub(super) fn expire_stmt_stale(&mut self, keep: usize) {
        for (name, wid) in self.stmt_stale.drain(keep..).collect::<SmallVec<[_; 1]>>() {
            if let Some(ws) = self.state.stale.get_mut(&name) {
                ws.retain(|x| *x != wid);
                if ws.is_empty() {
                    self.state.stale.remove(&name);
                }
            }
        }
    }

    /// Whether `x` is the NumPy array `t` was made from (`t = torch.from_numpy(a)`): a write
    /// into `t` changes the array its caller keeps (ART's preprocessing rescaled the user's
    /// batch on every call).
    pub(super) fn array_of(&self, x: ObjId, t: ObjId) -> bool {
        (self.tensor(x))
            .is_some_and(|a| a.numpy.is_some_and(|n| !n.from_tensor) && a.detached_from == Some(t))
    }

    /// Whether `t` is a parameter (one that requires grad, or a frozen one) or a view of one,
    /// under any grad mode: what a module and an optimizer hold, which no copy can stand for.
    /// (A parameter made to show another's memory, `t_p.data = s_p.data`, is one still; a
    /// view of a detached alias is not.)
    fn parameter_memory(&self, o: ObjId, t: &TensorObj) -> bool {
        let viewed = || t.view_of.is_some() && self.is_param(t.storage);
        let own = || t.detached_from.is_none() && (t.view_of_leaf || viewed());
        t.counter && (t.leaf || self.frozen.contains(&o) || own())
    }

    /// Whether `o` is a parameter: a leaf that requires grad, or a frozen one.
    pub(super) fn is_param(&self, o: ObjId) -> bool {
        self.tensor(o).is_some_and(|t| t.leaf) || self.frozen.contains(&o)
    }

    /// Whether `t` is a `.data` alias whose writes IP402 follows to the tensor's other names:
    /// not a NumPy array's share, and not a parameter's `.data` (how older code updates one
    /// where it is kept).
    pub(super) fn names_data_of_non_leaf(&self, t: &TensorObj) -> bool {
        !t.counter
            && t.numpy.is_none()
            && (t.detached_from).is_some_and(|b| {
                !self.is_param(b) && self.tensor(b).is_some_and(|b| !b.view_of_leaf)
            })
    }

    /// Whether a write of this kind into memory some of whose elements overlap is refused
    /// (measured with torch 2.15): those computing from the old values (`e += 1`, `e.mul_(2)`,
    /// `e.relu_()`, `e.clamp_(0, 1)`) and `copy_` are; scalar fills (`fill_`, `zero_`,
    /// `masked_fill_`) and stores at an index (`e[0] = v`, whose piece may not overlap) are not.
    fn overlap_refused(&self, kind: WriteKind) -> bool {
        match kind {
            WriteKind::Method(m) | WriteKind::TorchFn(m) => !matches!(
                self.name(m),
                "fill_" | "zero_" | "masked_fill_" | "index_fill_" | "fill_diagonal_" | "set_"
            ),
            WriteKind::AugAssign
            | WriteKind::InplaceModule { .. }
            | WriteKind::InplaceFunctional
            | WriteKind::InplaceOption => true,
            _ => false,
        }
    }

    /// Whether `x` is `t`, `.detach()` of it, `.data` of it, or what `t` is `.detach()` or
    /// `.data` of: the same memory (a `.data` alias without the version counter, which is IP401's
    /// business when a backward reads the values; a name of the tensor that reads them later
    /// sees the write all the same). Not a NumPy array's share (see [`Interp::array_of`]).
    fn same_or_detached(&self, x: ObjId, t: ObjId) -> bool {
        let detached_from = |x: ObjId| {
            self.tensor(x)
                .filter(|tt| tt.counter || tt.numpy.is_none())
                .and_then(|tt| tt.detached_from)
        };
        x == t || detached_from(x) == Some(t) || detached_from(t) == Some(x)
    }

    /// Whether `t`, and what it is a view of up to the detached alias, were made inside the
    /// write's own statement `site` (`b.detach()[:, 4] += v`), not earlier (a name, an
    /// attribute or a list holding `w.detach()`).
    fn made_in_write(&self, t: ObjId, site: Span) -> bool {
        let mut at = t;
        for _ in 0..4 {
            let Some(tt) = self.tensor(at) else {
                return false;
            };
            if !site.contains(tt.origin) {
                return false;
            }
            match tt.view_of {
                Some((base, _)) if self.tensor(base).is_some_and(|b| b.detached_from.is_some()) => {
                    at = base
                }
                _ => return true,
            }
        }
        false
    }

    /// Whether `t` is a view taken in the statement `site` writes it in (`x[0] += 1`).
    fn view_made_in(&self, t: &TensorObj, site: Span) -> bool {
        t.view_of.is_some()
            && (t.view_origin).is_some_and(|o| o.item == site.item && site.rel.contains(o.rel))
    }

    /// After optimizer step `wid` wrote `params`: the snapshots of them that share their
    /// memory, a name or a container slot holding `p.detach()` (what `state_dict()` holds), are
    /// stale: `best = model.state_dict()` kept for later reads the weights of every step
    /// after it, not those of its own time. (The parameters themselves are meant to be seen
    /// updated, through any name.)
    /// (Only snapshots made before object `made_before` was: those a called helper made after
    /// its own steps, `self.final = model.state_dict()` at the end of `fit`, are of the weights
    /// it leaves.)
    pub(super) fn mark_stale_snapshots(&mut self, params: &Vals, wid: WriteId, made_before: ObjId) {
        let params: FxHashSet<ObjId> = params.iter().copied().collect();
        // (`p.data` too: the same memory, without the counter.)
        let snapshot = |it: &Self, x: ObjId| {
            x < made_before
                && (it.tensor(x).and_then(|t| t.detached_from)).is_some_and(|p| params.contains(&p))
        };
        self.mark_stale_where(wid, None, snapshot);
        self.mark_stale_slots_where(wid, Taken::Any, false, snapshot);
    }

    /// Every other name bound to object `t`, or to `.detach()` of it (or to what `t` is
    /// `.detach()` of), is stale after write `wid`.
    fn mark_stale(&mut self, t: ObjId, wid: WriteId, keep: Option<Name>) {
        self.mark_stale_where(wid, keep, |it, x| {
            it.same_or_detached(x, t) || it.array_of(x, t)
        });
    }

    /// Every name (but `keep`) that may hold an object `hit` accepts is stale after write `wid`.
    fn mark_stale_where(
        &mut self,
        wid: WriteId,
        keep: Option<Name>,
        hit: impl Fn(&Self, ObjId) -> bool,
    ) {
        let stale: SmallVec<[Name; 4]> = self
            .state
            .env
            .iter()
            .filter(|(n, vs)| vs.iter().any(|x| hit(self, *x)) && Some(**n) != keep)
            .map(|(n, _)| *n)
            .collect();
        for n in stale {
            note_write(self.state.stale.entry(n).or_default(), wid);
        }
    }

    /// Whether expression `e` is a masking value: negative infinity (`-float("inf")`,
    /// `float("-inf")`, `-math.inf`), the least finite value (`torch.finfo(x.dtype).min`), or a
    /// large negative constant (`-1e9`, `-10000.0`).
    /// A constant held by an attribute or a name (`self._mask_value = -float("inf")`, `NEG_INF
    /// = -1e9` at module level) counts when every assignment of it in the program's text is
    /// one: of the attribute on any object (a subclass's, a caller's `layer._mask_value = 0.0`,
    /// chained or annotated targets), of the name in the function and at the file's top level;
    /// never a name a function takes as a parameter. Decided once per expression.
    pub(super) fn masking_value(&mut self, c: Code<'_>, e: ExprId) -> bool {
        let span = c.span(e);
        if masking_text(self.prog.text_of(span)) {
            return true;
        }
        if let Some(known) = self.masking_consts.get(&span) {
            return *known;
        }
        let found = match *c.expr(e) {
            // (Read from the whole text: kept as a dependency of the unit.)
            Expr::Attr { value, attr, .. } if matches!(*c.expr(value), Expr::Name { name, .. } if name == known::SELF) =>
            {
                let target = format!(".{}", self.name(attr));
                let found = attr_is_masking(self.prog.text, &target);
                if !self.deps.masking_attrs.iter().any(|(t, _)| *t == target) {
                    self.deps.masking_attrs.push((target, found));
                }
                found
            }
            _ => self.masking_constant(c, e),
        };
        self.masking_consts.insert(span, found);
        found
    }

    fn masking_constant(&self, c: Code<'_>, e: ExprId) -> bool {
        let values: Vec<&str> = match *c.expr(e) {
            Expr::Name { name, .. } => {
                if c.body.params.iter().any(|p| p.name == name) {
                    return false;
                }
                let Some(item) = self.prog.item(c.item) else {
                    return false;
                };
                let (o, target) = (&item.outline, self.name(name));
                let own = (self.prog.text)
                    .get(o.start as usize..o.end as usize)
                    .unwrap_or("");
                let top = (self.prog.text).get(..self.prog.entry_end()).unwrap_or("");
                let indented = own.lines().map(str::trim_start);
                let unindented = top.lines().filter(|l| !l.starts_with([' ', '\t']));
                (indented.chain(unindented))
                    .flat_map(|line| assigned_after(line, target, true))
                    .collect()
            }
            _ => return false,
        };
        !values.is_empty() && values.iter().all(|v| masking_text(v))
    }

    /// Names bound to a view of `base` that shows some of its `part` a write `wid` changed
    /// (`x1 = x[..., :d]` before `x[..., :d] = v`; `flat = x.view(-1)` before `x.relu_()`) are
    /// stale: the view reads the new values. A view of such a view that shows all of it too.
    /// (The tensor written through, and `base` itself, rightly see the write.)
    fn mark_stale_views(&mut self, base: ObjId, part: Part, wid: WriteId) {
        let written = self.write_targets[wid as usize];
        let stale: SmallVec<[Name; 4]> = (self.state.env.iter())
            .filter(|(_, vs)| {
                vs.len() == 1
                    && vs[0] != written
                    && vs[0] != base
                    && self.view_sees(vs[0], base, part)
            })
            .map(|(n, _)| *n)
            .collect();
        for n in stale {
            note_write(self.state.stale.entry(n).or_default(), wid);
        }
    }

    /// Slots of containers that keep a view of `base` showing some of the `part` write `wid`
    /// changed (`output.append(h_t[-1])` before the next step's `h_t[layer] = ...`: every
    /// kept step shows the last state), as [`Self::mark_stale_slots`] judges slots.
    fn mark_stale_view_slots(&mut self, base: ObjId, part: Part, wid: WriteId) {
        let written = self.write_targets[wid as usize];
        self.mark_stale_slots_where(wid, Taken::Any, false, |it, x| {
            x != written
                && x != base
                && it.view_sees(x, base, part)
                && (part == Part::Whole || !it.indexed_by_name(x))
        });
    }

    /// Whether view `x` was taken with an index that names a variable (`buf[t]`, `x[:, :d]`):
    /// kept at each turn of a loop, each is another element, which the next turn's write at
    /// the same text does not change. (`h_t[0]`, `h_t[-1]` name one element every time.)
    fn indexed_by_name(&self, x: ObjId) -> bool {
        let Some(origin) = self.tensor(x).and_then(|t| t.view_origin) else {
            return true;
        };
        let text = self.prog.text_of(origin);
        let index = text.find('[').map_or("", |at| &text[at..]);
        index.chars().any(|ch| ch.is_alphabetic() || ch == '_')
    }

    /// Whether `x` is a view of `base` showing some of its `part` (or a view of such a view
    /// showing all of it).
    fn view_sees(&self, x: ObjId, base: ObjId, part: Part) -> bool {
        let mut at = x;
        for _ in 0..3 {
            let Some((of, shows)) = self
                .tensor(at)
                .filter(|t| t.counter)
                .and_then(|t| t.view_of)
            else {
                return false;
            };
            if of == base {
                return shows.overlaps(part);
            }
            if shows != Part::Whole {
                return false;
            }
            at = of;
        }
        false
    }

    /// Slots of containers the names reach (a dict, a list, a module's attributes, and the
    /// containers those hold) that hold `t` itself, or `.detach()` of it, are stale after write
    /// `wid` (a forward hook's `store["f"] = o` before the next in-place ReLU writes `o`;
    /// `outs.append(x)` before `x = self.act(x)`; a grad-cam hook's
    /// `self.activations.append(output.detach())`). The names are the running function's and
    /// its callers' `self` (the object a hook keeps its list on is often only the caller's). Not a
    /// slot `t` was taken out of since it was stored: the code works on the tensor through it
    /// (`w = self.w; w[m] = 0`, `for s in self.hidden: s.zero_()`, `self.center.mul_(m)`, a
    /// helper given `self.running`), and means the slot to change.
    /// `taken`: which slots taken out count (see [`Taken`]).
    pub(super) fn mark_stale_slots(&mut self, t: ObjId, wid: WriteId, taken: Taken) {
        self.mark_stale_slots_outside(t, wid, taken, None);
    }

    /// [`Self::mark_stale_slots`] but for the slots of container `owner`.
    pub(super) fn mark_stale_slots_outside(
        &mut self,
        t: ObjId,
        wid: WriteId,
        taken: Taken,
        owner: Option<ObjId>,
    ) {
        let keys = self.slots_keeping(wid, taken, false, |it, x| it.same_or_detached(x, t));
        for key in keys.into_iter().filter(|key| Some(key.0) != owner) {
            note_write(self.state.stale_slots.entry(key).or_default(), wid);
        }
    }

    /// `y = out[0]; y += out[j]`: an element taken out of a list and added into in place with
    /// elements of that same list is an accumulator started from the element, not an update of
    /// it (HRNet-style fusion summing branches): the list's slot holding it is stale even
    /// though it was taken out (`Taken::None`), where a slot of the list holds what is added.
    fn mark_accumulated_slots(&mut self, t: ObjId, wid: WriteId, w: &WriteSpec<'_>) {
        let Some(value) = w
            .value
            .filter(|_| w.compounds && w.kind == WriteKind::AugAssign)
        else {
            return;
        };
        let added: Vals = (value.iter().copied())
            .filter(|v| self.tensor(*v).is_some())
            .collect();
        if added.is_empty() {
            return;
        }
        let keys = self.slots_keeping(wid, Taken::None, false, |it, x| it.same_or_detached(x, t));
        for key in keys {
            let Obj::Seq(items) = self.obj(key.0) else {
                continue;
            };
            let sibling =
                (items.iter()).any(|vs| !vs.is_empty() && vs.iter().all(|x| added.contains(x)));
            if sibling {
                note_write(self.state.stale_slots.entry(key).or_default(), wid);
            }
        }
    }

    /// Whether slot `key`, holding `vs`, was stored in an earlier iteration of a loop whose
    /// target takes `vs` (`for mask in masks: mask[...] = 0; out.append(mask)`): it holds the
    /// row of that iteration, another tensor than the one this iteration writes.
    fn earlier_row(&self, key: (ObjId, Slot), vs: &Vals) -> bool {
        let Some(stored) = self.stored_slots.get(&key) else {
            return false;
        };
        (self.loop_rows.iter()).any(|(rows, started, began)| {
            started <= stored && stored < began && vs.iter().all(|x| rows.contains(x))
        })
    }

    /// [`Interp::mark_stale_slots`] for the slots holding one object `hit` accepts; `children`:
    /// the children of containers too (`model[0].weight`).
    pub(super) fn mark_stale_slots_where(
        &mut self,
        wid: WriteId,
        taken: Taken,
        children: bool,
        hit: impl Fn(&Self, ObjId) -> bool,
    ) {
        for key in self.slots_keeping(wid, taken, children, hit) {
            note_write(self.state.stale_slots.entry(key).or_default(), wid);
        }
    }

    /// The container slots (reached from the running code's names, see
    /// [`Self::mark_stale_slots`]) that keep only objects `hit` accepts, as copies a write of
    /// them makes stale.
    fn slots_keeping(
        &mut self,
        wid: WriteId,
        taken: Taken,
        children: bool,
        hit: impl Fn(&Self, ObjId) -> bool,
    ) -> SmallVec<[(ObjId, Slot); 2]> {
        /// Most container objects looked into per write.
        const MAX_VISITED: usize = 64;
        let container = |it: &Self, o: ObjId| matches!(it.obj(o), Obj::Seq(_) | Obj::Module(_));
        // (Breadth first from the names, so a local list is seen before the insides of `self`,
        // and the running function's names before its callers'.)
        // (Of the callers, their `self`: the object a hook keeps its list on, whose method runs
        // the model. For a parameter (`children`), every name of theirs: the module a script
        // made, whose parameter a helper it called zeroed through an activation.)
        let callers = (self.outer_envs.iter().rev()).flat_map(|e| {
            let own: SmallVec<[&Vals; 4]> = if children {
                e.values().collect()
            } else {
                e.get(&known::SELF).into_iter().collect()
            };
            own
        });
        // (In the order the objects were made, not the names' hash order: which containers the
        // bound below lets in must not depend on the names' ids.)
        let mut start: Vec<ObjId> = (self.state.env.values())
            .chain(callers)
            .flatten()
            .copied()
            .filter(|v| container(self, *v))
            .collect();
        start.sort_unstable();
        start.dedup();
        let mut todo: std::collections::VecDeque<(ObjId, u8)> =
            start.into_iter().map(|v| (v, 0)).collect();
        let mut visited: FxHashSet<ObjId> = FxHashSet::default();
        let mut stale: SmallVec<[(ObjId, Slot); 2]> = SmallVec::new();
        while let Some((o, depth)) = todo.pop_front() {
            if visited.len() >= MAX_VISITED {
                break;
            }
            if !visited.insert(o) {
                continue;
            }
            let slots: SmallVec<[(Slot, &Vals); 8]> = match self.obj(o) {
                Obj::Seq(items) => (items.iter().enumerate())
                    .map(|(k, vs)| (Slot::At(k as u32), vs))
                    .collect(),
                Obj::Module(m) => {
                    // (A container's children are no slots of it, but hold theirs: the
                    // `weight` of `model[0]`.)
                    if children && depth < 2 {
                        todo.extend(m.children.iter().map(|ch| (*ch, depth + 1)));
                    }
                    // (In the order the held objects were made: under the bound, which slots
                    // are reached must not rest on the names' hash order.)
                    (self.attrs_in_creation_order(&m.attrs).into_iter())
                        .map(|(a, vs)| (Slot::Attr(a), vs))
                        .collect()
                }
                _ => SmallVec::new(),
            };
            for (slot, vs) in slots {
                let key = (o, slot);
                // (Every alternative the slot may hold: a slot of certain ones.)
                if !vs.is_empty() && vs.iter().all(|x| hit(self, *x)) {
                    if self.slot_kept(key, vs, wid, taken) {
                        stale.push(key);
                    }
                } else if depth < 2 {
                    todo.extend(
                        vs.iter()
                            .filter(|v| container(self, **v))
                            .map(|v| (*v, depth + 1)),
                    );
                }
            }
        }
        self.steps += visited.len() as u64;
        stale
    }

    /// Slots an inlined call stored `t` into, in a container that no name of the running code
    /// may reach (a forward hook's `feats[name] = out` into a module-level dict, read after
    /// the model ran): stale by write `wid` as [`Self::mark_stale_slots`] judges them.
    fn mark_stale_called_slots(&mut self, t: ObjId, wid: WriteId) {
        let stale: SmallVec<[(ObjId, Slot); 2]> = (self.call_stored.iter())
            .copied()
            .filter(|&key| {
                let vs = match (self.obj(key.0), key.1) {
                    (Obj::Seq(items), Slot::At(k)) => items.get(k as usize),
                    (Obj::Module(m), Slot::Attr(a)) => m.attrs.get(&a),
                    _ => None,
                };
                vs.is_some_and(|vs| {
                    !vs.is_empty()
                        && vs.iter().all(|x| self.same_or_detached(*x, t))
                        && self.slot_kept(key, vs, wid, Taken::Any)
                })
            })
            .collect();
        for key in stale {
            note_write(self.state.stale_slots.entry(key).or_default(), wid);
        }
    }

    /// Whether slot `key`, holding `vs` (what a write just wrote), keeps it as a copy the
    /// write makes stale: not a row of an earlier iteration, not taken out since it was stored
    /// (`taken`: which takings count), not stored by a hook that may not run on this layer.
    fn slot_kept(&self, key: (ObjId, Slot), vs: &Vals, wid: WriteId, taken: Taken) -> bool {
        // (Nor one stored after the write: a forward hook on the in-place layer itself keeps
        // its output, written already.)
        let stored_after = (self.slot_stored_at.get(&key)).is_some_and(|at| *at > wid as usize);
        if stored_after || self.earlier_row(key, vs) {
            return false;
        }
        let taken = match (self.taken_slots.get(&key), taken) {
            (Some(_), Taken::Any) => true,
            (Some(at), Taken::After(since)) => *at > since,
            (_, Taken::None) | (None, _) => false,
        };
        !taken && !self.maybe_slots.contains_key(&key)
    }

    /// Slot `slot` of container `o` now holds what was just stored there (by a hook that may not
    /// run on its layer, when `storing_maybe`): neither stale nor taken out.
    pub(super) fn store_slot(&mut self, o: ObjId, slot: Slot) {
        let key = (o, slot);
        self.state.stale_slots.remove(&key);
        self.taken_slots.remove(&key);
        self.slot_stored_at.insert(key, self.writes.len());
        self.call_stored.retain(|k| *k != key);
        if !self.frames.is_empty() {
            if self.call_stored.len() >= super::MAX_CALL_STORED {
                self.call_stored.remove(0);
            }
            self.call_stored.push(key);
        }
        if !self.loop_rows.is_empty() {
            self.slot_clock += 1;
            self.stored_slots.insert(key, self.slot_clock);
        }
        if self.storing_maybe {
            self.maybe_slots.insert(key, ());
        } else {
            self.maybe_slots.remove(&key);
        }
    }

    /// Position `at` of list or dict `o` was removed (`pop`): the marks of the slots after it
    /// move down with them.
    pub(super) fn slot_removed(&mut self, o: ObjId, at: usize) {
        let shift = |slot: Slot| match slot {
            Slot::At(k) if k as usize > at => Some(Slot::At(k - 1)),
            Slot::At(k) if k as usize == at => None,
            other => Some(other),
        };
        shift_slots(&mut self.state.stale_slots, o, shift);
        shift_slots(&mut self.taken_slots, o, shift);
        shift_slots(&mut self.maybe_slots, o, shift);
    }

    /// A slot was put in front of list `o` (`deque.appendleft`): the marks of every slot move
    /// up with them.
    pub(super) fn slot_inserted_front(&mut self, o: ObjId) {
        let shift = |slot: Slot| match slot {
            Slot::At(k) => Some(Slot::At(k + 1)),
            other => Some(other),
        };
        shift_slots(&mut self.state.stale_slots, o, shift);
        shift_slots(&mut self.taken_slots, o, shift);
        shift_slots(&mut self.maybe_slots, o, shift);
    }

    /// A read of slot `slot` of container `o` by expression `at`: the slot is taken out (a
    /// later write through what it holds means to change it), and reported when a write
    /// changed its tensor another way since (IP402).
    pub(super) fn read_slot(&mut self, o: ObjId, slot: Slot, at: Span) {
        self.slot_clock += 1;
        self.taken_slots.insert((o, slot), self.slot_clock);
        // (`if self.feat is not None`, `feats[0].shape` read no values.)
        if self.metadata_read {
            return;
        }
        if let Some(writes) = self.state.stale_slots.remove(&(o, slot)) {
            let name = entry_spelling(self.prog.text_of(at));
            let name = self.intern(&name);
            self.report_stale_read(name, &writes, at, Some((o, slot)));
        }
    }

    /// A read of container `o` at a place the analysis cannot pin (`d[k]`, `xs[i]`): any of its
    /// slots may be read, a stale one too.
    pub(super) fn read_any_slot(&mut self, o: ObjId, at: Span) {
        let first = (self.stale_slots_of(o).into_iter().map(|(s, _)| s)).min_by_key(|s| match s {
            Slot::At(k) => *k as u64,
            Slot::Attr(n) => u64::MAX - n.idx() as u64,
        });
        if let Some(slot) = first {
            self.read_slot(o, slot, at);
        }
    }

    /// A torch layer's forward, called at `at`, reads its parameters and buffers: one a write
    /// changed another way since (a teacher's update into memory the student's layer shows)
    /// is read stale there.
    /// (Only memory `t.data = s.data` made two layers share: the rest of a layer's state is
    /// meant to change where it is kept.)
    pub(super) fn read_layer_state(&mut self, m: ObjId, layer: Span, at: Span) {
        if self.state.stale_slots.is_empty() || self.shown_memory.is_empty() || self.metadata_read {
            return;
        }
        for (slot, writes) in self.stale_slots_of(m) {
            let seen = self.slot_values(m, slot);
            let shared = |w: &WriteId| {
                let written = self.write_targets[*w as usize];
                self.shared_site(written, &seen).is_some()
            };
            if writes.iter().any(shared) {
                self.state.stale_slots.remove(&(m, slot));
                let name = self.prog.text_of(layer).to_string();
                let name = self.intern(&name);
                self.report_stale_read(name, &writes, at, Some((m, slot)));
            }
        }
    }

    /// Every entry of the lists and dicts among `vals` is read by expression `at` (a state
    /// given to `load_state_dict` or `torch.save`, lists zipped): a stale one is reported.
    pub(super) fn read_entries(&mut self, vals: &Vals, at: Span) {
        for o in vals.clone() {
            if matches!(self.obj(o), Obj::Seq(_)) {
                self.read_any_slot(o, at);
            }
        }
    }

    /// The stale slots of container `o`, with the writes that made them so.
    fn stale_slots_of(&self, o: ObjId) -> SmallVec<[(Slot, SmallVec<[WriteId; 1]>); 2]> {
        (self.state.stale_slots.iter())
            .filter(|((c, _), _)| *c == o)
            .map(|((_, slot), ws)| (*slot, ws.clone()))
            .collect()
    }

    /// A copy of list or dict `s` (`dict(d)`, `d.copy()`), slot by slot with its keys, or
    /// (`collapse`) one slot that may be any of its elements (`d.values()`); a slot a write
    /// made stale is stale in the copy too.
    pub(super) fn copy_seq(&mut self, s: ObjId, collapse: bool) -> ObjId {
        let slots = match self.obj(s) {
            Obj::Seq(items) if !collapse => items.clone(),
            _ => vec![self.elements(&smallvec![s])],
        };
        let copy = self.alloc(Obj::Seq(slots));
        if let (false, Some(keys)) = (collapse, self.dict_keys.get(&s).cloned()) {
            self.dict_keys.insert(copy, keys);
        }
        if !collapse && self.dict_objs.contains(&s) {
            self.dict_objs.insert(copy);
        }
        for (slot, ws) in self.stale_slots_of(s) {
            let slot = if collapse { Slot::At(0) } else { slot };
            let e = self.state.stale_slots.entry((copy, slot)).or_default();
            for w in ws {
                note_write(e, w);
            }
        }
        copy
    }

    /// Remember which names share the version counter a write bumps (for hover).
    fn record_site(&mut self, range: Span, targets: &Vals) {
        let storages: SmallVec<[ObjId; 2]> = targets
            .iter()
            .filter_map(|t| self.tensor(*t).filter(|tt| tt.counter).map(|tt| tt.storage))
            .collect();
        if storages.is_empty() {
            self.sites.entry(range).or_default();
            return;
        }
        let mut names: SmallVec<[Name; 4]> = SmallVec::new();
        for (name, vals) in &self.state.env {
            let shares = vals.iter().any(|v| {
                self.tensor(*v)
                    .is_some_and(|t| t.counter && storages.contains(&t.storage))
            });
            if shares {
                names.push(*name);
            }
        }
        let entry = self.sites.entry(range).or_default();
        for n in names {
            if !entry.contains(&n) {
                entry.push(n);
            }
        }
    }
}

/// Adds write `wid` to a list of writes, once.
pub(super) fn note_write<A: smallvec::Array<Item = WriteId>>(list: &mut SmallVec<A>, wid: WriteId) {
    if !list.contains(&wid) {
        list.push(wid);
    }
}

/// The marks of container `o`'s slots in `marks`, moved to the slots `shift` gives (dropped
/// where it gives none). All are taken out first, then put back: shifting one in place could
/// land on a mark not moved yet.
fn shift_slots<V>(
    marks: &mut FxHashMap<(ObjId, Slot), V>,
    o: ObjId,
    shift: impl Fn(Slot) -> Option<Slot>,
) {
    let keys: Vec<(ObjId, Slot)> = (marks.keys()).filter(|(c, _)| *c == o).copied().collect();
    let moved: Vec<(Slot, V)> = (keys.into_iter())
        .filter_map(|k| marks.remove(&k).map(|v| (k.1, v)))
        .collect();
    for (slot, v) in moved {
        if let Some(slot) = shift(slot) {
            marks.insert((o, slot), v);
        }
    }
}

/// Which slots a write's code took out of their container (to work on the tensor through a
/// name) count as taken, and so as meant to change (see [`Interp::mark_stale_slots`]).
#[derive(Clone, Copy, Debug)]
pub(super) enum Taken {
    /// Every slot ever taken out.
    Any,
    /// Only a slot taken out after that [`Interp::slot_clock`]: by the callee whose write this
    /// is, which then wrote through it (`self.state += 1; return self.state`), not one the
    /// caller took out to pass (`mask_tokens(batch["input_ids"])` giving the written ids back).
    After(usize),
    /// None: the callee wrote through a name it bound to the slot's tensor and gave it back
    /// (`out_x = g.x; out_x[m] = 0; return out_x`).
    None,
}

/// How a message names the entry a read takes: the read's own text, but for `d.pop(k)`,
/// `d.get(k, default)` and `xs.pop()`, the subscript they read (`d[k]`, `xs[-1]`).
fn entry_spelling(read: &str) -> String {
    let call = [".pop(", ".get("]
        .iter()
        .filter_map(|m| read.rfind(m).map(|at| (at, m.len())))
        .max();
    match call {
        Some((at, len)) if read.ends_with(')') && !read[at + len..].contains(['(', '\n']) => {
            let args = &read[at + len..read.len() - 1];
            let key = args.split(',').next().unwrap_or("").trim();
            let key = if key.is_empty() { "-1" } else { key };
            format!("{}[{key}]", &read[..at])
        }
        _ => read.to_string(),
    }
}

/// Whether an expression's text is a masking value (see [`Interp::masking_value`]).
fn masking_text(text: &str) -> bool {
    let text: String = (text.chars())
        .filter(|ch| !ch.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    let text = text.split('#').next().unwrap_or("");
    let negative = text.starts_with('-') || text.contains("\"-inf") || text.contains("'-inf");
    (negative && text.replace("finfo", "").contains("inf"))
        || (text.contains("finfo") && text.ends_with(".min"))
        || text.parse::<f64>().is_ok_and(|v| v <= -1e4)
}

/// The values `text` gives the name `name` as a default, a keyword argument or a plain
/// assignment (`name=-1e9` in a signature or a call, `name = v` on a line of its own): each
/// `name` not after a word character or a dot, followed by one `=`. (A value passed by
/// position is not seen.)
fn keyword_values<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    let ident = crate::syntax::ident_char;
    let mut out = Vec::new();
    for (at, _) in text.match_indices(name) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|b| ident(b) || b == '.') {
            continue;
        }
        let rest = &text[at + name.len()..];
        if rest.starts_with(ident) {
            continue;
        }
        let rest = rest.trim_start_matches([' ', '\t']);
        if let Some(value) = rest.strip_prefix('=').filter(|v| !v.starts_with('=')) {
            // (Up to the `,` or `)` that ends the argument.)
            let mut depth = 0i32;
            let end = value
                .char_indices()
                .find(|(_, ch)| match ch {
                    '(' | '[' | '{' => {
                        depth += 1;
                        false
                    }
                    ')' | ']' | '}' if depth > 0 => {
                        depth -= 1;
                        false
                    }
                    ')' | ']' | '}' | ',' | '\n' => depth == 0 || *ch == '\n',
                    _ => false,
                })
                .map_or(value.len(), |(i, _)| i);
            out.push(&value[..end]);
        }
    }
    out
}

/// The values `line` assigns to `target` (`.attr` anywhere in the line, or a name that starts
/// it: `at_start`), annotated (`x: float = v`) or chained (`a = self.x = v`).
fn assigned_after<'l>(line: &'l str, target: &str, at_start: bool) -> Vec<&'l str> {
    let ident = crate::syntax::ident_char;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = line.get(from..).and_then(|rest| rest.find(target)) {
        let start = from + k;
        let end = start + target.len();
        from = end;
        if at_start && start != 0 {
            break;
        }
        if line[end..].starts_with(ident) {
            continue;
        }
        let mut rest = line[end..].trim_start();
        // (An annotation: up to its `=`.)
        if let Some(annotated) = rest.strip_prefix(':') {
            match annotated.find('=') {
                Some(eq) => rest = &annotated[eq..],
                None => continue,
            }
        }
        if let Some(value) = rest.strip_prefix('=').filter(|v| !v.starts_with('=')) {
            out.push(value);
        }
    }
    out
}

/// Whether every assignment of attribute `target` (`.name`) in `text` assigns a masking value
/// (see `Interp::masking_value`).
pub(crate) fn attr_is_masking(text: &str, target: &str) -> bool {
    let mut values = Vec::new();
    for v in text
        .lines()
        .flat_map(|line| assigned_after(line, target, false))
    {
        // (`self.score_mask_value = score_mask_value`: the parameter's default and every
        // value a keyword argument of that name passes.)
        let id = v.split('#').next().unwrap_or("").trim();
        if !id.is_empty() && id.chars().all(crate::syntax::ident_char) {
            let given = keyword_values(text, id);
            if given.is_empty() {
                return false;
            }
            values.extend(given);
        } else {
            values.push(v);
        }
    }
    !values.is_empty() && values.iter().all(|v| masking_text(v))
}
