//! # IP403 param-rebind
//!
//! **What it finds.** A name or attribute that holds a parameter is rebound to a *new* object:
//! `w = w - lr * w.grad` (out-of-place update of a leaf that requires grad), `v = v - 0.1 * v.grad`
//! after `opt = torch.optim.SGD([v])`, `self.w = nn.Parameter(...)` or `model = Net()` after the
//! optimizer was built from the old parameters.
//!
//! **Why it breaks.** An optimizer holds tensor *objects*. The new object is not what it
//! updates, and `w - lr * w.grad` is no leaf: its `.grad` stays `None`. Training silently stops
//! (form ④), or the next iteration fails on `w.grad` being `None`.
//!
//! **Runtime message.** None at the rebinding. (Reading `.grad` of the non-leaf later warns:
//! `The .grad attribute of a Tensor that is not a leaf Tensor is being accessed.`)
//!
//! **Example**
//! ```python
//! opt = torch.optim.SGD([v], lr=0.1)
//! (v * v).backward()
//! v = v - 0.1 * v.grad     # IP403: opt still holds the old v
//! ```
//!
//! **Fix.** Update in place under `with torch.no_grad():` (`v -= 0.1 * v.grad`), or let the
//! optimizer do it (`opt.step()`). Build the optimizer after the model is final.
//!
//! **Fix safety.** *Unsafe*: it changes which object the name refers to afterwards.

use super::{Ctx, Related};
use crate::finding::{Applicability, Finding, Severity, TextRange};
use crate::fix;
use crate::syntax::NodeExt;
use crate::Rule;
use tree_sitter::Node;

pub(crate) fn finding(
    ctx: &Ctx<'_>,
    stmt: Node<'_>,
    target: Node<'_>,
    name: &str,
    optimizer: Option<TextRange>,
    update: bool,
) -> Finding {
    let range = TextRange::of(stmt);
    let mut related = Vec::new();
    if let Some(o) = optimizer {
        related.push(Related {
            range: o,
            message: format!("this optimizer holds the old `{name}` and keeps updating it"),
        });
    }
    let message = match (optimizer, update) {
        (Some(o), _) => format!(
            "`{}` replaces `{name}`, which the optimizer built on line {} holds; it keeps updating the old object and training of `{name}` silently stops",
            ctx.snippet(range),
            ctx.line(o)
        ),
        (None, _) => format!(
            "`{}` replaces the leaf `{name}` by a computed tensor: it is no leaf, its `.grad` stays `None`, and the next update fails or does nothing",
            ctx.snippet(range)
        ),
    };
    let fix = augmented_update(ctx, stmt, target);
    Finding {
        rule: Rule::ParamRebind,
        severity: Severity::Warning,
        range,
        message,
        related,
        fix,
    }
}

/// `w = w - lr * w.grad` -> `with torch.no_grad(): w -= lr * w.grad`.
fn augmented_update(
    ctx: &Ctx<'_>,
    stmt: Node<'_>,
    target: Node<'_>,
) -> Option<crate::finding::Fix> {
    let right = stmt.field("right")?;
    if right.k() != "binary_operator" {
        return None;
    }
    let left = right.field("left")?;
    let op = right.field("operator")?;
    let operand = right.field("right")?;
    let t = ctx.text(TextRange::of(target));
    if ctx.text(TextRange::of(left)) != t {
        return None;
    }
    let op = ctx.text(TextRange::of(op));
    if !matches!(op, "-" | "+" | "*" | "/") {
        return None;
    }
    let new = format!("{t} {op}= {}", ctx.text(TextRange::of(operand)));
    let stmt_range = fix::enclosing_statement(ctx, TextRange::of(stmt))?;
    fix::wrap_no_grad(
        ctx,
        stmt_range,
        &new,
        "Update in place under `torch.no_grad()`",
        Applicability::Unsafe,
    )
}
