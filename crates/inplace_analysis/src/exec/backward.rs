//! What a backward reaches: `backward()` (or a graph returned out of a function analysed on
//! its own) walks the graph of its roots; every clobbered save it reaches is a form ③ event.
//! And stale reads: a name read after an in-place write changed its tensor (IP402).

use super::*;
use crate::events::{Event, Keeper, Trigger, WriteId, WriteKind};

impl Interp<'_, '_> {
    pub fn check_graph(&mut self, roots: &Vals, trigger: Span, retain: bool, backward: bool) {
        self.check_graph_until(roots, &Vals::new(), trigger, retain, backward);
    }

    /// [`Interp::check_graph`] for a backward that stops at the tensors `inputs`
    /// (`torch.autograd.grad(loss, inputs)` differentiates with respect to them: the ops that
    /// made them do not run).
    pub fn check_graph_until(
        &mut self,
        roots: &Vals,
        inputs: &Vals,
        trigger: Span,
        retain: bool,
        backward: bool,
    ) {
        self.ran_backward |= backward;
        if let (true, Some(site)) = (backward, self.call_site) {
            self.training_calls.insert(site);
        }
        let stop = self.nodes_of(inputs);
        let mut flat = Vals::new();
        self.flatten(roots, &mut flat, &mut FxHashSet::default());
        if backward {
            self.backpropagated.extend(flat.iter().copied());
        }
        let mut stack: Vec<NodeId> = flat
            .iter()
            .filter_map(|v| self.tensor(*v).and_then(|t| t.node))
            .collect();
        let mut visited = FxHashSet::default();
        let mut reached = Vec::new();
        let mut calls = [None; 3];
        for (slot, call) in calls.iter_mut().zip(&self.call_path) {
            *slot = Some(*call);
        }
        let trigger = Trigger {
            range: trigger,
            backward,
            calls,
        };
        while let Some(n) = stack.pop() {
            if !visited.insert(n) || stop.contains(&n) {
                continue;
            }
            self.steps += 1;
            if let Some(ws) = self.state.data_written.get(&n).cloned() {
                for (write, leaf) in ws {
                    self.report(Event::DataWrite {
                        write,
                        live: true,
                        leaf,
                        trigger: Some(trigger),
                    });
                }
            }
            let node = self.nodes.get(n);
            reached.extend(node.saves.iter().copied());
            stack.extend(node.parents.iter().copied());
        }
        for s in &reached {
            if let Some(ws) = self.state.data_clobbered.get(s).cloned() {
                for (write, leaf) in ws {
                    self.report(Event::DataWrite {
                        write,
                        live: true,
                        leaf,
                        trigger: Some(trigger),
                    });
                }
            }
            let Some(ws) = self.state.clobbered.get(s).cloned() else {
                continue;
            };
            for w in ws {
                self.report(Event::Clobber {
                    write: w,
                    save: *s,
                    trigger,
                });
            }
        }
        if backward && inputs.is_empty() && !self.new_grads {
            self.accumulate_grads(&visited, trigger.range);
        }
        if backward && !self.state.gradless.is_empty() {
            for n in &visited {
                for leaf in &self.nodes.get(*n).leaves {
                    self.state.gradless.remove(leaf);
                }
            }
        }
        if !retain {
            for s in reached {
                self.state.clobbered.remove(&s);
                self.state.data_clobbered.remove(&s);
                let storage = self.saves.get(s).storage;
                if let Some(live) = self.state.live.get_mut(&storage) {
                    live.retain(|x| *x != s);
                }
            }
            for n in &visited {
                self.state.data_written.remove(n);
            }
        }
    }

    /// A read, later in a chain of in-place calls on the same name, that takes a reduction of
    /// it (`p.exp_().div_(p.sum(-1, keepdim=True))`, `x.sub_(x.min()).div_(x.max())`): the
    /// chain means to normalise by the new values.
    fn reduction_receiver(&mut self, read: Span) -> bool {
        let Some(body) = self.body_of(read.item) else {
            return false;
        };
        body.exprs.iter().any(|e| match *e {
            Expr::Attr { value, attr, .. } => {
                body.expr_span(value) == read.rel
                    && crate::ops::REDUCTIONS.contains(&self.name(attr))
            }
            _ => false,
        })
    }

    /// A backward reaching leaves that already have a `.grad` tensor adds the new gradient
    /// into it in place (`g1 = w.grad; loss2.backward()` changes what `g1` holds: IP402 where it
    /// is read).
    fn accumulate_grads(&mut self, visited: &FxHashSet<NodeId>, at: Span) {
        let mut grads: SmallVec<[ObjId; 4]> = SmallVec::new();
        for n in visited {
            for leaf in &self.nodes.get(*n).leaves {
                let g = self.tensor(*leaf).and_then(|t| t.grad_tensor);
                if let Some(g) = g.filter(|g| !grads.contains(g)) {
                    grads.push(g);
                }
            }
        }
        self.write_grads(&grads, WriteKind::GradAccumulate, at);
    }

    /// `.grad` tensors `grads` written in place by one call (`kind`, at `at`): a backward adding
    /// into them, or `zero_grad(set_to_none=False)` zeroing them.
    pub(super) fn write_grads(&mut self, grads: &[ObjId], kind: WriteKind, at: Span) {
        let mut last = None;
        for g in grads {
            let mut spec = super::write::WriteSpec::new(kind, at, at).no_leaf_check();
            spec.grad_read = self.grad_reads.get(g).copied();
            last = Some(self.write(&smallvec![*g], spec));
        }
        // (One call writes all of them: a slot that holds any of several, `[p.grad for p in
        // model.parameters()]` read as one element, is changed whichever it is.)
        if let (Some(wid), true) = (last, grads.len() > 1) {
            self.mark_stale_slots_where(wid, super::write::Taken::Any, false, |_, x| {
                grads.contains(&x)
            });
        }
    }

    /// `container`: the read is of a slot of it (`d["w"]`, `load_state_dict(d)`).
    pub fn report_stale_read(
        &mut self,
        name: Name,
        writes: &[WriteId],
        read: Span,
        container: Option<(ObjId, Slot)>,
    ) {
        // (What the read sees: the slot's values, or the name's.)
        let seen: Vals = match container {
            Some((o, slot)) => self.slot_values(o, slot),
            None => self.state.env.get(&name).cloned().unwrap_or_default(),
        };
        let container = container.map(|(o, _)| o);
        let mut kept: Option<bool> = None;
        for w in writes {
            let written = self.write_targets[*w as usize];
            // (A piece of a `chunk` or a loop's row is not copied where it is made: that is
            // the call returning them all, or the loop.)
            // (Not when the name holds what was written through, or a tensor it is a view of:
            // `io = p; io[..., 4:].sigmoid_()` changes `p` however `p` was made.)
            let view = seen.iter().find_map(|v| {
                let t = self
                    .tensor(*v)
                    .filter(|t| t.view_of.is_some() && !self.viewed_through(written, *v))?;
                Some((t.view_origin?, !matches!(t.view_of, Some((_, Part::Piece)))))
            });
            let (view, view_copyable) = (view.map(|v| v.0), view.is_some_and(|v| v.1));
            if self.stmt_stale.contains(&(name, *w)) && self.reduction_receiver(read) {
                continue;
            }
            let write = &self.writes[*w as usize];
            let mut bindings: SmallVec<[Binding; 2]> = write.through_bound.into_iter().collect();
            bindings.extend(self.state.bound_at.get(&name).copied());
            // (Past its statement, an inline in-place function's name is stale for a `return`
            // of it and a name the statement bound, side by side, alone.)
            let later = !self.stmt_stale.contains(&(name, *w))
                && (self.stale_past_stmt.get(&(name, *w))).is_some_and(|bound| {
                    let returned = |n: Name| self.returned_names.iter().any(|(_, r)| *r == n);
                    self.returned_names.contains(&(read, name))
                        && bound.iter().any(|b| returned(*b))
                });
            if !later && self.stale_past_stmt.contains_key(&(name, *w)) {
                self.state.stale.entry(name).or_default().push(*w);
                continue;
            }
            let nested = self.stmt_stale.contains(&(name, *w)) || later;
            let shared = self.shared_site(written, &seen);
            let snapshot = (write.kind == WriteKind::Step && shared.is_none())
                .then(|| match container {
                    Some(o) => self.snapshot_in(o),
                    None => self.snapshot_origin(name),
                })
                .flatten();
            // A snapshot written through after the step (`W = layer.weight.data` re-masked
            // with `W.mul_(mask)` after each step) is a live handle on the parameter, kept so
            // on purpose.
            // (Unless that write also reads the parameter itself: `slow.add_(fast - slow)` or
            // `ema.lerp_(p, 0.1)` on a snapshot that is `p`'s memory means an old copy.)
            // (Decided once per read: it depends on the read, not the write.)
            if snapshot.is_some()
                && *kept.get_or_insert_with(|| self.kept_handle_write(read, &seen))
            {
                continue;
            }
            self.report(Event::StaleRead {
                write: *w,
                name,
                read,
                bindings,
                next_call: None,
                view,
                view_copyable,
                nested,
                snapshot,
                shared,
            });
        }
    }

    /// Whether `written` is `base` itself, or a view of it (through views of views).
    fn viewed_through(&self, written: ObjId, base: ObjId) -> bool {
        const MAX_CHAIN: usize = 8;
        let mut at = written;
        for _ in 0..MAX_CHAIN {
            if at == base {
                return true;
            }
            match self.tensor(at).and_then(|t| t.view_of) {
                Some((b, _)) => at = b,
                None => return false,
            }
        }
        false
    }

    /// Where `t.data = s.data` made the memory written shared, when the read sees it from the
    /// other side (`seen`: what the read sees, not the tensor written nor what its `.data` was
    /// taken from): the tensor written (or the tensor of its `.data`) shows another's memory, a
    /// teacher's update read through the student; or what the read sees shows it, a teacher's
    /// layer read after the student's step.
    pub(super) fn shared_site(&self, written: ObjId, seen: &[ObjId]) -> Option<(Span, Span)> {
        if self.shown_memory.is_empty() {
            return None;
        }
        let shown = |o: ObjId| self.shown_memory.get(&o).copied();
        let from = |o: ObjId| self.tensor(o).and_then(|t| t.detached_from);
        // (The tensor written itself, and, for a `.data` alias written, the tensor it is of.)
        let writer =
            |v: ObjId| v == written || (shown(written).is_none() && Some(v) == from(written));
        let other: SmallVec<[ObjId; 2]> = (seen.iter().copied()).filter(|v| !writer(*v)).collect();
        if other.is_empty() {
            return None;
        }
        (shown(written))
            .or_else(|| from(written).and_then(shown))
            .or_else(|| other.into_iter().find_map(shown))
    }

    /// The values slot `slot` of container `o` holds.
    pub(super) fn slot_values(&self, o: ObjId, slot: Slot) -> Vals {
        match (self.obj(o), slot) {
            (Obj::Module(m), Slot::Attr(a)) => m.attrs.get(&a).cloned().unwrap_or_default(),
            (Obj::Seq(items), Slot::At(k)) => items.get(k as usize).cloned().unwrap_or_default(),
            _ => Vals::new(),
        }
    }

    /// Where what `name` holds was made, when it is a snapshot of parameters sharing their
    /// memory: the `state_dict()` call of a dict of them, or the `.detach()` / `.data` of one.
    fn snapshot_origin(&self, name: Name) -> Option<Span> {
        (self.state.env.get(&name).into_iter().flatten()).find_map(|v| self.snapshot_made(*v))
    }

    /// Where object `v` was made when it is a snapshot of parameters: a `state_dict()` dict, or
    /// a tensor that is `.detach()` / `.data` of another.
    fn snapshot_made(&self, v: ObjId) -> Option<Span> {
        if let Some(at) = self.state_dicts.get(&v) {
            return Some(*at);
        }
        self.tensor(v)
            .filter(|t| t.detached_from.is_some())
            .map(|t| t.origin)
    }

    /// The history nodes of the tensors in `vals` (inside tuples and lists too).
    fn nodes_of(&self, vals: &Vals) -> FxHashSet<NodeId> {
        let mut flat = Vals::new();
        self.flatten(vals, &mut flat, &mut FxHashSet::default());
        (flat.iter())
            .filter_map(|v| self.tensor(*v).and_then(|t| t.node))
            .collect()
    }

    /// The gradients `torch.autograd.grad(outputs, inputs, create_graph=True)` gives: a tensor
    /// whose history is the part of the graph between `outputs` and `inputs` (the backward ops
    /// read what those ops saved), not what made the inputs. `None` when no output has history.
    pub(super) fn gradient_graph(
        &mut self,
        outputs: &Vals,
        inputs: &Vals,
        call: Span,
    ) -> Option<ObjId> {
        let stop = self.nodes_of(inputs);
        let mut stack: Vec<NodeId> = self.nodes_of(outputs).into_iter().collect();
        if stack.is_empty() {
            return None;
        }
        let mut visited = FxHashSet::default();
        let (mut saves, mut leaves) = (FxHashSet::default(), FxHashSet::default());
        while let Some(n) = stack.pop() {
            if stop.contains(&n) || !visited.insert(n) {
                continue;
            }
            self.steps += 1;
            let node = self.nodes.get(n);
            saves.extend(node.saves.iter().copied());
            leaves.extend(node.leaves.iter().copied());
            stack.extend(node.parents.iter().copied());
        }
        let mut saves: Saves = saves.into_iter().collect();
        saves.sort_unstable();
        let mut leaves: SmallVec<[u32; 2]> = leaves.into_iter().collect();
        leaves.sort_unstable();
        let node = self.nodes.push(GraphNode {
            saves,
            parents: SmallVec::new(),
            leaves,
        });
        self.second_order.insert(node, call);
        let id = self.heap.len() as ObjId;
        let mut t = TensorObj::fresh(id, Tri::Maybe, true, call);
        t.node = Some(node);
        Some(self.alloc(Obj::Tensor(t)))
    }

    /// Where the gradient taken with `create_graph=True` that the history of `vals` goes
    /// through was taken, if any (the walk charged to the step budget).
    pub(super) fn second_order_in(&mut self, vals: &Vals) -> Option<Span> {
        if self.second_order.is_empty() {
            return None;
        }
        let mut stack: Vec<NodeId> = self.nodes_of(vals).into_iter().collect();
        let mut visited = FxHashSet::default();
        while let Some(n) = stack.pop() {
            if !visited.insert(n) || self.out_of_budget() {
                continue;
            }
            if let Some(at) = self.second_order.get(&n) {
                return Some(*at);
            }
            self.steps += 1;
            stack.extend(self.nodes.get(n).parents.iter().copied());
        }
        None
    }

    /// Whether the expression read at `read` is written there: the receiver of an in-place
    /// method (`w.mul_(m)`), or the target of an augmented assignment or of a store into it
    /// (`w += v`, `w[i] = v`, `w[i] += v`). Decided on the lowered code of the item.
    fn written_at(&mut self, read: Span) -> bool {
        use crate::ir::{Expr, ExprId, Stmt};
        let Some(body) = self.body_of(read.item) else {
            return false;
        };
        let read_ids: SmallVec<[ExprId; 2]> = (0..body.exprs.len())
            .filter(|&i| body.expr_spans[i] == read.rel)
            .map(|i| ExprId(i as u32))
            .collect();
        let is_read = |e: ExprId| read_ids.contains(&e);
        // `w[...]` or `w` itself.
        let place = |e: ExprId| {
            is_read(e) || matches!(*body.expr(e), Expr::Subscript { value, .. } if is_read(value))
        };
        let inplace_call = (body.exprs.iter()).any(|x| {
            matches!(*x, Expr::Call { func, .. } if matches!(*body.expr(func),
            Expr::Attr { value, attr, .. } if is_read(value) && {
                let m = self.name(attr);
                m.ends_with('_') && !m.starts_with('_')
            }))
        });
        inplace_call
            || (body.stmts.iter()).any(|st| match *st {
                Stmt::AugAssign { target, .. } => place(target),
                Stmt::Assign { targets, .. } => body.exprs_of(targets).any(
                    |t| matches!(*body.expr(t), Expr::Subscript { value, .. } if is_read(value)),
                ),
                _ => false,
            })
    }

    /// Whether the read at `read` of a snapshot (`seen`) belongs to an in-place update made
    /// through the snapshot itself, kept as a live handle on purpose: its receiver (`W.mul_(m)`,
    /// `W += v`, `W[i] = v`) or an argument of an in-place call on it (`W.mul_(W.abs() > t)`)
    /// -- unless that call also reads the parameter itself: `slow.add_(fast - slow)`,
    /// `ema.mul_(d).add_(p)` on a snapshot of `p` means an old copy. Decided on the lowered
    /// code of the item.
    fn kept_handle_write(&mut self, read: Span, seen: &Vals) -> bool {
        use crate::ir::Expr;
        let Some(body) = self.body_of(read.item) else {
            return false;
        };
        let text = |r: crate::ir::Rel| self.prog.text_of(Span::new(read.item, r));
        let inplace = |it: &Self, e: &Expr| match *e {
            Expr::Call { func, .. } => match *body.expr(func) {
                Expr::Attr { value, attr, .. } => {
                    let m = it.name(attr);
                    (m.ends_with('_') && !m.starts_with('_')).then_some((value, func))
                }
                _ => None,
            },
            _ => None,
        };
        // The in-place call on the snapshot (by the text of its receiver) whose receiver or
        // arguments hold the read, and the argument ranges of it and of the calls chained on it.
        let read_text = text(read.rel);
        let first = (0..body.exprs.len()).find(|&i| {
            inplace(self, &body.exprs[i]).is_some_and(|(value, _)| {
                let recv = body.expr_spans[value.0 as usize];
                let call = body.expr_spans[i];
                recv == read.rel
                    || (text(recv) == read_text
                        && read.rel.start >= recv.end
                        && read.rel.end <= call.end)
            })
        });
        let Some(first) = first else {
            return self.written_at(read);
        };
        let mut args = Vec::new();
        let mut at = Some(first);
        while let Some(i) = at {
            let Some((_, func)) = inplace(self, &body.exprs[i]) else {
                break;
            };
            let call = body.expr_spans[i];
            args.push((body.expr_spans[func.0 as usize].end, call.end));
            at = (0..body.exprs.len()).find(|&k| {
                inplace(self, &body.exprs[k])
                    .is_some_and(|(value, _)| body.expr_spans[value.0 as usize] == call)
            });
        }
        let storages: SmallVec<[ObjId; 4]> = (seen.iter())
            .filter_map(|v| self.tensor(*v).map(|t| t.storage))
            .collect();
        // (A name read inside a comparison makes a mask, `W.mul_(w.abs() > t)`: no old copy.)
        let compared: SmallVec<[crate::ir::Rel; 2]> = (0..body.exprs.len())
            .filter(|&i| matches!(body.exprs[i], Expr::Compare { .. }))
            .map(|i| body.expr_spans[i])
            .collect();
        let other = (0..body.exprs.len()).any(|i| {
            let Expr::Name { name, .. } = body.exprs[i] else {
                return false;
            };
            let at = body.expr_spans[i];
            args.iter()
                .any(|(from, to)| at.start >= *from && at.end <= *to)
                && !compared.iter().any(|c| c.contains(at))
                && (self.state.env.get(&name).into_iter().flatten()).any(|v| {
                    !seen.contains(v)
                        && self
                            .tensor(*v)
                            .is_some_and(|t| storages.contains(&t.storage))
                })
        });
        !other
    }

    /// Where the snapshots container `o` holds were made: the `state_dict()` call that made
    /// it, or the `.detach()` / `.data` of its elements (`[p.data for p in ...]`).
    fn snapshot_in(&self, o: ObjId) -> Option<Span> {
        match self.obj(o) {
            _ if self.state_dicts.contains_key(&o) => self.snapshot_made(o),
            Obj::Seq(items) => (items.iter().flatten()).find_map(|v| self.snapshot_made(*v)),
            _ => None,
        }
    }

    /// A write in a dataset's `__getitem__` that changes a tensor it read out of `self` from its
    /// own values (`x -= mean`, `x.mul_(g)`, an in-place activation): the stored sample
    /// changes, and every later access (the next epoch) reads the changed one. A store
    /// (`self.cache[i] = x`, `x.copy_(v)`, `x.fill_(0)`) gives the same result every time,
    /// unless it is computed from what it replaces (`compounds`: `im[i] = (im[i] - m) / s`).
    pub(super) fn check_stored_write(&mut self, wid: WriteId, storage: ObjId, compounds: bool) {
        // (Stored reads are recorded while a `__getitem__` runs: the write is in it, or in the
        // code its sample reached, a loop over an unbatched loader.)
        if !(compounds || self.compounds(self.writes[wid as usize].kind)) {
            return;
        }
        let Some(&(attr, read)) = self.stored_reads.get(&storage) else {
            return;
        };
        // (An attribute of the dataset's own class, or what a torch dataset keeps, named in
        // full: `TensorDataset.tensors`.)
        let name = match self.name(attr).contains('.') {
            true => attr,
            false => self.intern(&format!("self.{}", self.name(attr))),
        };
        let bindings: SmallVec<[Binding; 2]> = self.writes[wid as usize]
            .through_bound
            .into_iter()
            .collect();
        // The view of the stored tensor a write inside `__getitem__` went through, when no
        // name there holds it (`self.x[i]` handed to a transform): a copy taken there leaves
        // the stored data as it was.
        // (Not one the write itself takes, `im[0] -= m`, but the tensor it is taken of: a
        // copy of the view would be what is written.)
        let site = self.writes[wid as usize].site;
        let mut written = self.write_targets[wid as usize];
        if let Some(t) = self.tensor(written) {
            if let (Some(origin), Some((base, _))) = (t.view_origin, t.view_of) {
                if site.contains(origin) {
                    written = base;
                }
            }
        }
        let view = (self.tensor(written))
            .filter(|t| t.view_of.is_some() && bindings.is_empty() && self.getitem_self.is_some())
            .and_then(|t| Some((t.view_origin?, !matches!(t.view_of, Some((_, Part::Piece))))));
        self.report(Event::StaleRead {
            write: wid,
            name,
            read,
            bindings,
            next_call: Some(Keeper::Dataset),
            view: view.map(|v| v.0),
            view_copyable: view.is_some_and(|v| v.1),
            nested: false,
            snapshot: None,
            shared: None,
        });
    }

    /// A write, in a method analysed on its own, into a tensor the method read out of its
    /// instance, from its own values and through a local name (`m = self.mask[:n, :n]; m |= pad`,
    /// a helper converting `self.anchors` it was handed): remembered until the method returns.
    /// (Updates spelled on the attribute, `self.count += 1`, `self.stats[i] += v`, are what
    /// keeping state means.)
    pub(super) fn note_kept_write(
        &mut self,
        wid: WriteId,
        tt: &TensorObj,
        w: &super::write::WriteSpec,
    ) {
        if self.getitem_self.is_some() || self.method_self.is_none() || w.through.is_none() {
            return;
        }
        let Some(&(.., depth)) = self.kept_reads.get(&tt.storage) else {
            return;
        };
        // (`t[i] -= v` is a subscript write that computes from the old values.)
        let subscript = matches!(w.kind, WriteKind::Subscript { .. });
        if !(self.compounds(w.kind) || subscript && self.in_aug_assign()) {
            return;
        }
        // The name is bound to a crop of the kept tensor (a view of it), written whole.
        let cropped = tt.view_of.is_some() && !subscript;
        // A function called after the read wrote it (a helper made for new tensors).
        let in_callee = self.inlining.len() > depth;
        if cropped || in_callee {
            self.kept_writes.push((wid, tt.storage, cropped));
        }
    }

    /// When a method analysed on its own returns: its writes into what its instance keeps
    /// (`note_kept_write`) that treat the kept tensor as if it were new — a crop of it bound to
    /// a name and written, or a helper's write the method returns — change it for every later
    /// call, which reads the changed values (IP402). A method that accumulates into a kept
    /// tensor through a name (`avg = self.avg; avg.mul_(m).add_(x); return avg`) keeps state
    /// on purpose.
    pub(super) fn check_kept_writes(&mut self, returns: &Vals) {
        if self.kept_writes.is_empty() {
            return;
        }
        let mut flat = Vals::new();
        self.flatten(returns, &mut flat, &mut FxHashSet::default());
        let returned: SmallVec<[ObjId; 4]> = (flat.iter())
            .filter_map(|v| Some(self.tensor(*v)?.storage))
            .collect();
        for (wid, storage, cropped) in std::mem::take(&mut self.kept_writes) {
            if !cropped && !returned.contains(&storage) {
                continue;
            }
            let Some(&(attr, read, _)) = self.kept_reads.get(&storage) else {
                continue;
            };
            let name = self.intern(&format!("self.{}", self.name(attr)));
            let view = (self.tensor(self.write_targets[wid as usize]))
                .filter(|t| cropped && t.view_of.is_some())
                .and_then(|t| Some((t.view_origin?, !matches!(t.view_of, Some((_, Part::Piece))))));
            self.report(Event::StaleRead {
                write: wid,
                name,
                read,
                bindings: SmallVec::new(),
                next_call: Some(Keeper::Instance),
                view: view.map(|v| v.0),
                view_copyable: view.is_some_and(|v| v.1),
                nested: false,
                snapshot: None,
                shared: None,
            });
        }
    }

    /// Whether the statement being run is an augmented assignment (`t[i] += v`).
    fn in_aug_assign(&mut self) -> bool {
        let Some(s) = self.stmt else {
            return false;
        };
        (self.body_of(s.item))
            .is_some_and(|b| matches!(b.stmt(s.stmt), crate::ir::Stmt::AugAssign { .. }))
    }

    /// Whether a write computes the new values from the old ones (rather than storing values).
    fn compounds(&self, kind: WriteKind) -> bool {
        const STORES: &[&str] = &[
            "copy_",
            "fill_",
            "zero_",
            "set_",
            "masked_fill_",
            "index_fill_",
            "fill_diagonal_",
        ];
        match kind {
            WriteKind::AugAssign
            | WriteKind::TorchFn(_)
            | WriteKind::InplaceModule { .. }
            | WriteKind::InplaceFunctional
            | WriteKind::InplaceOption => true,
            WriteKind::Method(m) => !STORES.contains(&self.name(m)),
            _ => false,
        }
    }
}
