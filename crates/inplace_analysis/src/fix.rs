//! Mechanical rewrites offered as fixes. Each keeps indentation and line endings and yields
//! code that parses.

use crate::engine::model::{Write, WriteKind};
use crate::finding::{Applicability, Edit, Fix, TextRange};
use crate::ops;
use crate::rules::Ctx;
use crate::syntax::NodeExt;
use tree_sitter::Node;

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
        "div",
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
fn is_atomic(n: Node<'_>) -> bool {
    matches!(
        n.k(),
        "identifier"
            | "attribute"
            | "call"
            | "subscript"
            | "integer"
            | "float"
            | "string"
            | "parenthesized_expression"
            | "true"
            | "false"
            | "none"
            | "list"
            | "tuple"
            | "dictionary"
    )
}

fn statement_level(call: Node<'_>) -> bool {
    call.parent()
        .is_some_and(|p| p.k() == "expression_statement" && p.named_child_count() == 1)
}

fn assign_rhs(call: Node<'_>) -> bool {
    call.parent()
        .is_some_and(|p| p.k() == "assignment" && p.field("right") == Some(call))
}

/// `y += 1` -> `y = y + 1`; `y.mul_(2)` -> `y = y.mul(2)`; `torch.relu_(h)` -> `h = torch.relu(h)`;
/// `inplace=True` -> `inplace=False`.
pub(crate) fn out_of_place(ctx: &Ctx<'_>, w: &Write, applicability: Applicability) -> Option<Fix> {
    let node = ctx.node(w.site)?;
    let rebinds = matches!(
        w.kind,
        WriteKind::AugAssign | WriteKind::Method(_) | WriteKind::TorchFn(_)
    );
    if rebinds && w.under_no_grad {
        // Rebinding under `no_grad` would leave a tensor without history.
        return None;
    }
    let (title, edit) = match &w.kind {
        WriteKind::AugAssign => {
            let left = node.field("left")?;
            let right = node.field("right")?;
            let op = node.field("operator")?;
            if !matches!(left.k(), "identifier" | "attribute") {
                return None;
            }
            let op = ctx.text(TextRange::of(op)).trim_end_matches('=');
            let l = ctx.text(TextRange::of(left));
            let r = ctx.text(TextRange::of(right));
            let r = if is_atomic(right) {
                r.to_string()
            } else {
                format!("({r})")
            };
            let new = format!("{l} = {l} {op} {r}");
            (
                format!("Rewrite out of place: `{new}`"),
                Edit {
                    range: w.site,
                    content: new,
                },
            )
        }
        WriteKind::Method(name) | WriteKind::TorchFn(name) => {
            let base = name.strip_suffix('_')?;
            if !has_out_of_place(base) {
                return None;
            }
            let func = node.field("function")?;
            let attr = func.field("attribute")?;
            let args = node.field("arguments")?;
            if statement_level(node) {
                let target = match &w.kind {
                    WriteKind::Method(_) => func.field("object")?,
                    _ => args.named_child(0)?,
                };
                if !matches!(target.k(), "identifier" | "attribute") {
                    return None;
                }
                let t = ctx.text(TextRange::of(target));
                let f = ctx.text(TextRange::new(func.start_byte(), attr.start_byte()));
                let new = format!("{t} = {f}{base}{}", ctx.text(TextRange::of(args)));
                (
                    format!("Rewrite out of place: `{new}`"),
                    Edit {
                        range: w.site,
                        content: new,
                    },
                )
            } else if assign_rhs(node) {
                (
                    format!("Use out-of-place `{base}`"),
                    Edit {
                        range: TextRange::of(attr),
                        content: base.to_string(),
                    },
                )
            } else {
                return None;
            }
        }
        WriteKind::InplaceModule { .. } | WriteKind::InplaceFunctional => {
            return inplace_false(ctx, w.range, applicability)
        }
        _ => return None,
    };
    Some(Fix {
        title,
        applicability,
        edits: vec![edit],
    })
}

/// `inplace=True` -> `inplace=False` (or a positional `True` -> `False`).
pub(crate) fn inplace_false(
    ctx: &Ctx<'_>,
    kw: TextRange,
    applicability: Applicability,
) -> Option<Fix> {
    let node = ctx.node(kw)?;
    let value = if node.k() == "keyword_argument" {
        node.field("value")?
    } else {
        node
    };
    if value.k() != "true" {
        return None;
    }
    Some(Fix {
        title: "Set `inplace=False`".into(),
        applicability,
        edits: vec![Edit {
            range: TextRange::of(value),
            content: "False".into(),
        }],
    })
}

/// Indentation and line ending of a single-line statement that starts its line.
fn line_layout<'a>(ctx: &Ctx<'a>, stmt: TextRange) -> Option<(&'a str, &'static str)> {
    let text = ctx.text(stmt);
    if text.contains('\n') {
        return None;
    }
    let line = ctx.lines.line_of(stmt.start);
    let start = ctx.lines.line_start(line);
    let indent = ctx.src.get(start..stmt.start)?;
    if !indent.chars().all(|c| c == ' ' || c == '\t') {
        return None;
    }
    let (_, end) = ctx.lines.line_range(ctx.src, line);
    let eol = if ctx.src[end..].starts_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    Some((indent, eol))
}

/// Replace a one-line statement by `with torch.no_grad():` around `new_stmt`.
pub(crate) fn wrap_no_grad(
    ctx: &Ctx<'_>,
    stmt: TextRange,
    new_stmt: &str,
    title: &str,
    applicability: Applicability,
) -> Option<Fix> {
    let torch = ctx.torch.as_deref()?;
    let (indent, eol) = line_layout(ctx, stmt)?;
    let unit = if indent.contains('\t') { "\t" } else { "    " };
    let content = format!("with {torch}.no_grad():{eol}{indent}{unit}{new_stmt}");
    Some(Fix {
        title: title.into(),
        applicability,
        edits: vec![Edit {
            range: stmt,
            content,
        }],
    })
}

/// The statement (expression statement or assignment) that contains a write's site.
pub(crate) fn enclosing_statement(ctx: &Ctx<'_>, site: TextRange) -> Option<TextRange> {
    let mut n = ctx.root.descendant_for_byte_range(site.start, site.end)?;
    loop {
        if n.k() == "expression_statement" {
            return Some(TextRange::of(n));
        }
        n = n.parent()?;
        if matches!(n.k(), "block" | "module") {
            return None;
        }
    }
}

/// `y = x` -> `y = x.clone()`, at the assignment that made the alias.
pub(crate) fn insert_clone(
    ctx: &Ctx<'_>,
    bound: TextRange,
    applicability: Applicability,
) -> Option<Fix> {
    let node = ctx.node(bound)?;
    if node.k() != "assignment" {
        return None;
    }
    let right = node.field("right")?;
    if !matches!(right.k(), "identifier" | "attribute" | "subscript") {
        return None;
    }
    let r = TextRange::of(right);
    Some(Fix {
        title: format!("Copy instead of aliasing: `{}.clone()`", ctx.text(r)),
        applicability,
        edits: vec![Edit {
            range: TextRange::new(r.end, r.end),
            content: ".clone()".into(),
        }],
    })
}
