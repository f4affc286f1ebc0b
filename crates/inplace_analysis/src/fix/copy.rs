//! Writes into a copy: `y = y.clone()` before the write (or the view it writes through), and
//! copies where an alias is made.

use super::*;

/// `y = x` -> `y = x.clone()`, at the assignment that made the alias (`alias_of` is `x`).
pub(crate) fn insert_clone(
    ctx: &RenderCtx<'_>,
    alias_of: Span,
    applicability: Applicability,
) -> Option<Fix> {
    append_clone(ctx, alias_of, "Copy instead of aliasing", applicability)
}

/// `[p.grad for p in params]` -> `[p.grad.clone() for p in params]`: a `.grad` tensor read at
/// `read` and kept in a list there (a comprehension's element, a list or tuple item, or what
/// `.append(...)` is given) is kept as a copy, which a later backward or
/// `zero_grad(set_to_none=False)` does not change (unsafe: the list no longer follows `.grad`).
pub(crate) fn clone_kept_grad(ctx: &RenderCtx<'_>, read: Span) -> Option<Fix> {
    let body = ctx.body(read.item)?;
    let mut at = body.expr_with_span(read.rel)?;
    // (Through the branches of a conditional kept so: `p.grad.clone() if copy else p.grad`.)
    while let Some(k) = (0..body.exprs.len()).find(|&i| {
        matches!(body.exprs[i], Expr::IfExp { body: b, orelse, .. } if b == at || orelse == at)
    }) {
        at = ExprId(k as u32);
    }
    let kept = body.exprs.iter().any(|e| match *e {
        Expr::Comp { elt, .. } => elt == at,
        Expr::Seq { items, .. } => body.exprs_of(items).any(|x| x == at),
        Expr::Call { func, args } => {
            matches!(*body.expr(func), Expr::Attr { attr, .. } if ctx.name(attr) == "append")
                && body.exprs_of(body.args[args as usize].positional).eq([at])
        }
        _ => false,
    });
    kept.then(|| insert_clone(ctx, read, Applicability::Unsafe))?
}

/// A snapshot of parameters made a copy: `model.state_dict()` -> `{k: v.clone() for k, v in
/// model.state_dict().items()}` (what `copy.deepcopy` of it holds), `p.detach()` and `p.data`
/// -> `.clone()` after them (unsafe: the name no longer follows the training).
pub(crate) fn copy_snapshot(ctx: &RenderCtx<'_>, made: Span) -> Option<Fix> {
    let r = ctx.range(made)?;
    let body = ctx.body(made.item)?;
    let e = body.expr_with_span(made.rel)?;
    let state_dict = matches!(*body.expr(e), Expr::Call { func, .. }
        if matches!(*body.expr(func), Expr::Attr { attr, .. } if ctx.name(attr) == "state_dict"));
    // (`list(model.parameters())`, `tuple(...)`: a list of copies, as of a state dict.)
    let listed = match *body.expr(e) {
        Expr::Call { func, args } => match (*body.expr(func), body.args[args as usize]) {
            (Expr::Name { name, .. }, a) if matches!(ctx.name(name), "list" | "tuple") => {
                let mut it = body.exprs_of(a.positional);
                match (it.next(), it.next()) {
                    (Some(x), None) => Some(ctx.text(Span::new(made.item, body.expr_span(x)))),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    };
    if let Some(source) = listed {
        let copy = format!("[p.detach().clone() for p in {source}]");
        return Some(one(
            format!("Keep a copy: `{copy}`"),
            Applicability::Unsafe,
            r,
            copy,
        ));
    }
    if !state_dict {
        return insert_clone(ctx, made, Applicability::Unsafe);
    }
    let text = ctx.slice(r);
    let copy = format!("{{k: v.clone() for k, v in {text}.items()}}");
    Some(one(
        format!("Keep a copy: `{copy}`"),
        Applicability::Unsafe,
        r,
        copy,
    ))
}

/// `a -= a[:, :1]` -> `a -= a[:, :1].clone()`: the operand is read before anything is
/// written, as the out-of-place op would (safe: the values are those the op was meant to
/// compute).
pub(crate) fn clone_operand(ctx: &RenderCtx<'_>, operand: Span) -> Option<Fix> {
    append_clone(ctx, operand, "Read a copy", Applicability::Safe)
}

/// `.clone()` after the expression at `at`, titled `what: `<expr>.clone()``.
fn append_clone(
    ctx: &RenderCtx<'_>,
    at: Span,
    what: &str,
    applicability: Applicability,
) -> Option<Fix> {
    let r = ctx.range(at)?;
    Some(one(
        format!("{what}: `{}.clone()`", ctx.slice(r)),
        applicability,
        TextRange::new(r.end, r.end),
        ".clone()".into(),
    ))
}

/// Where a NumPy array and a tensor came to share memory, one side gets its own:
/// `t.numpy()` -> `t.numpy().copy()`, `torch.from_numpy(a)` -> `torch.from_numpy(a).clone()`.
/// Unsafe: code may rely on the sharing.
pub(crate) fn own_memory(
    ctx: &RenderCtx<'_>,
    share: crate::domain::NumpyShare,
    w: &crate::events::Write,
) -> Option<Fix> {
    // The tensor read by its name after the array was written (`p = probs.detach().numpy();
    // p[~legal] = 0; masked = probs`): the write is meant to reach it, and a copy would
    // silently drop it.
    if share.from_tensor && tensor_read_after(ctx, share.at, w) {
        return None;
    }
    let (copy, what) = if share.from_tensor {
        (".copy()", "the array")
    } else {
        (".clone()", "the tensor")
    };
    let r = ctx.range(share.at)?;
    Some(one(
        format!("Give {what} its own memory: `{}{copy}`", ctx.slice(r)),
        Applicability::Unsafe,
        TextRange::new(r.end, r.end),
        copy.into(),
    ))
}

/// Whether the name the tensor of `t.numpy()` (at `at`) was taken from is read after the
/// write's statement, in the same function.
fn tensor_read_after(ctx: &RenderCtx<'_>, at: Span, w: &crate::events::Write) -> bool {
    let Some(s) = w.stmt.filter(|s| s.item == at.item) else {
        return false;
    };
    let Some(body) = ctx.body(at.item) else {
        return false;
    };
    let call = (0..body.exprs.len()).find(|&k| body.expr_spans[k] == at.rel);
    let root = call.and_then(|k| root_place(&body, ExprId(k as u32)));
    let Some(Expr::Name { name, .. }) = root.map(|r| *body.expr(r)) else {
        return false;
    };
    let after = Rel::new(body.stmt_span(s.stmt).end, u32::MAX);
    names_read(&body, after).contains(&name)
}

/// `R = R.clone()` on a line of its own before the statement that makes the tensor a write
/// changes (the view it writes through, when it is one; else the write itself): the write
/// then changes a copy, and what an op saved stays as it was saved. Under `torch.no_grad()`
/// the copy goes before the outermost `with ... no_grad()` block, so that it keeps its
/// history. Unsafe: other names of the old tensor no longer see the write.
pub(crate) fn clone_before(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    // (Not a parameter's `.detach()` made in the write: that means to change the parameter.)
    if let Some(fix) = copy_detached(ctx, w).filter(|_| !w.into_leaf) {
        return Some(fix);
    }
    if let Some(fix) = copy_in_caller(ctx, w) {
        return fix;
    }
    // `state.h = state.h.clone()` of a record's field raises `AttributeError`.
    if w.into_leaf || w.record_field {
        // `p = p.clone()` of a parameter: not a parameter any more (a module refuses it, an
        // optimizer keeps updating the old one).
        return None;
    }
    let s = w.stmt?;
    // (`torch.sigmoid(h).view(-1)` views a new tensor: the name written is then what is
    // copied.)
    let view = w.view_origin.and_then(|v| view_statement(ctx, v));
    let (at, root) = match (w.element, view) {
        // `outs[i].add_(1)`: the element is replaced by a copy, not the list (of a list or a
        // dict: a tuple's element, one a call returned included, cannot be replaced).
        (Some(element), _) if element.item == s.item && w.fixed_element => return None,
        (Some(element), _) if element.item == s.item && w.tuple_element => {
            return copy_tuple_element(ctx, w, element);
        }
        (Some(element), _) if element.item == s.item => (s, element),
        (_, Some(found)) => found,
        _ => {
            let body = ctx.body(s.item)?;
            let written = written_expr(&body, s.stmt, w)?;
            (
                s,
                Span::new(s.item, body.expr_span(written_root(ctx, &body, written)?)),
            )
        }
    };
    let body = ctx.body(at.item)?;
    let mut stmt = body.stmt_span(at.stmt);
    if w.under_no_grad {
        stmt = outermost_no_grad(ctx, &body, at.item, stmt)?;
    }
    let stmt = ctx.range(Span::new(at.item, stmt))?;
    let r = ctx.text(root);
    if ctx.is_imported_module(r) {
        return None;
    }
    let title = format!("Write into a copy: `{r} = {r}.clone()` first");
    let fix = copy_before_statement(ctx, stmt, r, title)?;
    with_declaration(ctx, &body, at, r, fix)
}

/// `feats = (feats[0].clone(), *feats[1:])` before a write into element `k` of a tuple a
/// name holds (`feats[0].mul_(2)` where `feats = backbone(x)` returned `h, y`): a tuple's
/// element cannot be replaced, the tuple can, with a copy in that position. Only a plain name
/// at a constant position; `None` under `no_grad` (the copy would go before the block).
fn copy_tuple_element(ctx: &RenderCtx<'_>, w: &crate::events::Write, element: Span) -> Option<Fix> {
    let s = w.stmt?;
    let body = ctx.body(s.item)?;
    let Expr::Subscript { value, sub, .. } = *body.expr(body.expr_with_span(element.rel)?) else {
        return None;
    };
    let (Expr::Name { .. }, crate::ir::Index::At(k @ 0..=64)) =
        (*body.expr(value), body.subscripts[sub as usize].index)
    else {
        return None;
    };
    if w.under_no_grad {
        return None;
    }
    let t = ctx.text(Span::new(s.item, body.expr_span(value)));
    let before = if k == 0 {
        String::new()
    } else {
        format!("*{t}[:{k}], ")
    };
    let tuple = format!("({before}{t}[{k}].clone(), *{t}[{}:])", k + 1);
    let stmt = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    let (indent, eol) = indentation(ctx, stmt.start)?;
    let line = stmt.start - indent.len();
    Some(one(
        format!("Write into a copy: `{t} = {tuple}` first"),
        Applicability::Unsafe,
        TextRange::new(line, line),
        format!("{indent}{t} = {tuple}{eol}"),
    ))
}

/// A write through a parameter of a helper that neither gives it back nor reads it again
/// (`x.mul_(lam).add_(flipped); return lam`, a mixup's features): the write is what the helper
/// does for its caller, and a copy inside would keep it from the caller. The caller copies what
/// it passes, before the call (`x = x.clone()` before `lam = self._mix_batch(x)`): `Some` of
/// that, or `Some(None)` where the argument is no plain name; `None` for any other write.
pub(crate) fn copy_in_caller(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Option<Fix>> {
    if w.element.is_some() || w.view_origin.is_some() || w.hook_output.is_some() {
        return None;
    }
    // (A parameter passed, `self.renorm(self.fc.weight)`: a copy would be no parameter, and
    // the write is meant to change it.)
    if w.into_leaf {
        return None;
    }
    let at = w.stmt?;
    let body = ctx.body(at.item)?;
    let body = &body;
    // (Not a write whose result the helper binds, `probs = logits.sigmoid_()`: it computes
    // with it.)
    if matches!(body.stmt(at.stmt), Stmt::Assign { .. })
        && !matches!(w.kind, crate::events::WriteKind::Subscript { .. })
    {
        return None;
    }
    let written = written_expr(body, at.stmt, w)?;
    let Expr::Name { name, .. } = *body.expr(written_root(ctx, body, written)?) else {
        return None;
    };
    let at_stmt = body.stmt_span(at.stmt);
    let f = enclosing_function(body, at_stmt)?;
    if !product_of(ctx, body, f, name, at_stmt) {
        return None;
    }
    // Up the calls that led here, innermost first: the first caller that keeps what it passed
    // (not a helper handing its own parameter on for the same purpose) copies it.
    let mut callee = (f.name, body.param_names(f).collect::<Vec<_>>());
    let (mut name, mut item) = (name, at.item);
    for call in w.call_path.iter().rev() {
        // (The helper defined in its caller's scope: a copy there would be the same code.)
        if ctx.same_scope(call.item, item) {
            return None;
        }
        let cb = ctx.body(call.item)?;
        let stmt = super::simple_statement_at(&cb, call.rel)?;
        // (An attribute path passed, `self.norm_img(self.fake)`: the object keeps what the
        // helper changes; its copy goes before the call.)
        if let Some(path) = passed_path(ctx, &cb, *call, (callee.0, &callee.1), name) {
            // (Another name holding it, `self.fake = fake`, would not see the change.)
            let at = cb.stmt_span(stmt);
            let within = enclosing_function(&cb, at).map_or(Rel::new(0, u32::MAX), |fc| fc.span);
            if path_held_by_name(ctx, &cb, call.item, path, within) {
                return Some(None);
            }
            let range = ctx.range(Span::new(call.item, at))?;
            let title = format!(
                "Pass the helper a copy to write: `{path} = {path}.clone()` before the call"
            );
            return Some(copy_before_statement(ctx, range, path, title));
        }
        let passed = passed_name(ctx, &cb, *call, (callee.0, &callee.1), name)?;
        let at = cb.stmt_span(stmt);
        let caller = enclosing_function(&cb, at).copied();
        let within = caller.map_or(Rel::new(0, u32::MAX), |fc| fc.span);
        // (A loop's element, `for f in feats: scale_(f)`, or a tensor a container or another
        // name keeps: a copy would keep the change from them.)
        if loop_target_around(&cb, passed, at) || kept_elsewhere(ctx, &cb, passed, at, within) {
            return Some(None);
        }
        if let Some(fc) = caller.filter(|fc| cb.param_names(fc).any(|p| p == passed)) {
            if product_of(ctx, &cb, &fc, passed, at) {
                callee = (fc.name, cb.param_names(&fc).collect());
                (name, item) = (passed, call.item);
                continue;
            }
        }
        let range = ctx.range(Span::new(call.item, at))?;
        let r = ctx.name(passed);
        let title = format!("Pass the helper a copy to write: `{r} = {r}.clone()` before the call");
        return Some(copy_before_statement(ctx, range, r, title));
    }
    None
}

/// The innermost function (not a lambda) around `at`.
fn enclosing_function(body: &Body, at: Rel) -> Option<&FuncDef> {
    (body.funcs.iter())
        .filter(|f| !f.lambda && f.span.contains(at))
        .min_by_key(|f| f.span.end - f.span.start)
}

/// Whether parameter `name` of `f` is what `f` changes for its caller: a parameter, neither
/// given back nor read after `at` other than to be written again (`f` no generator).
fn product_of(ctx: &RenderCtx<'_>, body: &Body, f: &FuncDef, name: Name, at: Rel) -> bool {
    if f.generator || !body.param_names(f).any(|p| p == name) {
        return false;
    }
    let returned = (body.stmts.iter().zip(&body.stmt_spans))
        .filter(|(_, sp)| f.span.contains(**sp))
        .any(|(st, _)| match *st {
            Stmt::Return(r) => r.get().is_some_and(|r| {
                super::reads_of(body, body.expr_span(r), name)
                    .next()
                    .is_some()
            }),
            _ => false,
        });
    let writes_or_metadata = |attr: Name| ops::inplace_or_metadata(ctx.name(attr));
    !returned && !used_after(&writes_or_metadata, body, name, at, f.span)
}

/// The plain name call `call` (in `cb`) passes for parameter `name` of function `fname` (of
/// parameters `params`), by keyword or by
/// position; `None` where it is called otherwise than by `f`'s name (a hook a module's call
/// runs) or passes something else (a value made in the call, `f(lin(x))`, that no caller's
/// name sees).
fn passed_name(
    ctx: &RenderCtx<'_>,
    cb: &Body,
    call: Span,
    callee: (Name, &[Name]),
    name: Name,
) -> Option<Name> {
    match *cb.expr(passed_arg(ctx, cb, call, callee, name)?) {
        Expr::Name { name, .. } => Some(name),
        _ => None,
    }
}

/// The attribute path (`self.fake`) call `call` passes for parameter `name`, as
/// [`passed_name`] finds a plain name.
fn passed_path<'a>(
    ctx: &RenderCtx<'a>,
    cb: &Body,
    call: Span,
    callee: (Name, &[Name]),
    name: Name,
) -> Option<&'a str> {
    let arg = passed_arg(ctx, cb, call, callee, name)?;
    (matches!(*cb.expr(arg), Expr::Attr { .. }) && super::is_place(cb, arg))
        .then(|| ctx.text(Span::new(call.item, cb.expr_span(arg))))
}

/// Whether an assignment in `within` binds a plain name to attribute path `path`, or `path` to
/// a plain name (`fake = self.fake`, `self.fake = fake`): that name holds the same tensor.
fn path_held_by_name(
    ctx: &RenderCtx<'_>,
    body: &Body,
    item: ItemId,
    path: &str,
    within: Rel,
) -> bool {
    let text = |e: ExprId| ctx.text(Span::new(item, body.expr_span(e)));
    let plain = |e: ExprId| matches!(*body.expr(e), Expr::Name { .. });
    (body.stmts.iter().zip(&body.stmt_spans))
        .filter(|(_, sp)| within.contains(**sp))
        .any(|(st, _)| match *st {
            Stmt::Assign { targets, value } => body.exprs_of(targets).any(|t| {
                // (Pairwise through tuples: `self.fake, self.real = fake, real`.)
                let pairs: Vec<(ExprId, ExprId)> = match (body.expr(t), body.expr(value)) {
                    (Expr::Seq { items: a, .. }, Expr::Seq { items: b, .. }) => {
                        body.exprs_of(*a).zip(body.exprs_of(*b)).collect()
                    }
                    _ => vec![(t, value)],
                };
                pairs
                    .into_iter()
                    .any(|(t, v)| (text(v) == path && plain(t)) || (plain(v) && text(t) == path))
            }),
            _ => false,
        })
}

/// The argument expression call `call` passes for parameter `name` (see [`passed_name`]).
fn passed_arg(
    ctx: &RenderCtx<'_>,
    cb: &Body,
    call: Span,
    (fname, params): (Name, &[Name]),
    name: Name,
) -> Option<ExprId> {
    let Expr::Call { func, args, .. } = *cb.expr(cb.expr_with_span(call.rel)?) else {
        return None;
    };
    let (Expr::Name { name: called, .. } | Expr::Attr { attr: called, .. }) = *cb.expr(func) else {
        return None;
    };
    if ctx.name(called) != ctx.name(fname) {
        return None;
    }
    let position = params.iter().position(|p| *p == name)?;
    let a = &cb.args[args as usize];
    // (A method called on its instance, `self._mix(x)`, passes `self` itself.)
    let method = matches!(cb.expr(func), Expr::Attr { .. })
        && params.first().is_some_and(|p| ctx.name(*p) == "self");
    let keyword = (cb.list(a.keywords).iter())
        .map(|k| cb.keywords[*k as usize])
        .find(|k| k.name == Some(name))
        .map(|k| k.value);
    keyword.or_else(|| {
        let k = position.checked_sub(usize::from(method))?;
        cb.exprs_of(a.positional).nth(k)
    })
}

/// Whether `name` is the target of a `for` loop around `at` (`for f in feats:`).
fn loop_target_around(body: &Body, name: Name, at: Rel) -> bool {
    (body.stmts.iter().zip(&body.stmt_spans)).any(|(st, sp)| match *st {
        Stmt::For { target, .. } if sp.contains(at) => {
            super::reads_of(body, body.expr_span(target), name)
                .next()
                .is_some()
                || matches!(*body.expr(target), Expr::Name { name: n, .. } if n == name)
        }
        _ => false,
    })
}

/// Whether before `at` (within `within`) the tensor `name` holds was put into a container or
/// an attribute, bound to another name, or viewed (`cache = {"h": h}`, `outs.append(h)`,
/// `self.h = h`, `y = h`, `h.view(-1)`, `h[0]`): those would not see a copy's change.
fn kept_elsewhere(ctx: &RenderCtx<'_>, body: &Body, name: Name, at: Rel, within: Rel) -> bool {
    let before = |sp: Rel| sp.end <= at.start && within.contains(sp);
    let is_name = |e: ExprId| matches!(*body.expr(e), Expr::Name { name: n, .. } if n == name);
    let kept_in_display = (body.exprs.iter().zip(&body.expr_spans))
        .filter(|(_, sp)| before(**sp))
        .any(|(e, _)| match *e {
            Expr::Seq { items, .. } => body.exprs_of(items).any(is_name),
            Expr::Dict { values, .. } => body.exprs_of(values).any(is_name),
            Expr::Call { func, args, .. } => {
                matches!(*body.expr(func), Expr::Attr { attr, .. }
                    if matches!(ctx.name(attr), "append" | "insert" | "extend" | "setdefault" | "update" | "add"))
                    && body.exprs_of(body.args[args as usize].positional).any(is_name)
            }
            // (A view of it, `flat = h.view(-1)`, `h[0]`, `h.t()`, `h.detach()`: the same
            // memory, which the copy would no longer be.)
            Expr::Attr { value, attr, .. } => {
                is_name(value) && same_memory(ctx.name(attr), false)
            }
            Expr::Subscript { value, .. } => is_name(value),
            _ => false,
        });
    let stored = (body.stmts.iter().zip(&body.stmt_spans))
        .filter(|(_, sp)| before(**sp))
        .any(|(st, _)| match *st {
            Stmt::Assign { targets, value } => {
                is_name(value) && body.exprs_of(targets).any(|t| !is_name(t))
            }
            _ => false,
        });
    kept_in_display || stored
}

/// Whether `name` is read after `at` within `within` other than to be written in place again
/// (`feats.add_(flipped)`, `feats[0] = 0`, `feats += 1`) or for its metadata.
/// `writes_or_metadata`: whether an attribute names an in-place method or metadata.
pub(crate) fn used_after(
    writes_or_metadata: &dyn Fn(Name) -> bool,
    body: &Body,
    name: Name,
    at: Rel,
    within: Rel,
) -> bool {
    let runs_after = super::RunsAfter::new(body, at, within);
    let after = |sp: Rel| runs_after.contains(sp);
    let mut writes: Vec<ExprId> = Vec::new();
    for (e, sp) in body.exprs.iter().zip(&body.expr_spans) {
        if !after(*sp) {
            continue;
        }
        if let Expr::Attr { value, attr, .. } = *e {
            if writes_or_metadata(attr) {
                writes.push(value);
            }
        }
    }
    for (st, sp) in body.stmts.iter().zip(&body.stmt_spans) {
        if !after(*sp) {
            continue;
        }
        match *st {
            Stmt::AugAssign { target, .. } => writes.push(target),
            Stmt::Assign { targets, .. } => writes.extend(body.exprs_of(targets)),
            _ => {}
        }
    }
    let written = |e: ExprId| {
        writes.iter().any(|w| {
            *w == e || matches!(*body.expr(*w), Expr::Subscript { value, .. } if value == e)
        })
    };
    (0..body.exprs.len()).map(|i| ExprId(i as u32)).any(|e| {
        matches!(*body.expr(e), Expr::Name { name: n, .. } if n == name)
            && after(body.expr_span(e))
            && !written(e)
    })
}

/// Where [`clone_before`] would copy too early: the view the write goes through is taken
/// (`q, k, v = qkv[0], qkv[1], qkv[2]`) before the statement whose op saved (`q_rot = rope(q[:,
/// 1:])`), so a copy of the base there would be saved and written alike. The name the write
/// goes through is copied right before the write instead (`q = q.clone()`): the op keeps what
/// it saved, and later reads of that name see the write. `Some(None)` (no copy of the base or
/// the name: other kinds of fix may still apply) where the view's base is read after the write
/// (the write was meant to reach it), the name is no plain one or another name holds the
/// tensor; `None` where a copy at the view is right.
pub(crate) fn clone_between_save_and_write(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    saved_at: Span,
) -> Option<Option<Fix>> {
    let s = w.stmt?;
    let (view_at, _) = view_statement(ctx, w.view_origin?)?;
    let range = |r: StmtRef| {
        let b = ctx.body(r.item)?;
        ctx.range(Span::new(r.item, b.stmt_span(r.stmt)))
    };
    let (v, x) = (range(view_at)?, range(s)?);
    let between = |r: crate::finding::TextRange| v.end <= r.start && r.end <= x.start;
    let top = |item| ctx.body(item).is_some_and(|b| b.root_def().is_none());
    let body = ctx.body(s.item)?;
    // The op that saved runs between the two: in this code (one function, or statements of
    // the module), or in a function a statement between them calls by name.
    let one_code = (view_at.item == s.item && saved_at.item == s.item)
        || (top(view_at.item) && top(s.item) && top(saved_at.item));
    let here = one_code && between(ctx.range(saved_at)?);
    let called = view_at.item == s.item
        && saving_function(ctx, saved_at, s.item).is_some_and(|name| {
            calls_named(&body, name, |sp| {
                ctx.range(Span::new(s.item, sp)).is_some_and(between)
            })
        });
    if !here && !called {
        return None;
    }
    if view_base_read_after(ctx, w) || w.into_leaf || w.record_field {
        return Some(None);
    }
    let written = written_expr(&body, s.stmt, w)?;
    let root = root_place(&body, written)?;
    // (Another name of it, `queries = q`, would keep the values without the write.)
    match *body.expr(root) {
        Expr::Name { name, .. } if !aliased_by_name(ctx, s.item, name) => {}
        _ => return Some(None),
    }
    let r = ctx.text(Span::new(s.item, body.expr_span(root)));
    let stmt = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    let title = format!("Write into a copy: `{r} = {r}.clone()` first");
    Some(copy_before_statement(ctx, stmt, r, title))
}

/// The name of the function of the file an op that saved (at `saved_at`) is in, when that is
/// not `item` itself (nor an imported module's).
fn saving_function(ctx: &RenderCtx<'_>, saved_at: Span, item: ItemId) -> Option<Name> {
    if saved_at.item == item || crate::project::is_module_item(saved_at.item) {
        return None;
    }
    let b = ctx.body(saved_at.item)?;
    b.root_def().map(|f| b.func(f).name)
}

/// Whether `body` makes a call within `within`.
fn calls_in(body: &Body, within: Rel) -> bool {
    (0..body.exprs.len())
        .any(|i| matches!(body.exprs[i], Expr::Call { .. }) && within.contains(body.expr_spans[i]))
}

/// Whether `body` calls a function or method named `name` at a place `at` accepts.
fn calls_named(body: &Body, name: Name, at: impl Fn(Rel) -> bool) -> bool {
    (0..body.exprs.len()).any(|i| {
        let Expr::Call { func, .. } = body.exprs[i] else {
            return false;
        };
        at(body.expr_spans[i])
            && matches!(*body.expr(func),
                Expr::Name { name: n, .. } | Expr::Attr { attr: n, .. } if n == name)
    })
}

/// `b[:, 1] = f(b[:, 0])`: the value reads the tensor the statement writes, so a copy made
/// before the statement would be read and written alike. The reads in the value become copies
/// instead (`f(b[:, 0].clone())`): what the op saves is then no longer the written memory.
/// Only where the op that saved (`saved_at`) is in that value, or in a function a call in
/// the value runs (`alpha[t] = logadd(alpha[t - 1], ...)` with `torch.max` in `logadd`).
pub(crate) fn clone_reads_in_value(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    (sid, save): (crate::domain::SaveId, &crate::domain::Save),
) -> Option<Fix> {
    let saved_at = save.range;
    let s = w.stmt?;
    let body = ctx.body(s.item)?;
    let within = match *body.stmt(s.stmt) {
        Stmt::Assign { value, .. } | Stmt::AugAssign { value, .. } => body.expr_span(value),
        // An in-place method given what it stores: its arguments
        // (`out[:, i:i + 1].add_(conv(out[:, i - 1:i]))`, a row recurrence).
        Stmt::Expr(_) if w.kind.is_inplace_call() => {
            let call = w.call?;
            let Expr::Call { func, .. } = *body.expr(call) else {
                return None;
            };
            Rel::new(body.expr_span(func).end, body.expr_span(call).end)
        }
        _ => return None,
    };
    let in_value = saved_at.item == s.item && within.contains(saved_at.rel);
    // (The function the save is in, called by name in the value: `logadd(...)`, `self.f(...)`.)
    let in_callee = saving_function(ctx, saved_at, s.item)
        .is_some_and(|name| calls_named(&body, name, |sp| within.contains(sp)));
    // (Or a call of this very statement reached it through a module's `forward`, `T[b] =
    // conv(T[b])` with `conv` a module: its calls in the value are the only ones it makes.)
    // (Or made while the statement ran, by a call in the value that reached it through a
    // module: `T[b][t] = self._graph_conv(T[b][t], L)`, the conv saving what it was given.)
    let in_callee = in_callee
        || (sid >= w.stmt_first_save
            && saved_at.item != s.item
            && !crate::project::is_module_item(saved_at.item)
            && calls_in(&body, within));
    if !in_value && !in_callee {
        return None;
    }
    let written = written_expr(&body, s.stmt, w)?;
    let root = match w.element {
        Some(element) => element,
        None => Span::new(s.item, body.expr_span(root_place(&body, written)?)),
    };
    // (With the other places a tuple target writes: `q[:, 1:], k[:, 1:] = rope(q[:, 1:], k[:,
    // 1:])` reads copies of both, one fix for the statement.)
    let mut roots = vec![ctx.text(root).to_string()];
    if let Stmt::Assign { targets, .. } = *body.stmt(s.stmt) {
        for t in body.exprs_of(targets) {
            if let Expr::Seq { items, .. } = *body.expr(t) {
                for e in body.exprs_of(items) {
                    if let Some(r) = matches!(body.expr(e), Expr::Subscript { .. })
                        .then(|| root_place(&body, e))
                        .flatten()
                    {
                        roots.push(ctx.text(Span::new(s.item, body.expr_span(r))).to_string());
                    }
                }
            }
        }
    }
    let reads: Vec<ExprId> = (0..body.exprs.len())
        .map(|i| ExprId(i as u32))
        .filter(|e| within.contains(body.expr_span(*e)))
        .filter(|e| match *body.expr(*e) {
            Expr::Subscript { value, .. } => {
                let text = ctx.text(Span::new(s.item, body.expr_span(value)));
                roots.iter().any(|r| r == text)
            }
            _ => false,
        })
        .collect();
    if reads.is_empty() {
        return None;
    }
    // (The value also hands on the whole tensor, `self.cell(H[:, t - 1], H)`: what is saved of
    // it is no copy of a part.)
    let parts: Vec<ExprId> = (reads.iter())
        .filter_map(|e| match *body.expr(*e) {
            Expr::Subscript { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    let whole = (0..body.exprs.len()).map(|i| ExprId(i as u32)).any(|e| {
        within.contains(body.expr_span(e))
            && matches!(body.expr(e), Expr::Name { .. } | Expr::Attr { .. })
            && !parts.contains(&e)
            && roots
                .iter()
                .any(|r| r == ctx.text(Span::new(s.item, body.expr_span(e))))
    });
    if whole {
        return None;
    }
    let edits = clones_after(ctx, &body, s.item, &reads)?;
    let first = ctx.text(Span::new(s.item, body.expr_span(reads[0])));
    Some(Fix {
        title: format!("Let the op read a copy: `{first}.clone()`"),
        applicability: Applicability::Unsafe,
        edits,
    })
}

/// A write through `x.detach()` (which shares `x`'s memory and counter): the detached tensor
/// becomes a copy, `x.detach().clone()`, so the write changes neither `x` nor what autograd
/// saved of it.
pub(crate) fn copy_detached(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let v = w.view_origin?;
    let body = ctx.body(v.item)?;
    let e = body.expr_with_span(v.rel)?;
    let Expr::Call { func, .. } = *body.expr(e) else {
        return None;
    };
    match *body.expr(func) {
        Expr::Attr { attr, .. } if ctx.name(attr) == "detach" => {
            insert_clone(ctx, v, Applicability::Unsafe)
        }
        _ => None,
    }
}

/// The expression whose tensor a write changes: `y` of `y[i] = v`, `y.mul_(2)`,
/// `torch.relu_(y)`, `out=y`, `y += 1`.
pub(crate) fn written_expr(body: &Body, s: StmtId, w: &crate::events::Write) -> Option<ExprId> {
    use crate::events::WriteKind;
    let subscript_value = |e: ExprId| match *body.expr(e) {
        Expr::Subscript { value, .. } => Some(value),
        _ => None,
    };
    match w.kind {
        WriteKind::Subscript { .. } => match *body.stmt(s) {
            // (Or the subscript of a tuple target that is the write: `q[:, 1:], k[:, 1:] = ...`.)
            Stmt::Assign { targets, .. } => {
                body.exprs_of(targets).find_map(|t| match *body.expr(t) {
                    Expr::Seq { items, .. } => body
                        .exprs_of(items)
                        .find(|e| body.expr_span(*e) == w.range.rel)
                        .and_then(subscript_value),
                    _ => subscript_value(t),
                })
            }
            Stmt::AugAssign { target, .. } => subscript_value(target),
            _ => None,
        },
        WriteKind::Method(_) => match *body.expr(w.call?) {
            Expr::Call { func, .. } => match *body.expr(func) {
                Expr::Attr { value, .. } => Some(value),
                _ => None,
            },
            _ => None,
        },
        WriteKind::TorchFn(_) => match *body.expr(w.call?) {
            Expr::Call { args, .. } => body.exprs_of(body.args[args as usize].positional).next(),
            _ => None,
        },
        WriteKind::AugAssign => match *body.stmt(s) {
            Stmt::AugAssign { target, .. } => Some(target),
            _ => None,
        },
        WriteKind::OutArg => body
            .keywords
            .iter()
            .find(|k| k.span == w.range.rel)
            .map(|k| k.value),
        _ => None,
    }
}

/// The innermost simple statement holding a view expression, and the place the view starts
/// from.
fn view_statement(ctx: &RenderCtx<'_>, v: Span) -> Option<(StmtRef, Span)> {
    let body = ctx.body(v.item)?;
    let e = body.expr_with_span(v.rel)?;
    let root = view_root(ctx, &body, e)?;
    let stmt = simple_statement_at(&body, v.rel)?;
    Some((
        StmtRef { item: v.item, stmt },
        Span::new(v.item, body.expr_span(root)),
    ))
}

/// The tensor a view expression is a view of, through subscripts, view methods and
/// attributes, and `.detach()` only (`h[:, 0].view(-1)` -> `h`). A chain through any other
/// call (`torch.sigmoid(h).view(-1)`, `self.head(h).view(-1)`) views a new tensor: None.
fn view_root(ctx: &RenderCtx<'_>, body: &Body, e: ExprId) -> Option<ExprId> {
    chain_root(body, e, &|attr| same_memory(ctx.name(attr), false))
}

/// Whether method `m` returns its receiver's memory: a view, `.detach()`, or (`inplace`) an
/// in-place call, which returns its receiver.
fn same_memory(m: &str, inplace: bool) -> bool {
    crate::ops::is_view_op(m)
        || m == "detach"
        || (inplace && crate::ops::table().inplace_method_base(m).is_some())
}

/// The tensor a write's target expression is: through subscripts, views, `.detach()` and
/// in-place calls (which return their receiver: `w.div_(s).add_(0.5)` writes `w`). Not through
/// another call (`g.norm(2, dim=1).sub_(1)` writes the new tensor `norm` made: a copy of `g`
/// would not change what is written).
fn written_root(ctx: &RenderCtx<'_>, body: &Body, e: ExprId) -> Option<ExprId> {
    chain_root(body, e, &|attr| same_memory(ctx.name(attr), true))
}

/// The outermost `with ...no_grad():` (or `inference_mode`) statement around `stmt`.
fn outermost_no_grad(ctx: &RenderCtx<'_>, body: &Body, item: ItemId, stmt: Rel) -> Option<Rel> {
    (0..body.stmts.len())
        .filter_map(|i| match body.stmts[i] {
            Stmt::With { items, .. } if body.stmt_spans[i].contains(stmt) => {
                let no_grad = body.list(items).iter().any(|w| {
                    let e = body.with_items[*w as usize].expr;
                    let text = ctx.text(Span::new(item, body.expr_span(e)));
                    text.contains("no_grad") || text.contains("inference_mode")
                });
                no_grad.then_some(body.stmt_spans[i])
            }
            _ => None,
        })
        .max_by_key(|r| r.end - r.start)
}

/// A lookup of an `nn.Embedding` with `max_norm` (`self.emb(ids)`) renormalises the weight an
/// op saved (`h @ self.emb.weight.t()`): that op reads a copy, `self.emb.weight.clone()` (the
/// fix the `nn.Embedding` documentation gives). Gradients still flow into the weight.
pub(crate) fn clone_renormalised_weight(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    saved_at: Span,
) -> Option<Fix> {
    let (s, call) = (w.stmt?, w.call?);
    let Expr::Call { func, .. } = *ctx.body(s.item)?.expr(call) else {
        return None;
    };
    let module = ctx.text(Span::new(s.item, ctx.body(s.item)?.expr_span(func)));
    let body = ctx.body(saved_at.item)?;
    let reads: Vec<ExprId> = (0..body.exprs.len())
        .map(|i| ExprId(i as u32))
        .filter(|e| saved_at.rel.contains(body.expr_span(*e)))
        .filter(|e| match *body.expr(*e) {
            Expr::Attr { value, attr, .. } => {
                ctx.name(attr) == "weight"
                    && ctx.text(Span::new(saved_at.item, body.expr_span(value))) == module
            }
            _ => false,
        })
        .collect();
    let edits = clones_after(ctx, &body, saved_at.item, &reads)?;
    (!edits.is_empty()).then(|| Fix {
        title: format!("Let the op read a copy: `{module}.weight.clone()`"),
        applicability: Applicability::Safe,
        edits,
    })
}

/// The op that saved reads a copy of the place the write goes into, where that op is called
/// (`torch.einsum("nc,ck->nk", [q, self.queue.clone()])` before a no-grad enqueue writes
/// `self.queue[:, p:p + b]`, MoCo's fix). Unsafe: the op no longer sees later writes.
pub(crate) fn clone_saved_read(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    saved_at: Span,
) -> Option<Fix> {
    let s = w.stmt?;
    let body = ctx.body(s.item)?;
    let root = root_place(&body, written_expr(&body, s.stmt, w)?)?;
    if !matches!(*body.expr(root), Expr::Attr { .. }) {
        return None;
    }
    let root_text = ctx.text(Span::new(s.item, body.expr_span(root)));
    if crate::project::is_module_item(saved_at.item) {
        return None;
    }
    let saver = ctx.body(saved_at.item)?;
    let reads: Vec<ExprId> = (0..saver.exprs.len())
        .map(|i| ExprId(i as u32))
        .filter(|e| saved_at.rel.contains(saver.expr_span(*e)))
        .filter(|e| matches!(*saver.expr(*e), Expr::Attr { .. }))
        .filter(|e| ctx.text(Span::new(saved_at.item, saver.expr_span(*e))) == root_text)
        .collect();
    if reads.is_empty() {
        return None;
    }
    let edits = clones_after(ctx, &saver, saved_at.item, &reads)?;
    Some(Fix {
        title: format!("Let the op read a copy: `{root_text}.clone()`"),
        applicability: Applicability::Unsafe,
        edits,
    })
}

/// `.clone()` inserted after each of the expressions `reads` of `item`.
fn clones_after(
    ctx: &RenderCtx<'_>,
    body: &Body,
    item: ItemId,
    reads: &[ExprId],
) -> Option<Vec<Edit>> {
    reads
        .iter()
        .map(|e| {
            let r = ctx.range(Span::new(item, body.expr_span(*e)))?;
            Some(Edit {
                range: TextRange::new(r.end, r.end),
                content: ".clone()".into(),
            })
        })
        .collect()
}

/// A write inside another file's function into a tensor this file passed it by name
/// (`normalize_(probs)`, the helper dividing its argument in place): the copy is made here.
/// `rebind` (a saved tensor clobbered): before the statement with the call
/// (`probs = probs.clone()`), so the helper writes the copy, later reads of the name see what
/// it wrote, and the saved tensor stays as it was. Else (a name that must keep its values,
/// IP402): the call is passed a copy, `gate(features.clone())`.
pub(crate) fn clone_argument(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    rebind: bool,
) -> Option<Fix> {
    if w.into_leaf || w.record_field {
        return None;
    }
    let (site, arg) = (w.call_site?, w.call_arg?);
    let body = ctx.body(site.item)?;
    // (`probs`, `self.probs`: a place a copy can be bound to.)
    if !super::is_place(&body, arg) {
        return None;
    }
    let r = ctx.text(Span::new(site.item, body.expr_span(arg)));
    let stmt = super::simple_statement_at(&body, site.rel);
    // (A name the scope cannot rebind is passed a copy instead.)
    if !rebind || stmt.is_some_and(|s| !rebindable(ctx, &body, s, r)) {
        return pass_copies(ctx, &body, site, arg);
    }
    let mut at = body.stmt_span(stmt?);
    // Under `no_grad` a copy would have no history: it is made before the block.
    if let Some(block) = outermost_no_grad(ctx, &body, site.item, at) {
        at = block;
    }
    let at = ctx.range(Span::new(site.item, at))?;
    let title = format!("Pass a copy: `{r} = {r}.clone()` before the call");
    copy_before_statement(ctx, at, r, title)
}

/// `F.apply(w.clone())` for an argument a custom Function's `forward` marks dirty: it writes
/// the copy, and the leaf still gets its gradient through it. Unsafe: the leaf itself no longer
/// changes.
pub(crate) fn clone_dirty_argument(ctx: &RenderCtx<'_>, item: ItemId, arg: ExprId) -> Option<Fix> {
    let body = ctx.body(item)?;
    let span = Span::new(item, body.expr_span(arg));
    let r = ctx.text(span);
    let copy = if super::is_atomic(body.expr(arg)) {
        format!("{r}.clone()")
    } else {
        format!("({r}).clone()")
    };
    Some(one(
        format!("Pass a copy: `{copy}`"),
        Applicability::Unsafe,
        ctx.range(span)?,
        copy,
    ))
}

/// The call made in the scope of `read` that passed a helper, where write `w` is, the tensor
/// `name` names there, and that argument: the outermost call when made there, else the call of
/// the write's call path made there whose argument is `name`.
pub(crate) fn call_passing(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    name: &str,
    read: Span,
) -> Option<(Span, Span)> {
    let site = w.call_site?;
    if ctx.same_scope(site.item, read.item) {
        let body = ctx.body(site.item)?;
        return Some((site, Span::new(site.item, body.expr_span(w.call_arg?))));
    }
    let call = (w.call_path.iter().rev()).find(|c| ctx.same_scope(c.item, read.item))?;
    let body = ctx.body(call.item)?;
    let e = body.expr_with_span(call.rel)?;
    let Expr::Call { args, .. } = *body.expr(e) else {
        return None;
    };
    let arg = body
        .exprs_of(body.args[args as usize].positional)
        .map(|a| Span::new(call.item, body.expr_span(a)))
        .find(|a| ctx.text(*a) == name)?;
    Some((*call, arg))
}

/// A helper that writes the tensor its caller passed and gives it back (`x[2:5] += 1; return
/// x`), whose caller reads `name` after the call (`a = shift(x); b = shift(x)`): the call made
/// from the reader's scope passes a copy (`shift(x.clone())`; see [`call_passing`]).
pub(crate) fn clone_passed_to_helper(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    name: &str,
    read: Span,
) -> Option<Fix> {
    let site = w.call_site?;
    if ctx.same_scope(site.item, read.item) {
        // (Not when the name read is what the call gave back, `outs = rollout(x0, 2)`: a
        // copy passed in is what the helper then writes and gives back.)
        let base = name.split(['[', '.']).next().unwrap_or(name);
        let body = ctx.body(site.item)?;
        let stmt = super::simple_statement_at(&body, site.rel);
        if let Some(Stmt::Assign { targets, .. }) = stmt.map(|s| *body.stmt(s)) {
            let bound = super::reorder::names_bound_by(&body, targets);
            if bound.iter().any(|(n, _)| ctx.name(*n) == base) {
                return None;
            }
        }
        return clone_argument(ctx, w, false);
    }
    let (call, arg) = call_passing(ctx, w, name, read)?;
    let body = ctx.body(call.item)?;
    let arg = body.expr_with_span(arg.rel)?;
    pass_copies(ctx, &body, call, arg)
}

/// `f(x.clone())` for argument `arg` of the call at `call`, and for every later call of the
/// same function passing the same name at the same place in the same block, with the result
/// used and the name not bound again in between (`a = shift(x); b = shift(x)`: each call would
/// write `x` again). (A call alone as a statement, `shift(x)`, is there for its write: it keeps
/// it.)
fn pass_copies(ctx: &RenderCtx<'_>, body: &Body, call: Span, arg: ExprId) -> Option<Fix> {
    let text = |e: ExprId| ctx.text(Span::new(call.item, body.expr_span(e)));
    let r = text(arg);
    let mut args = vec![arg];
    let same = body.expr_with_span(call.rel).and_then(|e| {
        let Expr::Call { func, args } = *body.expr(e) else {
            return None;
        };
        let j = body
            .exprs_of(body.args[args as usize].positional)
            .position(|a| a == arg)?;
        Some((text(func), j))
    });
    let stmt = super::simple_statement_at(body, call.rel);
    if let (Some((callee, j)), Some(stmt)) = (same, stmt) {
        let name = match *body.expr(arg) {
            Expr::Name { name, .. } => Some(name),
            _ => None,
        };
        let block = body.siblings(stmt);
        let later = block.iter().skip_while(|s| **s != stmt).skip(1);
        for &s in later {
            let span = body.stmt_span(s);
            let used = match *body.stmt(s) {
                Stmt::Assign { value, .. } | Stmt::Return(value) => Some(value),
                _ => None,
            };
            // (The value's own calls: `b = shift(x)`, `out = head(shift(x))`.)
            if let Some(value) = used {
                let within = body.expr_span(value);
                let calls = (0..body.exprs.len()).filter(|&i| within.contains(body.expr_spans[i]));
                for i in calls {
                    let Expr::Call { func, args: a } = body.exprs[i] else {
                        continue;
                    };
                    let Some(x) = body.exprs_of(body.args[a as usize].positional).nth(j) else {
                        continue;
                    };
                    if text(func) == callee && text(x) == r && !inside_lambda(body, x, within) {
                        args.push(x);
                    }
                }
            }
            // (Bound again here, or in a block of this statement, a loop's target included: the
            // calls after pass another tensor.)
            let rebinds = |n: Name| {
                super::reorder::names_bound_in(body, span).contains(&n)
                    || body
                        .inner_blocks(s)
                        .iter()
                        .any(|b| body.bound_in(*b).contains(&n))
                    || matches!(*body.stmt(s), Stmt::For { target, .. } if {
                        let mut bound = Vec::new();
                        super::reorder::names_in(body, target, &mut bound);
                        bound.iter().any(|(b, _)| *b == n)
                    })
            };
            if name.is_some_and(rebinds) {
                break;
            }
        }
    }
    let edits = args
        .iter()
        .map(|&a| {
            Some(Edit {
                range: ctx.range(Span::new(call.item, body.expr_span(a)))?,
                content: format!("{r}.clone()"),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Fix {
        title: format!("Pass a copy: `{r}.clone()`"),
        applicability: Applicability::Unsafe,
        edits,
    })
}

/// Whether expression `e` lies inside a lambda within `within` (its parameters shadow names).
fn inside_lambda(body: &Body, e: ExprId, within: Rel) -> bool {
    let at = body.expr_span(e);
    (0..body.exprs.len()).any(|i| {
        let sp = body.expr_spans[i];
        matches!(body.exprs[i], Expr::Lambda(_)) && within.contains(sp) && sp.contains(at)
    })
}

/// A write into a leaf's view of a value that requires grad (`inputs[slices] = updates` with
/// `updates = proj(x)`, keras-core's `slice_update` given a parameter), in a function that
/// reads the name again (`return inputs`): the write is part of the computation, which
/// `no_grad` would cut from the value's gradient. The name gets a copy first (`inputs =
/// inputs.clone()`): the write then goes into a tensor with history, and the parameter stays.
pub(crate) fn clone_leaf_before_computed_write(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
) -> Option<Fix> {
    let s = w.stmt?;
    if !w.value_grad || w.record_field || w.under_no_grad {
        return None;
    }
    let body = ctx.body(s.item)?;
    let (name, _, read_after) = written_name_in_function(&body, s.stmt, w)?;
    if !read_after {
        return None;
    }
    let r = ctx.name(name);
    let stmt = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    let title = format!("Write into a copy: `{r} = {r}.clone()` first");
    copy_before_statement(ctx, stmt, r, title)
}

/// A write through a name bound to a view (`part = t.narrow(-1, 0, 1)`, `patch = img[:, c:]`)
/// whose base the function reads after the write (`return t`): the write was meant to change
/// the base, which a rewrite of the view out of place drops (the base keeps its old values)
/// and `no_grad` cuts from the gradient. The base gets a copy before the view is taken (`t =
/// t.clone()`): the view is then one of a tensor with a history of its own, the write goes
/// through, and what the function reads on carries it. `None` unless the base is a plain name.
pub(crate) fn clone_view_base(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let (v, s) = (w.view_origin?, w.stmt?);
    if v.item != s.item || w.record_field || !super::view_base_read_after(ctx, w) {
        return None;
    }
    // (In a called function, only where the call's result is used: a caller that keeps only
    // the write's effect, `clamp_border(img)` as a statement, would lose it to the copy.)
    if let Some(call) = w.call_path.last() {
        let cb = ctx.body(call.item)?;
        let stmt = super::simple_statement_at(&cb, call.rel)?;
        if matches!(*cb.stmt(stmt), Stmt::Expr(e) if cb.expr_span(e) == call.rel) {
            return None;
        }
    }
    let body = ctx.body(s.item)?;
    let base = super::out_of_place::view_base(&body, v.rel)?;
    let Expr::Name { .. } = *body.expr(base) else {
        return None;
    };
    let r = ctx.text(Span::new(s.item, body.expr_span(base)));
    let taken = super::simple_statement_at(&body, v.rel)?;
    let at = ctx.range(Span::new(s.item, body.stmt_span(taken)))?;
    let title = format!("Copy `{r}` before the view is taken: `{r} = {r}.clone()`");
    copy_before_statement(ctx, at, r, title)
}

/// A write, outside the module, into an activation that a module's `forward` made as a view of
/// a parameter (TransformerLens's `PosEmbed` returns `W_pos[:n].unsqueeze(0).expand(...)`, and
/// a hook zeroes it): the code means to change the activation, not the parameter, so the view
/// is copied where `forward` makes it (`...expand(...).clone()`; unsafe: the activation then
/// has memory of its own). `None` when the write is in that `forward` itself.
pub(crate) fn clone_activation_view(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let (v, s) = (w.view_origin?, w.stmt?);
    if !w.param || v.item == s.item || crate::project::is_module_item(v.item) {
        return None;
    }
    let body = ctx.body(v.item)?;
    let f = body.root_def()?;
    if !ops::is_forward_name(ctx.name(body.func(f).name)) {
        return None;
    }
    append_clone(
        ctx,
        v,
        "Copy the activation `forward` makes as a view of a parameter",
        Applicability::Unsafe,
    )
}

/// `r = r.clone()` inserted as a statement of its own just before the statement at `at`, at
/// its indentation (unsafe: what `r` names is a copy from there on).
pub(crate) fn copy_before_statement(
    ctx: &RenderCtx<'_>,
    at: TextRange,
    r: &str,
    title: String,
) -> Option<Fix> {
    assign_before_statement(ctx, at, r, &format!("{r}.clone()"), title)
}

/// `r = value` inserted as a statement of its own just before the statement at `at`, at its
/// indentation (unsafe: what `r` names is that value from there on).
pub(crate) fn assign_before_statement(
    ctx: &RenderCtx<'_>,
    at: TextRange,
    r: &str,
    value: &str,
    title: String,
) -> Option<Fix> {
    let (indent, eol) = indentation(ctx, at.start)?;
    let line = at.start - indent.len();
    Some(one(
        title,
        Applicability::Unsafe,
        TextRange::new(line, line),
        format!("{indent}{r} = {value}{eol}"),
    ))
}

/// An in-place product whose operand is the very tensor it writes because the operand's own
/// expression wrote it first (`x.mul_(hard_sigmoid(x, inplace=True))`, `x.mul_(x.add_(3).div_(6))`):
/// the operand works on a copy (`hard_sigmoid(x.clone(), inplace=True)`), so the product reads
/// the old values and the transformed ones, as the code means, and saves the copy. `None` for an
/// operand that reads the tensor as it is (`x.mul_(x)`, an alias `x.mul_(a)`): an out-of-place
/// rewrite is right there; and `None` where the written tensor is no plain name.
pub(crate) fn clone_target_in_operand(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
) -> Option<Fix> {
    let s = w.stmt?;
    let body = ctx.body(s.item)?;
    let written = written_expr(&body, s.stmt, w)?;
    let Expr::Name { name, .. } = *body.expr(written) else {
        return None;
    };
    let operand = match *body.expr(w.call?) {
        Expr::Call { args, .. } => body.exprs_of(body.args[args as usize].positional).last()?,
        _ => return None,
    };
    if !matches!(body.expr(operand), Expr::Call { .. }) {
        return None;
    }
    let reads: Vec<ExprId> = super::reads_of(&body, body.expr_span(operand), name).collect();
    let [read] = reads.as_slice() else {
        return None;
    };
    let text = ctx.text(Span::new(s.item, body.expr_span(*read)));
    Some(Fix {
        title: format!("Let the operand work on a copy: `{text}.clone()`"),
        applicability: Applicability::Unsafe,
        edits: clones_after(ctx, &body, s.item, &reads)?,
    })
}
