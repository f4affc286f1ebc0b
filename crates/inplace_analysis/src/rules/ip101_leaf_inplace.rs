//! # IP101 leaf-inplace
//!
//! **What it finds.** An in-place write (`x += 1`, `x.add_(1)`, `torch.relu_(x)`, `out=x`)
//! into a *leaf* tensor that requires grad: one made with `requires_grad=True`,
//! `.requires_grad_()`, an `nn.Parameter`, or a module parameter, while grad mode is on.
//!
//! **Why it breaks.** Autograd accumulates gradients into leaves; it has no op to record for
//! "the leaf was overwritten", so it refuses the write (form ①).
//!
//! **Runtime message** (raised at the write itself, torch 2.15):
//! `RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.`
//!
//! **Example**
//! ```python
//! x = torch.tensor([1.0, 2.0], requires_grad=True)
//! x += 1          # IP101
//! ```
//!
//! **Fix.** A parameter update belongs under `with torch.no_grad():` (that is how
//! `optimizer.step()` does it). To compute a new value, write it out of place (`y = x + 1`).
//!
//! **Fix safety.** Wrapping in `torch.no_grad()` is *unsafe*: it makes the write succeed, which
//! changes what the program does from then on; apply it when the write is an update.

use super::{write_related, write_snippet, Ctx, FORM1_MESSAGE};
use crate::engine::model::Write;
use crate::finding::{Applicability, Finding, Severity};
use crate::fix;
use crate::Rule;

pub(crate) fn finding(ctx: &Ctx<'_>, w: &Write) -> Finding {
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    let stmt = fix::enclosing_statement(ctx, w.site);
    let fix = stmt.and_then(|s| {
        let text = ctx.text(s).to_string();
        fix::wrap_no_grad(
            ctx,
            s,
            &text,
            "Update under `torch.no_grad()`",
            Applicability::Unsafe,
        )
    });
    Finding {
        rule: Rule::LeafInplace,
        severity: Severity::Error,
        range: w.range,
        message: format!(
            "`{}` writes in place into a leaf tensor that requires grad; it raises here: {}",
            write_snippet(ctx, w),
            FORM1_MESSAGE
        ),
        related,
        fix,
    }
}
