//! Out-of-place rewrites: the write becomes a new value bound to the same name.

use super::*;

/// `y += 1` -> `y = y + 1`; `outs[i] += v` -> `outs[i] = outs[i] + v` where `outs` is a list
/// or dict (the element is replaced; into a tensor, that would still write in place).
pub(crate) fn aug_assign_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    applicability: Applicability,
) -> Option<Fix> {
    let (s, record_field) = (w.stmt?, w.record_field);
    let body = ctx.body(s.item)?;
    let Stmt::AugAssign { target, op, value } = *body.stmt(s.stmt) else {
        return None;
    };
    // (`outs["a"] += 1` of an element read out of a container, not `outs["a"][i] += 1`.)
    let element = w.element == Some(Span::new(s.item, body.expr_span(target)))
        && matches!(body.expr(target), Expr::Subscript { .. });
    if !element && !matches!(body.expr(target), Expr::Name { .. } | Expr::Attr { .. })
        || param_attribute(&body, target, w)
    {
        return None;
    }
    let span = |e: ExprId| Span::new(s.item, body.expr_span(e));
    let l = ctx.text(span(target));
    let r = ctx.text(span(value));
    let r = if is_atomic(body.expr(value)) {
        r.to_string()
    } else {
        format!("({r})")
    };
    let new = assignment(l, &format!("{l} {} {r}", op_text(op)?), record_field);
    rewrite_statement(ctx, s, &body, new, applicability)
}

/// The out-of-place rewrite (unsafe) of a write through a plain name that its function reads
/// again after it (`return x` included), the statement computing nothing from a gradient: the
/// function wanted a new value under that name, not a change of the tensor the name held (a
/// leaf the caller passed in: `inputs_embeds *= scale`; a view of a parameter:
/// `cls = self.cls_token.expand(b, -1, -1); cls += pos`). With `param`, only where the name is
/// a parameter of the function. Not an update step (`p.add_(p.grad, alpha=-lr)`, `w -= lr * g`
/// in `update(w, g, lr)`), which is meant to change the tensor: a rewrite there would be a
/// dead local store (`param` asks for the name to be read again for that reason too).
pub(crate) fn rebind_read_again(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    param: bool,
) -> Option<Fix> {
    use crate::events::WriteKind;
    let s = w.stmt?;
    if view_base_read_after(ctx, w) {
        return None;
    }
    let body = ctx.body(s.item)?;
    if ctx
        .text(Span::new(s.item, body.stmt_span(s.stmt)))
        .contains(".grad")
    {
        return None;
    }
    let written = written_expr(&body, s.stmt, w)?;
    if !matches!(*body.expr(written), Expr::Name { .. }) {
        return None;
    }
    let (name, f, read_after) = written_name_in_function(&body, s.stmt, w)?;
    let is_param = || body.param_names(f).any(|p| p == name);
    if !read_after || (param && !is_param()) {
        return None;
    }
    match w.kind {
        WriteKind::AugAssign => aug_assign_out_of_place(ctx, w, Applicability::Unsafe),
        WriteKind::Method(m) => call_out_of_place(ctx, w, m, true, Applicability::Unsafe),
        _ => None,
    }
}

/// What the view taken at `view` was taken of: the receiver of the view method
/// (`t.narrow(-1, 0, 1)`), or what is subscripted (`img[:, c:]`).
pub(crate) fn view_base(body: &Body, view: Rel) -> Option<ExprId> {
    match *body.expr(body.expr_with_span(view)?) {
        Expr::Call { func, .. } => match *body.expr(func) {
            Expr::Attr { value, .. } => Some(value),
            _ => None,
        },
        Expr::Subscript { value, .. } => Some(value),
        _ => None,
    }
}

/// Whether the tensor the write's view shows, spelled as where the view was taken
/// (`self.weight` of `w = self.weight.view(n, -1)`), is read after the write in the write's
/// item: the write through the view was meant to change it (weight standardisation done in
/// place, then `F.conv2d(x, self.weight)`), which a rewrite of the view out of place drops.
pub(crate) fn view_base_read_after(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> bool {
    let (Some(v), Some(s)) = (w.view_origin, w.stmt) else {
        return false;
    };
    let Some(body) = ctx.body(s.item).filter(|_| v.item == s.item) else {
        return false;
    };
    let Some(base) = view_base(&body, v.rel) else {
        return false;
    };
    let text = ctx.text(Span::new(s.item, body.expr_span(base)));
    let end = body.stmt_span(s.stmt).end;
    // (Not a read: the target of an assignment (`mi.bias = nn.Parameter(b.view(-1))`), its
    // metadata (`x.shape`), or the shape another takes (`flat.view_as(x)`).)
    let targets: Vec<ExprId> = (body.stmts.iter())
        .flat_map(|st| match *st {
            Stmt::Assign { targets, .. } => body.exprs_of(targets).collect(),
            _ => Vec::new(),
        })
        .collect();
    let only_shape = |e: ExprId| {
        body.exprs.iter().any(|x| match *x {
            Expr::Attr { value, attr, .. } => {
                value == e && crate::ops::METADATA.contains(&ctx.name(attr))
            }
            Expr::Call { func, args } => {
                body.exprs_of(body.args[args as usize].positional).eq([e])
                    && matches!(*body.expr(func), Expr::Attr { attr, .. }
                        if ctx.name(attr).ends_with("_as"))
            }
            _ => false,
        })
    };
    (0..body.exprs.len()).any(|i| {
        let e = ExprId(i as u32);
        matches!(body.exprs[i], Expr::Name { .. } | Expr::Attr { .. })
            && body.expr_spans[i].start >= end
            && ctx.text(Span::new(s.item, body.expr_spans[i])) == text
            && !targets.contains(&e)
            && !only_shape(e)
    })
}

/// `y.mul_(2)` -> `y = y.mul(2)` (or `mul` for `mul_` when the result is assigned);
/// `torch.relu_(h)` -> `h = torch.relu(h)`. `method`: the receiver is written (else the first
/// argument).
pub(crate) fn call_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    name: Name,
    method: bool,
    applicability: Applicability,
) -> Option<Fix> {
    let (s, call, record_field) = (w.stmt?, w.call?, w.record_field);
    let (body, base, attr) = out_of_place_name(ctx, w, name)?;
    let span = |e: ExprId| Span::new(s.item, body.expr_span(e));
    let Expr::Call { func, args } = *body.expr(call) else {
        return None;
    };
    let Expr::Attr { value, .. } = *body.expr(func) else {
        return None;
    };
    let a = body.args[args as usize];
    let func_range = ctx.range(span(func))?;
    match *body.stmt(s.stmt) {
        Stmt::Expr(e) if e == call => {
            let target = if method {
                value
            } else {
                body.exprs_of(a.positional).next()?
            };
            if !matches!(body.expr(target), Expr::Name { .. } | Expr::Attr { .. })
                || param_attribute(&body, target, w)
            {
                return None;
            }
            let t = ctx.text(span(target));
            let prefix = ctx.slice(TextRange::new(func_range.start, attr.start));
            let arg_text = ctx.text(Span::new(s.item, a.span));
            let new = assignment(t, &format!("{prefix}{base}{arg_text}"), record_field);
            let fix = rewrite_statement(ctx, s, &body, new, applicability)?;
            with_declaration(ctx, &body, s, t, fix)
        }
        // (Or the element a comprehension builds: `[h[i].squeeze_(0) for i in ...]`.)
        Stmt::Assign { value: v, .. } | Stmt::Return(v)
            if v == call || comp_element(&body, call) =>
        {
            // (A lambda's result is used only where the call it is given to takes it:
            // `map(lambda t: t.mul_(2), ys)` is all side effect.)
            if lambda_returning(&body, call).is_some_and(|l| !lambda_result_used(ctx, &body, l)) {
                return None;
            }
            Some(one(
                format!("Use out-of-place `{base}`"),
                applicability,
                attr,
                base,
            ))
        }
        _ => None,
    }
}

/// The out-of-place twin of an in-place call on a leaf whose result is bound to another name
/// (`gates = zeros.scatter_(1, idx, src)`): the code computes a value there, not an update,
/// and `no_grad` would cut the gradient of what the call writes in (`src`). `None` for an
/// update (`w = w.sub_(lr * g)`, or a call alone as a statement).
pub(crate) fn result_out_of_place(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    use crate::events::WriteKind;
    let (WriteKind::Method(name) | WriteKind::TorchFn(name)) = w.kind else {
        return None;
    };
    let (s, call) = (w.stmt?, w.call?);
    let body = ctx.body(s.item)?;
    let Stmt::Assign { targets, value } = *body.stmt(s.stmt) else {
        return None;
    };
    let receiver = match (*body.expr(call), w.kind) {
        (Expr::Call { func, .. }, WriteKind::Method(_)) => match *body.expr(func) {
            Expr::Attr { value, .. } => value,
            _ => return None,
        },
        (Expr::Call { args, .. }, _) => {
            body.exprs_of(body.args[args as usize].positional).next()?
        }
        _ => return None,
    };
    let text = |e: ExprId| ctx.text(Span::new(s.item, body.expr_span(e)));
    if value != call || body.exprs_of(targets).any(|t| text(t) == text(receiver)) {
        return None;
    }
    let method = matches!(w.kind, WriteKind::Method(_));
    call_out_of_place(ctx, w, name, method, Applicability::Unsafe)
}

/// Whether `target` is an attribute holding a parameter (`layer.weight`): a module refuses a
/// plain tensor there (`TypeError`), and an optimizer would keep updating the old one.
fn param_attribute(body: &crate::ir::Body, target: ExprId, w: &crate::events::Write) -> bool {
    w.into_leaf && matches!(body.expr(target), Expr::Attr { .. })
}

/// The out-of-place twin of in-place call `w` (`relu` for `z.relu_()` or `torch.relu_(z)`), and
/// the range of the name to replace, with the body of its item.
fn out_of_place_name(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    name: Name,
) -> Option<(std::sync::Arc<crate::ir::Body>, String, TextRange)> {
    let (s, call) = (w.stmt?, w.call?);
    let base = ctx.name(name).strip_suffix('_')?.to_string();
    if !has_out_of_place(&base) {
        return None;
    }
    let body = ctx.body(s.item)?;
    let Expr::Call { func, .. } = *body.expr(call) else {
        return None;
    };
    let Expr::Attr { attr_at, .. } = *body.expr(func) else {
        return None;
    };
    let func_range = ctx.range(Span::new(s.item, body.expr_span(func)))?;
    let attr_start = ctx
        .range(Span::new(s.item, Rel::new(attr_at, attr_at)))?
        .start;
    Some((body, base, TextRange::new(attr_start, func_range.end)))
}

/// In-place call `w` nested in an expression whose result is used as a new value, as its
/// out-of-place twin (`lin(torch.relu(z)) + res(z)`): the name keeps the value the rest of
/// the statement reads.
pub(crate) fn nested_call_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    name: Name,
    applicability: Applicability,
) -> Option<Fix> {
    let (_, base, attr) = out_of_place_name(ctx, w, name)?;
    Some(one(
        format!("Use out-of-place `{base}`"),
        applicability,
        attr,
        base,
    ))
}

/// A statement of in-place calls alone (`input.mul_(lam).add_(input.flip(0), alpha=1 - lam)`,
/// timm's first mixup) whose later call reads the name the first one wrote: the first call out
/// of place and the statement's result bound to the name (`input = input.mul(lam).add_(...)`),
/// so the read sees the values before the write and the name the values after. For a name the
/// function bound to a value of its own (not to a place: `x = batch["input"]` shares the
/// batch's tensor, which would keep the old values), or a parameter it returns (a caller that
/// goes on using its own tensor would miss the write).
pub(crate) fn chain_out_of_place_rebound(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    name: Name,
) -> Option<Fix> {
    let s = w.stmt?;
    let (body, base, attr) = out_of_place_name(ctx, w, name)?;
    let Stmt::Expr(whole) = *body.stmt(s.stmt) else {
        return None;
    };
    let written = super::written_expr(&body, s.stmt, w)?;
    let Expr::Name { name: target, .. } = *body.expr(written) else {
        return None;
    };
    let returns_it = || {
        (body.stmts.iter()).any(|st| match *st {
            Stmt::Return(e) if !e.is_none() => super::reads_of(&body, body.expr_span(e), target)
                .next()
                .is_some(),
            _ => false,
        })
    };
    // (A tensor the name shares with a container, an attribute or a view keeps the old values
    // once the name is bound anew: `x = batch["input"]` would lose the mix.)
    if w.view_origin.is_some() || w.element.is_some() || w.into_leaf || w.record_field {
        return None;
    }
    let param =
        (body.root_def()).is_some_and(|f| body.param_names(body.func(f)).any(|p| p == target));
    let made_here = w.through_bound.is_some_and(|b| b.alias_of.is_none());
    if !(made_here || param && returns_it()) {
        return None;
    }
    let start = ctx.range(Span::new(s.item, body.expr_span(whole)))?.start;
    let target = ctx.name(target);
    Some(Fix {
        title: format!("Use out-of-place `{base}` and bind the result to `{target}`"),
        applicability: Applicability::Unsafe,
        edits: vec![
            Edit {
                range: TextRange::new(start, start),
                content: format!("{target} = "),
            },
            Edit {
                range: attr,
                content: base,
            },
        ],
    })
}

/// A statement that is one chain of in-place calls on a name (`logits.div_(c).tanh_().mul_(c)`,
/// a soft cap) where a later call writes what an earlier one saved (`tanh_` its output, which
/// `mul_` changes): every call out of place and the result bound to the name (`logits =
/// logits.div(c).tanh().mul(c)`). A copy of the name first would not help: the chain saves and
/// writes the copy alike. Only for a name of a value of its own (as
/// [`chain_out_of_place_rebound`]) that no other name holds: `Some(None)` (no fix at all) for
/// such a chain otherwise, `None` for a statement that is no such chain.
pub(crate) fn chain_all_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
) -> Option<Option<Fix>> {
    let (s, call) = (w.stmt?, w.call?);
    let body = ctx.body(s.item)?;
    if *body.stmt(s.stmt) != Stmt::Expr(call) {
        return None;
    }
    if w.view_origin.is_some() || w.element.is_some() || w.into_leaf || w.record_field {
        return None;
    }
    // Down the chain: each call an in-place method with an out-of-place twin.
    let mut edits = Vec::new();
    let mut at = call;
    let root = loop {
        match *body.expr(at) {
            Expr::Call { func, .. } => {
                let Expr::Attr {
                    value,
                    attr,
                    attr_at,
                    ..
                } = *body.expr(func)
                else {
                    return None;
                };
                let base = ctx.name(attr).strip_suffix('_')?.to_string();
                if !has_out_of_place(&base) || ctx.name(attr).ends_with("__") {
                    return None;
                }
                let end = ctx.range(Span::new(s.item, body.expr_span(func)))?.end;
                let start = ctx
                    .range(Span::new(s.item, Rel::new(attr_at, attr_at)))?
                    .start;
                edits.push(Edit {
                    range: TextRange::new(start, end),
                    content: base,
                });
                at = value;
            }
            Expr::Name { name, .. } => break name,
            _ => return None,
        }
    };
    if edits.len() < 2 {
        return None;
    }
    // (Another name of the tensor, `scores = logits`, would keep the values without the chain.)
    if w.through_bound.is_none_or(|b| b.alias_of.is_some())
        || super::aliased_by_name(ctx, s.item, root)
    {
        return Some(None);
    }
    let start = ctx.range(Span::new(s.item, body.expr_span(call)))?.start;
    let root = ctx.name(root);
    edits.push(Edit {
        range: TextRange::new(start, start),
        content: format!("{root} = "),
    });
    edits.sort_by_key(|e| e.range.start);
    Some(Some(Fix {
        title: format!("Compute the chain out of place and bind it to `{root}`"),
        applicability: Applicability::Unsafe,
        edits,
    }))
}

/// `g.norm(2, dim=1).sub_(1)`: the write's receiver is the very call whose output was saved,
/// made in the same expression, so no name holds it: its out-of-place twin (`.sub(1)`) changes
/// nothing else (a copy of `g` would not separate them).
pub(crate) fn fresh_result_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    saved_at: Span,
    applicability: Applicability,
) -> Option<Fix> {
    let (name, s, call, body) = method_write(ctx, w)?;
    let Expr::Call { func, .. } = *body.expr(call) else {
        return None;
    };
    let Expr::Attr { value, .. } = *body.expr(func) else {
        return None;
    };
    if w.under_no_grad || saved_at.item != s.item || body.expr_span(value) != saved_at.rel {
        return None;
    }
    nested_call_out_of_place(ctx, w, name, applicability)
}

/// An in-place call that is the whole body of a lambda whose result is used
/// (`register_forward_hook(lambda m, inp, out: out.mul_(2.0))`: torch puts a hook's result in
/// place of what it was given): the lambda returns what the call returns, the tensor itself, so
/// the out-of-place twin (`out.mul(2.0)`) passes on the same values and leaves the saved tensor
/// alone. (A lambda whose result nobody uses, `map(lambda t: t.mul_(2), ys)`, gets no such fix:
/// the write is its whole effect; see [`lambda_result_used`].)
pub(crate) fn lambda_result_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    applicability: Applicability,
) -> Option<Fix> {
    let (name, _, call, body) = method_write(ctx, w)?;
    let lambda = lambda_returning(&body, call)?;
    if w.under_no_grad || !lambda_result_used(ctx, &body, lambda) {
        return None;
    }
    nested_call_out_of_place(ctx, w, name, applicability)
}

/// A write by an in-place method call (`y.mul_(2)`): the method, its statement, the call and
/// the body they are in.
fn method_write(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
) -> Option<(Name, crate::ir::StmtRef, ExprId, std::sync::Arc<Body>)> {
    let crate::events::WriteKind::Method(name) = w.kind else {
        return None;
    };
    let (s, call) = (w.stmt?, w.call?);
    Some((name, s, call, ctx.body(s.item)?))
}

/// The lambda whose whole body is expression `e` (`lambda t: t.mul_(2)`), if any.
fn lambda_returning(body: &Body, e: ExprId) -> Option<crate::ir::FuncId> {
    (0..body.funcs.len() as u32)
        .map(crate::ir::FuncId)
        .find(|&f| {
            let f = body.func(f);
            f.lambda
                && (body.stmts_of(f.body))
                    .any(|r| matches!(*body.stmt(r), Stmt::Return(x) if x == e))
        })
}

/// Whether what `lambda` returns is used: it is given to a call that takes its result (a hook
/// registration, which puts it in place of what the hook was given; a transform's `T.Lambda`),
/// not to `map`/`filter` or bound where the calls of it are not seen (`scale = lambda t:
/// t.mul_(2)` then `scale(y)` alone: the write is all it does).
fn lambda_result_used(ctx: &RenderCtx<'_>, body: &Body, lambda: crate::ir::FuncId) -> bool {
    let is_it = |e: ExprId| matches!(*body.expr(e), Expr::Lambda(f) if f == lambda);
    body.exprs.iter().any(|e| {
        let Expr::Call { func, args } = *e else {
            return false;
        };
        let a = &body.args[args as usize];
        let given = body.exprs_of(a.positional).any(is_it)
            || (body.list(a.keywords).iter()).any(|k| is_it(body.keywords[*k as usize].value));
        let discards = matches!(*body.expr(func), Expr::Name { name, .. }
            if matches!(ctx.name(name), "map" | "filter"));
        given && !discards
    })
}

/// Whether `e` is the element a comprehension builds.
fn comp_element(body: &Body, e: ExprId) -> bool {
    (body.exprs.iter()).any(|x| matches!(*x, Expr::Comp { elt, .. } if elt == e))
}

/// `inplace=True` -> `inplace=False` (or a positional `True` -> `False`).
pub(crate) fn inplace_false(
    ctx: &RenderCtx<'_>,
    arg: Span,
    applicability: Applicability,
) -> Option<Fix> {
    let r = ctx.range(arg)?;
    let text = ctx.slice(r);
    let (at, applicability) = if text == "True" {
        (0, applicability)
    } else {
        let eq = text.find('=')?;
        let (name, value) = (text[..eq].trim(), text[eq + 1..].trim_start());
        // (Or `m.inplace = True`, set on a module after it was built.)
        if name != "inplace" && !name.ends_with(".inplace") {
            return None;
        }
        // `inplace=cfg.inplace_act`: the setting is overridden here, whatever it says.
        let applicability = if value == "True" {
            applicability
        } else {
            Applicability::Unsafe
        };
        (text.len() - value.len(), applicability)
    };
    Some(one(
        "Set `inplace=False`".into(),
        applicability,
        TextRange::new(r.start + at, r.end),
        "False".into(),
    ))
}

/// A write through `.data` into a tensor a backward still reads, rewritten out of place.
/// Arithmetic (`y.data *= 2`, `wav.data /= wsq`, `y.data.add_(b)`) is written as itself,
/// `y = y * 2`: the gradient goes through the scaling, as the computation performed means (the
/// write was moved to `.data` to silence autograd's error: pytorch#96110). Anything else
/// (`y.data.clamp_(0, 1)`, `round_`, `copy_`, `fill_`) keeps the values the write made and the
/// gradient autograd computed before it, a straight-through estimator (what such a `.data`
/// write is used for): `y = y.clamp(0, 1).detach() + (y - y.detach())`. A mask
/// (`masked_fill_`, `index_fill_`) is written as itself: masked places get no gradient.
pub(crate) fn data_write_out_of_place(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
) -> Option<Fix> {
    use crate::events::WriteKind;
    let s = w.stmt?;
    let body = ctx.body(s.item)?;
    let span = |e: ExprId| Span::new(s.item, body.expr_span(e));
    // The tensor written through `.data`: `y` of `y.data`.
    let under_data = |e: ExprId| match *body.expr(e) {
        Expr::Attr { value, attr, .. } if attr == known::DATA && is_place(&body, value) => {
            Some(value)
        }
        _ => None,
    };
    let (target, value, arithmetic) = match (w.kind, *body.stmt(s.stmt)) {
        (WriteKind::Method(name), Stmt::Expr(call)) if Some(call) == w.call => {
            let base = ctx.name(name).strip_suffix('_')?;
            // (A mask, too: masked places are meant to carry no gradient, which the plain
            // op gives them, mozilla/TTS's attention; a straight-through copy of the `.data`
            // write would keep the wrong gradient it is reported for.)
            let arithmetic = matches!(
                base,
                "add"
                    | "sub"
                    | "mul"
                    | "div"
                    | "true_divide"
                    | "pow"
                    | "masked_fill"
                    | "index_fill"
            );
            let Expr::Call { func, args } = *body.expr(call) else {
                return None;
            };
            let Expr::Attr { value, .. } = *body.expr(func) else {
                return None;
            };
            if !has_out_of_place(base) {
                return None;
            }
            let t = under_data(value)?;
            let args = ctx.text(Span::new(s.item, body.args[args as usize].span));
            (t, format!("{}.{base}{args}", ctx.text(span(t))), arithmetic)
        }
        (WriteKind::AugAssign, Stmt::AugAssign { target, op, value }) => {
            let t = under_data(target)?;
            let r = ctx.text(span(value));
            let r = if is_atomic(body.expr(value)) {
                r.to_string()
            } else {
                format!("({r})")
            };
            // (Not `//=`, `%=`: steps, as `round_` is.)
            let arithmetic = !matches!(op, BinOp::FloorDiv | BinOp::Mod | BinOp::Other);
            let text = ctx.text(span(t));
            let value = match arithmetic {
                true => format!("{text} {} {r}", op_text(op)?),
                false => format!("({text} {} {r})", op_text(op)?),
            };
            (t, value, arithmetic)
        }
        _ => return None,
    };
    let t = ctx.text(span(target));
    let new = match arithmetic {
        true => format!("{t} = {value}"),
        false => format!("{t} = {value}.detach() + ({t} - {t}.detach())"),
    };
    rewrite_statement(ctx, s, &body, new, Applicability::Unsafe)
}

/// A fix that rebinds a forward hook's `output` argument, completed with `return output` at
/// the end of the hook: a hook's result replaces the module's output, and without it the
/// rebinding would silently drop what the hook did. A hook that already ends with `return
/// output` and returns nothing else keeps the fix as it is (the rebound name is what it
/// returns); `None` when it returns anything else.
pub(crate) fn return_from_hook(
    ctx: &RenderCtx<'_>,
    hook: DefLoc,
    name: Name,
    mut fix: Fix,
) -> Option<Fix> {
    let body = ctx.body(hook.item)?;
    let f = match hook.func.get() {
        Some(f) => f,
        None => body.root_def()?,
    };
    let def = body.func(f);
    if def.lambda {
        return None;
    }
    if returns(&body, def.body) {
        let ends_returning =
            (body.stmts_of(def.body).last()).is_some_and(|s| returns_name(&body, s, name));
        return (ends_returning && only_returns(&body, def.body, name)).then_some(fix);
    }
    let stmt_range = |s: StmtId| ctx.range(Span::new(hook.item, body.stmt_span(s)));
    let first = stmt_range(body.stmts_of(def.body).next()?)?;
    let last = stmt_range(body.stmts_of(def.body).last()?)?;
    let (indent, eol) = super::indentation(ctx, first.start)?;
    let ret = format!("{eol}{indent}return {}", ctx.name(name));
    // After the last statement's line (a comment on it stays there); when that statement is
    // the one rewritten and nothing follows it on its line, in the same edit.
    let (_, line_end) = ctx
        .lines
        .line_range(ctx.text_all(), ctx.lines.line_of(last.end));
    match fix.edits.iter_mut().find(|e| e.range.end == line_end) {
        Some(edit) => edit.content.push_str(&ret),
        None => fix.edits.push(Edit {
            range: TextRange::new(line_end, line_end),
            content: ret,
        }),
    }
    fix.title = format!("{}, and return it from the hook", fix.title);
    Some(fix)
}

/// Whether statement `s` is `return name`.
fn returns_name(body: &Body, s: StmtId, name: Name) -> bool {
    matches!(body.stmt(s), Stmt::Return(e)
        if matches!(e.get().map(|e| body.expr(e)), Some(Expr::Name { name: n, .. }) if *n == name))
}

/// Whether every `return` in a block (its branches and loops too, not nested definitions) is
/// `return name`.
fn only_returns(body: &Body, block: Block, name: Name) -> bool {
    body.stmts_of(block).all(|s| match body.stmt(s) {
        Stmt::Return(_) => returns_name(body, s, name),
        _ => (body.inner_blocks(s).into_iter()).all(|b| only_returns(body, b, name)),
    })
}

/// Whether a block has a `return` statement (in its branches and loops too, not in nested
/// definitions).
fn returns(body: &Body, block: Block) -> bool {
    body.stmts_of(block).any(|s| {
        matches!(body.stmt(s), Stmt::Return(_))
            || body.inner_blocks(s).into_iter().any(|b| returns(body, b))
    })
}

#[cfg(test)]
mod tests {
    /// The fix offered for the one finding of a hook script whose hook body is `body`.
    fn hook_fix(body: &str) -> Option<String> {
        let text = format!(
            "import torch\nimport torch.nn as nn\n\n\ndef hook(module, inputs, output):\n{body}\n\n\
             net = nn.Sequential(nn.Linear(4, 4), nn.Tanh())\n\
             net[1].register_forward_hook(hook)\n\
             net(torch.randn(2, 4)).sum().backward()\n"
        );
        let findings = crate::analyze_source(&text);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let fix = findings[0].fix.as_ref()?;
        let fixed = crate::verify_fix(&text, &findings[0]).expect("the fix verifies");
        assert!(fixed.contains("hook(module, inputs, output)"));
        Some(fix.edits.iter().map(|e| e.content.clone()).collect())
    }

    /// The fixed text of a script with one finding.
    fn fixed(text: &str) -> Option<String> {
        let findings = crate::analyze_source(text);
        assert_eq!(findings.len(), 1, "{findings:?}");
        findings[0].fix.as_ref()?;
        Some(crate::verify_fix(text, &findings[0]).expect("the fix verifies"))
    }

    #[test]
    fn a_global_rebound_in_a_function_is_declared_after_the_docstring() {
        let text = "import torch\n\nx = torch.randn(3, requires_grad=True)\nfeats = torch.sigmoid(x)\n\n\n\
                    def rescale(k):\n    \"\"\"Scale the features.\"\"\"\n    feats.mul_(k)\n\n\n\
                    loss = feats.sum()\nrescale(2.0)\nloss.backward()\n";
        let out = fixed(text).expect("a fix");
        assert!(
            out.contains(
                "\"\"\"Scale the features.\"\"\"\n    global feats\n    feats = feats.mul(k)\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_closure_rebinding_its_definers_name_declares_it_nonlocal() {
        let text = "import torch\n\n\ndef step(x):\n    feats = torch.tanh(x)\n\n    \
                    def rescale(k):\n        feats.mul_(k)\n\n    loss = feats.sum()\n    \
                    rescale(2.0)\n    loss.backward()\n\n\nstep(torch.randn(3, requires_grad=True))\n";
        let out = fixed(text).expect("a fix");
        assert!(
            out.contains(
                "    def rescale(k):\n        nonlocal feats\n        feats = feats.mul(k)\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_hook_that_ends_returning_the_written_name_keeps_the_copy() {
        let fix = hook_fix("    output[0] = 0.0\n    return output").expect("a fix");
        assert!(fix.contains("output = output.clone()"), "{fix}");
        assert!(!fix.contains("return"), "{fix}");
    }

    #[test]
    fn a_hook_without_return_gets_one() {
        let fix = hook_fix("    output[0] = 0.0").expect("a fix");
        assert!(fix.contains("return output"), "{fix}");
    }

    #[test]
    fn a_hook_that_returns_something_else_somewhere_gets_no_fix() {
        let body = "    output[0] = 0.0\n    if output.shape[0] > 8:\n        return output.detach()\n    return output";
        assert_eq!(hook_fix(body), None);
        assert_eq!(hook_fix("    output[0] = 0.0\n    return output * 1"), None);
    }
}
