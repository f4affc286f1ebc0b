//! Custom autograd functions: `F.apply(*args)` of a `torch.autograd.Function` subclass.
//!
//! Its `forward(ctx, *args)` runs without grad, as torch runs it; the tensors it gives
//! `ctx.save_for_backward` are saved by the op `apply` makes, and torch checks their versions
//! when the backward runs like any built-in op's saves. The results get that op as their
//! history, over the history of every tensor argument.

use super::*;
use crate::domain::graph::OpLabel;

impl Interp<'_, '_> {
    /// Whether a class of the file derives from `torch.autograd.Function`.
    pub(super) fn is_autograd_function(&self, class: &ClassObj, depth: usize) -> bool {
        let function = |p: &str| p.starts_with("torch.autograd") && p.ends_with("Function");
        self.derives_from(class, &function, depth)
    }

    /// `F.apply(*args)`: `forward` run without grad on a fresh `ctx`; its results get the op's
    /// history and saves.
    pub(super) fn apply_function(&mut self, class: &ClassObj, args: &Args, call: Span) -> Vals {
        let Some(forward) = self.find_method(class, known::FORWARD) else {
            return self.opaque_call(args, call);
        };
        let ctx = self.torch_object("FunctionCtx", FxHashMap::default(), call);
        let mut full = args.clone();
        full.positional.insert(0, (smallvec![ctx], None));
        let grad_was = std::mem::replace(&mut self.grad_enabled, false);
        let implicit_was = std::mem::replace(&mut self.implicit_no_grad, true);
        let results = self.inline(forward, None, &full, call);
        self.grad_enabled = grad_was;
        self.implicit_no_grad = implicit_was;
        let saved = match self.obj(ctx) {
            Obj::Module(m) => m.attrs.get(&known::SAVED_TENSORS).cloned(),
            _ => None,
        };
        let mut saved_flat = Vals::new();
        self.flatten(
            &saved.unwrap_or_default(),
            &mut saved_flat,
            &mut FxHashSet::default(),
        );
        let mut inputs = Vals::new();
        for v in args.all_values() {
            self.flatten(v, &mut inputs, &mut FxHashSet::default());
        }
        inputs.retain(|v| self.tensor(*v).is_some());
        let mut outputs = Vals::new();
        self.flatten(&results, &mut outputs, &mut FxHashSet::default());
        outputs.retain(|v| self.tensor(*v).is_some());
        // The op: no saves yet, the arguments' history below it.
        let label = OpLabel::Function(class.name);
        let op = self.derive(
            &[inputs.clone()],
            call,
            Default::default(),
            Some(label),
            true,
        );
        let Some(node) = self.tensor(op).and_then(|t| t.node) else {
            // No argument may require grad (or grad is off): no history to give.
            return results;
        };
        let (grad, assumes) = self
            .tensor(op)
            .map_or((Tri::No, None), |t| (t.grad, t.grad_if));
        let input_storages: SmallVec<[ObjId; 4]> = inputs
            .iter()
            .filter_map(|v| self.tensor(*v).map(|t| t.storage))
            .collect();
        let marked = |how: Name| -> Vals {
            match self.obj(ctx) {
                Obj::Module(m) => m.attrs.get(&how).cloned().unwrap_or_default(),
                _ => Vals::new(),
            }
        };
        let dirty = marked(known::MARK_DIRTY);
        let non_differentiable = marked(known::MARK_NON_DIFFERENTIABLE);
        // An argument marked dirty is written in place by the op, as autograd sees it: a leaf
        // that requires grad raises at the call (measured with torch 2.15: "a leaf Variable
        // that requires grad has been used in an in-place operation").
        for (vals, arg) in &args.positional {
            for d in vals.iter().filter(|d| dirty.contains(d)) {
                if self
                    .tensor(*d)
                    .is_some_and(|t| (t.leaf || t.view_of_leaf) && t.grad == Tri::Yes)
                {
                    let kind = crate::events::WriteKind::DirtyArg { arg: *arg };
                    self.write(
                        &smallvec![*d],
                        super::write::WriteSpec::new(kind, call, call),
                    );
                }
            }
        }
        // Each result made inside `forward` takes the op's history, and so does an argument
        // it wrote in place and marked dirty (torch rebases its history on the op: what the
        // op saved of it is checked when a backward through it runs); one passed through
        // otherwise is that argument (torch makes it a view; its history stays).
        for o in &outputs {
            let fresh = self
                .tensor(*o)
                .is_some_and(|t| !input_storages.contains(&t.storage) || dirty.contains(o));
            let Some(t) = self.tensor_mut(*o) else {
                continue;
            };
            if fresh {
                t.node = Some(node);
                t.grad = grad;
                t.grad_if = assumes;
            }
            // A view made inside `forward` (there a `no_grad` view), of a tensor of its own or
            // of an argument (`x.view_as(x)`), is one of the Function's: autograd refuses to see
            // it written in place (measured with torch 2.15: "This view was created inside a
            // custom Function").
            if t.refused_view.is_some_and(|v| v.op == RefusedBy::NoGrad) {
                t.refused_view = Some(RefusedView {
                    op: RefusedBy::CustomFunction(class.name),
                    at: call,
                    grad: grad == Tri::Yes,
                });
            }
        }
        // An argument returned as it is (and not marked dirty) comes back as a view of it made
        // inside the Function, which autograd refuses to see written in place once any argument
        // requires grad, whether or not that one does (measured with torch 2.15: "This view was
        // created inside a custom Function (or because an input was returned as-is)").
        // (A tuple of outputs raises with the multi-view message instead: not followed.)
        // (Nor one marked dirty or non-differentiable: it comes back as it is.)
        let mut results = results;
        if let [one] = results.as_slice() {
            let as_is = dirty.contains(one) || non_differentiable.contains(one);
            if inputs.contains(one) && !as_is && self.grad_enabled {
                let view = self.view_of(*one, call, Part::Whole);
                if let Some(t) = self.tensor_mut(view) {
                    t.refused_view = Some(RefusedView {
                        op: RefusedBy::ReturnedInput(class.name),
                        at: call,
                        grad: grad == Tri::Yes,
                    });
                }
                results = smallvec![view];
            }
        }
        let output_storages: SmallVec<[ObjId; 4]> = outputs
            .iter()
            .filter_map(|v| self.tensor(*v).map(|t| t.storage))
            .collect();
        let saved = saved_flat.into_iter().map(|s| (s, None));
        for (s, stash) in saved.chain(self.stashed_on(class, ctx)) {
            let Some(storage) = self.tensor(s).map(|t| t.storage) else {
                continue;
            };
            let output = output_storages.contains(&storage);
            let id = self.record_save(storage, output, label, call, assumes);
            self.saves.get_mut(id).stash = stash;
            self.nodes.get_mut(node).saves.push(id);
        }
        results
    }

    /// For each tensor a custom Function's `forward` (or `setup_context`) gives
    /// `ctx.save_for_backward`, in order, whether its caller holds it too: an argument of
    /// `forward` (or a view of one) or what it returns, not a buffer of its own (a softmax it
    /// saves to turn into the gradient in place). `None` when no such call is found.
    pub(super) fn saves_held_by_caller(&mut self, class: &ClassObj) -> Option<Vec<bool>> {
        // (`setup_context(ctx, inputs, output)` sees only the inputs and the output.)
        for (method, all_held) in [(known::FORWARD, false), (known::SETUP_CONTEXT, true)] {
            let Some((body, f)) = self
                .find_method(class, method)
                .and_then(|def| self.resolve_def(def))
            else {
                continue;
            };
            let fd = body.func(f);
            let params: FxHashSet<Name> = (body.list(fd.params).iter())
                .map(|p| body.params[*p as usize].name)
                .collect();
            let within = |sp: crate::ir::Rel| fd.span.contains(sp);
            let mut returned = FxHashSet::default();
            for (st, sp) in body.stmts.iter().zip(&body.stmt_spans) {
                if let (Stmt::Return(e), true) = (*st, within(*sp)) {
                    // (What it returns itself, or a view of it: `return x`, `return out, None`,
                    // `return res.squeeze(-1)`; not a value computed from it, `s * x.sum()`.)
                    if let Some(e) = e.get() {
                        let items: Vec<ExprId> = match *body.expr(e) {
                            Expr::Seq { items, .. } => body.exprs_of(items).collect(),
                            _ => vec![e],
                        };
                        returned.extend(items.into_iter().filter_map(|i| root_name(&body, i)));
                    }
                }
            }
            // (A name bound to a view of another that it returns, `out = y.view(-1)`: that
            // one too.)
            for _ in 0..2 {
                for (st, sp) in body.stmts.iter().zip(&body.stmt_spans) {
                    let Stmt::Assign { targets, value } = *st else {
                        continue;
                    };
                    let returns_target = (body.exprs_of(targets)).any(|t| {
                        matches!(*body.expr(t), Expr::Name { name, .. } if returned.contains(&name))
                    });
                    if within(*sp) && returns_target {
                        if let Some(n) = value.get().and_then(|v| root_name(&body, v)) {
                            returned.insert(n);
                        }
                    }
                }
            }
            // (Each call, in any branch: held where any call's argument there is; calls of
            // other lengths, or a starred argument, leave the slots unknown.)
            let mut held: Option<Vec<bool>> = None;
            for (e, sp) in body.exprs.iter().zip(&body.expr_spans) {
                let Expr::Call { func, args } = *e else {
                    continue;
                };
                let saves = matches!(
                    *body.expr(func),
                    Expr::Attr { attr, .. } if attr == known::SAVE_FOR_BACKWARD
                );
                if !within(*sp) || !saves {
                    continue;
                }
                let given: Vec<ExprId> =
                    body.exprs_of(body.args[args as usize].positional).collect();
                if given
                    .iter()
                    .any(|a| matches!(*body.expr(*a), Expr::Starred(_)))
                {
                    return None;
                }
                let this: Vec<bool> = (given.iter())
                    .map(|a| {
                        all_held
                            || root_name(&body, *a)
                                .is_some_and(|n| params.contains(&n) || returned.contains(&n))
                    })
                    .collect();
                held = match held {
                    None => Some(this),
                    Some(h) if h.len() == this.len() => {
                        Some(h.iter().zip(&this).map(|(a, b)| *a || *b).collect())
                    }
                    Some(_) => return None,
                };
            }
            if held.is_some() {
                return held;
            }
        }
        None
    }

    /// The tensors a custom Function's `forward` kept as attributes of `ctx` (`ctx.x = x`,
    /// `ctx.stash = (x, w)`) that its `backward` reads (`ctx.x` in its body, `ctx` its first
    /// parameter), each with the attribute: the backward reads them as they are then.
    fn stashed_on(&mut self, class: &ClassObj, ctx: ObjId) -> Vec<(ObjId, Option<Name>)> {
        let Some(def) = self.find_method(class, known::BACKWARD) else {
            return Vec::new();
        };
        let Some((body, f)) = self.resolve_def(def) else {
            return Vec::new();
        };
        // (Read as `<ctx>.<attr>` in its body, `<ctx>` its first parameter.)
        let fd = body.func(f);
        let Some(&first) = body.list(fd.params).first() else {
            return Vec::new();
        };
        let ctx_name = body.params[first as usize].name;
        let read: FxHashSet<Name> = (body.exprs.iter().zip(&body.expr_spans))
            .filter(|(_, sp)| fd.span.contains(**sp))
            .filter_map(|(e, _)| match *e {
                Expr::Attr { value, attr, .. } => {
                    matches!(*body.expr(value), Expr::Name { name, .. } if name == ctx_name)
                        .then_some(attr)
                }
                _ => None,
            })
            .collect();
        let mut attrs: Vec<(Name, Vals)> = match self.obj(ctx) {
            Obj::Module(m) => (m.attrs.iter())
                .filter(|(n, _)| {
                    ![
                        known::SAVED_TENSORS,
                        known::MARK_DIRTY,
                        known::MARK_NON_DIFFERENTIABLE,
                    ]
                    .contains(*n)
                })
                .filter(|(n, _)| read.contains(*n))
                .map(|(n, vs)| (*n, vs.clone()))
                .collect(),
            _ => return Vec::new(),
        };
        // (By the names' text: the order of the saves decides which one a finding names.)
        attrs.sort_unstable_by(|a, b| self.name(a.0).cmp(self.name(b.0)));
        let mut out = Vec::new();
        for (name, vals) in attrs {
            let mut flat = Vals::new();
            self.flatten(&vals, &mut flat, &mut FxHashSet::default());
            out.extend(
                (flat.into_iter())
                    .filter(|v| self.tensor(*v).is_some())
                    .map(|v| (v, Some(name))),
            );
        }
        out
    }

    /// `ctx.mark_dirty(*tensors)` (`how`; or `ctx.mark_non_differentiable`) inside a custom
    /// function's `forward`: returning those arguments returns them (not a view).
    pub(super) fn mark_dirty(&mut self, ctx: ObjId, how: Name, args: &Args) {
        let dirty: Vals = args.all_values().flatten().copied().collect();
        if let Obj::Module(m) = self.obj_mut(ctx) {
            m.attrs.entry(how).or_default().extend(dirty);
        }
    }

    /// `ctx.save_for_backward(*tensors)` inside a custom function's `forward`.
    pub(super) fn save_for_backward(&mut self, ctx: ObjId, args: &Args) {
        let saved: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        let seq = self.alloc(Obj::Seq(saved));
        if let Obj::Module(m) = self.obj_mut(ctx) {
            m.attrs.insert(known::SAVED_TENSORS, smallvec![seq]);
        }
    }
}

/// The name an expression reads through attributes, calls, subscripts and a star (`x` of
/// `x.view(-1)`, `*xs`).
fn root_name(body: &crate::ir::Body, e: ExprId) -> Option<Name> {
    match *body.expr(name_root(body, e, true)?) {
        Expr::Name { name, .. } => Some(name),
        _ => None,
    }
}

/// The name expression an expression reads through attributes and calls (`w` of `w.data`,
/// `w.detach()`), and with `subscripts` through subscripts and a star too (`x[0]`, `*xs`).
pub(super) fn name_root(body: &crate::ir::Body, mut e: ExprId, subscripts: bool) -> Option<ExprId> {
    loop {
        match *body.expr(e) {
            Expr::Name { .. } => return Some(e),
            Expr::Attr { value, .. } => e = value,
            Expr::Call { func, .. } => e = func,
            Expr::Subscript { value, .. } if subscripts => e = value,
            Expr::Starred(inner) if subscripts => e = inner,
            _ => return None,
        }
    }
}
