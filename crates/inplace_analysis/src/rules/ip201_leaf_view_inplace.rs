//! # IP201 leaf-view-inplace
//!
//! **What it finds.** An in-place write into a *view* of a leaf tensor that requires grad:
//! `x[0] = 1.0`, `x[0:2] += 1`, `x.t().mul_(2)`, or a write through a name bound to such a view,
//! while grad mode is on. Subscript assignment on a leaf is this form, not IP101: Python runs
//! `x[0] = v` as "take the view `x[0]`, then copy into it".
//!
//! **Why it breaks.** The view shares the leaf's memory; autograd cannot rebase a leaf's
//! history onto a write made through a view, so it refuses (form ②).
//!
//! **Runtime message** (raised at the write itself, torch 2.15):
//! `RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.`
//!
//! **Example**
//! ```python
//! x = torch.zeros(3, requires_grad=True)
//! x[0] = 1.0       # IP201
//! ```
//!
//! **Fix.** Build the tensor out of place and combine the pieces
//! (`torch.cat`, `torch.where`, `x + torch.tensor([1.0, 0.0, 0.0])`); to initialise a
//! parameter, write under `with torch.no_grad():`.
//!
//! **Fix safety.** No automatic fix: which rewrite is right depends on what the code means.

use super::{write_related, write_snippet, Ctx, FORM2_MESSAGE};
use crate::engine::model::Write;
use crate::finding::{Finding, Related, Severity, TextRange};
use crate::Rule;

pub(crate) fn finding(ctx: &Ctx<'_>, w: &Write, view: Option<TextRange>) -> Finding {
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    if related.is_empty() {
        if let Some(v) = view {
            related.push(Related {
                range: v,
                message: "the view of the leaf is taken here".into(),
            });
        }
    }
    Finding {
        rule: Rule::LeafViewInplace,
        severity: Severity::Error,
        range: w.range,
        message: format!(
            "`{}` writes in place into a view of a leaf tensor that requires grad; it raises here: {}",
            write_snippet(ctx, w),
            FORM2_MESSAGE
        ),
        related,
        fix: None,
    }
}
