//! Optimizers: the parameters they hold, `step()` writing all of them, and parameters or
//! modules rebound to new objects while an optimizer holds the old ones (IP403).

use super::write::WriteSpec;
use super::*;
use crate::events::{Event, Replacement, WriteKind};

impl Interp<'_, '_> {
    pub(super) fn new_optimizer(&mut self, params: &Vals, origin: Span) -> ObjId {
        let mut flat = Vals::new();
        self.flatten(params, &mut flat, &mut FxHashSet::default());
        let mut owners = Vals::new();
        let mut stack: Vec<ObjId> = params.iter().copied().collect();
        let mut seen = FxHashSet::default();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            match self.obj(v) {
                Obj::Params { owners: o, .. } => owners.extend(o.iter().copied()),
                Obj::Seq(items) => {
                    stack.extend(items.iter().flatten().copied());
                    // (The list the optimizer trains is the parameters on purpose.)
                    self.param_lists.remove(&v);
                }
                _ => {}
            }
        }
        let tensors: Vals = flat.into_iter().filter(|v| self.maybe_tensor(*v)).collect();
        // (A leaf's computed update given to an optimizer: "can't optimize a non-leaf Tensor".)
        for t in &tensors {
            if let Some(e) = self.leaf_rebinds.remove(t) {
                self.report(e);
            }
        }
        let opt = self.alloc(Obj::Optimizer {
            params: tensors.clone(),
            origin,
        });
        // (A frozen parameter is listed but not trained: replacing it stops no training.)
        for t in tensors.into_iter().filter(|t| !self.frozen.contains(t)) {
            self.state.held.insert(t, opt);
        }
        for o in owners {
            // (A model the analysis cannot see into, `models.resnet18()`, is held as a whole:
            // a layer assigned into it later is not the optimizer's.)
            if matches!(self.obj(o), Obj::Module(_))
                || (o != UNKNOWN && matches!(self.obj(o), Obj::Unknown))
            {
                self.state.held.insert(o, opt);
            }
        }
        opt
    }

    /// `model.fc = nn.Linear(...)` on a model the analysis cannot see into, after an optimizer
    /// took `model.parameters()`: the new layer's parameters are not the optimizer's. Left
    /// waiting for the optimizer's next use, as a replaced submodule of a model it sees.
    pub(super) fn check_replaced_in_opaque(
        &mut self,
        c: Code<'_>,
        parent: ObjId,
        new: &Vals,
        target: ExprId,
        s: StmtId,
        name: Name,
    ) {
        let Some(&opt) = self.state.held.get(&parent) else {
            return;
        };
        if !new.iter().any(|n| matches!(self.obj(*n), Obj::Module(_))) {
            return;
        }
        // Not a replacement the optimizer misses: a module without parameters (a loss), one
        // whose parameters it already holds (given in another group), or one wrapping the old
        // layer (`nn.Sequential(nn.Dropout(0.5), net.fc)`).
        let mut params = Vals::new();
        for n in new {
            self.module_params(*n, &mut params, &mut FxHashSet::default());
        }
        let held = |p: &ObjId| self.state.held.get(p) == Some(&opt);
        let old = self.loose_attrs.get(&(parent, name)).copied();
        if params.is_empty()
            || params.iter().all(held)
            || old.is_some_and(|o| new.iter().any(|n| self.holds_module(*n, o, 0)))
        {
            return;
        }
        let e = self.rebind_event(c, s, target, name, self.optimizer_origin(opt), false);
        self.orphan_rebind(opt, e, params);
    }

    /// Rebinding `e` waits for optimizer `opt`'s next use; `new`: the parameters that replaced
    /// those it held, which a re-sync of its groups gives it back (see `give_back`).
    fn orphan_rebind(&mut self, opt: ObjId, e: Event, new: Vals) {
        if !self.rebind_news.iter().any(|(x, _)| *x == e) {
            self.rebind_news.push((e.clone(), new));
        }
        self.state.orphan(opt, e);
    }

    /// Whether module `m` is `old` or holds it (as a child or an attribute, a few levels down).
    fn holds_module(&self, m: ObjId, old: ObjId, depth: usize) -> bool {
        if m == old {
            return true;
        }
        let Obj::Module(module) = self.obj(m) else {
            return false;
        };
        depth < 8
            && (module.children.iter().copied())
                .chain(module.attrs.values().flatten().copied())
                .any(|c| self.holds_module(c, old, depth + 1))
    }

    /// The event of `name` rebound by statement `s` through `target`.
    fn rebind_event(
        &self,
        c: Code<'_>,
        s: StmtId,
        target: ExprId,
        name: Name,
        optimizer: Option<Span>,
        update: bool,
    ) -> Event {
        Event::Rebind {
            stmt: StmtRef {
                item: c.item,
                stmt: s,
            },
            span: c.stmt_span(s),
            target: c.span(target),
            name,
            optimizer,
            update,
            how: Replacement::Replaces,
            call_site: self.call_site,
            call_path: self.call_path.clone(),
        }
    }

    pub(super) fn optimizer_method(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        opt: ObjId,
        params: &Vals,
        meth: Name,
        args: &Args,
    ) -> Vals {
        let call = c.span(e);
        // (Used: what a read of it reported before stays reported, whatever re-syncs it next.)
        self.read_reported.retain(|(o, _)| *o != opt);
        if let Some(evs) = self.state.orphaned.remove(&opt) {
            // (`opt.add_param_group({"params": model.fc.parameters()})` after replacing a
            // layer gives the optimizer the new parameters: the way to do it.)
            if self.name(meth) != "add_param_group" {
                for e in evs {
                    if !self.given_back.contains(&e) {
                        self.report(e);
                    }
                }
            }
        }
        match self.name(meth) {
            "step" => {
                // `step(closure)`: the optimizer calls the closure, which computes the loss
                // again, before it updates (LBFGS calls it again on each of its iterations;
                // the update below then runs between two of its calls).
                let closure = (args.keyword(known::CLOSURE).map(|(v, ..)| v))
                    .or_else(|| args.first())
                    .cloned();
                for f in closure.into_iter().flatten() {
                    if matches!(self.obj(f), Obj::Func(_) | Obj::Bound(..)) {
                        self.call_value(c, e, f, &Args::default());
                    }
                }
                // Every held parameter is written in place (under no_grad, so no form ①),
                // except those without a `.grad`, which every optimizer skips (a head no
                // backward reached since `zero_grad()`; measured with SGD with momentum and
                // weight decay, Adam and AdamW).
                let written: Vals = params
                    .iter()
                    .copied()
                    .filter(|p| {
                        !self.frozen.contains(p)
                            && (self.tensor(*p))
                                .is_none_or(|t| !self.state.gradless.contains(&t.storage))
                    })
                    .collect();
                if !written.is_empty() {
                    let spec = WriteSpec::new(WriteKind::Step, call, call).no_leaf_check();
                    let wid = self.write(&written, spec);
                    let now = self.heap.len() as ObjId;
                    self.mark_stale_snapshots(&written, wid, now);
                    self.step_log.push((written, wid, now));
                }
                smallvec![OTHER]
            }
            "zero_grad" => {
                self.zero_grads(params, args, call);
                smallvec![OTHER]
            }
            "add_param_group" => {
                let mut flat = Vals::new();
                for v in args.all_values() {
                    self.flatten(v, &mut flat, &mut FxHashSet::default());
                }
                let new: Vals = flat.into_iter().filter(|v| self.maybe_tensor(*v)).collect();
                for t in &new {
                    self.state.held.insert(*t, opt);
                }
                if let Obj::Optimizer { params, .. } = self.obj_mut(opt) {
                    params.extend(new);
                }
                smallvec![OTHER]
            }
            _ => smallvec![OTHER],
        }
    }

    /// `zero_grad()` (called at `call`) sets the parameters' `.grad` to `None`; with
    /// `set_to_none=False` it zeroes the `.grad` tensors they have in place (what a name kept of
    /// them, `g = w.grad`, then reads zeros).
    pub(super) fn zero_grads(&mut self, params: &Vals, args: &Args, call: Span) {
        if self.keyword_false(args, known::SET_TO_NONE) {
            let mut grads: SmallVec<[ObjId; 4]> = SmallVec::new();
            for p in params {
                let g = self.tensor(*p).and_then(|t| t.grad_tensor);
                if let Some(g) = g.filter(|g| !grads.contains(g)) {
                    grads.push(g);
                }
            }
            self.write_grads(&grads, WriteKind::GradZero, call);
            return;
        }
        for p in params {
            if let Some(t) = self.tensor(*p).filter(|t| t.leaf) {
                let storage = t.storage;
                self.state.gradless.insert(storage);
            }
            // (The next backward makes new gradient tensors.)
            self.set_grad_tensor(*p, None);
        }
    }

    pub(super) fn check_rebind(
        &mut self,
        c: Code<'_>,
        name: Name,
        target: ExprId,
        new: &Vals,
        s: StmtId,
    ) {
        let old = self.state.env.get(&name).cloned().unwrap_or_default();
        let waiting = self.check_rebind_objs(c, &old, new, target, s, name);
        if let (Some(e), false) = (waiting, self.inlining.is_empty()) {
            if let Some(frame) = self.frames.last_mut() {
                frame.local_rebinds.push(e);
            }
        }
    }

    /// `name` (held in `old`) is bound to `new` by statement `s`, through `target`. Returns
    /// the event left waiting for the optimizer's next use, if any.
    pub(super) fn check_rebind_objs(
        &mut self,
        c: Code<'_>,
        old: &Vals,
        new: &Vals,
        target: ExprId,
        s: StmtId,
        name: Name,
    ) -> Option<Event> {
        for o in old {
            if new.contains(o) {
                continue;
            }
            // A submodule is held through its parameters (`opt = SGD(net.parameters())`, then
            // `net.fc = nn.Linear(...)`).
            let held_by = self
                .state
                .held
                .get(o)
                .copied()
                .or_else(|| match self.obj(*o) {
                    // Nothing is held before an optimizer exists: no tree walk then.
                    Obj::Module(_) if !self.state.held.is_empty() => {
                        let mut params = Vals::new();
                        self.module_params(*o, &mut params, &mut FxHashSet::default());
                        params.iter().find_map(|p| self.state.held.get(p).copied())
                    }
                    _ => None,
                });
            let new_is_leaf = new.iter().any(|n| self.tensor(*n).is_some_and(|t| t.leaf));
            let reads_grad = match *c.body.stmt(s) {
                Stmt::Assign { value, .. } => mentions_grad_of(c, value, name),
                _ => false,
            };
            let event = |optimizer: Option<Span>, update: bool| {
                self.rebind_event(c, s, target, name, optimizer, update)
            };
            match (self.obj(*o), held_by) {
                (Obj::Module(_), Some(opt)) => {
                    // What an unseen call returns (`model = wrap(model)` with `wrap` out of
                    // reach) may well be the module or a wrapper around its parameters: only a
                    // module the analysis sees being built replaces them.
                    if !new.iter().any(|n| matches!(self.obj(*n), Obj::Module(_))) {
                        continue;
                    }
                    // A wrapper that keeps the old parameters is fine (`DataParallel(model)`).
                    let mut old_params = Vals::new();
                    self.module_params(*o, &mut old_params, &mut FxHashSet::default());
                    let mut new_params = Vals::new();
                    for n in new {
                        self.module_params(*n, &mut new_params, &mut FxHashSet::default());
                    }
                    let mut e = event(self.optimizer_origin(opt), false);
                    if old_params.iter().all(|p| new_params.contains(p)) && !old_params.is_empty() {
                        // ... unless it brings trainable parameters of its own, which the
                        // optimizer does not hold: they never train (a LoRA or adapter
                        // wrapped around the layer after the optimizer was built).
                        let fresh = new_params.iter().any(|p| {
                            !old_params.contains(p)
                                && !self.state.held.contains_key(p)
                                && self
                                    .tensor(*p)
                                    .is_some_and(|t| t.leaf && t.grad == Tri::Yes)
                        });
                        if !fresh {
                            continue;
                        }
                        if let Event::Rebind { how, .. } = &mut e {
                            *how = Replacement::Wraps;
                        }
                    }
                    // Reported once the optimizer is used again (a new one may replace it).
                    self.orphan_rebind(opt, e.clone(), new_params);
                    return Some(e);
                }
                // A local alias rebound (`x = latents; x = x * 3`): the tensor keeps the name
                // the code trains it under.
                (Obj::Tensor(_), Some(_))
                    if matches!(c.expr(target), Expr::Name { .. })
                        && self.rebinds_alias(*o, name) => {}
                // Tied to another parameter the same optimizer trains (`head.weight =
                // emb.weight`): training goes on through it; the old one just gets no gradient.
                (Obj::Tensor(_), Some(opt))
                    if !new.is_empty()
                        && (new.iter()).all(|n| self.state.held.get(n) == Some(&opt)) => {}
                (Obj::Tensor(_), Some(opt)) => {
                    let e = event(self.optimizer_origin(opt), reads_grad);
                    self.orphan_rebind(opt, e.clone(), new.clone());
                    return Some(e);
                }
                // A new leaf that requires grad (`(x + d).detach().requires_grad_()`) is the
                // right way to restart from an update.
                // (Reported when the new tensor's `.grad` is read, see `leaf_rebinds`.)
                (Obj::Tensor(t), None) if t.leaf && reads_grad && !new_is_leaf => {
                    let e = event(None, true);
                    for n in new {
                        self.leaf_rebinds.insert(*n, e.clone());
                    }
                    return None;
                }
                _ => {}
            }
        }
        None
    }

    /// Whether `name`, about to be bound anew, was bound as an alias of `o` (`x = latents`)
    /// while another name (of this scope or the module's) still holds `o` alone: the tensor
    /// keeps the name it is trained under. (Not the original name rebound while an alias of it
    /// is kept, `init = latents; latents = ...`: the code goes on with the new tensor.)
    fn rebinds_alias(&self, o: ObjId, name: Name) -> bool {
        let alias = self
            .state
            .bound_at
            .get(&name)
            .is_some_and(|b| b.alias_of.is_some());
        let alone = |v: &Vals| v.as_slice() == [o];
        alias
            && ((self.state.env.iter()).any(|(n, v)| *n != name && alone(v))
                || (self.globals.iter()).any(|(n, v)| *n != name && alone(v)))
    }

    fn optimizer_origin(&self, opt: ObjId) -> Option<Span> {
        match self.obj(opt) {
            Obj::Optimizer { origin, .. } => Some(*origin),
            _ => None,
        }
    }
}

/// Whether `e` reads `name.grad` (an update like `w - lr * w.grad`).
fn mentions_grad_of(c: Code<'_>, e: ExprId, name: Name) -> bool {
    let mut stack = vec![e];
    let mut budget = 10_000;
    while let Some(x) = stack.pop() {
        budget -= 1;
        if x.is_none() || budget == 0 {
            continue;
        }
        match *c.expr(x) {
            Expr::Attr { value, attr, .. } => {
                if attr == known::GRAD
                    && matches!(*c.expr(value), Expr::Name { name: n, .. } if n == name)
                {
                    return true;
                }
                stack.push(value);
            }
            Expr::Binary { left, right, .. } | Expr::Bool { left, right, .. } => {
                stack.extend([left, right])
            }
            Expr::Unary { operand } | Expr::Not(operand) => stack.push(operand),
            Expr::Call { func, args } => {
                stack.push(func);
                let a = c.body.args[args as usize];
                stack.extend(c.body.exprs_of(a.positional));
                for k in c.body.list(a.keywords) {
                    stack.push(c.body.keywords[*k as usize].value);
                }
            }
            Expr::Subscript { value, .. } => stack.push(value),
            Expr::Seq { items, .. } | Expr::Other(items) => stack.extend(c.body.exprs_of(items)),
            Expr::IfExp { body, test, orelse } => stack.extend([body, test, orelse]),
            Expr::Starred(v) | Expr::Await(v) => stack.push(v),
            _ => {}
        }
    }
    false
}
