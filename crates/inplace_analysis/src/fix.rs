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
        Stmt::Assign { value: v, .. } if v == call => Some(one(
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
    let text = ctx.slice(stmt);
    if text.contains(['\n', '\r']) {
        return None;
    }
    let line = ctx.lines.line_of(stmt.start);
    let start = ctx.lines.line_start(line);
    let indent = ctx.text_all().get(start..stmt.start)?;
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

/// Replace a one-line statement by `with torch.no_grad():` around `new_stmt`.
pub(crate) fn wrap_no_grad(
    ctx: &RenderCtx<'_>,
    stmt: TextRange,
    new_stmt: &str,
    title: &str,
    applicability: Applicability,
) -> Option<Fix> {
    let torch = ctx.torch_alias()?;
    let (indent, eol) = line_layout(ctx, stmt)?;
    let unit = if indent.contains('\t') { "\t" } else { "    " };
    let content = format!("with {torch}.no_grad():{eol}{indent}{unit}{new_stmt}");
    Some(one(title.into(), applicability, stmt, content))
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
