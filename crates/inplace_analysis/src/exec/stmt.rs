//! Statements and control flow: branches are run separately and joined, loops twice, `try`
//! handlers from before and after their body, `with` blocks in their grad mode.

use super::*;

/// Turns of a `range` loop with known bounds that run one by one whatever its body does.
const SHORT_LOOP: i64 = 4;

impl Interp<'_, '_> {
    pub fn exec_block(&mut self, c: Code<'_>, block: Block) {
        if self.depth > MAX_DEPTH {
            return;
        }
        self.depth += 1;
        for s in c.body.stmts_of(block) {
            if self.state.dead || self.out_of_budget() {
                break;
            }
            self.exec_stmt(c, s);
        }
        self.depth -= 1;
    }

    fn exec_stmt(&mut self, c: Code<'_>, s: StmtId) {
        self.steps += 1;
        let saved = self.stmt.replace(StmtRef {
            item: c.item,
            stmt: s,
        });
        self.stmt_runs += 1;
        let saved_run = std::mem::replace(&mut self.stmt_run, self.stmt_runs);
        let first_save = self.saves.len() as u32;
        let saved_first_save = std::mem::replace(&mut self.stmt_first_save, first_save);
        let simple = matches!(
            c.body.stmt(s),
            Stmt::Expr(_) | Stmt::Assign { .. } | Stmt::AugAssign { .. } | Stmt::Return(_)
        );
        let saved_span = std::mem::replace(&mut self.stmt_span, simple.then(|| c.stmt_span(s)));
        let saved_unit = self.unit_stmt;
        if simple && self.inlining.len() <= self.unit_depth {
            self.unit_stmt = self.stmt;
        }
        let saved_stale = std::mem::take(&mut self.stmt_stale);
        match *c.body.stmt(s) {
            Stmt::Expr(e) => {
                let vals = self.eval(c, e);
                // `torch.set_grad_enabled(False)` as a statement switches the mode.
                for v in vals {
                    if let Obj::GradCtx(GradCtx::Set(on)) = self.obj(v) {
                        self.grad_enabled = *on;
                    }
                }
            }
            Stmt::Assign { targets, value } => self.exec_assign(c, s, targets, value),
            Stmt::AugAssign { target, op, value } => self.exec_aug_assign(c, s, target, op, value),
            Stmt::Return(e) => self.exec_return(c, s, e),
            Stmt::If {
                cond,
                body,
                clauses,
            } => self.exec_if(c, cond, body, clauses),
            Stmt::For {
                target,
                iter,
                body,
                orelse,
            } => self.exec_for(c, target, iter, body, orelse),
            Stmt::While { cond, body, orelse } => self.exec_while(c, cond, body, orelse),
            Stmt::Try(t) => self.exec_try(c, t),
            Stmt::With { items, body } => self.exec_with(c, items, body),
            Stmt::Def(f) => {
                let def = DefLoc {
                    item: c.item,
                    func: f,
                };
                let o = self.new_func(def);
                let name = c.body.func(f).name;
                self.bind_name(c, name, None, smallvec![o], None);
                self.apply_decorators(c, c.body.func(f).applied, o);
            }
            Stmt::Class(k) => {
                let class = self.class_ref(c, k);
                let name = class.name;
                let o = self.alloc(Obj::Class(Arc::new(class)));
                self.bind_name(c, name, None, smallvec![o], None);
                self.apply_decorators(c, c.body.class(k).decorators, o);
            }
            Stmt::Import(list) => self.exec_import(c, list),
            Stmt::Break | Stmt::Continue => {
                let is_break = matches!(c.body.stmt(s), Stmt::Break);
                self.steps += self.state.weight();
                let state = &self.state;
                if let Some((breaks, conts)) =
                    self.frames.last_mut().and_then(|f| f.loops.last_mut())
                {
                    if is_break {
                        breaks.join(state);
                    } else {
                        conts.join(state);
                    }
                }
                self.state.dead = true;
            }
            Stmt::Raise(list) => {
                for e in c.body.exprs_of(list) {
                    self.eval(c, e);
                }
                self.state.dead = true;
            }
            Stmt::Match { subject, cases } => {
                if !subject.is_none() {
                    self.eval(c, subject);
                }
                let before = self.fork();
                let mut out = State::dead();
                for case in c.body.stmts_of(cases) {
                    self.state = before.clone();
                    if let Stmt::Block(b) = *c.body.stmt(case) {
                        self.exec_block(c, b);
                    }
                    let st = std::mem::take(&mut self.state);
                    self.join(&mut out, &st);
                }
                self.join(&mut out, &before);
                self.state = out;
            }
            Stmt::Block(b) => self.exec_block(c, b),
            Stmt::Pass => {}
            Stmt::Delete(list) => self.exec_delete(c, s, list),
            Stmt::Other(list) => {
                for e in c.body.exprs_of(list) {
                    self.eval(c, e);
                }
            }
        }
        self.expire_stmt_stale(0);
        self.stmt_stale = saved_stale;
        self.stmt_span = saved_span;
        self.stmt = saved;
        self.unit_stmt = saved_unit;
        self.stmt_run = saved_run;
        self.stmt_first_save = saved_first_save;
    }

    fn exec_return(&mut self, c: Code<'_>, s: StmtId, e: ExprId) {
        // (The plain names a returned tuple holds, `return h, c`, or the one returned, `return
        // x`: see `returned_names`.)
        let names: SmallVec<[(Span, Name); 2]> = match e.get().map(|e| (e, *c.expr(e))) {
            Some((_, Expr::Seq { items, .. })) => (c.body.exprs_of(items))
                .filter_map(|i| match *c.expr(i) {
                    Expr::Name { name, .. } => Some((c.span(i), name)),
                    _ => None,
                })
                .collect(),
            Some((e, Expr::Name { name, .. })) => smallvec![(c.span(e), name)],
            _ => SmallVec::new(),
        };
        let outer = std::mem::replace(&mut self.returned_names, names);
        let vals = match e.get() {
            Some(e) => self.eval(c, e),
            None => smallvec![OTHER],
        };
        self.returned_names = outer;
        let standalone = self.frames.len() == 1 && self.frames[0].standalone;
        if standalone && self.grad_enabled {
            // (With what a dict given as an argument was filled with: `return end_points`.)
            let mut roots = vals.clone();
            for ((o, _), kept) in &self.loose_items {
                if vals.contains(o) {
                    roots.extend(kept.iter().copied());
                }
            }
            // (In the order the objects were made: the walk's order decides which save a
            // finding names.)
            roots[vals.len()..].sort_unstable();
            // (A loss a `backward()` already ran from, returned for logging, `return d_loss,
            // g_loss` of a training step, is no graph the caller goes on to differentiate.)
            if !self.backpropagated.is_empty() {
                let mut flat = Vals::new();
                self.flatten(&roots, &mut flat, &mut FxHashSet::default());
                flat.retain(|v| !self.backpropagated.contains(v));
                roots = flat;
            }
            self.check_graph(&roots, c.stmt_span(s), true, false);
        }
        self.steps += self.state.weight();
        let state = &self.state;
        let frame = self.frames.last_mut().expect("a frame");
        for v in &vals {
            if !frame.returns.contains(v) {
                frame.returns.push(*v);
            }
        }
        frame.ret_state.join(state);
        self.state.dead = true;
    }

    fn exec_if(&mut self, c: Code<'_>, cond: ExprId, body: Block, clauses: List) {
        // (The condition's key is made only where a pair needs it.)
        let cond_text = self.prog.text_of(c.span(cond));
        if !self.certain.branch_pairs.is_empty() {
            let key = condition_key(cond_text);
            self.certain.branch_pairs.retain(|_, (_, k)| *k != key);
        }
        let assumed = self.assumed_value(c, cond);
        let mut cond = self.eval_opt(c, cond);
        if let Some(v) = assumed {
            cond = smallvec::smallvec![v];
        }
        // A condition known to be true or false takes one branch only.
        match self.truth(&cond) {
            Some(true) => cond = smallvec::smallvec![TRUE],
            Some(false) => cond = smallvec::smallvec![FALSE],
            None => {}
        }
        if cond.as_slice() == [TRUE] {
            return self.exec_block(c, body);
        }
        let clauses: Vec<Clause> = c
            .body
            .list(clauses)
            .iter()
            .map(|i| c.body.clauses[*i as usize])
            .collect();
        if cond.as_slice() == [FALSE] {
            return self.exec_alternatives(c, &clauses);
        }
        let before = self.fork();
        let mark = self.arms_begin();
        self.exec_block(c, body);
        let mut arms = vec![self.arm_end(mark)];
        let mut out = std::mem::take(&mut self.state);
        let mut has_else = false;
        let mut running = before;
        for clause in clauses {
            self.steps += 1;
            self.state = running.clone();
            match clause.cond.get() {
                Some(cond) => {
                    self.eval(c, cond);
                    running = self.state.clone();
                    self.exec_block(c, clause.body);
                }
                None => {
                    has_else = true;
                    self.exec_block(c, clause.body);
                }
            }
            arms.push(self.arm_end(mark));
            let st = std::mem::take(&mut self.state);
            // (`if ...: w = mask * w` / `else: w = embed.weight`: the two arms.)
            if has_else && arms.len() == 2 {
                self.note_branch_pairs(c, &[body, clause.body], (&out, &st), cond_text);
            }
            self.join(&mut out, &st);
        }
        if !has_else {
            self.note_branch_pairs(c, &[body], (&out, &running), cond_text);
            self.join(&mut out, &running);
        }
        self.arms_end(arms, !has_else);
        self.state = out;
    }

    /// The names the arms of an `if` (`blocks`: its body, and an `else`; or its body alone,
    /// `one` where it ran and `other` where it did not) bind to a tensor on one path and to what
    /// an op made of that tensor on the other: such a pair of tensors is written for certain on
    /// one path or the other ([`CertainWrites::branch_pairs`]); `cond`: the condition's text.
    fn note_branch_pairs(
        &mut self,
        c: Code<'_>,
        blocks: &[Block],
        (one, other): (&State, &State),
        cond: &str,
    ) {
        for &block in blocks {
            for s in c.body.stmts_of(block) {
                let Stmt::Assign { targets, .. } = *c.body.stmt(s) else {
                    continue;
                };
                for t in c.body.exprs_of(targets) {
                    if let Expr::Name { name, .. } = *c.body.expr(t) {
                        self.note_branch_pair(name, (one, other), cond);
                        self.note_branch_pair(name, (other, one), cond);
                    }
                }
            }
        }
    }

    /// [`Self::note_branch_pairs`] for `name`, made from its tensor where it holds it in `kept`.
    fn note_branch_pair(&mut self, name: Name, (made, kept): (&State, &State), cond: &str) {
        let (Some([b]), Some([a])) = (
            made.env.get(&name).map(|v| v.as_slice()),
            kept.env.get(&name).map(|v| v.as_slice()),
        ) else {
            return;
        };
        let (Some(ta), Some(tb)) = (self.tensor(*a), self.tensor(*b)) else {
            return;
        };
        // (Made from it by one op: its node reads the tensor's node, or the leaf.)
        let derived = tb.node.is_some_and(|nb| {
            let node = self.nodes.get(nb);
            match ta.node {
                Some(na) => node.parents.contains(&na),
                None => node.leaves.contains(&ta.storage),
            }
        });
        // (Saved on the path that keeps it: a save the other arm made is not there.)
        let saves = kept.live.get(&ta.storage).filter(|s| !s.is_empty());
        if let (true, Some(saves)) = (a != b && derived, saves) {
            let pair = (*a.min(b), *a.max(b));
            (self.certain.branch_pairs).insert(pair, (saves.clone(), condition_key(cond)));
        }
    }

    /// The `elif`/`else` clauses of an `if` whose own condition is false.
    fn exec_alternatives(&mut self, c: Code<'_>, clauses: &[Clause]) {
        let Some((first, rest)) = clauses.split_first() else {
            return;
        };
        let Some(cond) = first.cond.get() else {
            return self.exec_block(c, first.body);
        };
        let cond = self.eval(c, cond);
        if cond.as_slice() == [FALSE] {
            return self.exec_alternatives(c, rest);
        }
        let before = self.fork();
        let mark = self.arms_begin();
        self.exec_block(c, first.body);
        let taken_arm = self.arm_end(mark);
        if cond.as_slice() == [TRUE] {
            return self.arms_end(vec![taken_arm], false);
        }
        let taken = std::mem::replace(&mut self.state, before);
        self.exec_alternatives(c, rest);
        let rest_arm = self.arm_end(mark);
        self.arms_end(vec![taken_arm, rest_arm], false);
        self.join_here(&taken);
    }

    /// Run a loop whose body is `block`: unswitched on a condition that cannot change while
    /// it runs (see [`super::unswitch`]), else as it is.
    fn run_loop(&mut self, c: Code<'_>, block: Block, mut body: impl FnMut(&mut Self)) {
        let Some(cond) = self.invariant_condition(c, block) else {
            return self.run_loop_body(body);
        };
        let entry = self.fork();
        let depth = self.frames.len();
        self.assumed.push((cond, depth, true));
        self.run_loop_body(&mut body);
        let taken = std::mem::replace(&mut self.state, entry);
        if let Some(last) = self.assumed.last_mut() {
            last.2 = false;
        }
        self.run_loop_body(&mut body);
        self.assumed.pop();
        self.join_here(&taken);
    }

    /// Run a loop body (twice, or once when the budget is low) and join the exits.
    fn run_loop_body(&mut self, mut body: impl FnMut(&mut Self)) {
        let entry = self.fork();
        let mut exit = entry;
        let runs = if self.exhausted() { 1 } else { LOOP_RUNS };
        for _ in 0..runs {
            self.push_loop();
            self.rolled_loops += 1;
            body(self);
            self.rolled_loops -= 1;
            let (breaks, conts) = self.pop_loop();
            self.join_here(&conts);
            self.steps += self.state.weight() + breaks.weight();
            exit.join(&self.state);
            exit.join(&breaks);
            // The next iteration runs after this one (not after zero iterations).
            if self.state.dead {
                break;
            }
        }
        self.state = exit;
    }

    fn push_loop(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            f.loops.push((State::dead(), State::dead()));
        }
    }

    fn pop_loop(&mut self) -> (State, State) {
        self.frames
            .last_mut()
            .and_then(|f| f.loops.pop())
            .unwrap_or_else(|| (State::dead(), State::dead()))
    }

    fn exec_for(&mut self, c: Code<'_>, target: ExprId, iter: ExprId, body: Block, orelse: Block) {
        let iter_expr = iter;
        let enumerated = self.enumerated(c, iter);
        let mut iter = match (iter.get(), enumerated) {
            (_, Some((inner, _))) => self.eval(c, inner),
            (Some(iter), None) => self.eval(c, iter),
            (None, None) => smallvec![UNKNOWN],
        };
        iter = self.iterated(
            iter,
            iter_expr
                .get()
                .filter(|_| enumerated.is_none())
                .map(|e| c.span(e)),
        );
        if let Some(longest) = self.grown_seq(&iter) {
            iter = smallvec![longest];
        }
        // A module container's children, or a list whose slots are its elements, are all
        // there: the loop runs at least once when there are any (the state before it is not
        // one it ends in).
        let exact = match iter.as_slice() {
            [one] => matches!(self.obj(*one), Obj::Module(_)) || self.exact_seqs.contains(one),
            _ => false,
        };
        if let Some((_, start)) = enumerated {
            let start_at = start;
            // `for i, block in enumerate(self.blocks)`: each child with its position; so too
            // each element of a list whose slots are its elements, when the body indexes by
            // the position (`xs[i] = torch.tanh(x)` replaces each in turn).
            let children = self
                .unrollable(&iter)
                .or_else(|| self.elements_by_position(c, target, body, &iter));
            if let Some(children) = children {
                let each = children
                    .into_iter()
                    .zip(start..)
                    .map(|(child, k)| {
                        let pos = self.position(k);
                        self.alloc(Obj::Seq(vec![smallvec![pos], smallvec![child]]))
                    })
                    .collect();
                self.run_unrolled(c, target, body, each, exact);
                self.exec_block(c, orelse);
                return;
            }
            iter = self.enumerate(&iter, start_at);
        }
        // `for layer in self.layers:` runs each child in order, and so does
        // `for k in range(9): x = self.vgg[k](x)` (k bound to each position).
        let unrolled = match self.unrollable(&iter) {
            Some(children) => Some((children, exact)),
            None => self
                .position_loop(c, target, iter_expr, &iter, body)
                .map(|positions| {
                    let each = (positions.into_iter())
                        .map(|k| {
                            let at = self.position(k);
                            self.every_position.insert(at);
                            at
                        })
                        .collect();
                    (each, true)
                }),
        };
        if let Some((each, exact)) = unrolled {
            self.run_unrolled(c, target, body, each, exact);
            self.exec_block(c, orelse);
            return;
        }
        let elems = self.elements(&iter);
        let each = self.each_element_loop(c, target, &iter);
        let pushed = each.len();
        (self.certain.each_element).extend(each.into_iter().map(|(n, ts)| (n, ts, c.span(target))));
        self.slot_clock += 1;
        let started = self.slot_clock;
        self.run_loop(c, body, |it| {
            it.slot_clock += 1;
            it.loop_rows.push((elems.clone(), started, it.slot_clock));
            if !target.is_none() {
                it.bind_target(c, target, elems.clone(), None);
            }
            it.exec_block(c, body);
            it.loop_rows.pop();
        });
        let kept = self.certain.each_element.len() - pushed;
        self.certain.each_element.truncate(kept);
        self.exec_block(c, orelse);
    }

    /// Of a name that may hold several tuples or lists, the longest, when each other one is a
    /// prefix of it: the one a loop grew (`acc = (s,)`, then `acc += (y,)` in a loop, as
    /// a UNet collects its skips), whose shorter versions are where it stood at earlier turns.
    pub(super) fn grown_seq(&self, vals: &Vals) -> Option<ObjId> {
        if vals.len() < 2 {
            return None;
        }
        let seqs: SmallVec<[&Vec<Vals>; 4]> = (vals.iter())
            .map(|v| match self.obj(*v) {
                Obj::Seq(slots) if !slots.is_empty() => Some(slots),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let (at, longest) = (seqs.iter().enumerate()).max_by_key(|(_, s)| s.len())?;
        // (Each shorter one is where the longest stood at an earlier turn: a prefix of it.)
        seqs.iter()
            .all(|s| longest.starts_with(s))
            .then_some(vals[at])
    }

    /// A loop over a known list of tensors, one per slot (`model.parameters()`, the pairs of
    /// `named_parameters()`, a literal `(a, b)`): each loop name bound to one of them per
    /// iteration (the target itself, or a name in a tuple target: `for name, p in ...`), with
    /// the tensors it takes.
    fn each_element_loop(
        &self,
        c: Code<'_>,
        target: ExprId,
        iter: &Vals,
    ) -> SmallVec<[(Name, Vals); 1]> {
        let mut out = SmallVec::new();
        let [one] = iter.as_slice() else { return out };
        let items: Vec<ObjId> = match self.obj(*one) {
            Obj::Params { tensors, .. } => tensors.to_vec(),
            Obj::Seq(slots) if slots.iter().all(|s| s.len() == 1) => {
                slots.iter().map(|s| s[0]).collect()
            }
            _ => return out,
        };
        // (Each name with its path into the item, empty for the whole item: `for name, p in
        // ...` takes part 1, `for (name, w), g in zip(d.items(), grads)` part 0 of part 0.)
        let mut names: SmallVec<[(Name, Path); 2]> = SmallVec::new();
        if let Some(t) = target.get() {
            loop_names(c, t, &mut SmallVec::new(), &mut names);
        }
        for (name, path) in names {
            let part = |item: ObjId| {
                path.iter().try_fold(item, |at, k| match self.obj(at) {
                    Obj::Seq(parts) => match parts.get(*k).map(|s| s.as_slice()) {
                        Some([one]) => Some(*one),
                        _ => None,
                    },
                    _ => None,
                })
            };
            let Some(taken) = items.iter().map(|i| part(*i)).collect::<Option<Vals>>() else {
                continue;
            };
            let tensors: Vals = taken
                .into_iter()
                .filter(|t| self.tensor(*t).is_some())
                .collect();
            if !tensors.is_empty() {
                out.push((name, tensors));
            }
        }
        out
    }

    /// The elements of an exact list of up to 16 single values, when the body of `for i, x in
    /// enumerate(xs)` indexes with `i`.
    fn elements_by_position(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        body: Block,
        iter: &Vals,
    ) -> Option<Vec<ObjId>> {
        let [one] = iter.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*one) else {
            return None;
        };
        if !self.exact_seqs.contains(one) || items.len() > 16 || items.iter().any(|i| i.len() != 1)
        {
            return None;
        }
        let items: Vec<ObjId> = items.iter().map(|i| i[0]).collect();
        let Expr::Seq { items: t, .. } = *c.expr(target) else {
            return None;
        };
        let Expr::Name { name: k, .. } = *c.expr(c.body.exprs_of(t).next()?) else {
            return None;
        };
        // (Keyed by its target: the range loop keys by its iterable.)
        self.indexes_by_position(c, c.span(target), body, k)
            .then_some(items)
    }

    /// Whether a loop body indexes with its variable `k` (`xs[k]`, `range(k)`), decided once
    /// per loop (`key`: a span of its header).
    fn indexes_by_position(&mut self, c: Code<'_>, key: Span, body: Block, k: Name) -> bool {
        if let Some(known) = self.position_bodies.get(&key) {
            return *known;
        }
        let range = self.intern("range");
        let found = uses_position(c, body, k, range);
        self.position_bodies.insert(key, found);
        found
    }

    /// The integer a loop over known positions binds.
    pub(super) fn position(&mut self, k: i64) -> ObjId {
        let o = self.alloc(Obj::Other);
        self.positions.insert(o);
        self.int_values.insert(o, k);
        o
    }

    /// `enumerate(xs)` / `enumerate(xs, start)` with `start` a literal: `xs` and the start.
    fn enumerated(&self, c: Code<'_>, iter: ExprId) -> Option<(ExprId, i64)> {
        let Expr::Call { func, args } = *c.expr(iter.get()?) else {
            return None;
        };
        if !self.is_name(c, func, "enumerate") {
            return None;
        }
        let a = c.body.args[args as usize];
        let positional: SmallVec<[ExprId; 2]> = c.body.exprs_of(a.positional).collect();
        let start = match (positional.get(1), a.keywords.len) {
            (None, 0) => 0,
            (Some(s), 0) => match *c.expr(*s) {
                Expr::Int(n) => n,
                _ => return None,
            },
            _ => return None,
        };
        Some((*positional.first()?, start))
    }

    /// Run a loop's body once per value of `each`, in order, with `target` bound to it; `exact`:
    /// those are all the values (else the loop may also not run at all).
    fn run_unrolled(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        body: Block,
        each: Vec<ObjId>,
        exact: bool,
    ) {
        let mut exit = if exact && !each.is_empty() {
            State::dead()
        } else {
            self.fork()
        };
        self.push_loop();
        for v in each {
            if self.state.dead {
                break;
            }
            if !target.is_none() {
                self.bind_target(c, target, smallvec![v], None);
            }
            self.exec_block(c, body);
            let conts = match self.frames.last_mut().and_then(|f| f.loops.last_mut()) {
                Some(l) => std::mem::replace(&mut l.1, State::dead()),
                None => State::dead(),
            };
            self.join_here(&conts);
        }
        let (breaks, _) = self.pop_loop();
        self.steps += self.state.weight() + breaks.weight();
        exit.join(&self.state);
        exit.join(&breaks);
        self.state = exit;
    }

    /// The positions a `for k in range(...)` loop runs over, when its bounds are known (integer
    /// literals, `len(...)` of a module container), they are at most 64, and
    /// its body indexes something with `k` (`self.layers[k]`); else `None`. So too the
    /// integers of a literal list or tuple (`for j in [0, 1]`, `for s in (1, 2, 4)`).
    fn position_loop(
        &mut self,
        c: Code<'_>,
        target: ExprId,
        iter: ExprId,
        vals: &Vals,
        body: Block,
    ) -> Option<Vec<i64>> {
        let Expr::Name { name: k, .. } = *c.expr(target) else {
            return None;
        };
        let positions: Vec<i64> = match self.range_bounds(c, iter) {
            Some((lo, hi)) if hi > lo && hi.saturating_sub(lo) <= 64 => (lo..hi).collect(),
            Some(_) => return None,
            None => self.literal_ints(vals)?,
        };
        let key = c.span(iter.get()?);
        // (A loop of a few turns runs each of them too, `for i in range(2)`: what it appends
        // is then where each turn put it, the last turn's last.)
        // (Not one that branches: a flag the same at every turn is followed by the loop run
        // as a whole, each turn taking the same side. A loop of one turn is its body run
        // once, a branch decided by its position: `if i < final_relu_layer`.)
        let turns = positions.len() as i64;
        let short = turns == 1 || turns <= SHORT_LOOP && !branches(c.body, body);
        (short || self.indexes_by_position(c, key, body, k)).then_some(positions)
    }

    /// The integers of an exact list or tuple of at most 64 known integers.
    fn literal_ints(&self, vals: &Vals) -> Option<Vec<i64>> {
        let [one] = vals.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*one) else {
            return None;
        };
        if !self.exact_seqs.contains(one) || items.is_empty() || items.len() > 64 {
            return None;
        }
        (items.iter())
            .map(|i| match i.as_slice() {
                [v] => self.int_values.get(v).copied(),
                _ => None,
            })
            .collect()
    }

    /// `range(n)` / `range(lo, hi)` with bounds known before running: `(lo, hi)`.
    pub(super) fn range_bounds(&mut self, c: Code<'_>, iter: ExprId) -> Option<(i64, i64)> {
        let Expr::Call { func, args } = *c.expr(iter.get()?) else {
            return None;
        };
        let a = c.body.args[args as usize];
        if !self.is_name(c, func, "range") || a.keywords.len != 0 {
            return None;
        }
        let bounds: Vec<ExprId> = c.body.exprs_of(a.positional).collect();
        match bounds.as_slice() {
            [hi] => Some((0, self.known_int(c, *hi)?)),
            [lo, hi] => Some((self.known_int(c, *lo)?, self.known_int(c, *hi)?)),
            _ => None,
        }
    }

    /// An integer known before running: a literal, or `len(x)` of a module container.
    fn known_int(&mut self, c: Code<'_>, e: ExprId) -> Option<i64> {
        match *c.expr(e) {
            Expr::Int(n) => Some(n),
            Expr::Call { func, args } => {
                if !self.is_name(c, func, "len") {
                    return None;
                }
                let a = c.body.args[args as usize];
                let [x] = c.body.exprs_of(a.positional).collect::<Vec<_>>()[..] else {
                    return None;
                };
                let v = self.eval(c, x);
                let [one] = v.as_slice() else { return None };
                // (A list's only when its slots are its elements one by one: one built by a
                // comprehension or in a loop is a summary.)
                match self.obj(*one) {
                    Obj::Module(m) if !m.children.is_empty() => Some(m.children.len() as i64),
                    _ => self.exact_len(&v),
                }
            }
            // `n`, `self.depth`: a name or attribute that holds one known integer.
            Expr::Name { .. } | Expr::Attr { .. } => {
                let v = self.eval(c, e);
                self.one_int(&v)
            }
            // `self.end_level + 1`, `len(self._ops) // 2`: arithmetic on known integers (each
            // side evaluated once).
            Expr::Binary { op, left, right } => {
                let (l, r) = (left.get()?, right.get()?);
                let (a, b) = (self.known_int(c, l)?, self.known_int(c, r)?);
                let (a, b) = (smallvec![self.int(a)], smallvec![self.int(b)]);
                self.int_arith(op, &a, &b)
            }
            _ => None,
        }
    }

    fn exec_while(&mut self, c: Code<'_>, cond: ExprId, body: Block, orelse: Block) {
        self.run_loop(c, body, |it| {
            if !cond.is_none() {
                it.eval(c, cond);
            }
            it.exec_block(c, body);
        });
        self.exec_block(c, orelse);
    }

    fn exec_try(&mut self, c: Code<'_>, t: u32) {
        let t = c.body.tries[t as usize];
        let before = self.fork();
        self.exec_block(c, t.body);
        let after_body = self.fork();
        let mut out = State::dead();
        for h in c.body.list(t.handlers) {
            let h = c.body.handlers[*h as usize];
            // The handler may start anywhere in the body: from before it or after it.
            let mut start = before.clone();
            self.join(&mut start, &after_body);
            self.state = start;
            if let Some(alias) = h.alias.get() {
                let o = self.alloc(Obj::Other);
                self.bind_target(c, alias, smallvec![o], None);
            }
            self.exec_block(c, h.body);
            let st = std::mem::take(&mut self.state);
            self.join(&mut out, &st);
        }
        match t.orelse {
            Some(b) => {
                self.state = after_body.clone();
                self.exec_block(c, b);
                let st = std::mem::take(&mut self.state);
                self.join(&mut out, &st);
            }
            None => self.join(&mut out, &after_body),
        }
        self.state = out;
        if let Some(f) = t.finally {
            let was_dead = self.state.dead;
            if was_dead {
                self.state = after_body;
            }
            self.exec_block(c, f);
            self.state.dead |= was_dead;
        }
    }

    fn exec_with(&mut self, c: Code<'_>, items: List, body: Block) {
        let saved_mode = (self.grad_enabled, self.implicit_no_grad);
        let saved_inference = self.inference_mode;
        let saved_modes = self.save_modes;
        for i in c.body.list(items) {
            let item = c.body.with_items[*i as usize];
            let vals = self.eval(c, item.expr);
            for v in &vals {
                // (Inference mode lasts through the other modes entered inside it.)
                let mode = match self.obj(*v) {
                    Obj::GradCtx(GradCtx::NoGrad) => false,
                    Obj::GradCtx(GradCtx::Inference) => {
                        self.inference_mode = true;
                        false
                    }
                    Obj::GradCtx(GradCtx::EnableGrad) => true,
                    Obj::GradCtx(GradCtx::Set(on)) => *on,
                    Obj::GradCtx(GradCtx::AllowMutation) => {
                        self.save_modes.mutation_allowed = true;
                        continue;
                    }
                    Obj::GradCtx(GradCtx::Autocast(low)) => {
                        self.save_modes.autocast_low = *low;
                        continue;
                    }
                    _ => continue,
                };
                // (The program asked for it: no longer only torch's own mode.)
                self.grad_enabled = mode;
                self.implicit_no_grad = false;
            }
            if let Some(alias) = item.alias.get() {
                let o = self.alloc(Obj::Unknown);
                self.bind_target(c, alias, smallvec![o], None);
            }
        }
        self.exec_block(c, body);
        (self.grad_enabled, self.implicit_no_grad) = saved_mode;
        self.inference_mode = saved_inference;
        self.save_modes = saved_modes;
    }
}

/// A key for an `if`'s condition that its negation shares (`not use` and `use`, `m is None`
/// and `m is not None`, `t == 1.0` and `t != 1.0`): the text without its spaces, leading `not`s
/// and outer brackets, with `is not` read as `is` and `!=` as `==`.
fn condition_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut t: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    loop {
        let trimmed = t.trim();
        let next = if let Some(rest) = trimmed.strip_prefix("not ") {
            rest.to_string()
        } else if trimmed.starts_with('(') && trimmed.ends_with(')') {
            trimmed[1..trimmed.len() - 1].to_string()
        } else {
            break;
        };
        t = next;
    }
    let t = t
        .replace(" is not ", " is ")
        .replace("!=", "==")
        .replace(' ', "");
    let mut h = rustc_hash::FxHasher::default();
    t.hash(&mut h);
    h.finish()
}

/// Whether a loop body uses the loop variable `k` as a position: subscripts anything with the
/// bare name or arithmetic on it (`self.layers[k]`, `self._ops[2 * k + 1]`), compares it
/// (`if k == 0:`) or bounds a `range` with it (`for j in range(k):`). Such a loop runs once per
/// position.
fn uses_position(c: Code<'_>, body: Block, k: Name, range: Name) -> bool {
    let (Some(start), Some(end)) = (c.body.stmts_of(body).next(), c.body.stmts_of(body).last())
    else {
        return false;
    };
    let within = Rel {
        start: c.body.stmt_span(start).start,
        end: c.body.stmt_span(end).end,
    };
    uses_position_within(c, within, k, Some(range))
}

/// [`uses_position`] over the expressions within `within` (a comprehension's element); without
/// `range`, only subscripts by the position count (`xs[k]`, not `k == 0` nor `range(k)`).
pub(super) fn uses_position_within(c: Code<'_>, within: Rel, k: Name, range: Option<Name>) -> bool {
    let is_k = |e: ExprId| matches!(*c.expr(e), Expr::Name { name, .. } if name == k);
    // (`2 * k + 1`: arithmetic a few levels deep on `k` and constants.)
    fn on_k(c: Code<'_>, e: ExprId, k: Name, depth: u8) -> bool {
        match *c.expr(e) {
            Expr::Name { name, .. } => name == k,
            Expr::Binary { left, right, .. } if depth < 4 => {
                let side = |x: Option<ExprId>| x.is_some_and(|x| on_k(c, x, k, depth + 1));
                side(left.get()) || side(right.get())
            }
            _ => false,
        }
    }
    (0..c.body.exprs.len()).any(|i| {
        if !within.contains(c.body.expr_spans[i]) {
            return false;
        }
        match c.body.exprs[i] {
            Expr::Subscript { sub, .. } => {
                let mut parts = c.body.exprs_of(c.body.subscripts[sub as usize].parts);
                matches!((parts.next(), parts.next()), (Some(p), None) if on_k(c, p, k, 0))
            }
            Expr::Compare { operands, .. } => {
                range.is_some() && c.body.exprs_of(operands).any(is_k)
            }
            Expr::Call { func, args } => {
                matches!(*c.expr(func), Expr::Name { name, .. } if Some(name) == range)
                    && c.body
                        .exprs_of(c.body.args[args as usize].positional)
                        .any(is_k)
            }
            _ => false,
        }
    })
}

/// Positions into nested tuples.
type Path = SmallVec<[usize; 2]>;

/// The names a loop target binds, each with its path of positions into the item (up to three
/// levels of tuples: `(name, w), g`).
fn loop_names(c: Code<'_>, t: ExprId, path: &mut Path, out: &mut SmallVec<[(Name, Path); 2]>) {
    match *c.expr(t) {
        Expr::Name { name, .. } => out.push((name, path.clone())),
        Expr::Seq { items: parts, .. } if path.len() < 3 => {
            for (k, p) in c.body.exprs_of(parts).enumerate() {
                path.push(k);
                loop_names(c, p, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Whether a block holds a branch (`if`, `match`, `while`, `try`), at any depth.
fn branches(body: &crate::ir::Body, block: Block) -> bool {
    body.stmts_of(block).any(|s| {
        matches!(
            body.stmt(s),
            Stmt::If { .. } | Stmt::Match { .. } | Stmt::While { .. } | Stmt::Try(_)
        ) || body.inner_blocks(s).into_iter().any(|b| branches(body, b))
    })
}
