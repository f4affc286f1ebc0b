//! Calls: evaluating arguments, dispatching on the callee, inlining the file's functions and
//! methods with the real arguments, instantiating its classes, and running a function on its
//! own as a unit.

use super::write::Taken;
use super::*;

impl Interp<'_, '_> {
    pub(super) fn eval_call(&mut self, c: Code<'_>, e: ExprId, func: ExprId, args: u32) -> Vals {
        self.drop_orphans_given_back(c, func);
        // Python evaluates the receiver before the arguments: a receiver that is itself a call
        // (`cum.add_(step // 2).div_(step.clamp_(min=1))`) runs first, so a write the arguments
        // make comes after what it read. (`super()` is looked at with the arguments.)
        let early = match *c.expr(func) {
            Expr::Attr { value, .. } if receiver_runs_code(c, value) => {
                Some(self.eval_opt(c, value))
            }
            _ => None,
        };
        // (`torch.zeros_like(self.feat)` reads only the slot's metadata.)
        let metadata_first = match *c.expr(func) {
            Expr::Name { name, .. } | Expr::Attr { attr: name, .. } => {
                crate::ops::metadata_arg(self.name(name))
            }
            _ => false,
        };
        let a = self.eval_args(c, args, metadata_first);
        let call = c.span(e);
        if let Expr::Attr { value, attr, .. } = *c.expr(func) {
            if early.is_none() {
                if let Some(res) = self.call_super(c, value, attr, &a, call) {
                    return res;
                }
            }
            let recv = match early {
                Some(recv) => recv,
                None => self.eval_opt(c, value),
            };
            let mut out = Vals::new();
            let mut tensors = Vals::new();
            let uncertain = recv.len() > 1;
            for r in recv.iter().copied() {
                let res = match self.obj(r) {
                    Obj::Tensor(_) => {
                        tensors.push(r);
                        continue;
                    }
                    Obj::Unknown => self.unknown_method(c, e, r, attr, &a, value),
                    Obj::Path(p) => {
                        let p = *p;
                        match self.module_member(p, attr) {
                            // `m.f(...)` of a project module `m`.
                            Some(fs) => {
                                let mut res = Vals::new();
                                for f in fs {
                                    res.extend(self.call_value(c, e, f, &a));
                                }
                                res
                            }
                            None => {
                                let path = self.path_join(p, attr);
                                self.call_path(c, e, path, &a)
                            }
                        }
                    }
                    Obj::Module(_) => {
                        let outer = std::mem::replace(&mut self.uncertain_receiver, uncertain);
                        let res = self.module_method(c, e, r, attr, &a);
                        self.uncertain_receiver = outer;
                        res
                    }
                    Obj::Optimizer { params, .. } => {
                        let params = params.clone();
                        self.optimizer_method(c, e, r, &params, attr, &a)
                    }
                    Obj::Seq(_) => self.seq_call(c, e, r, attr, &a),
                    Obj::Dist(_) => self.distribution_method(r, attr, &a, call),
                    Obj::Params { .. } => smallvec![r],
                    Obj::Class(k) => match self.find_method(&k.clone(), attr) {
                        // (A `@classmethod` gets the class as its first argument: `m = cls()`
                        // in `Head.build()` makes a `Head`.)
                        Some(def) => {
                            let classmethod = (self.resolve_def(def))
                                .is_some_and(|(b, f)| b.func(f).decorators.classmethod);
                            self.inline(def, classmethod.then_some(r), &a, call)
                        }
                        None if attr == known::APPLY && self.is_autograd_function(k, 0) => {
                            let k = k.clone();
                            self.apply_function(&k, &a, call)
                        }
                        // A class attribute called through its class: a nested class
                        // (`T.Lambda(f)`), a layer type (`Block.act(inplace=True)`).
                        None => match self.class_attribute(&k.clone(), attr) {
                            Some(fs) => {
                                let mut res = Vals::new();
                                for f in fs {
                                    res.extend(self.call_value(c, e, f, &a));
                                }
                                res
                            }
                            None => self.opaque_call(&a, call),
                        },
                    },
                    Obj::GradCtx(_) => smallvec![r],
                    Obj::Str(n) => {
                        let n = *n;
                        self.str_method(n, attr, &a)
                    }
                    Obj::Other => smallvec![OTHER],
                    _ => self.opaque_call(&a, call),
                };
                out.extend(res);
            }
            if !tensors.is_empty() {
                let moved = a.operands_by_position(true);
                let a = moved.as_ref().unwrap_or(&a);
                // (`y.__iadd__(1)` is `y += 1`: `add_`.)
                let attr = match crate::ops::inplace_dunder(self.name(attr)) {
                    Some(m) => self.intern(m),
                    None => attr,
                };
                out.extend(self.tensor_method(c, e, &tensors, attr, a, value));
            }
            if out.is_empty() {
                out.push(UNKNOWN);
            }
            return out;
        }
        let callee = self.eval_opt(c, func);
        let mut out = self.call_one_of(c, e, &callee, &a);
        if out.is_empty() {
            out.push(UNKNOWN);
        }
        out
    }

    /// The arguments of a call, in order; with `metadata_first`, only the first positional
    /// argument's metadata is read.
    fn eval_args(&mut self, c: Code<'_>, args: u32, metadata_first: bool) -> Args {
        let spec = c.body.args[args as usize];
        let mut out = Args::default();
        for (i, a) in c.body.exprs_of(spec.positional).enumerate() {
            if let Expr::Starred(inner) = *c.expr(a) {
                out.spread = true;
                let v = self.eval_opt(c, inner);
                // `f(*layers)`: one argument per position of the list, in order (of the longest
                // list when the name may hold several).
                let longest = v
                    .iter()
                    .filter_map(|x| match self.obj(*x) {
                        Obj::Seq(items) => Some(items.clone()),
                        _ => None,
                    })
                    .max_by_key(|items| items.len());
                match longest {
                    Some(items) if v.len() == 1 || !items.is_empty() => {
                        out.positional.extend(items.into_iter().map(|i| (i, None)));
                    }
                    _ => {
                        let e = self.elements(&v);
                        out.positional.push((e, None));
                    }
                }
                continue;
            }
            let v = match metadata_first && i == 0 {
                true => self.eval_metadata(c, a, true),
                false => self.eval(c, a),
            };
            out.positional.push((v, Some(a)));
        }
        for k in c.body.list(spec.keywords) {
            let kw = c.body.keywords[*k as usize];
            let v = self.eval_opt(c, kw.value);
            let span = Span::new(c.item, kw.span);
            match kw.name {
                Some(name) => out.keywords.push((name, v, kw.value, span)),
                // `f(**kwargs)` with the dict's keys known: one keyword each.
                None => {
                    out.spread = true;
                    for (name, v, at) in self.keyed_entries(&v).unwrap_or_default() {
                        out.keywords.push((name, v, ExprId::NONE, at));
                    }
                }
            }
        }
        let given = (out.positional.iter().filter_map(|(_, at)| *at))
            .chain(out.keywords.iter().map(|k| k.2))
            .collect::<SmallVec<[ExprId; 4]>>();
        for at in given {
            self.operand_read_again(c, at);
        }
        out
    }

    /// Call what may be one of several callees (`self.ls` is a `LayerScale` or an `Identity`):
    /// only one runs, so each runs on its own copy of the state and the paths join.
    pub(super) fn call_one_of(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        callees: &Vals,
        args: &Args,
    ) -> Vals {
        let mut out = Vals::new();
        if callees.len() < 2 {
            for f in callees {
                out.extend(self.call_value(c, e, *f, args));
            }
            return out;
        }
        let before = self.fork();
        let mut joined = State::dead();
        for f in callees {
            self.state = before.clone();
            out.extend(self.call_value(c, e, *f, args));
            let st = std::mem::take(&mut self.state);
            self.join(&mut joined, &st);
        }
        self.state = joined;
        out
    }

    pub fn call_value(&mut self, c: Code<'_>, e: ExprId, callee: ObjId, args: &Args) -> Vals {
        let call = c.span(e);
        match self.obj(callee) {
            Obj::Path(p) => {
                let p = *p;
                self.call_path(c, e, p, args)
            }
            Obj::Func(def) => {
                let def = *def;
                // (Restored after: a closure called while this one's parameters are bound
                // must not take or drop this one's names.)
                let captured = self.closures.get(&callee).cloned();
                let outer = std::mem::replace(&mut self.next_capture, captured);
                let out = self.inline(def, None, args, call);
                self.next_capture = outer;
                out
            }
            Obj::Bound(s, def) => {
                let (s, def) = (*s, *def);
                // `relu = MyReLU.apply` (see `attribute_of`): the custom function's `apply`.
                if let Obj::Class(k) = self.obj(s) {
                    if self.is_autograd_function(k, 0) {
                        let k = k.clone();
                        return self.apply_function(&k, args, call);
                    }
                }
                self.inline(def, Some(s), args, call)
            }
            Obj::Class(k) => {
                let k = k.clone();
                smallvec![self.instantiate(&k, args, call)]
            }
            Obj::Module(_) => self.call_module(c, e, callee, args),
            Obj::Record(fields) => {
                let fields = fields.clone();
                smallvec![self.new_record(&fields, args, call)]
            }
            Obj::Partial {
                func,
                positional,
                keywords,
            } => {
                let func = func.clone();
                let mut full = Args {
                    positional: positional.iter().map(|v| (v.clone(), None)).collect(),
                    keywords: keywords
                        .iter()
                        .filter(|(n, ..)| args.keyword(*n).is_none())
                        .map(|(n, v, s)| (*n, v.clone(), ExprId::NONE, *s))
                        .collect(),
                    spread: false,
                };
                full.positional.extend(args.positional.iter().cloned());
                full.keywords.extend(args.keywords.iter().cloned());
                let mut out = Vals::new();
                for f in func {
                    out.extend(self.call_value(c, e, f, &full));
                }
                out
            }
            Obj::Other | Obj::Str(_) => smallvec![OTHER],
            _ => self.opaque_call(args, call),
        }
    }

    /// A call we cannot see into: its result carries the history of every tensor argument.
    pub fn opaque_call(&mut self, args: &Args, call: Span) -> Vals {
        let mut inputs = Vals::new();
        let mut seen = FxHashSet::default();
        for v in args.all_values() {
            self.flatten(v, &mut inputs, &mut seen);
        }
        // (A function handed to an unseen call, `checkpoint(self.block, x)`, `map(f, xs)`, runs
        // with arguments not seen here.)
        for v in inputs.clone() {
            if let Obj::Func(def) | Obj::Bound(_, def) = *self.obj(v) {
                self.passed_unknown(def);
            }
        }
        let tensors: Vals = inputs
            .iter()
            .copied()
            .filter(|v| self.maybe_tensor(*v))
            .collect();
        // `itertools.chain(a.parameters(), b.parameters())`, `filter(..., m.parameters())`: the
        // parameters themselves, not a new tensor.
        let from_params = args
            .all_values()
            .flatten()
            .any(|v| matches!(self.obj(*v), Obj::Params { .. }));
        if from_params {
            return smallvec![self.alloc(Obj::Seq(vec![tensors]))];
        }
        if tensors.is_empty() {
            // Modules passed through wrappers (`torch.compile(model)`) stay themselves.
            let modules: Vals = inputs
                .iter()
                .copied()
                .filter(|v| matches!(self.obj(*v), Obj::Module(_)))
                .collect();
            if !modules.is_empty() && args.positional.len() == 1 {
                return modules;
            }
            return smallvec![self.alloc(Obj::Unknown)];
        }
        // The result carries their history but may be anything (a list, a dict, a tensor).
        let out = self.derive(&[tensors], call, crate::ops::Saves::default(), None, false);
        if let Some(t) = self.tensor_mut(out) {
            t.known = false;
        }
        smallvec![out]
    }

    /// Whether `def` is an `@property` getter.
    pub(super) fn is_property(&mut self, def: DefLoc) -> bool {
        self.resolve_def(def)
            .is_some_and(|(b, f)| b.func(f).decorators.property)
    }

    /// The function behind a location, with its body.
    pub fn resolve_def(&mut self, def: DefLoc) -> Option<(Arc<Body>, FuncId)> {
        let body = self.body_of(def.item)?;
        let f = match def.func.get() {
            Some(f) => f,
            None => body.root_def()?,
        };
        (f.idx() < body.funcs.len()).then_some((body, f))
    }

    /// A location with the item's own definition spelled out (`FuncId::NONE` resolved).
    fn normalized(def: DefLoc, f: FuncId) -> DefLoc {
        DefLoc {
            item: def.item,
            func: f,
        }
    }

    /// Execute a function or method body with these arguments.
    pub fn inline(
        &mut self,
        def: DefLoc,
        self_obj: Option<ObjId>,
        args: &Args,
        call: Span,
    ) -> Vals {
        if self.inlining.len() >= MAX_INLINE || self.exhausted() {
            self.passed_unknown(def);
            return self.opaque_call(args, call);
        }
        let Some((body, f)) = self.resolve_def(def) else {
            return self.opaque_call(args, call);
        };
        let def = Self::normalized(def, f);
        if self.refuses_reentry(def) {
            self.passed_unknown(def);
            return self.opaque_call(args, call);
        }
        let c = Code {
            body: &body,
            item: def.item,
        };
        let fd = *body.func(f);
        let env = self.bind_params(c, &fd, self_obj, args);
        self.inline_with(def, env, c, &fd, args, call)
    }

    /// Whether running `def` again would be recursion not followed: it is running already,
    /// and not as a builder whose build runs it again (`__init__` of what it builds between its
    /// runs, at most [`MAX_REENTRY`] of them).
    fn refuses_reentry(&mut self, def: DefLoc) -> bool {
        let Some(last) = self.inlining.iter().rposition(|d| *d == def) else {
            return false;
        };
        if self.inlining.iter().filter(|d| **d == def).count() >= MAX_REENTRY {
            return true;
        }
        let between: Vec<DefLoc> = self.inlining[last + 1..].to_vec();
        !between.into_iter().any(|d| {
            self.resolve_def(d)
                .is_some_and(|(b, f)| b.func(f).name == known::INIT)
        })
    }

    /// A function object for `def` (a `def` statement or a lambda): one defined inside a
    /// function closes over the names bound there (and those its own definer closed over), as
    /// they are when it is defined.
    pub(super) fn new_func(&mut self, def: DefLoc) -> ObjId {
        let o = self.alloc(Obj::Func(def));
        let nested =
            !self.outer_envs.is_empty() || self.frames.first().is_some_and(|f| f.standalone);
        if nested {
            let mut env = self.state.env.clone();
            if let Some(outer) = self.frames.last().and_then(|f| f.captured.as_ref()) {
                for (k, v) in outer.iter() {
                    env.entry(*k).or_insert_with(|| v.clone());
                }
            }
            self.closures.insert(o, Arc::new(env));
        }
        o
    }

    /// Whether `call` is in the file's own code, in a program that has imported modules.
    fn calls_from_entry(&self, call: Span) -> bool {
        self.prog.segments.len() > 1
            && self
                .prog
                .range(call)
                .is_some_and(|r| r.end <= self.prog.entry_end())
    }

    /// Run a function body with its parameters bound in `env`.
    fn inline_with(
        &mut self,
        def: DefLoc,
        env: Env,
        c: Code<'_>,
        fd: &FuncDef,
        args: &Args,
        call: Span,
    ) -> Vals {
        // (A method's instance: what it keeps, it keeps on purpose.)
        let receiver = match (fd.owner, c.body.list(fd.params).first()) {
            (crate::ir::Owner::None, _) | (_, None) => None,
            (_, Some(p)) => match env
                .get(&c.body.params[*p as usize].name)
                .map(|v| v.as_slice())
            {
                Some([one]) if matches!(self.obj(*one), Obj::Module(_)) => Some(*one),
                _ => None,
            },
        };
        let saved_env = std::mem::replace(&mut self.state.env, env);
        let saved_bound = std::mem::take(&mut self.state.bound_at);
        let saved_stale = std::mem::take(&mut self.state.stale);
        self.outer_envs.push(saved_env);
        let saved_mode = (self.grad_enabled, self.implicit_no_grad);
        let saved_inference = self.inference_mode;
        if !fd.lambda && self.runs_without_grad(c, fd) {
            // (A custom `Function`'s `forward` runs without grad because torch runs it so:
            // implicitly, unless grad was off already or the function turns it off itself.)
            self.implicit_no_grad =
                (self.grad_enabled || self.implicit_no_grad) && !fd.decorators.no_grad;
            self.grad_enabled = false;
        }
        self.inference_mode |= fd.decorators.inference;
        let saved_site = self.call_site;
        let saved_args = self.call_site_args.clone();
        if self.call_site.is_none() || self.calls_from_entry(call) {
            self.call_site = Some(call);
            self.call_site_args = args
                .positional
                .iter()
                .filter_map(|(v, e)| match (v.as_slice(), e) {
                    ([one], Some(e)) if !e.is_none() => self.tensor(*one).map(|t| (t.storage, *e)),
                    _ => None,
                })
                .collect();
        }
        self.inlining.push(def);
        self.call_path.push(call);
        let mut frame = Frame::new(false);
        frame.captured = self.next_capture.take();
        frame.steps_from = self.step_log.len();
        self.frames.push(frame);
        let saved_assign = self.assign_rhs.take();
        let saved_stmt = self.stmt;
        let first_write = self.writes.len();
        self.slot_clock += 1;
        let entered = self.slot_clock;
        let raised_before = self.raised_in;
        if let Some(s) = saved_stmt {
            self.caller_stmts.push(s);
            self.caller_chain = None;
        }
        self.exec_block(c, fd.body);
        if saved_stmt.is_some() {
            self.caller_stmts.pop();
            self.caller_chain = None;
        }
        // (A write that raised in it stops the call: what it wrote is never read after.)
        let raised = self.raised_in != raised_before;
        self.stmt = saved_stmt;
        self.assign_rhs = saved_assign;
        let frame = self.frames.pop().expect("the callee's frame");
        self.inlining.pop();
        self.call_path.pop();
        self.call_site = saved_site;
        self.call_site_args = saved_args;
        (self.grad_enabled, self.implicit_no_grad) = saved_mode;
        self.inference_mode = saved_inference;
        self.join_here(&frame.ret_state);
        self.state.lapse_orphans(&frame.local_rebinds);
        self.state.dead = false;
        let carried = self.stale_parameters(c, fd, &frame.call_stale);
        self.state.env = self.outer_envs.pop().unwrap_or_default();
        self.state.bound_at = saved_bound;
        self.state.stale = saved_stale;
        if !raised {
            self.mark_stale_after_call(
                call,
                args,
                &frame.returns,
                (first_write, entered),
                receiver,
            );
        }
        self.carry_stale(call, carried);
        // (The steps it ran left the caller's snapshots of their parameters stale.)
        for k in frame.steps_from..self.step_log.len() {
            let (params, wid, made_before) = self.step_log[k].clone();
            self.mark_stale_snapshots(&params, wid, made_before);
        }
        // A generator: what it yields, as the elements of what the call gives (its body has
        // run to the end: the consumer's loop sees every value it yields).
        if fd.generator {
            if frame.yields.is_empty() {
                return self.opaque_call(args, call);
            }
            return smallvec![self.alloc(Obj::Seq(vec![frame.yields]))];
        }
        if frame.returns.is_empty() {
            return smallvec![OTHER];
        }
        frame.returns
    }

    /// The callee's parameters a call inside it left stale (`img = denormalize(batch[0])` in
    /// a logging helper given `batch`: `call_stale`), with what they hold: the caller's names
    /// of those tensors are stale too once it returns. (Not a parameter the callee writes
    /// itself: a helper that fills its argument is meant to.)
    fn stale_parameters(
        &self,
        c: Code<'_>,
        fd: &FuncDef,
        call_stale: &[Name],
    ) -> Vec<(Vals, SmallVec<[crate::events::WriteId; 1]>)> {
        if call_stale.is_empty() {
            return Vec::new();
        }
        (c.body.list(fd.params).iter())
            .map(|p| c.body.params[*p as usize].name)
            .filter(|n| call_stale.contains(n))
            .filter_map(|n| {
                let writes = self.state.stale.get(&n)?;
                let held = self.state.env.get(&n)?;
                let tensors: Vals = held
                    .iter()
                    .copied()
                    .filter(|v| self.tensor(*v).is_some_and(|t| t.known && t.counter))
                    .collect();
                (!tensors.is_empty()).then(|| (tensors, writes.clone()))
            })
            .collect()
    }

    /// What a callee's write into `t` changes that its caller may hold: `t`, what `t` is a row
    /// or piece of (`for t in zip(tensor, mean)` writes all of `tensor`), and, when that is an
    /// argument that is itself a view (`denormalize(batch[0])`), what it is a view of, if the
    /// callee went over the argument's rows or returns the argument (the caller takes the
    /// result for a new tensor). (Not the tensor an indexed write in the callee goes into:
    /// `out[i] += v` fills an output argument, as it means to; nor the base of a row a helper
    /// fills and reports on, `n = fill_row(buf[i], v)`.)
    fn written_through(&self, t: ObjId, args: &Args, returns: &Vals) -> SmallVec<[ObjId; 4]> {
        let mut written: SmallVec<[ObjId; 4]> = smallvec![t];
        // (`x_adv = x.data` or `x.detach()` of an argument: the argument's memory.)
        if let Some(base) = self.tensor(t).and_then(|tt| tt.detached_from) {
            written.push(base);
        }
        let mut at = t;
        let mut pieces = false;
        while written.len() < 4 {
            match self.tensor(at).and_then(|tt| tt.view_of) {
                Some((base, part @ (Part::Whole | Part::Piece))) => {
                    pieces |= part == Part::Piece;
                    written.push(base);
                    at = base;
                }
                _ => break,
            }
        }
        // (The array a tensor made from it shares: `t = torch.from_numpy(x)` of an argument.)
        for v in args.all_values().flatten() {
            if self.array_of(*v, t) && !written.contains(v) {
                written.push(*v);
            }
        }
        // (An indexed write into a tensor the callee gives back, `x[2:5] += 1; return x`: the
        // caller takes the result for a new tensor; its other names of `x` see the write.)
        if let Some((base, Part::Index(_))) = self.tensor(at).and_then(|tt| tt.view_of) {
            if returns.contains(&base) && !written.contains(&base) {
                written.push(base);
            }
        }
        let argument = args.all_values().any(|v| v.as_slice() == [at]);
        let meant_new = pieces || returns.contains(&at);
        if let (true, true, Some((base, _))) = (
            argument,
            meant_new,
            self.tensor(at).and_then(|tt| tt.view_of),
        ) {
            written.push(base);
        }
        written
    }

    /// Name `n` of the running function went stale by a call (see [`Frame::call_stale`]).
    fn note_call_stale(&mut self, n: Name) {
        if let Some(f) = self.frames.last_mut() {
            if !f.call_stale.contains(&n) {
                f.call_stale.push(n);
            }
        }
    }

    /// The caller's names of tensors a callee's parameters held when they went stale (see
    /// [`Self::stale_parameters`]) are stale (not the name the call's result is bound to).
    fn carry_stale(
        &mut self,
        call: Span,
        carried: Vec<(Vals, SmallVec<[crate::events::WriteId; 1]>)>,
    ) {
        let targets = (self.assign_rhs.as_ref())
            .filter(|(rhs, _)| *rhs == call)
            .map(|(_, t)| t.clone())
            .unwrap_or_default();
        for (held, writes) in carried {
            self.mark_names_stale(&held, &writes, &targets);
        }
    }

    /// The names of the running function holding one of `held` (but `except`: the name a
    /// call's result is bound to, the name passed to a helper meant to change it) went stale
    /// by `writes` of a call.
    fn mark_names_stale(
        &mut self,
        held: &[ObjId],
        writes: &[crate::events::WriteId],
        except: &[Name],
    ) {
        let names: SmallVec<[Name; 4]> = (self.state.env.iter())
            .filter(|(n, vs)| vs.iter().any(|v| held.contains(v)) && !except.contains(n))
            .map(|(n, _)| *n)
            .collect();
        for n in names {
            let entry = self.state.stale.entry(n).or_default();
            for w in writes {
                super::write::note_write(entry, *w);
            }
            self.note_call_stale(n);
        }
    }

    /// `y = helper(x)` where the helper wrote `x` in place: other names of `x` are stale; so
    /// are names of what `x` is a view of (`denormalize(batch[0])` writing each channel of its
    /// argument changes `batch`, which the caller reads next). Also for a call nested in the
    /// value assigned (`dx = self.conv_1(self.conv_0(x))`, `y = f(x).clone()`): its result is
    /// used, not the argument it changed.
    fn mark_stale_after_call(
        &mut self,
        call: Span,
        args: &Args,
        returns: &Vals,
        (first_write, entered): (usize, usize),
        receiver: Option<ObjId>,
    ) {
        let Some((rhs, targets)) = self.assign_rhs.clone() else {
            return;
        };
        if !rhs.contains(call) {
            return;
        }
        // (A tensor the callee made of constants, `torch.tensor(lam_batch).unsqueeze(1)`,
        // without history and sharing no argument's memory, is no result computed from them.)
        let given: FxHashSet<ObjId> = (args.all_values().flatten())
            .filter_map(|v| self.tensor(*v).map(|t| t.storage))
            .collect();
        let returns_tensor = returns.iter().any(|v| {
            self.tensor(*v).is_some_and(|t| {
                t.node.is_some() || !t.known || given.contains(&t.storage) || t.grad_if.is_some()
            })
        });
        // (What a tuple returned holds is returned, for the views a write meant to make:
        // `return x, coords`.)
        let returns = &self.flat_tensors(returns);
        for w in first_write..self.writes.len() {
            // (An optimizer step is meant to be seen wherever the parameters are kept, as in
            // the caller's own code; its snapshots are marked apart.)
            if matches!(
                self.writes[w].kind,
                crate::events::WriteKind::Step
                    | crate::events::WriteKind::Renorm
                    | crate::events::WriteKind::LoadState
            ) {
                continue;
            }
            // (A write through a name that may hold several tensors is no clobber: see
            // `Interp::write`.)
            if !self.write_sole[w] {
                continue;
            }
            let t = self.write_targets[w];
            // (A `.data` alias too, as in the callee's own names; not a parameter's.)
            let followed = |it: &Self, tt: &TensorObj| tt.counter || it.names_data_of_non_leaf(tt);
            if !matches!(self.obj(t), Obj::Tensor(tt) if tt.known && followed(self, tt)) {
                continue;
            }
            let written = self.written_through(t, args, returns);
            let mut except: SmallVec<[Name; 2]> = targets.clone();
            // A helper that returns no tensor and reads what it wrote no more (`lam =
            // mix(x, 0.3)` mixing the batch in place, timm's Mixup) means to change it: the name
            // the caller passed stays fresh (other names of the tensor do not). One that reads
            // it again computes from the changed values (`acc = accuracy(logits, y)` after
            // `logits.sigmoid_()`): a side effect, stale as any.
            let meant = !returns_tensor && !self.read_after_write(w);
            if meant {
                except.extend(self.caller_arg_name(call, args, t));
            }
            self.mark_names_stale(&written, &[w as crate::events::WriteId], &except);
            // (And the caller's lists and dicts that keep it: `mlm_ids, labels =
            // mask_tokens(batch["input_ids"])` masks the ids `batch` still holds, SimCSE. An
            // element taken out to be changed is meant to change in its container, unless the
            // call gives the tensor back as a result of its own. A name passed and bound to the
            // result, `tile = blend(rows[i - 1][j], tile)`, is updated as the caller means, and
            // so is what a helper named as in-place (`standardize_(feats["a"])`) is given.)
            if !meant && !self.rebinds_arg(call, args, t, &targets) {
                let given_back = returns.contains(&t) && !self.named_inplace(call);
                // (Given back, a slot counts as taken only when the callee wrote through it
                // itself, `self.state += 1; return self.state`, not through a name it bound
                // to the slot's tensor, `out_x = g.x; out_x[m] = 0; return out_x`.)
                // (Not the method's own instance's, though: `k_out = self.k_cache; k_out[:, :,
                // pos] = k_val; return k_out` is a cache kept up to date on purpose.)
                let taken = match (given_back, self.writes[w].named) {
                    (false, _) => Taken::Any,
                    (true, false) => Taken::After(entered),
                    (true, true) => Taken::None,
                };
                let own = receiver.filter(|_| matches!(taken, Taken::None));
                self.mark_stale_slots_outside(t, w as crate::events::WriteId, taken, own);
            }
        }
    }

    /// Whether the function a write is in reads the name it wrote through after the write
    /// (in its text; a write that is not through a plain name counts as read). Decided once
    /// per write site.
    fn read_after_write(&mut self, w: usize) -> bool {
        let site = self.writes[w].range;
        if let Some(&known) = self.read_after.get(&site) {
            return known;
        }
        let found = self.scan_read_after_write(w);
        self.read_after.insert(site, found);
        found
    }

    fn scan_read_after_write(&mut self, w: usize) -> bool {
        let wr = self.writes[w].clone();
        let Some(s) = wr.stmt else { return true };
        let Some(body) = self.body_of(s.item) else {
            return true;
        };
        // (Read again only to be written in place again, `x.mul_(lam); x.add_(flipped)`, or
        // for its shape, it is not computed from.)
        let Some((name, f, _)) = crate::fix::written_name_in_function(&body, s.stmt, &wr) else {
            return true;
        };
        let writes_or_metadata = |attr: Name| crate::ops::inplace_or_metadata(self.name(attr));
        let at = body.stmt_span(s.stmt);
        crate::fix::used_after(&writes_or_metadata, &body, name, at, f.span)
    }

    /// Whether the function called at `call` is named as an in-place one (`standardize_`).
    fn named_inplace(&mut self, call: Span) -> bool {
        let Some(body) = self.body_of(call.item) else {
            return false;
        };
        (body.exprs.iter().zip(&body.expr_spans)).any(|(e, sp)| match *e {
            Expr::Call { func, .. } if *sp == call.rel => match *body.expr(func) {
                Expr::Name { name, .. } | Expr::Attr { attr: name, .. } => {
                    let n = self.name(name);
                    n.ends_with('_') && !n.ends_with("__")
                }
                _ => false,
            },
            _ => false,
        })
    }

    /// Whether an argument that may be `t` is a plain name the call's result is bound to
    /// (`tile = blend(above, tile)`, `tile = blend(above, b=tile)`).
    fn rebinds_arg(&mut self, call: Span, args: &Args, t: ObjId, targets: &[Name]) -> bool {
        let Some(body) = self.body_of(call.item) else {
            return false;
        };
        let named = |v: &Vals, e: Option<ExprId>| {
            v.contains(&t)
                && e.is_some_and(
                    |e| matches!(*body.expr(e), Expr::Name { name, .. } if targets.contains(&name)),
                )
        };
        (args.positional.iter()).any(|(v, e)| named(v, *e))
            || (args.keywords.iter()).any(|(_, v, e, _)| named(v, Some(*e)))
    }

    /// The caller's name passed as the argument that is `t` itself (`mix(x, 0.3)`).
    fn caller_arg_name(&mut self, call: Span, args: &Args, t: ObjId) -> Option<Name> {
        let body = self.body_of(call.item)?;
        // (Passed by position or by keyword, `blend(feats=h)`.)
        let passed = (args.positional.iter()).filter_map(|(v, e)| Some((v, (*e)?)));
        let keywords = (args.keywords.iter()).map(|(_, v, e, _)| (v, *e));
        (passed.chain(keywords))
            .filter(|(v, e)| v.as_slice() == [t] && !e.is_none())
            .find_map(|(_, e)| match *body.expr(e) {
                Expr::Name { name, .. } => Some(name),
                _ => None,
            })
    }

    /// The callee's environment: its parameters bound to the arguments (or defaults).
    fn bind_params(
        &mut self,
        c: Code<'_>,
        fd: &FuncDef,
        self_obj: Option<ObjId>,
        args: &Args,
    ) -> Env {
        let mut env = Env::default();
        let mut positional = args.positional.iter();
        // (`self.add(block, layer)` of a `@staticmethod` passes no `self`.)
        let mut self_pending = self_obj.filter(|_| !fd.decorators.staticmethod);
        for p in c.body.list(fd.params) {
            let p = c.body.params[*p as usize];
            let vals = if let Some(s) = self_pending.take() {
                smallvec![s]
            } else if p.kind == ParamKind::VarArgs {
                let rest: Vec<Vals> = positional.by_ref().map(|(v, _)| v.clone()).collect();
                let args_seq = self.alloc(Obj::Seq(rest));
                self.tuples.insert(args_seq);
                // (With no spread argument these are its elements one by one.)
                if !args.spread {
                    self.exact_seqs.insert(args_seq);
                }
                smallvec![args_seq]
            } else if p.kind == ParamKind::KwArgs {
                // The keywords no other parameter takes.
                let named: SmallVec<[Name; 8]> = c
                    .body
                    .list(fd.params)
                    .iter()
                    .map(|q| c.body.params[*q as usize].name)
                    .collect();
                let rest = args
                    .keywords
                    .iter()
                    .filter(|(n, ..)| !named.contains(n))
                    .map(|(n, v, _, at)| (Some((*n, *at)), v.clone()))
                    .collect();
                let d = self.keyed_dict(rest);
                // (With no spread argument these are all its keys, none of them too:
                // `kwargs.pop('value', gamma)` then gives the default.)
                if !args.spread {
                    self.dict_keys.entry(d).or_default();
                }
                smallvec![d]
            } else if let Some((v, ..)) = args.keyword(p.name) {
                v.clone()
            } else if let Some((v, _)) = positional.next() {
                v.clone()
            } else if let Some(d) = p.default.get() {
                self.eval(c, d)
            } else {
                smallvec![self.alloc(Obj::Unknown)]
            };
            // `n: int`: numbers, as declared, whatever the analysis guessed a caller passes
            // (`x.shape[2]` of an unknown, a tensor it took a count for).
            let mut vals = vals;
            if p.annotation == Annotation::Scalar {
                vals.retain(|v| !matches!(self.obj(*v), Obj::Unknown | Obj::Tensor(_)));
                if vals.is_empty() {
                    vals.push(OTHER);
                }
            }
            if p.kind == ParamKind::Normal {
                let at = Span::new(c.item, p.span);
                // (What a function analysed on its own passes on of its own argument, `forward(x)`
                // calling `self.forecast(x)`, requires grad as that argument does where the
                // function is called: not known here.)
                if let Some(from) = self.stand_in_of(&vals).filter(|_| self.grad_enabled) {
                    self.passed_through.push((at, from));
                } else {
                    // (Under `no_grad`, what a call passes says nothing of how it trains.)
                    let maybe = !self.grad_enabled || self.may_carry_grad(&vals);
                    let data = self_obj.is_some_and(|o| self.is_module(o))
                        && crate::ops::is_forward_name(self.name(fd.name));
                    let e = self.passed_grad.entry(at).or_default();
                    e.0 |= maybe;
                    e.1 |= data;
                }
            }
            env.insert(p.name, vals);
        }
        env
    }

    /// A function that did not run with these arguments (the inlining depth, recursion, the
    /// budget, a callable handed to an unseen call): any of its parameters may get grad.
    pub(super) fn passed_unknown(&mut self, def: DefLoc) {
        let Some((body, f)) = self.resolve_def(def) else {
            return;
        };
        let fd = *body.func(f);
        for p in body.list(fd.params) {
            let p = body.params[*p as usize];
            self.passed_grad
                .entry(Span::new(def.item, p.span))
                .or_default()
                .0 = true;
        }
    }

    /// The parameter of the function analysed on its own whose stand-in every tensor of `vals`
    /// is or is computed from alone (whether they require grad rests on it), if one is.
    fn stand_in_of(&self, vals: &Vals) -> Option<Span> {
        if !self.frames.first().is_some_and(|f| f.standalone) {
            return None;
        }
        let mut from = None;
        for v in vals {
            let t = self.tensor(*v)?;
            let g = t.grad_if.filter(|_| t.grad == Tri::Maybe)?;
            if from.is_some_and(|f| f != g.at) {
                return None;
            }
            from = Some(g.at);
        }
        from
    }

    /// Whether `vals` may hold a tensor that requires grad: one that may, anything unknown,
    /// or a stand-in for an argument of the running unit (whose callers are not known).
    pub(super) fn may_carry_grad(&self, vals: &Vals) -> bool {
        let mut flat = Vals::new();
        self.flatten(vals, &mut flat, &mut FxHashSet::default());
        flat.iter().any(|v| match self.obj(*v) {
            Obj::Tensor(t) => t.grad.is_possible() || t.grad_if.is_some(),
            Obj::Unknown => true,
            _ => false,
        })
    }

    /// Functions whose body runs with grad disabled: `@torch.no_grad()` /
    /// `@torch.inference_mode()` decorated ones, and methods of a `torch.autograd.Function`.
    pub fn runs_without_grad(&mut self, c: Code<'_>, fd: &FuncDef) -> bool {
        fd.decorators.no_grad || self.in_autograd_function(c, fd)
    }

    /// Whether a function is a method of a `torch.autograd.Function` subclass.
    fn in_autograd_function(&mut self, c: Code<'_>, fd: &FuncDef) -> bool {
        match fd.owner {
            Owner::Class(k) => c.body.class(k).autograd_function,
            Owner::ItemClass => self
                .prog
                .parent_class(c.item)
                .and_then(|p| self.body_of(p))
                .and_then(|b| b.root_class().map(|k| b.class(k).autograd_function))
                .unwrap_or(false),
            Owner::None => false,
        }
    }

    /// A class of the file: its methods and (evaluated) base classes.
    pub fn class_ref(&mut self, c: Code<'_>, k: ClassId) -> ClassObj {
        let def = *c.body.class(k);
        let (mut methods, mut setters) = (FxHashMap::default(), FxHashMap::default());
        for f in c.body.list(def.methods) {
            let func = &c.body.funcs[*f as usize];
            let at = DefLoc {
                item: c.item,
                func: FuncId(*f),
            };
            match (func.decorators.setter, func.decorators.deleter) {
                (_, true) => {}
                (true, _) => _ = setters.insert(func.name, at),
                _ => _ = methods.insert(func.name, at),
            }
        }
        // A class item: its methods are the function items of its body.
        if c.body.root_class() == Some(k) {
            for (name, item, role) in self.class_methods(c.item) {
                let table = match role {
                    MethodRole::Method => &mut methods,
                    MethodRole::Setter => &mut setters,
                };
                table.insert(name, self.prog.item_def(item));
            }
            self.methods_bound_by_name(c.item, &mut methods);
        }
        let mut bases = Vec::new();
        for b in c.body.exprs_of(def.bases) {
            bases.extend(self.eval(c, b));
        }
        ClassObj {
            name: def.name,
            loc: ClassLoc {
                item: c.item,
                class: k,
            },
            span: Span::new(c.item, def.span),
            methods,
            setters,
            bases,
        }
    }

    /// Find a method on a class of the file or its bases of the file.
    pub fn find_method(&self, class: &ClassObj, name: Name) -> Option<DefLoc> {
        self.find_in_mro(class, &|k| k.methods.get(&name).copied(), 0)
    }

    /// The `@name.setter` of a class of the file or of its bases of the file.
    pub fn find_setter(&self, class: &ClassObj, name: Name) -> Option<DefLoc> {
        self.find_in_mro(class, &|k| k.setters.get(&name).copied(), 0)
    }

    /// The first answer of `get` for a class or its bases (depth first, as Python's method
    /// resolution for single inheritance).
    fn find_in_mro(
        &self,
        class: &ClassObj,
        get: &dyn Fn(&ClassObj) -> Option<DefLoc>,
        depth: usize,
    ) -> Option<DefLoc> {
        if let Some(m) = get(class) {
            return Some(m);
        }
        if depth > 16 {
            return None;
        }
        class.bases.iter().find_map(|b| match self.obj(*b) {
            Obj::Class(k) => self.find_in_mro(k, get, depth + 1),
            _ => None,
        })
    }

    /// The method resolution order of a class among the program's classes (C3, as Python
    /// computes it: `class C(A, B)` is C, then A and its bases before B where they allow).
    pub(super) fn mro(&self, class: &Arc<ClassObj>) -> Option<Vec<Arc<ClassObj>>> {
        self.mro_depth(class, 0, &mut FxHashMap::default())
    }

    /// [`Self::mro`], each class's order computed once (`memo`); `None` when the bases admit
    /// no such order or are deeper than 16 (the caller then searches the bases depth first).
    fn mro_depth(
        &self,
        class: &Arc<ClassObj>,
        depth: usize,
        memo: &mut FxHashMap<ClassLoc, Option<Vec<Arc<ClassObj>>>>,
    ) -> Option<Vec<Arc<ClassObj>>> {
        if depth > 16 {
            return None;
        }
        if let Some(known) = memo.get(&class.loc) {
            return known.clone();
        }
        let out = self.mro_uncached(class, depth, memo);
        memo.insert(class.loc, out.clone());
        out
    }

    fn mro_uncached(
        &self,
        class: &Arc<ClassObj>,
        depth: usize,
        memo: &mut FxHashMap<ClassLoc, Option<Vec<Arc<ClassObj>>>>,
    ) -> Option<Vec<Arc<ClassObj>>> {
        let bases: Vec<Arc<ClassObj>> = (class.bases.iter())
            .filter_map(|b| match self.obj(*b) {
                Obj::Class(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        let mut lists: Vec<Vec<Arc<ClassObj>>> = Vec::new();
        for b in &bases {
            lists.push(self.mro_depth(b, depth + 1, memo)?);
        }
        lists.push(bases);
        let mut out = vec![class.clone()];
        loop {
            lists.retain(|l| !l.is_empty());
            if lists.is_empty() {
                return Some(out);
            }
            // The first head that is in no other list's tail.
            let head = lists
                .iter()
                .map(|l| l[0].clone())
                .find(|h| !lists.iter().any(|l| l[1..].iter().any(|k| k.loc == h.loc)))?;
            for l in &mut lists {
                if l[0].loc == head.loc {
                    l.remove(0);
                }
            }
            out.push(head);
        }
    }

    /// Whether a class of the file derives (directly or through the file's classes) from
    /// `torch.nn.Module`.
    pub fn class_is_module(&self, class: &ClassObj) -> bool {
        self.class_is_module_depth(class, 0)
    }

    fn class_is_module_depth(&self, class: &ClassObj, depth: usize) -> bool {
        class.bases.iter().any(|b| match self.obj(*b) {
            Obj::Path(p) => {
                let p = self.name(*p);
                p.starts_with("torch.nn") || p.ends_with("Module") || p.contains("nn.")
            }
            Obj::Class(k) => depth < 16 && self.class_is_module_depth(k, depth + 1),
            _ => false,
        }) || class.methods.contains_key(&known::FORWARD)
    }

    pub fn instantiate(&mut self, class: &Arc<ClassObj>, args: &Args, call: Span) -> ObjId {
        let module = ModuleObj {
            class: class.name,
            local: Some(class.clone()),
            inplace: None,
            attrs: FxHashMap::default(),
            children: Vec::new(),
            origin: call,
            hooks: Vec::new(),
            maybe_hooks: Vec::new(),
            pre_hooks: Vec::new(),
            backward_hook: None,
        };
        let obj = self.alloc(Obj::Module(Box::new(module)));
        let made = self.made.entry(class.loc).or_default();
        if made.len() < 8 {
            made.push(MadeBy {
                obj,
                call,
                args: args.clone(),
            });
        }
        if let Some(init) = self.find_method(class, known::INIT) {
            self.inline(init, Some(obj), args, call);
        } else if self.init_record(obj, class, args, call) {
            // A `NamedTuple` or a dataclass: its fields are bound.
        } else if let Some(kind) = self.torch_container_base(class) {
            // `class Stack(nn.Sequential)` with no `__init__` of its own: the base's takes the
            // layers.
            self.add_children(obj, kind, args);
        } else if let Some(base) = self.torch_layer_base(class) {
            self.init_layer_base(obj, &base, args, call);
        } else if self.list_base(class) {
            self.init_list_items(obj, args);
        } else if self.dict_base(class) {
            self.init_dict_items(obj, args);
        }
        obj
    }

    /// `dict.__init__(mapping, **kw)` of an instance of a `dict` subclass (`TD(reward=r)`, or
    /// `super().__init__(*args, **kwargs)`): its entries, with their keys, are what `self[k]`,
    /// `.items()` and `.get(k)` see, kept in a dict of its own (see [`Self::dict_items`]).
    fn init_dict_items(&mut self, obj: ObjId, args: &Args) {
        // (A class with item methods of its own, `__setitem__` that copies, `update`, or a
        // `__getitem__` that builds what it returns (transformers' `ClassInstantier`) is not
        // followed: its entries are not what the constructor was given.)
        let own = |it: &Self, k: &ClassObj| {
            ["__getitem__", "__setitem__", "update", "setdefault", "get"]
                .iter()
                .any(|m| it.names_find(k, m))
        };
        if let Obj::Module(m) = self.obj(obj) {
            if m.local.as_ref().is_some_and(|k| own(self, k)) {
                return;
            }
        }
        let mut entries: Vec<(Option<(Name, Span)>, Vals)> = Vec::new();
        // (A mapping whose keys are not known: an entry of unknown key holding its values.)
        if let Some(first) = args.positional.first().map(|(v, _)| v.clone()) {
            match self.keyed_entries(&first) {
                Some(known) => {
                    entries.extend(known.into_iter().map(|(k, v, at)| (Some((k, at)), v)))
                }
                None => {
                    let any = self.elements(&first);
                    entries.push((None, any));
                }
            }
        }
        entries.extend((args.keywords.iter()).map(|(n, v, _, at)| (Some((*n, *at)), v.clone())));
        let d = self.keyed_dict(entries);
        if let Obj::Module(module) = self.obj_mut(obj) {
            module.attrs.insert(known::DICT_ITEMS, smallvec![d]);
        }
    }

    /// The dict that holds the entries of an instance of a `dict` subclass (one without item
    /// methods of its own: see [`Self::init_dict_items`]).
    pub(super) fn dict_items(&self, o: ObjId) -> Option<ObjId> {
        let Obj::Module(m) = self.obj(o) else {
            return None;
        };
        match m.attrs.get(&known::DICT_ITEMS).map(|v| v.as_slice()) {
            Some([d]) => Some(*d),
            _ => None,
        }
    }

    /// Whether class `k` (or a base of the file) defines method `name`.
    fn names_find(&self, k: &ClassObj, name: &str) -> bool {
        self.names
            .get(name)
            .is_some_and(|n| self.find_method(k, n).is_some())
    }

    /// Whether a class of the file derives from `dict` (or `OrderedDict`, `UserDict`).
    pub(super) fn dict_base(&self, class: &ClassObj) -> bool {
        self.derives_from_one_of(
            class,
            &[
                "builtins.dict",
                "collections.OrderedDict",
                "collections.UserDict",
            ],
        )
    }

    /// Whether a class of the file derives from one of the library classes `paths`.
    fn derives_from_one_of(&self, class: &ClassObj, paths: &[&str]) -> bool {
        let base = |path: &str| paths.contains(&path).then_some(());
        self.torch_base(class, &base, 0).is_some()
    }

    /// `list.__init__(items)` of an instance of a `list` subclass (`Processors([Ban(), Clip()])`,
    /// or `super().__init__(items)`): its items, in order, are what `for p in self` and `self[i]`
    /// see (as `append` adds). (A slot that may hold one of several values leaves them unknown.)
    fn init_list_items(&mut self, obj: ObjId, args: &Args) {
        let items: Option<Vec<ObjId>> = match args.positional.first().map(|(v, _)| v.as_slice()) {
            Some([seq]) => match self.obj(*seq) {
                Obj::Seq(slots) => slots
                    .iter()
                    .map(|v| match v.as_slice() {
                        [one] => Some(*one),
                        _ => None,
                    })
                    .collect(),
                _ => None,
            },
            _ => None,
        };
        if let (Some(items), Obj::Module(module)) = (items, self.obj_mut(obj)) {
            module.children.extend(items);
        }
    }

    /// Whether a class of the file derives from `torch.optim.Optimizer` (a custom optimizer).
    fn optimizer_base(&self, class: &ClassObj) -> bool {
        self.derives_from_one_of(class, &["torch.optim.Optimizer"])
    }

    /// `Optimizer.__init__(params, defaults)` of a custom optimizer: `self.param_groups` holds
    /// one group, a dict of `"params"` and the defaults (`for group in self.param_groups: for p
    /// in group["params"]` then walks the parameters its `step` updates).
    fn init_param_groups(&mut self, c: Code<'_>, e: ExprId, opt: ObjId, args: &Args, call: Span) {
        let params = args.positional.first().map(|(v, _)| v.clone());
        let defaults = args.positional.get(1).map(|(v, _)| v.clone()).or_else(|| {
            let name = self.intern("defaults");
            args.keyword(name).map(|(v, ..)| v.clone())
        });
        let Some(params) = params else { return };
        let mut entries = vec![(Some((self.intern("params"), call)), params)];
        if let Some([d]) = defaults.as_deref() {
            if let (Some(keys), Obj::Seq(values)) = (self.dict_keys.get(d), self.obj(*d)) {
                entries.extend(keys.iter().copied().zip(values.iter().cloned()));
            }
        }
        let group = self.keyed_dict(entries);
        let groups = self.alloc(Obj::Seq(vec![smallvec![group]]));
        let name = self.intern("param_groups");
        self.set_attribute(c, e, opt, name, smallvec![groups], None);
    }

    /// Whether a class of the file derives from `list` (or `collections.UserList`).
    pub(super) fn list_base(&self, class: &ClassObj) -> bool {
        self.derives_from_one_of(class, &["builtins.list", "collections.UserList"])
    }

    /// An instance built by a caller we do not see: `__init__` runs with unknown arguments.
    fn instantiate_unknown(&mut self, class: &Arc<ClassObj>, settings: &Env) -> ObjId {
        let obj = self.alloc(Obj::Module(Box::new(ModuleObj {
            class: class.name,
            local: Some(class.clone()),
            inplace: None,
            attrs: FxHashMap::default(),
            children: Vec::new(),
            origin: class.span,
            hooks: Vec::new(),
            maybe_hooks: Vec::new(),
            pre_hooks: Vec::new(),
            backward_hook: None,
        })));
        if self.find_method(class, known::INIT).is_none() {
            if let Some(base) = self.torch_layer_base(class) {
                self.init_layer_base(obj, &base, &Args::default(), class.span);
            }
            return obj;
        }
        let Some((init, body, f)) = self.init_of(class) else {
            return obj;
        };
        let c = Code {
            body: &body,
            item: init.item,
        };
        let fd = *body.func(f);
        let mut env = self.unknown_params(c, &fd, Some(obj));
        env.extend(settings.iter().map(|(n, v)| (*n, v.clone())));
        let init = Self::normalized(init, f);
        self.inline_with(init, env, c, &fd, &Args::default(), class.span);
        obj
    }

    /// `class`'s `__init__` (its own or a base's of the program): where it is, with its body
    /// and function.
    fn init_of(&mut self, class: &ClassObj) -> Option<(DefLoc, Arc<Body>, FuncId)> {
        let init = self.find_method(class, known::INIT)?;
        let (body, f) = self.resolve_def(init)?;
        Some((init, body, f))
    }

    /// The parameters of `class`'s `__init__` that every call in `made` gives a constant (a
    /// string, a number, a boolean, `None`; passed, or left to a default), with the values
    /// they give, joined. (A tensor, a layer or a callable argument stays unknown.)
    pub(super) fn constant_init_args(&mut self, class: &ClassObj, made: &[MadeBy]) -> Env {
        let mut out = Env::default();
        let Some((init, body, f)) = self.init_of(class) else {
            return out;
        };
        let c = Code {
            body: &body,
            item: init.item,
        };
        let fd = *body.func(f);
        let params: Vec<_> = body
            .list(fd.params)
            .iter()
            .map(|p| body.params[*p as usize])
            .collect();
        // (After `self`.)
        'param: for (i, p) in params.iter().enumerate().skip(1) {
            if p.kind != ParamKind::Normal {
                break;
            }
            let mut joined = Vals::new();
            for m in made {
                if m.args.spread {
                    continue 'param;
                }
                let vals = match m.args.keyword(p.name) {
                    Some((v, ..)) => v.clone(),
                    None => match m.args.positional.get(i - 1) {
                        Some((v, _)) => v.clone(),
                        None if p.literal_default => match p.default.get() {
                            Some(d) => self.eval(c, d),
                            None => continue 'param,
                        },
                        None => continue 'param,
                    },
                };
                if vals.is_empty() || !vals.iter().all(|v| self.is_constant(*v)) {
                    continue 'param;
                }
                for v in vals {
                    if !joined.contains(&v) {
                        joined.push(v);
                    }
                }
            }
            out.insert(p.name, joined);
        }
        out
    }

    /// A string, number, boolean or `None`.
    fn is_constant(&self, v: ObjId) -> bool {
        matches!(v, TRUE | FALSE | NONE | OTHER)
            || self.int_values.contains_key(&v)
            || matches!(self.obj(v), Obj::Str(_))
    }

    // ------------------------------------------------------------------- a function as a unit

    /// Analyse a function on its own: its arguments unknown (a `forward` argument carries
    /// grad), `self` an instance of its class after `__init__`.
    pub fn run_function(&mut self, def: DefLoc) {
        let Some((body, f)) = self.resolve_def(def) else {
            return;
        };
        let c = Code {
            body: &body,
            item: def.item,
        };
        let fd = *body.func(f);
        self.budget = budget_for(fd.lines as usize);
        self.frames = vec![Frame::new(true)];
        self.inlining = vec![Self::normalized(def, f)];
        self.unit_depth = 1;
        self.grad_enabled = !self.runs_without_grad(c, &fd);
        // (A custom Function's method runs without grad because torch runs it so: a rewrite out
        // of place there drops no history the code asked for.)
        self.implicit_no_grad = !fd.decorators.no_grad && self.in_autograd_function(c, &fd);
        self.inference_mode = fd.decorators.inference;
        let class = self.enclosing_class(c, &fd);
        if let Some(k) = &class {
            if self.instances.contains_key(&k.loc) {
                self.deps.instance = Some(k.loc);
            }
        }
        // (A `@classmethod` analysed on its own gets its class, `cls`, not an instance.)
        let self_obj = match class {
            Some(k) if fd.decorators.classmethod => Some(self.alloc(Obj::Class(k))),
            Some(k) => Some(self.instance_for(&k)),
            None => None,
        };
        self.getitem_self = self_obj.filter(|_| fd.name == known::GETITEM);
        self.method_self = self_obj.filter(|_| {
            let plain = !fd.decorators.staticmethod && !fd.decorators.classmethod;
            plain && fd.name != known::GETITEM && fd.name != known::INIT
        });
        let mut env = self.unknown_params(c, &fd, self_obj);
        // (Of a subclass of the program's own Function subclass too.)
        if (fd.name == known::BACKWARD || fd.name == known::VJP)
            && (self.in_autograd_function(c, &fd)
                || (self.enclosing_class(c, &fd)).is_some_and(|k| self.is_autograd_function(&k, 0)))
        {
            self.enter_custom_backward(c, &fd, &mut env);
        }
        self.state.env = env;
        self.method_heap = self.heap.len();
        self.exec_block(c, fd.body);
        let returns = self.frames[0].returns.clone();
        self.check_kept_writes(&returns);
    }

    /// A custom Function's `backward(ctx, *grad_outputs)` analysed on its own: the gradients
    /// autograd passes it (every parameter after `ctx`) are autograd's, which it may share with
    /// other nodes (a sum's branches get one tensor; the gradient of `.sum()` is one element
    /// expanded): a write into one is [`Event::GradOutputWrite`]. (Named `backward` or, newer,
    /// `vjp`.)
    ///
    /// Its `ctx` (a `@staticmethod`'s first parameter) holds in `saved_tensors` what `forward`
    /// saved: its inputs or outputs, which the caller may still hold (see
    /// [`Event::BackwardSavedWrite`]).
    fn enter_custom_backward(&mut self, c: Code<'_>, fd: &FuncDef, env: &mut Env) {
        let params = c.body.list(fd.params);
        if let Some(first) = params.first().filter(|_| fd.decorators.staticmethod) {
            let at = Span::new(c.item, c.body.params[*first as usize].span);
            // (What `forward` saved, in order, each a tensor of its own; only those its
            // caller holds count: a buffer `forward` made for the backward is its to change.)
            let held = match self.enclosing_class(c, fd) {
                Some(k) => self.saves_held_by_caller(&k),
                None => None,
            };
            // (Not resolved, a save made in a helper or a starred one: one tensor standing for
            // each, which its caller may hold.)
            let exact = held.is_some();
            let mut slots = Vec::new();
            for caller_holds in held.unwrap_or_else(|| vec![true]) {
                let t = self.param_tensor(at, true);
                if let Some(tt) = self.tensor_mut(t) {
                    tt.grad = Tri::No;
                    let storage = tt.storage;
                    if caller_holds {
                        self.custom_backward.saved.insert(storage);
                    }
                }
                slots.push(smallvec![t]);
            }
            let saved = match exact {
                true => {
                    let saved = self.alloc(Obj::Seq(slots));
                    self.exact_seqs.insert(saved);
                    saved
                }
                false => slots[0][0],
            };
            self.tuples.insert(saved);
            let mut attrs = FxHashMap::default();
            attrs.insert(known::SAVED_TENSORS, smallvec![saved]);
            attrs.insert(self.intern("saved_variables"), smallvec![saved]);
            let ctx = self.torch_object("FunctionCtx", attrs, at);
            env.insert(c.body.params[*first as usize].name, smallvec![ctx]);
        }
        for p in params.iter().skip(1) {
            let p = c.body.params[*p as usize];
            // (`*grad_outputs`: a tuple of them.)
            if p.kind == ParamKind::VarArgs {
                let t = self.param_tensor(Span::new(c.item, p.span), true);
                if let Some(tt) = self.tensor_mut(t) {
                    tt.grad = Tri::No;
                    let storage = tt.storage;
                    self.custom_backward.grad_outputs.push((
                        storage,
                        p.name,
                        Span::new(c.item, p.span),
                    ));
                }
                // (One slot standing for each of them: `grad_outputs[0]` is that tensor.)
                let grads = self.alloc(Obj::Seq(vec![smallvec![t]]));
                self.tuples.insert(grads);
                self.exact_seqs.insert(grads);
                env.insert(p.name, smallvec![grads]);
                continue;
            }
            // (Autograd passes tensors: a subscript store into one is a tensor write.)
            let Some(t) = (env.get(&p.name))
                .and_then(|vs| vs.first())
                .and_then(|v| self.tensor_mut(*v))
            else {
                continue;
            };
            t.known = true;
            let storage = t.storage;
            self.custom_backward
                .grad_outputs
                .push((storage, p.name, Span::new(c.item, p.span)));
        }
        let mut stmts = c.body.stmts_of(fd.body);
        let mut first = stmts.next();
        if first.is_some_and(
            |s| matches!(*c.body.stmt(s), Stmt::Expr(e) if matches!(c.body.expr(e), Expr::Str(_))),
        ) {
            first = stmts.next();
        }
        self.custom_backward.first = first.map(|s| Span::new(c.item, c.body.stmt_span(s)));
    }

    /// Parameters bound to what an unknown caller may pass: a literal default or a non-tensor
    /// annotation is no tensor; a `forward` argument is a tensor that carries grad; an argument
    /// of a plain function is a tensor that may not.
    fn unknown_params(&mut self, c: Code<'_>, fd: &FuncDef, self_obj: Option<ObjId>) -> Env {
        let name = self.name(fd.name);
        let is_forward =
            self_obj.is_some_and(|o| self.is_module(o)) && crate::ops::is_forward_name(name);
        let in_module = self_obj.is_some_and(|o| self.is_module(o));
        let mut self_pending = self_obj.filter(|_| !fd.decorators.staticmethod);
        let mut env = Env::default();
        for p in c.body.list(fd.params) {
            let p = c.body.params[*p as usize];
            let obj = if let Some(s) = self_pending.take() {
                s
            } else if p.literal_default
                || matches!(p.annotation, Annotation::NonTensor | Annotation::Scalar)
            {
                // `n=3`, `n: int`, `config: BertConfig`: not a tensor.
                OTHER
            } else if p.kind != ParamKind::Normal {
                self.alloc(Obj::Unknown)
            } else {
                let known = is_forward || p.annotation == Annotation::Tensor;
                let t = self.param_tensor(Span::new(c.item, p.span), known);
                if let Some(tt) = self.tensor_mut(t) {
                    tt.grad_if = Some(GradIf {
                        at: tt.origin,
                        non_data: !is_forward,
                    });
                }
                // Arguments of plain functions carry no grad unless a caller passes it, nor do a
                // module constructor's (`D(std)` keeping `self.std = std`: a setting, not a
                // tensor in the graph; a caller that passes one is followed where it calls).
                if !in_module || fd.name == known::INIT {
                    if let Some(tt) = self.tensor_mut(t) {
                        tt.grad = Tri::No;
                    }
                }
                t
            };
            env.insert(p.name, smallvec![obj]);
        }
        env
    }

    /// A function argument: a tensor that may require grad (a `forward` argument is one).
    fn param_tensor(&mut self, span: Span, known: bool) -> ObjId {
        let id = self.heap.len() as ObjId;
        self.alloc(Obj::Tensor(TensorObj::fresh(id, Tri::Maybe, known, span)))
    }

    /// The class a function is a method of.
    fn enclosing_class(&mut self, c: Code<'_>, fd: &FuncDef) -> Option<Arc<ClassObj>> {
        match fd.owner {
            Owner::None => None,
            Owner::Class(k) => Some(Arc::new(self.class_ref(c, k))),
            Owner::ItemClass => {
                let parent = self.prog.parent_class(c.item)?;
                let body = self.body_of(parent)?;
                let k = body.root_class()?;
                let pc = Code {
                    body: &body,
                    item: parent,
                };
                Some(Arc::new(self.class_ref(pc, k)))
            }
        }
    }

    /// `super().m(...)` in a method: `m` of the bases of the method's class, run on `self`.
    /// `None` when `value` is no bare `super()` or no base has `m` (the call is then opaque).
    fn call_super(
        &mut self,
        c: Code<'_>,
        value: ExprId,
        attr: Name,
        args: &Args,
        call: Span,
    ) -> Option<Vals> {
        let Expr::Call { func, args: sargs } = *c.expr(value) else {
            return None;
        };
        if !matches!(*c.expr(func), Expr::Name { name, .. } if name == known::SUPER) {
            return None;
        }
        let positional = c.body.args[sargs as usize].positional;
        let (class, self_obj) = match positional.len {
            0 => {
                let def = *self.inlining.last()?;
                let (body, f) = self.resolve_def(def)?;
                let fd = *body.func(f);
                let mc = Code {
                    body: &body,
                    item: def.item,
                };
                let class = self.enclosing_class(mc, &fd)?;
                (class, self.state.env.get(&known::SELF)?.first().copied()?)
            }
            // `super(Block, self)`: the bases of the class named (Python 2's spelling).
            2 => {
                let mut pos = c.body.exprs_of(positional);
                let (k, s) = (pos.next()?, pos.next()?);
                let class = match self.eval(c, k).as_slice() {
                    [k] => match self.obj(*k) {
                        Obj::Class(k) => k.clone(),
                        _ => return None,
                    },
                    _ => return None,
                };
                match self.eval(c, s).as_slice() {
                    [s] => (class, *s),
                    _ => return None,
                }
            }
            _ => return None,
        };
        // The classes after the method's class in the method resolution order of the
        // instance's class (a mixin's `super().forward(x)` reaches the class beside it:
        // `class Gate(RangeMixin, ConvGate)`); without one, the method's class's bases.
        let instance = match self.obj(self_obj) {
            Obj::Module(m) => m.local.clone(),
            _ => None,
        };
        let after = instance.as_ref().and_then(|k| {
            let mro = self.mro(k)?;
            let at = mro.iter().position(|m| m.loc == class.loc)?;
            Some(mro[at + 1..].to_vec())
        });
        let method = match &after {
            Some(rest) => rest.iter().find_map(|k| k.methods.get(&attr).copied()),
            None => class.bases.iter().find_map(|b| match self.obj(*b) {
                Obj::Class(k) => self.find_method(k, attr),
                _ => None,
            }),
        };
        if let Some(method) = method {
            return Some(self.inline(method, Some(self_obj), args, call));
        }
        // A torch base class: `nn.Module.__init__` sets nothing the analysis follows; a
        // container's (`nn.Sequential.__init__(*layers)`) takes its children; its `forward` runs
        // them in order. (Of the instance's class when the method's is a mixin.)
        let class = match (&after, instance) {
            (Some(_), Some(k))
                if self.torch_container_base(&class).is_none()
                    && self.torch_layer_base(&class).is_none() =>
            {
                k
            }
            _ => class,
        };
        let container = self.torch_container_base(&class);
        let layer = self.torch_layer_base(&class);
        if attr == known::INIT {
            if let Some(kind) = container {
                self.add_children(self_obj, kind, args);
            } else if let Some(base) = layer {
                self.init_layer_base(self_obj, &base, args, call);
            } else if self.list_base(&class) {
                self.init_list_items(self_obj, args);
            } else if self.dict_base(&class) {
                self.init_dict_items(self_obj, args);
            } else if self.optimizer_base(&class) {
                self.init_param_groups(c, value, self_obj, args, call);
            }
            return Some(smallvec![NONE]);
        }
        if attr == known::FORWARD && container == Some(Container::Sequential) {
            let input = args.first().cloned().unwrap_or_default();
            return Some(self.run_in_order(c, value, self_obj, input));
        }
        if attr == known::FORWARD {
            if let Some(base) = layer {
                return Some(self.call_layer(c, value, self_obj, &base, args, None));
            }
        }
        None
    }

    /// `opt.add_param_group(...)` after a layer the optimizer held was replaced: the way to
    /// give it the new layer's parameters, so the replacement waiting for the optimizer's next
    /// use is dropped (not reported by reading `opt` here).
    fn drop_orphans_given_back(&mut self, c: Code<'_>, func: ExprId) {
        if self.state.orphaned.is_empty() {
            return;
        }
        let Expr::Attr { value, attr, .. } = *c.expr(func) else {
            return;
        };
        let Expr::Name { name, .. } = *c.expr(value) else {
            return;
        };
        if self.name(attr) != "add_param_group" {
            return;
        }
        for o in self.state.env.get(&name).cloned().unwrap_or_default() {
            self.give_back(o, None);
        }
    }

    /// Optimizer `opt` was given parameters (`given`; `None`: a group added, whatever it
    /// holds): the replacements waiting for its next use whose new parameters it now holds are
    /// dropped, on every path, and so are those a read of it reported on the way here.
    pub(super) fn give_back(&mut self, opt: ObjId, given: Option<&Vals>) {
        let covered = |it: &Self, e: &Event| {
            given.is_none_or(|g| {
                (it.rebind_news.iter())
                    .any(|(x, new)| x == e && !new.is_empty() && new.iter().all(|p| g.contains(p)))
            })
        };
        let waiting = self.state.orphaned.remove(&opt).unwrap_or_default();
        let (mut back, kept): (Vec<Event>, Vec<Event>) =
            waiting.into_iter().partition(|e| covered(self, e));
        for e in kept {
            self.state.orphan(opt, e);
        }
        // (Reported where `opt` was read on the way to this, `resync(opt, ...)` or
        // `opt.param_groups`, with no use of it since: taken back.)
        let reported = std::mem::take(&mut self.read_reported);
        for (o, e) in reported {
            if o == opt && covered(self, &e) {
                self.events.retain(|x| *x != e);
                self.seen_events.remove(&e);
                back.push(e);
            } else {
                self.read_reported.push((o, e));
            }
        }
        for e in back {
            if !self.given_back.contains(&e) {
                self.given_back.push(e);
            }
        }
    }

    /// The torch container a class of the file derives from (`class Stack(nn.Sequential)`).
    pub(super) fn torch_container_base(&self, class: &ClassObj) -> Option<Container> {
        self.torch_base(class, &|path| Container::of(path.rsplit('.').next()?), 0)
    }

    /// The torch layer (a module of the op table or one with parameters, not a container) a
    /// class of the file derives from (`class WSConv2d(nn.Conv2d)`): its class name (`Conv2d`).
    pub(super) fn torch_layer_base(&self, class: &ClassObj) -> Option<String> {
        let layer = |path: &str| {
            let last = path.rsplit('.').next()?;
            (path.starts_with("torch.nn.")
                && Container::of(last).is_none()
                && (crate::ops::table().module(last).is_some()
                    || crate::ops::module_has_params(last)))
            .then(|| last.to_string())
        };
        self.torch_base(class, &layer, 0)
    }

    /// Whether a class derives from `torch.distributions.transforms.Transform` (also reached
    /// as `torch.distributions.Transform`), whose `__call__` runs `_call`.
    pub(super) fn torch_transform_base(&self, class: &ClassObj) -> bool {
        let transform = |path: &str| {
            matches!(
                path,
                "torch.distributions.transforms.Transform" | "torch.distributions.Transform"
            )
            .then_some(())
        };
        self.torch_base(class, &transform, 0).is_some()
    }

    /// The first answer of `get` for the dotted paths among a class's bases, through the
    /// file's classes it derives from (depth first).
    fn torch_base<T>(
        &self,
        class: &ClassObj,
        get: &dyn Fn(&str) -> Option<T>,
        depth: usize,
    ) -> Option<T> {
        class.bases.iter().find_map(|b| match self.obj(*b) {
            Obj::Path(p) => get(self.name(*p)),
            Obj::Class(k) if depth < 16 => self.torch_base(k, get, depth + 1),
            _ => None,
        })
    }

    /// A torch layer base's constructor run on `obj` (`super().__init__(3, 8, 3)`, or no
    /// `__init__` of the class's own): its parameters and options become `obj`'s attributes (set
    /// as Python does, over what was there), and `inplace=True` makes it an in-place layer.
    pub(super) fn init_layer_base(&mut self, obj: ObjId, base: &str, args: &Args, call: Span) {
        let attrs = self.layer_attrs(base, args, call);
        let inplace = args
            .keyword(known::INPLACE)
            .filter(|(v, ..)| v.contains(&TRUE))
            .map(|(_, _, arg)| InplaceArg { arg, call });
        if let Obj::Module(m) = self.obj_mut(obj) {
            m.attrs.extend(attrs);
            if inplace.is_some() {
                m.inplace = inplace;
            }
        }
    }

    /// One instance per class for analysing its methods on their own (`__init__` has run).
    pub(super) fn instance_for(&mut self, class: &Arc<ClassObj>) -> ObjId {
        self.instance_for_with(class, &Env::default())
    }

    /// [`Self::instance_for`], its constructor's parameters in `settings` given those values
    /// (the others unknown).
    pub(super) fn instance_for_with(&mut self, class: &Arc<ClassObj>, settings: &Env) -> ObjId {
        if let Some(&o) = self.instances.get(&class.loc) {
            return o;
        }
        let saved_state = std::mem::take(&mut self.state);
        let saved_frames = std::mem::replace(&mut self.frames, vec![Frame::new(false)]);
        let saved_inlining = std::mem::take(&mut self.inlining);
        let obj = self.instantiate_unknown(class, settings);
        self.state = saved_state;
        self.frames = saved_frames;
        self.inlining = saved_inlining;
        self.instances.insert(class.loc, obj);
        obj
    }
}

/// Whether evaluating receiver `value` runs a call (other than `super()`) that may write in
/// place before the call's arguments are evaluated.
fn receiver_runs_code(c: Code<'_>, value: ExprId) -> bool {
    match *c.expr(value) {
        Expr::Call { func, .. } => {
            !matches!(*c.expr(func), Expr::Name { name, .. } if name == known::SUPER)
        }
        _ => false,
    }
}
