//! Rewrites offered as fixes, built from the IR and the text. Each keeps indentation and line
//! endings; whether it parses is verified where a fix is used (see [`crate::verify_fix`]).

use crate::finding::{Applicability, Edit, Fix, TextRange};
use crate::ir::*;
use crate::ops;
use crate::render::RenderCtx;

/// Tensor methods with an out-of-place twin of the same name without `_`.
fn has_out_of_place(base: &str) -> bool {
    const EXTRA: &[&str] = &[
        "add",
        "sub",
        "mul",
        "div",
        "clamp",
        "clamp_min",
        "clamp_max",
        "clip",
        "masked_fill",
        "masked_scatter",
        "index_add",
        "index_fill",
        "index_copy",
        "index_put",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "relu",
        "sigmoid",
        "tanh",
        "exp",
        "log",
        "abs",
        "neg",
        "pow",
        "sqrt",
        "addmm",
        "addcmul",
        "addcdiv",
        "lerp",
        "floor",
        "ceil",
        "round",
        "sign",
        "fill_diagonal",
        "tril",
        "triu",
        "t",
        "squeeze",
        "unsqueeze",
        "transpose",
        "true_divide",
        "leaky_relu",
        "hardtanh",
        "elu",
        "silu",
        "gelu",
        "mish",
        "softplus",
        "selu",
        "celu",
        "relu6",
        "hardsigmoid",
        "hardswish",
        "threshold",
        "nan_to_num",
        "remainder",
        "fmod",
        "bitwise_and",
        "bitwise_or",
        "logical_not",
        "square",
        "rsqrt",
        "reciprocal",
        "erf",
    ];
    EXTRA.contains(&base) || ops::table().op(base).is_some()
}

/// Expressions that need no parentheses after a binary operator.
fn is_atomic(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Name { .. }
            | Expr::Attr { .. }
            | Expr::Call { .. }
            | Expr::Subscript { .. }
            | Expr::Int(_)
            | Expr::Float
            | Expr::Str(_)
            | Expr::OtherStr
            | Expr::True
            | Expr::False
            | Expr::None
            | Expr::Seq {
                kind: SeqKind::List,
                ..
            }
            | Expr::Dict { .. }
    )
}

fn op_text(op: BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::MatMul => "@",
        BinOp::Pow => "**",
        BinOp::FloorDiv => "//",
        BinOp::Mod => "%",
        BinOp::Other => return None,
    })
}

/// A single edit as a fix.
fn one(title: String, applicability: Applicability, range: TextRange, content: String) -> Fix {
    Fix {
        title,
        applicability,
        edits: vec![Edit { range, content }],
    }
}

/// `y += 1` -> `y = y + 1` (statement `s` of `item`).
pub(crate) fn aug_assign_out_of_place(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    applicability: Applicability,
) -> Option<Fix> {
    let body = ctx.body(s.item)?;
    let Stmt::AugAssign { target, op, value } = *body.stmt(s.stmt) else {
        return None;
    };
    if !matches!(body.expr(target), Expr::Name { .. } | Expr::Attr { .. }) {
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
    let new = format!("{l} = {l} {} {r}", op_text(op)?);
    rewrite_statement(ctx, s, &body, new, applicability)
}

/// Statement `s` replaced by its out-of-place form `new`.
fn rewrite_statement(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    body: &crate::ir::Body,
    new: String,
    applicability: Applicability,
) -> Option<Fix> {
    let range = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    Some(one(
        format!("Rewrite out of place: `{new}`"),
        applicability,
        range,
        new,
    ))
}

/// `y.mul_(2)` -> `y = y.mul(2)` (or `mul` for `mul_` when the result is assigned);
/// `torch.relu_(h)` -> `h = torch.relu(h)`. `method`: the receiver is written (else the first
/// argument).
pub(crate) fn call_out_of_place(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    call: ExprId,
    name: Name,
    method: bool,
    applicability: Applicability,
) -> Option<Fix> {
    let base = ctx.name(name).strip_suffix('_')?.to_string();
    if !has_out_of_place(&base) {
        return None;
    }
    let body = ctx.body(s.item)?;
    let span = |e: ExprId| Span::new(s.item, body.expr_span(e));
    let Expr::Call { func, args } = *body.expr(call) else {
        return None;
    };
    let Expr::Attr { value, attr_at, .. } = *body.expr(func) else {
        return None;
    };
    let a = body.args[args as usize];
    let func_range = ctx.range(span(func))?;
    let attr_start = ctx
        .range(Span::new(s.item, Rel::new(attr_at, attr_at)))?
        .start;
    let attr = TextRange::new(attr_start, func_range.end);
    match *body.stmt(s.stmt) {
        Stmt::Expr(e) if e == call => {
            let target = if method {
                value
            } else {
                body.exprs_of(a.positional).next()?
            };
            if !matches!(body.expr(target), Expr::Name { .. } | Expr::Attr { .. }) {
                return None;
            }
            let t = ctx.text(span(target));
            let prefix = ctx.slice(TextRange::new(func_range.start, attr.start));
            let arg_text = ctx.text(Span::new(s.item, a.span));
            let new = format!("{t} = {prefix}{base}{arg_text}");
            rewrite_statement(ctx, s, &body, new, applicability)
        }
        Stmt::Assign { value: v, .. } | Stmt::Return(v) if v == call => Some(one(
            format!("Use out-of-place `{base}`"),
            applicability,
            attr,
            base,
        )),
        _ => None,
    }
}

/// `inplace=True` -> `inplace=False` (or a positional `True` -> `False`).
pub(crate) fn inplace_false(
    ctx: &RenderCtx<'_>,
    arg: Span,
    applicability: Applicability,
) -> Option<Fix> {
    let r = ctx.range(arg)?;
    let text = ctx.slice(r);
    let at = if text == "True" {
        0
    } else {
        let eq = text.find('=')?;
        let (name, value) = (text[..eq].trim(), text[eq + 1..].trim_start());
        if name != "inplace" || value != "True" {
            return None;
        }
        text.len() - 4
    };
    Some(one(
        "Set `inplace=False`".into(),
        applicability,
        TextRange::new(r.start + at, r.end),
        "False".into(),
    ))
}

/// Indentation and line ending of a single-line statement that starts its line.
fn line_layout<'a>(ctx: &RenderCtx<'a>, stmt: TextRange) -> Option<(&'a str, &'static str)> {
    if ctx.slice(stmt).contains(['\n', '\r']) {
        return None;
    }
    indentation(ctx, stmt.start)
}

/// Replace a one-line statement by `with torch.no_grad():` around `new_stmt`.
pub(crate) fn wrap_no_grad(
    ctx: &RenderCtx<'_>,
    stmt: TextRange,
    new_stmt: &str,
    title: &str,
    applicability: Applicability,
) -> Option<Fix> {
    let (indent, eol) = line_layout(ctx, stmt)?;
    let unit = if indent.contains('\t') { "\t" } else { "    " };
    let (torch, import) = match ctx.torch_alias() {
        Some(t) => (t, None),
        None => ("torch", Some(import_torch(ctx)?)),
    };
    let content = format!("with {torch}.no_grad():{eol}{indent}{unit}{new_stmt}");
    let mut fix = one(title.into(), applicability, stmt, content);
    fix.edits.splice(0..0, import);
    Some(fix)
}

/// `import torch` on a line of its own before the file's first import (after any
/// `from __future__` import), for a fix that needs `torch` in a file that imports only
/// `torch.nn as nn` or the like.
fn import_torch(ctx: &RenderCtx<'_>) -> Option<Edit> {
    let prog = ctx.prog;
    let first = prog.items.iter().find(|it| {
        it.parent().is_none()
            && ctx.body(it.id).is_some_and(|b| {
                b.stmts_of(b.root).any(|s| match *b.stmt(s) {
                    Stmt::Import(list) => b.list(list).iter().all(|i| {
                        !ctx.name(b.imports[*i as usize].path)
                            .starts_with("__future__")
                    }),
                    _ => false,
                })
            })
    })?;
    let at = first.outline.start as usize;
    let (indent, eol) = indentation(ctx, at)?;
    indent.is_empty().then(|| Edit {
        range: TextRange::new(at, at),
        content: format!("import torch{eol}"),
    })
}

/// The write's statement under `with torch.no_grad():` (a parameter's initialisation or
/// update, written where autograd must not record it).
pub(crate) fn write_under_no_grad(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let s = simple_statement(ctx, w.stmt)?;
    let text = ctx.slice(s).to_string();
    wrap_no_grad(
        ctx,
        s,
        &text,
        "Update under `torch.no_grad()`",
        Applicability::Unsafe,
    )
}

/// The simple statement (expression, assignment, augmented assignment) a write is in.
pub(crate) fn simple_statement(ctx: &RenderCtx<'_>, s: Option<StmtRef>) -> Option<TextRange> {
    let s = s?;
    let body = ctx.body(s.item)?;
    match body.stmt(s.stmt) {
        Stmt::Expr(_) | Stmt::Assign { .. } | Stmt::AugAssign { .. } => {
            ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))
        }
        _ => None,
    }
}

/// `y = x` -> `y = x.clone()`, at the assignment that made the alias (`alias_of` is `x`).
pub(crate) fn insert_clone(
    ctx: &RenderCtx<'_>,
    alias_of: Span,
    applicability: Applicability,
) -> Option<Fix> {
    let r = ctx.range(alias_of)?;
    Some(one(
        format!("Copy instead of aliasing: `{}.clone()`", ctx.slice(r)),
        applicability,
        TextRange::new(r.end, r.end),
        ".clone()".into(),
    ))
}

/// `w = w - lr * w.grad` -> `with torch.no_grad(): w -= lr * w.grad`.
pub(crate) fn augmented_update(ctx: &RenderCtx<'_>, s: StmtRef, target: Span) -> Option<Fix> {
    let body = ctx.body(s.item)?;
    let Stmt::Assign { value, targets } = *body.stmt(s.stmt) else {
        return None;
    };
    if targets.len != 1 {
        return None;
    }
    let Expr::Binary { op, left, right } = *body.expr(value) else {
        return None;
    };
    let span = |e: ExprId| Span::new(s.item, body.expr_span(e));
    let t = ctx.text(target);
    if ctx.text(span(left)) != t || !matches!(op, BinOp::Sub | BinOp::Add | BinOp::Mul | BinOp::Div)
    {
        return None;
    }
    let new = format!("{t} {}= {}", op_text(op)?, ctx.text(span(right)));
    let stmt = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    wrap_no_grad(
        ctx,
        stmt,
        &new,
        "Update in place under `torch.no_grad()`",
        Applicability::Unsafe,
    )
}

/// `R = R.clone()` on a line of its own before the statement that makes the tensor a write
/// changes (the view it writes through, when it is one; else the write itself): the write
/// then changes a copy, and what an op saved stays as it was saved. Under `torch.no_grad()`
/// the copy goes before the outermost `with ... no_grad()` block, so that it keeps its
/// history. Unsafe: other names of the old tensor no longer see the write.
pub(crate) fn clone_before(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let s = w.stmt?;
    let (at, root) = match w.view_origin.and_then(|v| view_statement(ctx, v)) {
        Some(found) => found,
        None => {
            let body = ctx.body(s.item)?;
            let written = written_expr(&body, s.stmt, w)?;
            (
                s,
                Span::new(s.item, body.expr_span(root_place(&body, written)?)),
            )
        }
    };
    let body = ctx.body(at.item)?;
    let mut stmt = body.stmt_span(at.stmt);
    if w.under_no_grad {
        stmt = outermost_no_grad(ctx, &body, at.item, stmt)?;
    }
    let stmt = ctx.range(Span::new(at.item, stmt))?;
    let (indent, eol) = indentation(ctx, stmt.start)?;
    let r = ctx.text(root);
    Some(one(
        format!("Write into a copy: `{r} = {r}.clone()` first"),
        Applicability::Unsafe,
        TextRange::new(stmt.start - indent.len(), stmt.start - indent.len()),
        format!("{indent}{r} = {r}.clone(){eol}"),
    ))
}

/// The expression whose tensor a write changes: `y` of `y[i] = v`, `y.mul_(2)`,
/// `torch.relu_(y)`, `out=y`.
fn written_expr(body: &Body, s: StmtId, w: &crate::events::Write) -> Option<ExprId> {
    use crate::events::WriteKind;
    let subscript_value = |e: ExprId| match *body.expr(e) {
        Expr::Subscript { value, .. } => Some(value),
        _ => None,
    };
    match w.kind {
        WriteKind::Subscript => match *body.stmt(s) {
            Stmt::Assign { targets, .. } => body.exprs_of(targets).find_map(subscript_value),
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
        WriteKind::OutArg => body
            .keywords
            .iter()
            .find(|k| k.span == w.range.rel)
            .map(|k| k.value),
        _ => None,
    }
}

/// A name or attribute path (`y`, `self.buf`).
fn is_place(body: &Body, e: ExprId) -> bool {
    match *body.expr(e) {
        Expr::Name { .. } => true,
        Expr::Attr { value, .. } => is_place(body, value),
        _ => false,
    }
}

/// The name or attribute path a view chain starts from: `y` of `y[0]`, `y.view(-1)[:, 1]`,
/// `y.detach()`, `self.buf[t]`.
fn root_place(body: &Body, mut e: ExprId) -> Option<ExprId> {
    loop {
        if is_place(body, e) {
            return Some(e);
        }
        e = match *body.expr(e) {
            Expr::Subscript { value, .. } => value,
            Expr::Call { func, .. } => match *body.expr(func) {
                Expr::Attr { value, .. } => value,
                _ => return None,
            },
            _ => return None,
        };
    }
}

/// The innermost simple statement holding a view expression, and the place the view starts
/// from.
fn view_statement(ctx: &RenderCtx<'_>, v: Span) -> Option<(StmtRef, Span)> {
    let body = ctx.body(v.item)?;
    let e = (0..body.exprs.len()).find(|&i| body.expr_spans[i] == v.rel)?;
    let root = root_place(&body, ExprId(e as u32))?;
    let stmt = simple_statement_at(&body, v.rel)?;
    Some((
        StmtRef { item: v.item, stmt },
        Span::new(v.item, body.expr_span(root)),
    ))
}

/// The innermost simple statement (expression, assignment, `return`) around a range.
fn simple_statement_at(body: &Body, rel: Rel) -> Option<StmtId> {
    (0..body.stmts.len())
        .filter(|&i| {
            matches!(
                body.stmts[i],
                Stmt::Expr(_) | Stmt::Assign { .. } | Stmt::AugAssign { .. } | Stmt::Return(_)
            ) && body.stmt_spans[i].contains(rel)
        })
        .min_by_key(|&i| body.stmt_spans[i].end - body.stmt_spans[i].start)
        .map(|i| StmtId(i as u32))
}

/// A one-line statement `s` moved to just after the statement around `after` (later in the
/// same block: same indentation, and no line between them less indented; checked on the text). For a `step()`
/// that runs before a `backward()` through what it updates.
pub(crate) fn move_after(ctx: &RenderCtx<'_>, s: StmtRef, after: Span) -> Option<Fix> {
    let body = ctx.body(s.item)?;
    let moved = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    // (A module-level statement is an item of its own: the two may be in different items.)
    let other = ctx.body(after.item)?;
    let target = simple_statement_at(&other, after.rel)?;
    let target = ctx.range(Span::new(after.item, other.stmt_span(target)))?;
    let (indent, eol) = line_layout(ctx, moved)?;
    let text = ctx.text_all();
    let line = ctx.lines.line_of(moved.start);
    let (from, to) = (ctx.lines.line_start(line), ctx.lines.line_start(line + 1));
    let last = ctx.lines.line_of(target.end);
    if !same_block(ctx, moved, target, indent) {
        return None;
    }
    let insert = ctx.lines.line_start(last + 1);
    if insert < target.end {
        return None;
    }
    // Nothing in between may use what the statement uses (`scaler.update()` after
    // `scaler.step(opt)`, `opt.zero_grad()` after `opt.step()`): that order must stay.
    let words = |t: &'_ str| -> Vec<String> {
        t.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
            .map(str::to_string)
            .collect()
    };
    let between = words(text.get(to..target.start)?);
    let uses = words(ctx.slice(moved));
    if uses.iter().any(|u| u != "step" && between.contains(u)) {
        return None;
    }
    // The statement with what follows it on its line (a comment).
    let stmt = ctx.slice(moved);
    let (_, end) = ctx.lines.line_range(text, line);
    let whole = text.get(moved.start..end)?;
    let rest = text.get(moved.end..end)?.trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    let sep = if text[..insert].ends_with('\n') {
        ""
    } else {
        eol
    };
    Some(Fix {
        title: format!("Move `{stmt}` after `{}`", ctx.slice(target)),
        applicability: Applicability::Unsafe,
        edits: vec![
            Edit {
                range: TextRange::new(from, to),
                content: String::new(),
            },
            Edit {
                range: TextRange::new(insert, insert),
                content: format!("{sep}{indent}{whole}{eol}"),
            },
        ],
    })
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

/// Whether statement `later` comes after statement `earlier` in the same block: it starts a
/// later line with the same indentation `indent`, and every line between them is blank, a
/// comment, or at least as indented (checked on the text).
fn same_block(ctx: &RenderCtx<'_>, earlier: TextRange, later: TextRange, indent: &str) -> bool {
    let next = ctx.lines.line_start(ctx.lines.line_of(earlier.end) + 1);
    if later.start < next || indentation(ctx, later.start).map(|i| i.0) != Some(indent) {
        return false;
    }
    let Some(between) = ctx
        .text_all()
        .get(next..ctx.lines.line_start(ctx.lines.line_of(later.start)))
    else {
        return false;
    };
    between.lines().all(|l| {
        let t = l.trim_start();
        t.is_empty() || t.starts_with('#') || l.len() - t.len() >= indent.len()
    })
}

/// After a statement that replaces what an optimizer holds, the statement that built the
/// optimizer again (`opt = torch.optim.SGD(model.parameters(), lr=0.1)`), so that it holds
/// the new parameters: when that statement is one line, earlier in the same block.
pub(crate) fn rebuild_optimizer(ctx: &RenderCtx<'_>, s: StmtRef, optimizer: Span) -> Option<Fix> {
    let body = ctx.body(s.item)?;
    let rebind = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    let (indent, eol) = line_layout(ctx, rebind)?;
    let other = ctx.body(optimizer.item)?;
    let built = simple_statement_at(&other, optimizer.rel)?;
    if !matches!(other.stmt(built), Stmt::Assign { .. }) {
        return None;
    }
    let built = ctx.range(Span::new(optimizer.item, other.stmt_span(built)))?;
    if line_layout(ctx, built)?.0 != indent || !same_block(ctx, built, rebind, indent) {
        return None;
    }
    let again = ctx.slice(built);
    let at = ctx.lines.line_start(ctx.lines.line_of(rebind.end) + 1);
    let sep = if ctx.text_all()[..at].ends_with('\n') {
        ""
    } else {
        eol
    };
    Some(one(
        format!("Build the optimizer again: `{again}`"),
        Applicability::Unsafe,
        TextRange::new(at, at),
        format!("{sep}{indent}{again}{eol}"),
    ))
}

/// The indentation before `pos` (only blanks between its line's start and it) and the line
/// ending of its line.
fn indentation<'a>(ctx: &RenderCtx<'a>, pos: usize) -> Option<(&'a str, &'static str)> {
    let line = ctx.lines.line_of(pos);
    let start = ctx.lines.line_start(line);
    let indent = ctx.text_all().get(start..pos)?;
    if !indent.chars().all(|c| c == ' ' || c == '\t') {
        return None;
    }
    let (_, end) = ctx.lines.line_range(ctx.text_all(), line);
    let eol = if ctx.text_all()[end..].starts_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    Some((indent, eol))
}

/// A write through `.data` into a tensor a backward still reads, rewritten out of place with
/// the values the write made and the gradient autograd computed before it (what the `.data`
/// write meant, without changing what the backward reads):
/// `y.data.clamp_(0, 1)` -> `y = y.clamp(0, 1).detach() + (y - y.detach())`;
/// `y.data *= 2` -> `y = (y * 2).detach() + (y - y.detach())`.
pub(crate) fn straight_through(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
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
    let (target, value) = match (w.kind, *body.stmt(s.stmt)) {
        (WriteKind::Method(name), Stmt::Expr(call)) if Some(call) == w.call => {
            let base = ctx.name(name).strip_suffix('_')?;
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
            (t, format!("{}.{base}{args}", ctx.text(span(t))))
        }
        (WriteKind::AugAssign, Stmt::AugAssign { target, op, value }) => {
            let t = under_data(target)?;
            let r = ctx.text(span(value));
            let r = if is_atomic(body.expr(value)) {
                r.to_string()
            } else {
                format!("({r})")
            };
            (t, format!("({} {} {r})", ctx.text(span(t)), op_text(op)?))
        }
        _ => return None,
    };
    let t = ctx.text(span(target));
    let new = format!("{t} = {value}.detach() + ({t} - {t}.detach())");
    rewrite_statement(ctx, s, &body, new, Applicability::Unsafe)
}
