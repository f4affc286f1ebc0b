//! Binding: names, attributes, subscripts and patterns; augmented assignment.

use super::expr::IndexOf;
use super::write::WriteSpec;
use super::*;
use crate::events::WriteKind;

impl Interp<'_, '_> {
    /// `a = b = value`: the value is evaluated once, then bound innermost target first.
    pub(super) fn exec_assign(&mut self, c: Code<'_>, s: StmtId, targets: List, value: ExprId) {
        let targets: SmallVec<[ExprId; 2]> = c.body.exprs_of(targets).collect();
        let Some(&innermost) = targets.last() else {
            return;
        };
        let saved = self.assign_rhs.take();
        // (The names a tuple target binds; its other places, `batch["mlm"], batch["labels"] =
        // mask(batch["ids"])`, bind none, nor does a place alone, `item["img"] =
        // normalize(img)`.)
        let names: Option<SmallVec<[Name; 2]>> = match *c.expr(innermost) {
            Expr::Subscript { .. } | Expr::Attr { .. } => Some(SmallVec::new()),
            Expr::Name { name, .. } => Some(smallvec![name]),
            Expr::Seq { items, .. } => Some(
                (c.body.exprs_of(items))
                    .filter_map(|t| match *c.expr(t) {
                        Expr::Name { name, .. } => Some(name),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        };
        if let Some(names) = names {
            self.assign_rhs = Some((c.span(value), names));
        }
        let vals = self.eval(c, value);
        self.assign_rhs = saved;
        self.keep_stale_past_statement(c, &targets, value);
        self.expire_stmt_stale(0);
        for t in targets.iter().rev() {
            self.bind_target(c, *t, vals.clone(), Some(s));
        }
        let call = matches!(c.expr(value), Expr::Call { .. });
        for t in &targets {
            match *c.expr(*t) {
                Expr::Name { name, .. } => self.note_graph(c, *t, name),
                // (Each name a tuple target binds: `advantages, returns = compute(batch)`.)
                Expr::Seq { items, .. } => {
                    for i in c.body.exprs_of(items) {
                        if let Expr::Name { name, .. } = *c.expr(i) {
                            self.note_graph(c, i, name);
                        }
                    }
                }
                _ => {}
            }
            if call {
                self.note_shapes(c, *t);
            }
        }
    }

    /// `del x`, `del m.weight`, `del m._parameters["weight"]` (SpectralNorm's re-registration
    /// of a weight as `weight_bar`): the name unbound, the member taken off the module (its
    /// `parameters()` no longer give it; a tensor set under the name later replaces nothing).
    /// Other targets (`del d[k]`) are evaluated. (A member is taken off only by a `del` that
    /// runs whenever its function does, not one under a branch or in a loop: the heap is
    /// the same on every path.)
    pub(super) fn exec_delete(&mut self, c: Code<'_>, s: StmtId, list: List) {
        let always = unconditional(c, s);
        for t in c.body.exprs_of(list) {
            self.delete_target(c, t, always);
        }
    }

    /// One target of `del` (`del (a, b)`, `del [a, b]`: each item).
    fn delete_target(&mut self, c: Code<'_>, t: ExprId, always: bool) {
        match *c.expr(t) {
            Expr::Seq { items, .. } => {
                for i in c.body.exprs_of(items) {
                    self.delete_target(c, i, always);
                }
            }
            Expr::Name { name, .. } => {
                self.state.env.remove(&name);
                self.state.stale.remove(&name);
                self.state.bound_at.remove(&name);
            }
            Expr::Attr { value, attr, .. } => {
                for o in self.eval(c, value) {
                    if always {
                        self.remove_member(o, attr);
                    }
                }
            }
            Expr::Subscript { value, sub } => match self.registry_slot(c, value, sub) {
                Some((owner, key)) => {
                    for o in self.eval(c, owner) {
                        if always {
                            self.remove_member(o, key);
                        }
                    }
                }
                None => {
                    self.eval(c, t);
                }
            },
            _ => {
                self.eval(c, t);
            }
        }
    }

    /// Whether the running statement runs whenever its function does (it is in the
    /// function's own block, not under a branch or in a loop).
    pub(super) fn runs_always(&self, c: Code<'_>) -> bool {
        (self.stmt.filter(|s| s.item == c.item)).is_some_and(|s| unconditional(c, s.stmt))
    }

    /// Member `name` of module `o` (a parameter, buffer, submodule or attribute) removed.
    pub(super) fn remove_member(&mut self, o: ObjId, name: Name) {
        if let Obj::Module(m) = self.obj_mut(o) {
            if let Some(gone) = m.attrs.remove(&name) {
                m.children.retain(|ch| !gone.contains(ch));
            }
        }
    }

    /// Whether the name a target binds holds tensors carrying an autograd graph, joined with
    /// what it held on other paths through the same statement.
    fn note_graph(&mut self, c: Code<'_>, target: ExprId, name: Name) {
        let vals = self.state.env.get(&name).cloned().unwrap_or_default();
        let graph = |v: &ObjId| self.tensor(*v).is_some_and(|t| t.node.is_some());
        let mut held = vals.iter().filter(|v| **v != NONE).peekable();
        let now = if held.peek().is_some() && held.all(graph) {
            Held::Graph
        } else if vals.iter().any(|v| self.keeps_graph(*v, 2)) {
            Held::GraphInObject
        } else {
            Held::Plain
        };
        let at = c.span(target);
        let joined = self.graphs.get(&at).map_or(now, |was| was.join(now));
        self.graphs.insert(at, joined);
    }

    /// Whether `v` is an object that keeps a tensor carrying a graph: a distribution, or a list,
    /// tuple or dict (`{"disc_0": [h1, h2]}`, nested up to `depth` levels).
    fn keeps_graph(&self, v: ObjId, depth: u8) -> bool {
        let graph = |v: &ObjId| self.tensor(*v).is_some_and(|t| t.node.is_some());
        match self.obj(v) {
            Obj::Dist(d) => d.first.iter().chain(&d.second).any(graph),
            Obj::Seq(items) if depth > 0 => {
                (items.iter().flatten()).any(|x| graph(x) || self.keeps_graph(*x, depth - 1))
            }
            _ => false,
        }
    }

    /// What each name of a target now holds (see [`Shape`]), joined with what it held on
    /// other paths through the same statement.
    fn note_shapes(&mut self, c: Code<'_>, target: ExprId) {
        match *c.expr(target) {
            Expr::Name { name, .. } => {
                let vals = self.state.env.get(&name).cloned().unwrap_or_default();
                let shape = self.shape_of(&vals);
                let at = c.span(target);
                let entry = self.shapes.entry(at).or_insert(shape);
                if *entry != shape {
                    *entry = Shape::Other;
                }
            }
            Expr::Seq { items, .. } => {
                for t in c.body.exprs_of(items) {
                    self.note_shapes(c, t);
                }
            }
            // `self.hidden` of a module keeping its recurrent state.
            Expr::Attr { value, attr, .. } => {
                let Expr::Name { name, .. } = *c.expr(value) else {
                    return;
                };
                let owners = self.state.env.get(&name).cloned().unwrap_or_default();
                let mut vals = Vals::new();
                for o in owners {
                    if let Obj::Module(m) = self.obj(o) {
                        vals.extend(m.attrs.get(&attr).into_iter().flatten().copied());
                    }
                }
                let shape = self.shape_of(&vals);
                let entry = self.shapes.entry(c.span(target)).or_insert(shape);
                if *entry != shape {
                    *entry = Shape::Other;
                }
            }
            _ => {}
        }
    }

    fn shape_of(&self, vals: &Vals) -> Shape {
        let tensors = |vs: &Vals| !vs.is_empty() && vs.iter().all(|v| self.tensor(*v).is_some());
        let one = |v: ObjId| match self.obj(v) {
            Obj::Tensor(_) => Shape::Tensor,
            // (A dict's values: iterating it gives its keys.)
            Obj::Seq(items)
                if !items.is_empty()
                    && items.iter().all(tensors)
                    && self.dict_objs.contains(&v) =>
            {
                Shape::Dict
            }
            Obj::Seq(items) if !items.is_empty() && items.iter().all(tensors) => Shape::Tensors,
            Obj::Module(m)
                if m.local.as_ref().is_some_and(|k| self.is_named_tuple(k, 0))
                    && !m.attrs.is_empty()
                    && m.attrs.values().all(tensors) =>
            {
                Shape::NamedTuple
            }
            _ => Shape::Other,
        };
        // (`None` on a path that made nothing yet: `state = None` before the first step.)
        let mut shapes = vals.iter().filter(|v| **v != NONE).map(|v| one(*v));
        let first = shapes.next().unwrap_or(Shape::Other);
        if shapes.all(|s| s == first) {
            first
        } else {
            Shape::Other
        }
    }

    /// Bind an assignment target (name, attribute, subscript or pattern) to values.
    pub fn bind_target(&mut self, c: Code<'_>, target: ExprId, vals: Vals, stmt: Option<StmtId>) {
        match *c.expr(target) {
            Expr::Name { name, .. } => self.bind_name(c, name, Some(target), vals, stmt),
            Expr::Attr { value, attr, .. } => {
                self.bind_attribute(c, target, value, attr, vals, stmt)
            }
            Expr::Subscript { value, sub } => {
                // `m._parameters["weight_orig"] = w`: the module's parameter of that name.
                if let Some((owner, key)) = self.registry_slot(c, value, sub) {
                    for o in self.eval(c, owner) {
                        self.set_attribute(c, target, o, key, vals.clone(), stmt);
                    }
                    return;
                }
                // `model.__dict__["_optimizer"] = opt`: an attribute set by its name (a
                // literal: a name computed at run time, torchrl's `self.__dict__[module_name]`,
                // is left as it was). Not a module or a tensor: put there, torch does not
                // register it (a teacher hidden from `parameters()`), which setting the
                // attribute would.
                let parts = c.body.subscripts[sub as usize].parts;
                let literal = matches!(c.body.exprs_of(parts).collect::<SmallVec<[ExprId; 2]>>().as_slice(),
                    [k] if matches!(c.expr(*k), Expr::Str(_)))
                    && !(vals.iter())
                        .any(|v| matches!(self.obj(*v), Obj::Module(_) | Obj::Tensor(_)));
                if let (
                    Expr::Attr {
                        value: owner, attr, ..
                    },
                    true,
                ) = (*c.expr(value), literal)
                {
                    if self.name(attr) == "__dict__" {
                        if let Some(key) = self.index_of(c, sub).key {
                            for o in self.eval(c, owner) {
                                self.set_attribute(c, target, o, key, vals.clone(), stmt);
                            }
                            return;
                        }
                    }
                }
                self.bind_subscript(c, target, value, sub, vals, stmt)
            }
            Expr::Seq { items, .. } => {
                let targets: SmallVec<[ExprId; 4]> = c.body.exprs_of(items).collect();
                // (Unpacking reads each slot of one container: `x, = inputs` in a forward hook
                // reads what `inputs[0]` would.)
                let starred = (targets.iter()).any(|t| matches!(c.expr(*t), Expr::Starred(_)));
                if let ([seq], false) = (vals.as_slice(), starred) {
                    // (Not a dict's: unpacking gives its keys.)
                    let dict = self.dict_objs.contains(seq);
                    if matches!(self.obj(*seq), Obj::Seq(items) if items.len() == targets.len() && !dict)
                    {
                        for (k, t) in targets.iter().enumerate() {
                            self.read_slot(*seq, Slot::At(k as u32), c.span(*t));
                        }
                    }
                }
                let parts = self.unpack(&vals, targets.len());
                for (t, v) in targets.into_iter().zip(parts) {
                    self.bind_target(c, t, v, None);
                }
            }
            Expr::Starred(inner) => {
                let s = self.alloc(Obj::Seq(vec![vals]));
                self.bind_target(c, inner, smallvec![s], None);
            }
            _ => {}
        }
    }

    /// Bind a name. With `stmt` (a plain assignment), rebinding a held parameter is checked
    /// and the binding remembered (an alias may be made there).
    pub fn bind_name(
        &mut self,
        c: Code<'_>,
        name: Name,
        target: Option<ExprId>,
        vals: Vals,
        stmt: Option<StmtId>,
    ) {
        match (stmt, target) {
            (Some(s), Some(t)) => {
                self.check_rebind(c, name, t, &vals, s);
                // (Of a tensor: a list or a module bound so has no `.clone()`.)
                let container =
                    (vals.iter()).any(|v| matches!(self.obj(*v), Obj::Seq(_) | Obj::Module(_)));
                let place = |e: ExprId| {
                    matches!(
                        c.expr(e),
                        Expr::Name { .. } | Expr::Attr { .. } | Expr::Subscript { .. }
                    )
                    .then(|| c.span(e))
                };
                let alias_of = match *c.body.stmt(s) {
                    Stmt::Assign { targets, value } if targets.len == 1 && !container => {
                        match *c.expr(value) {
                            // `io = p.clone() if copy else p`: the arm that aliases.
                            Expr::IfExp { body, orelse, .. } => {
                                match (place(body), place(orelse)) {
                                    (Some(a), None) | (None, Some(a)) => Some(a),
                                    _ => None,
                                }
                            }
                            _ => place(value),
                        }
                    }
                    _ => None,
                };
                self.state.bound_at.insert(
                    name,
                    Binding {
                        stmt: c.stmt_span(s),
                        alias_of,
                    },
                );
            }
            _ => {
                self.state.bound_at.remove(&name);
            }
        }
        self.state.stale.remove(&name);
        if !self.state.orphaned.is_empty() {
            self.drop_replaced_optimizers(name, &vals);
        }
        self.state.env.insert(name, vals);
    }

    /// An in-place function of a tensor's values used inline as a value in an assignment to
    /// other names (`h = o.sigmoid() * c.tanh_()`) reads as its out-of-place twin, so the name it
    /// wrote stays stale past the statement, until it is bound again, for one read: a `return`
    /// of both, side by side (`return h, c`: Tree-LSTM's `c.tanh_()` returned the squashed cell
    /// state, latent-treelstm#5; see `report_stale_read`). Other reads may well mean the new
    /// values (`keep = logits.sigmoid_() > t; return boxes[keep], logits[keep]`). Not where the
    /// statement stores into that name (`z[0] = f(z.relu_())` updates `z` on purpose), nor in
    /// an arm of a conditional expression (`x.tanh_() if inplace else x.tanh()` chooses), nor
    /// for arithmetic with an operand (`x.mul_(a)`).
    fn keep_stale_past_statement(&mut self, c: Code<'_>, targets: &[ExprId], value: ExprId) {
        if self.stmt_stale.is_empty() {
            return;
        }
        let names: SmallVec<[Name; 2]> = (targets.iter())
            .map(|t| match *c.expr(*t) {
                Expr::Name { name, .. } => Some(name),
                _ => None,
            })
            .collect::<Option<_>>()
            .unwrap_or_default();
        if names.is_empty() {
            return;
        }
        let within = c.body.expr_span(value);
        let arms: SmallVec<[Rel; 2]> = (0..c.body.exprs.len())
            .filter(|i| within.contains(c.body.expr_spans[*i]))
            .filter_map(|i| match c.body.exprs[i] {
                Expr::IfExp { body, orelse, .. } => {
                    Some([c.body.expr_span(body), c.body.expr_span(orelse)])
                }
                _ => None,
            })
            .flatten()
            .collect();
        let entries = self.stmt_stale.clone();
        for (name, wid) in entries {
            let w = &self.writes[wid as usize];
            let function = match w.kind {
                WriteKind::Method(m) | WriteKind::TorchFn(m) => {
                    crate::ops::is_value_function_inplace(self.name(m))
                }
                _ => false,
            };
            let in_arm = arms
                .iter()
                .any(|a| w.site.item == c.item && a.contains(w.site.rel));
            if function && !in_arm && !names.contains(&name) {
                self.stale_past_stmt.insert((name, wid), names.clone());
                self.stmt_stale.retain(|e| *e != (name, wid));
            }
        }
    }

    /// `optimizer = SGD(model.parameters())` again after a layer it held was replaced: the old
    /// optimizer, no longer held by any name or object, can never be used, so the replacement
    /// waiting for its next use is dropped on this path (another path that kept it still
    /// reports it there).
    fn drop_replaced_optimizers(&mut self, name: Name, new: &Vals) {
        let rebuilt = new
            .iter()
            .any(|v| matches!(self.obj(*v), Obj::Optimizer { .. }));
        let Some(old) = self.state.env.get(&name).filter(|_| rebuilt) else {
            return;
        };
        let gone: SmallVec<[ObjId; 1]> = (old.iter().copied())
            .filter(|o| self.state.orphaned.contains_key(o) && !new.contains(o))
            .filter(|o| {
                let named = (self.state.env.iter()).any(|(n, vs)| *n != name && vs.contains(o));
                !named && !self.kept_by_object(*o)
            })
            .collect();
        // (The heap was looked through for each: charged to the step budget.)
        self.steps += (old.len() * self.heap.len()) as u64;
        for o in gone {
            self.state.orphaned.remove(&o);
        }
    }

    /// Whether an object of the heap keeps `o` (an attribute, a container's slot, a caller's
    /// name).
    fn kept_by_object(&self, o: ObjId) -> bool {
        let callers = self
            .outer_envs
            .iter()
            .any(|e| e.values().any(|vs| vs.contains(&o)));
        callers
            || (0..self.heap.len() as ObjId).any(|h| match self.obj(h) {
                Obj::Module(m) => m.attrs.values().any(|vs| vs.contains(&o)),
                Obj::Seq(items) => items.iter().any(|vs| vs.contains(&o)),
                _ => false,
            })
    }

    fn bind_attribute(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        object: ExprId,
        attr: Name,
        vals: Vals,
        stmt: Option<StmtId>,
    ) {
        let owners = self.eval(c, object);
        let paired = (attr == known::DATA)
            .then(|| self.paired_data(c, object, &owners, &vals))
            .flatten();
        for (k, o) in owners.into_iter().enumerate() {
            let vals = match &paired {
                Some(each) => smallvec![each[k]],
                None => vals.clone(),
            };
            self.set_attribute(c, target, o, attr, vals, stmt);
        }
    }

    /// `for t, s in zip(a.parameters(), b.parameters()): t.data = s.data`: the names of one
    /// loop's tuple target take their tensors in step, so each `t` is given the alias of the
    /// `s` of its own turn (not any of them). The value for each owner, in the owners' order.
    fn paired_data(&self, c: Code<'_>, object: ExprId, owners: &Vals, vals: &Vals) -> Option<Vals> {
        let Expr::Name { name, .. } = *c.expr(object) else {
            return None;
        };
        let (_, mine, key) =
            (self.certain.each_element.iter()).rfind(|(n, ts, _)| *n == name && ts == owners)?;
        let sources = |v: &ObjId| self.tensor(*v).and_then(|t| t.detached_from);
        let (_, theirs, _) = self.certain.each_element.iter().rfind(|(n, ts, k)| {
            k == key
                && *n != name
                && ts.len() == mine.len()
                && vals
                    .iter()
                    .all(|v| sources(v).is_some_and(|s| ts.contains(&s)))
        })?;
        (theirs.iter())
            .map(|s| vals.iter().copied().find(|v| sources(v) == Some(*s)))
            .collect()
    }

    /// `o.attr = vals` (or `setattr(o, "attr", vals)`; `target` is where it is written). An
    /// attribute named with holes (`setattr(self, f"layer{i}", m)`) stands for several, so it
    /// gains the values instead of losing the old ones.
    pub(super) fn set_attribute(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        o: ObjId,
        attr: Name,
        vals: Vals,
        stmt: Option<StmtId>,
    ) {
        match self.obj(o) {
            Obj::Module(m) => {
                // `obj.scale = v` of an `@scale.setter`: the setter runs with `v`.
                let setter = m.local.as_ref().and_then(|k| self.find_setter(k, attr));
                if let Some(def) = setter {
                    let args = Args {
                        positional: vec![(vals, None)],
                        keywords: Vec::new(),
                        spread: false,
                    };
                    let site = stmt.map_or(c.span(target), |s| c.stmt_span(s));
                    self.inline(def, Some(o), &args, site);
                    return;
                }
                let old = m.attrs.get(&attr).cloned().unwrap_or_default();
                let activation = m.local.is_none()
                    && crate::ops::module_inplace_position(self.name(m.class)).is_some();
                let family = self.name(attr).contains(STR_HOLE);
                if let (Some(s), false) = (stmt, family) {
                    let _ = self.check_rebind_objs(c, &old, &vals, target, s, attr);
                }
                let mut vals = vals;
                if family {
                    for &v in &old {
                        if !vals.contains(&v) {
                            vals.push(v);
                        }
                    }
                }
                self.note_attr_write(o, attr, &old);
                // `m.inplace = True` on an activation (`for m in model.modules(): ...`): its
                // calls compute in place from now on, as if built with `inplace=True`.
                let inplace = (attr == known::INPLACE && activation).then(|| {
                    let site = stmt.map_or(c.span(target), |s| c.stmt_span(s));
                    vals.contains(&TRUE).then_some(InplaceArg {
                        arg: site,
                        call: site,
                    })
                });
                // (A submodule replaced under its name keeps its place among the children:
                // `seq.head = nn.Linear(...)` runs the new layer where the old one ran.)
                let replaced = match (old.as_slice(), vals.as_slice()) {
                    ([old], [new]) if matches!(self.obj(*new), Obj::Module(_)) => {
                        Some((*old, *new))
                    }
                    _ => None,
                };
                self.store_slot(o, Slot::Attr(attr));
                if let Obj::Module(m) = self.obj_mut(o) {
                    if let Some((old, new)) = replaced {
                        for child in m.children.iter_mut().filter(|ch| **ch == old) {
                            *child = new;
                        }
                    }
                    m.attrs.insert(attr, vals);
                    if let Some(arg) = inplace {
                        m.inplace = arg;
                    }
                }
            }
            // `p.grad = None` (or a new tensor): the next backward makes a new gradient tensor
            // (what `g = p.grad` held before is no longer accumulated into).
            Obj::Tensor(_) if attr == known::GRAD => {
                let tensors: Vals = (vals.iter().copied())
                    .filter(|v| matches!(self.obj(*v), Obj::Tensor(_)))
                    .collect();
                let grad = match tensors.as_slice() {
                    [one] => Some(*one),
                    _ => None,
                };
                self.set_grad_tensor(o, grad);
            }
            Obj::Tensor(_) if attr == known::DATA => {
                let site = stmt.map_or(c.span(target), |s| c.stmt_span(s));
                // Replacing `.data` writes new contents without a version bump.
                let alias = self.data_alias(o, c.span(target));
                let spec = WriteSpec::new(WriteKind::DataAssign, site, site)
                    .value(Some(&vals))
                    .no_leaf_check();
                self.write(&smallvec![alias], spec);
                // (The statement and its value: where the memory came to be shared.)
                let at = stmt.and_then(|s| match *c.body.stmt(s) {
                    Stmt::Assign { value, .. } => Some((c.stmt_span(s), c.span(value))),
                    _ => None,
                });
                self.share_data_of(o, &vals, at);
            }
            Obj::Tensor(_) if attr == known::REQUIRES_GRAD => {
                let on = vals.as_slice() != [FALSE];
                self.set_requires_grad(o, on);
            }
            Obj::Unknown | Obj::Path(_) => {
                if let Some(s) = stmt {
                    self.check_replaced_in_opaque(c, o, &vals, target, s, attr);
                }
                let v = vals.first().copied().unwrap_or(UNKNOWN);
                self.loose_attrs.insert((o, attr), v);
            }
            // `args.act = "gelu"` of a dict read by attribute (an `argparse.Namespace`, a
            // `Munch`): its entry.
            Obj::Seq(_) if self.dict_objs.contains(&o) => {
                let at = stmt.map_or(c.span(target), |s| c.stmt_span(s));
                self.store_entry(o, Some(attr), Index::Key, &Vals::new(), &vals, at);
            }
            _ => {}
        }
    }

    /// `t.data = s.data` (or `= s.detach()`): `t` now shows `s`'s memory, a detached alias of it, so a
    /// later write through `t` changes what `s` reads (a mean teacher set up this way trains
    /// the student's own weights).
    fn share_data_of(&mut self, o: ObjId, vals: &Vals, at: Option<(Span, Span)>) {
        let [v] = vals.as_slice() else {
            return;
        };
        let Some(vt) = self.tensor(*v) else {
            return;
        };
        // (`s.data` and `s.detach()` are aliases of `s`: `s` is what `t` now shares. A new
        // tensor, `torch.from_numpy(array)` loading weights, is no other tensor's memory.)
        let Some(src) = vt.detached_from else {
            // (A new tensor, `s.data.clone()`: `t` shows memory of its own again.)
            self.shown_memory.remove(&o);
            if let Some(t) = self.tensor_mut(o) {
                if t.detached_from.is_some() {
                    t.detached_from = None;
                    t.storage = o;
                }
            }
            return;
        };
        let Some(storage) = self.tensor(src).filter(|st| st.known).map(|st| st.storage) else {
            return;
        };
        if src == o {
            return;
        }
        if let Some(t) = self.tensor_mut(o) {
            t.storage = storage;
            t.detached_from = Some(src);
            match at {
                Some(at) => self.shown_memory.insert(o, at),
                None => self.shown_memory.remove(&o),
            };
        }
    }

    /// `d[key] = v` / `xs[index] = v` into list or dict `s` (`objects`: the modules or tensors a
    /// one-part index evaluates to, kept as a dict's keys); `written`: where (a dict's new key
    /// was written there).
    /// Where `s` is part of an optimizer's `param_groups` a store re-syncs: a group whose
    /// `"params"` are stored (`group["params"] = [...]`), or the list of a group's params
    /// (`group["params"][i] = new_param`): the optimizer, and the list it holds after the store
    /// (`None` for the one a store into the group makes: found after it).
    fn optimizer_group_part(&mut self, s: ObjId, key: Option<Name>) -> Option<(ObjId, GroupPart)> {
        if self.loose_attrs.is_empty() {
            return None;
        }
        let groups = self.intern("param_groups");
        let params = self.intern("params");
        let whole = key == Some(params);
        for ((o, attr), gs) in self.loose_attrs.iter() {
            if *attr != groups || !matches!(self.obj(*o), Obj::Optimizer { .. }) {
                continue;
            }
            let Obj::Seq(items) = self.obj(*gs) else {
                continue;
            };
            for g in items.iter().flatten() {
                if whole && *g == s {
                    return Some((*o, GroupPart::Group(s)));
                }
                let slot = self.key_slot(*g, params).flatten();
                if let (Some(k), Obj::Seq(entries)) = (slot, self.obj(*g)) {
                    if entries.get(k).is_some_and(|l| l.contains(&s)) {
                        return Some((*o, GroupPart::Params(s)));
                    }
                }
            }
        }
        None
    }

    /// The optimizer `opt` holds the parameters of its re-synced group now (the list stored
    /// into, or the group's `"params"` read again), and the ones it lost to a rebinding that
    /// these replace are no longer its concern (no IP403).
    fn resync_optimizer(&mut self, opt: ObjId, part: GroupPart) {
        let list = match part {
            GroupPart::Params(list) => Some(list),
            GroupPart::Group(g) => {
                let params = self.intern("params");
                let k = self.key_slot(g, params).flatten();
                match (k, self.obj(g)) {
                    (Some(k), Obj::Seq(entries)) => entries.get(k).and_then(|l| l.first().copied()),
                    _ => None,
                }
            }
        };
        let Some(list) = list else { return };
        let given = self.elements(&smallvec![list]);
        // (The group's parameters join the others the optimizer holds.)
        for p in &given {
            if self.tensor(*p).is_some() {
                self.state.held.insert(*p, opt);
            }
        }
        if let Obj::Optimizer { params: held, .. } = self.obj_mut(opt) {
            for p in &given {
                if !held.contains(p) {
                    held.push(*p);
                }
            }
        }
        self.give_back(opt, Some(&given));
    }

    pub(super) fn store_entry(
        &mut self,
        s: ObjId,
        key: Option<Name>,
        index: Index,
        objects: &Vals,
        vals: &Vals,
        written: Span,
    ) {
        let groups_of = self.optimizer_group_part(s, key);
        if key.is_none() && !objects.is_empty() && self.dict_objs.contains(&s) {
            // (Past the bound the keys are not all known: none are given then.)
            let keys = self.object_keys.entry(s).or_default();
            for o in objects {
                if !keys.contains(o) {
                    keys.push(*o);
                }
            }
            if keys.len() > MAX_SEQ {
                keys.clear();
                keys.push(UNKNOWN);
            }
        }
        // `xs[2] = v` replaces that position; other keys add a position.
        let Obj::Seq(items) = self.obj(s) else {
            return;
        };
        // (`xs[-1] = v`: the last; `d["f"] = v`: the entry of that key, a new one at the end
        // of a dict whose keys are known or that is empty.)
        let len = items.len();
        let keyed = key.filter(|_| len == 0 || self.dict_keys.contains_key(&s));
        // (A slot holds a bounded number of alternatives.)
        let stored = if vals.len() > MAX_SEQ {
            smallvec![UNKNOWN]
        } else {
            vals.clone()
        };
        let at = match keyed.map(|k| self.key_slot(s, k).flatten()) {
            Some(at) => at,
            None => index_at(index, len),
        };
        match (at, keyed) {
            (Some(k), _) => {
                self.store_slot(s, Slot::At(k as u32));
                if let Obj::Seq(items) = self.obj_mut(s) {
                    items[k] = stored;
                }
            }
            (None, Some(k)) if len < MAX_SLOTS => {
                self.exact_seqs.remove(&s);
                self.store_slot(s, Slot::At(len as u32));
                if let Obj::Seq(items) = self.obj_mut(s) {
                    items.push(stored);
                }
                let keys = self.dict_keys.entry(s).or_default();
                keys.resize(len, None);
                keys.push(Some((k, written)));
            }
            (None, _) => self.seq_insert(s, len.min(MAX_SLOTS - 1), vals),
        }
        if let Some((opt, part)) = groups_of {
            self.resync_optimizer(opt, part);
        }
    }

    fn bind_subscript(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        object: ExprId,
        sub: u32,
        vals: Vals,
        stmt: Option<StmtId>,
    ) {
        let base = self.eval(c, object);
        let at = self.index_of(c, sub);
        let index = at.list_index();
        let IndexOf {
            key,
            arrays_only,
            objects,
            gather,
            ..
        } = at;
        let mut tensors = Vals::new();
        let mut seqs = Vals::new();
        for b in base {
            let b = self.dict_items(b).unwrap_or(b);
            match self.obj(b) {
                // `xs[i] = v` is a tensor write only on what is known to be a tensor (lists and
                // dicts are written the same way).
                Obj::Tensor(t) if index != Index::Key && t.known => tensors.push(b),
                Obj::Seq(_) => seqs.push(b),
                // `self.stages["proj"] = nn.Linear(...)` of an `nn.ModuleDict`.
                Obj::Module(_) if key.is_some() && self.container_of(b).is_some() => {
                    self.add_named_module(c, target, b, key, vals.clone(), stmt);
                }
                // `model[2] = nn.Linear(4, 3)` of an `nn.Sequential` / `nn.ModuleList`.
                Obj::Module(m)
                    if matches!(
                        self.container_of(b),
                        Some(Container::Sequential | Container::ModuleList)
                    ) =>
                {
                    if let Some(at) = index_at(index, m.children.len()) {
                        self.replace_child(c, target, b, at, &vals, stmt);
                    }
                }
                // `outputs["center"] = x` of a dict the code was given (a parameter, taken
                // for a tensor where it is not known): kept, so that returning the dict returns
                // the tensor's graph.
                Obj::Unknown | Obj::Tensor(_)
                    if key.is_some() || matches!(self.obj(b), Obj::Unknown) =>
                {
                    // (A key stored again replaces what it held.)
                    let kept = self.loose_items.entry((b, key)).or_default();
                    if key.is_some() {
                        kept.clear();
                    }
                    for v in &vals {
                        if kept.len() < MAX_SEQ && !kept.contains(v) {
                            kept.push(*v);
                        }
                    }
                }
                _ => {}
            }
        }
        for s in seqs {
            self.store_entry(s, key, index, &objects, &vals, c.span(target));
        }
        if !tensors.is_empty() {
            let site = stmt.map_or(c.span(target), |s| c.stmt_span(s));
            let through = self.obj_name(c, object);
            // `x[:] = v`, `x[mask] = v` write the tensor itself; `x[0] = v` a view of it.
            let whole = c.body.subscripts[sub as usize].whole || arrays_only;
            let element = self.element_read(c.span(object));
            let part = if whole {
                Part::Whole
            } else {
                self.subscript_part(c, target, object, sub)
            };
            // `scores.data[mask] = -inf`.
            let masking = stmt.is_some_and(|s| match *c.body.stmt(s) {
                Stmt::Assign { value, .. } => self.masking_value(c, value),
                _ => false,
            });
            // (Computed from the values it replaces, `im[i] = (im[i] - m) / s`: looked for
            // only where a dataset's stored sample is written.)
            let stored = (tensors.iter()).any(|t| {
                (self.tensor(*t)).is_some_and(|t| self.stored_reads.contains_key(&t.storage))
            });
            let compounds = stored
                && stmt.is_some_and(|s| match *c.body.stmt(s) {
                    Stmt::Assign { value, .. } => self.reads_place(c, value, object),
                    _ => false,
                });
            let mut spec = WriteSpec::new(WriteKind::Subscript { whole }, site, site)
                .masking(masking)
                .part(part)
                .through(through, through)
                .value(Some(&vals))
                .element(element)
                .record_field(self.field_reads.contains(&c.span(object)));
            spec.compounds = compounds;
            let w = self.write(&tensors, spec);
            // `x[idx] = v` with index tensors (`index_put_`): they are saved, as the index of
            // the out-of-place op is (measured with torch 2.15: writing `idx` in place before
            // `backward()` raises).
            if let Some(index) = gather {
                let index = self.flat_tensors(&index);
                self.save_with(&tensors, &index, OpLabel::Indexing(c.span(target)), site);
            }
            // `x[:, 1:] = x[:, :-1]`: a copy from elements of the same tensor that overlap
            // the ones written (a shift done in place).
            let value = stmt.and_then(|s| match *c.body.stmt(s) {
                Stmt::Assign { targets, value } if targets.len == 1 => Some(value),
                _ => None,
            });
            self.check_self_overlap(c, (target, &tensors), value, w);
        }
    }

    /// Whether expression `value` reads the values of `place` (a name or attribute, by its
    /// text): not only its metadata (`im.shape[1]`, `im.size(0)`, `len(im)`,
    /// `torch.zeros_like(im)`, `im.new_zeros(...)`), which are the same every time.
    fn reads_place(&self, c: Code<'_>, value: ExprId, place: ExprId) -> bool {
        let (Some(value), Some(place)) = (value.get(), place.get()) else {
            return false;
        };
        let within = c.body.expr_span(value);
        let text = self.prog.text_of(c.span(place));
        let inside: SmallVec<[usize; 16]> = (0..c.body.exprs.len())
            .filter(|&i| within.contains(c.body.expr_spans[i]))
            .collect();
        // (The expression `e` is only a receiver or argument whose metadata is read.)
        let metadata_only = |e: ExprId| {
            inside.iter().any(|&i| match c.body.exprs[i] {
                Expr::Attr { value, attr, .. } if value == e => {
                    crate::ops::metadata_attr(self.name(attr))
                }
                Expr::Call { func, args } => {
                    let first = c
                        .body
                        .exprs_of(c.body.args[args as usize].positional)
                        .next();
                    let name = match *c.expr(func) {
                        Expr::Name { name, .. } | Expr::Attr { attr: name, .. } => self.name(name),
                        _ => "",
                    };
                    first == Some(e) && crate::ops::metadata_arg(name)
                }
                _ => false,
            })
        };
        inside.iter().any(|&i| {
            let e = ExprId(i as u32);
            matches!(c.body.exprs[i], Expr::Name { .. } | Expr::Attr { .. })
                && self.prog.text_of(Span::new(c.item, c.body.expr_spans[i])) == text
                && !metadata_only(e)
                // (`im[0]` of `torch.zeros_like(im[0])`: its subscript is what is passed.)
                && !inside.iter().any(|&k| {
                    matches!(c.body.exprs[k], Expr::Subscript { value: v, .. } if v == e)
                        && metadata_only(ExprId(k as u32))
                })
        })
    }

    /// Position `at` of container module `m` replaced by `vals` (one module): a module an
    /// optimizer holds is rebound (IP403).
    pub(super) fn replace_child(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        m: ObjId,
        at: usize,
        vals: &Vals,
        stmt: Option<StmtId>,
    ) {
        let [new] = vals.as_slice() else { return };
        let Obj::Module(module) = self.obj(m) else {
            return;
        };
        let old = module.children[at];
        if let Some(s) = stmt {
            // (`model[2] = ...` names itself; `model.add_module("2", ...)` names `model[2]`.)
            let name = match *c.expr(target) {
                Expr::Call { func, .. } => match *c.expr(func) {
                    Expr::Attr { value, .. } => {
                        format!("{}[{at}]", self.prog.text_of(c.span(value)))
                    }
                    _ => self.prog.text_of(c.span(target)).to_string(),
                },
                _ => self.prog.text_of(c.span(target)).to_string(),
            };
            let name = self.intern(&name);
            let _ = self.check_rebind_objs(c, &smallvec![old], vals, target, s, name);
        }
        if let Obj::Module(module) = self.obj_mut(m) {
            module.children[at] = *new;
            // (Under its name too: `nn.Sequential(OrderedDict(...))`, `add_module`.)
            for v in module.attrs.values_mut().flat_map(|vs| vs.iter_mut()) {
                if *v == old {
                    *v = *new;
                }
            }
        }
    }

    pub(super) fn exec_aug_assign(
        &mut self,
        c: Code<'_>,
        s: StmtId,
        target: ExprId,
        op: BinOp,
        value: ExprId,
    ) {
        let value_expr = value;
        let value = self.eval(c, value);
        self.expire_stmt_stale(0);
        let outer = std::mem::replace(&mut self.index_target, true);
        let current = self.eval(c, target);
        self.index_target = outer;
        let tensors: Vals = current
            .iter()
            .copied()
            .filter(|t| self.maybe_tensor(*t))
            .collect();
        let span = c.stmt_span(s);
        // A tensor has no `__imatmul__`: `y @= m` is `y = y @ m` (a store into `x[i]` or
        // `self.w` for such a target), measured with torch 2.15.
        if op == BinOp::MatMul && !tensors.is_empty() {
            let result = self.binary(op, &current, &value, span);
            self.bind_target(c, target, result, Some(s));
            return;
        }
        if tensors.is_empty() {
            // Numbers, strings, lists: `+=` rebinds or mutates something that is no tensor.
            let mut result = self.binary(op, &current, &value, span);
            // A counter stepped while a loop runs (`self.n += 1` in a method the training loop
            // calls) has a value per iteration, of which the runs analysed see only the first:
            // no known integer (`if self.n % self.k == 0` is then taken on some iteration).
            if self.one_int(&result).is_some() && self.rolled_loops > 0 {
                result = smallvec![OTHER];
            }
            match *c.expr(target) {
                Expr::Name { name, .. } => self.bind_name(c, name, None, result, None),
                // `self.params += list(m.parameters())`: the attribute (or element) holds the
                // result; a module container extended so (`self.layers += [...]` of a
                // `ModuleList`) is the same container, which it keeps.
                Expr::Attr { .. } | Expr::Subscript { .. }
                    if !current
                        .iter()
                        .any(|v| matches!(self.obj(*v), Obj::Module(_) | Obj::Unknown)) =>
                {
                    self.bind_target(c, target, result, None)
                }
                _ => {}
            }
            return;
        }
        let through = self.obj_name(c, target);
        // `outs["a"] += 1`, `feats[i] *= s`: an element read out of a list or dict is written
        // as a whole (`outs["a"] = outs["a"] + 1` is out of place).
        let mut element = self.element_read(c.span(target));
        // `x[:] += v` takes the view `x[:]` first, then writes it; `x[mask] += v` gathers a
        // copy, adds to it and puts it back into `x` itself.
        let kind = match *c.expr(target) {
            Expr::Subscript { value, .. } if element.is_none() => {
                // (`feats["user"][idx] += h` writes into an element read out of a dict: that
                // element is what a copy replaces.)
                element = self.element_read(c.span(value));
                WriteKind::Subscript {
                    whole: self.array_indexed.contains(&c.span(target)),
                }
            }
            _ => WriteKind::AugAssign,
        };
        let mut spec = WriteSpec::new(kind, span, span)
            .through(through, through)
            .value(Some(&value))
            .element(element)
            .record_field(self.field_reads.contains(&c.span(target)));
        spec.compounds = true;
        let w = self.write(&tensors, spec);
        self.check_self_overlap(c, (target, &tensors), Some(value_expr), w);
        // The in-place op itself may save tensors (`x *= w` saves `w` when `x` needs grad).
        if let Some(name) = op.op_name() {
            self.inplace_saves_by_name(&tensors, name, Some(&value), (span, w));
        }
    }

    /// Split values for `a, b = vals` into `n` parts.
    /// Whether tensor `t`'s memory was made at or after object `from` (by a comprehension's
    /// element): `t`, and what it is a view of or was detached from up the chain, all made there
    /// (`w.mul(2)`, a view of it), never memory from before (`buf.view(2, 2)`, `buf.detach()`,
    /// `buf.reshape(4)` of a `buf` made outside: every element shows that one).
    fn memory_made_since(&self, t: ObjId, from: ObjId) -> bool {
        let mut at = t;
        for _ in 0..8 {
            let Some(tt) = self.tensor(at) else {
                return false;
            };
            if at < from || tt.storage < from {
                return false;
            }
            match (tt.view_of, tt.detached_from) {
                (Some((base, _)), _) => at = base,
                (None, Some(src)) => at = src,
                (None, None) => return true,
            }
        }
        false
    }

    pub(super) fn unpack(&mut self, vals: &Vals, n: usize) -> Vec<Vals> {
        let mut parts = vec![Vals::new(); n];
        for v in vals {
            match self.obj(*v).clone() {
                Obj::Seq(items) if items.len() == n && !self.starred_slots.contains_key(v) => {
                    for (p, item) in parts.iter_mut().zip(items) {
                        p.extend(item);
                    }
                }
                // `q, k, v = (x, *kv)`: the items before and after the star in their places,
                // the star's elements in the places between.
                Obj::Seq(items)
                    if (self.starred_slots.get(v)).is_some_and(|_| items.len() <= n + 1) =>
                {
                    let star = self.starred_slots[v];
                    let after = items.len() - star - 1;
                    for (k, p) in parts.iter_mut().enumerate() {
                        if k < star {
                            p.extend(items[k].iter().copied());
                        } else if k >= n - after {
                            p.extend(items[items.len() - (n - k)].iter().copied());
                        } else {
                            for x in &items[star] {
                                let each = match self.obj(*x).clone() {
                                    Obj::Tensor(mut t) => {
                                        t.grad_tensor = None;
                                        self.alloc(Obj::Tensor(t))
                                    }
                                    _ => *x,
                                };
                                p.push(each);
                            }
                        }
                    }
                }
                Obj::Seq(items) => {
                    // `a, b, c = x.unbind()`: each target is its own object (same storage for
                    // views), not one shared object. A view of a tensor a comprehension's
                    // element made (`[g.mul(c).flatten() for g in gs]`) views that element's own
                    // tensor: each target's view gets a base of its own (same storage, for what
                    // saved it), so a write through one is no write into what another shows.
                    let made = self.summaries.made_per_element.get(v).copied();
                    let all: Vals = items.into_iter().flatten().collect();
                    for p in parts.iter_mut() {
                        for v in &all {
                            match self.obj(*v).clone() {
                                Obj::Tensor(mut t) => {
                                    t.grad_tensor = None;
                                    if let (Some(from), Some((base, part))) = (made, t.view_of) {
                                        if self.memory_made_since(base, from) {
                                            if let Some(b) = self.tensor(base).map(|b| b.alias()) {
                                                t.view_of =
                                                    Some((self.alloc(Obj::Tensor(b)), part));
                                            }
                                        }
                                    }
                                    p.push(self.alloc(Obj::Tensor(t)));
                                }
                                _ => p.push(*v),
                            }
                        }
                    }
                }
                Obj::Tensor(t) => {
                    // Several results of one op (`out, (h, c) = lstm(x)`): new tensors with its
                    // history. (What a custom `backward` unpacks from a `ctx.saved_tensors` it
                    // could not resolve is each saved.)
                    let saved = self.custom_backward.saved.contains(&t.storage);
                    for p in parts.iter_mut() {
                        let t2 = t.sibling(self.heap.len() as ObjId);
                        if saved {
                            self.custom_backward.saved.insert(t2.storage);
                        }
                        p.push(self.alloc(Obj::Tensor(t2)));
                    }
                }
                Obj::Other | Obj::Str(_) => parts.iter_mut().for_each(|p| p.push(OTHER)),
                // `h, c = state` of a `NamedTuple`: its fields in order.
                Obj::Module(_) if let Some(fields) = self.named_tuple_items(*v, n) => {
                    for (p, f) in parts.iter_mut().zip(fields) {
                        p.extend(f);
                    }
                }
                // `attn, ff = layer` of an `nn.ModuleList` / `nn.Sequential` (`for attn, ff in
                // self.layers`): its children in order.
                Obj::Module(m)
                    if m.local.is_none()
                        && m.children.len() == n
                        && self.container_of(*v).is_some() =>
                {
                    for (p, child) in parts.iter_mut().zip(m.children) {
                        p.push(child);
                    }
                }
                _ => {
                    for p in parts.iter_mut() {
                        p.push(self.alloc(Obj::Unknown));
                    }
                }
            }
        }
        parts
    }
}

impl Interp<'_, '_> {
    /// The plain name an expression writes through (`y` in `y += 1`, `x` in `x[0] = 1`, `x` in
    /// `x.mul_(2).add_(1)`).
    pub(crate) fn obj_name(&self, c: Code<'_>, e: ExprId) -> Option<Name> {
        match *c.expr(e.get()?) {
            Expr::Name { name, .. } => Some(name),
            Expr::Subscript { value, .. } => self.obj_name(c, value),
            Expr::Call { func, .. } => match *c.expr(func) {
                Expr::Attr { value, attr, .. } if self.name(attr).ends_with('_') => {
                    self.obj_name(c, value)
                }
                _ => None,
            },
            _ => None,
        }
    }
}

/// Whether statement `s` runs whenever the function it is in does: no branch, loop, `try`,
/// `with` or `match` holds it.
fn unconditional(c: Code<'_>, s: StmtId) -> bool {
    let at = c.body.stmt_span(s);
    !(c.body.stmts.iter().zip(&c.body.stmt_spans)).any(|(st, span)| {
        *span != at
            && span.contains(at)
            && matches!(
                st,
                Stmt::If { .. }
                    | Stmt::For { .. }
                    | Stmt::While { .. }
                    | Stmt::Try(_)
                    | Stmt::With { .. }
                    | Stmt::Match { .. }
            )
    })
}

/// What a store into an optimizer's `param_groups` stores into: a group (`group["params"] =
/// [...]`), or the list of a group's params (`group["params"][i] = p`).
#[derive(Clone, Copy)]
enum GroupPart {
    Group(ObjId),
    Params(ObjId),
}
