//! # IP401 data-bypass
//!
//! **What it finds.** Use of `.data` on a tensor. A write through `.data`
//! (`y.data.mul_(0)`, `p.data -= lr * p.grad`) is a warning when something saved the tensor for a
//! backward that may still run; otherwise, for `x.data = v` (which swaps the storage while
//! autograd keeps what it saved: measured, the gradient is unchanged), and for reads
//! (`x.data.numpy()`), it is information.
//!
//! **Why it breaks.** `.data` shares the memory but *not* the version counter. A write through
//! it changes values autograd saved without bumping the version, so backward runs on the new
//! values and silently computes wrong gradients (form ④). In the seed example the sigmoid
//! gradient 0.10499362647533417 becomes 0.0 and `_version` stays 0.
//!
//! **Runtime message.** None: that is the danger.
//!
//! **Example**
//! ```python
//! y = torch.sigmoid(x)
//! y.data.mul_(0)          # IP401: gradient silently wrong
//! y.sum().backward()
//! ```
//!
//! **Fix.** Reads: `.detach()` (same memory, shared version counter, so later misuse is caught).
//! Writes: do the write on the tensor itself under `with torch.no_grad():`.
//!
//! **Fix safety.** Both are *unsafe* where the value is kept: a write that the counter now sees
//! may turn the silent error into form ③ at `backward()`, which is the point, but it changes
//! behaviour. `.detach()` on a read used directly in an expression is *safe*.

use super::{write_related, Ctx};
use crate::engine::model::Write;
use crate::finding::{Applicability, Edit, Finding, Fix, Severity, TextRange};
use crate::fix;
use crate::syntax::NodeExt;
use crate::Rule;

pub(crate) fn write_finding(ctx: &Ctx<'_>, w: &Write, in_graph: bool) -> Finding {
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    let (severity, why) = if in_graph {
        (
            Severity::Warning,
            "autograd will not notice, and gradients through it come out silently wrong",
        )
    } else {
        (
            Severity::Information,
            "prefer writing the tensor itself under `torch.no_grad()`, which autograd can check",
        )
    };
    // `x.data = v` swaps the storage: no statement without `.data` does the same.
    let mechanical = w.kind != crate::engine::model::WriteKind::DataAssign;
    let fix = fix::enclosing_statement(ctx, w.site)
        .filter(|_| mechanical)
        .and_then(|s| {
            let text = without_data(ctx, s)?;
            fix::wrap_no_grad(
                ctx,
                s,
                &text,
                "Write under `torch.no_grad()` without `.data`",
                Applicability::Unsafe,
            )
        });
    Finding {
        rule: Rule::DataBypass,
        severity,
        range: w.range,
        message: format!(
            "`{}` writes through `.data`, which shares memory but not the version counter: {why}",
            ctx.snippet(w.site)
        ),
        related,
        fix,
    }
}

/// The statement's text with every `.data` attribute dropped (`p.data.add_(1)` -> `p.add_(1)`).
fn without_data(ctx: &Ctx<'_>, stmt: TextRange) -> Option<String> {
    let text = ctx.text(stmt);
    let mut out = String::new();
    let mut rest = text;
    let mut found = false;
    while let Some(i) = rest.find(".data") {
        let after = &rest[i + 5..];
        let boundary = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        if boundary {
            found = true;
        } else {
            out.push_str(".data");
        }
        rest = after;
    }
    out.push_str(rest);
    found.then_some(out)
}

pub(crate) fn read_finding(ctx: &Ctx<'_>, range: TextRange) -> Finding {
    let node = ctx.node(range);
    let kept = node
        .and_then(|n| n.parent())
        .is_some_and(|p| p.k() == "assignment");
    let obj_end = node.and_then(|n| n.field("object")).map(|o| o.end_byte());
    let fix = obj_end.map(|end| Fix {
        title: "Use `.detach()` instead of `.data`".into(),
        applicability: if kept {
            Applicability::Unsafe
        } else {
            Applicability::Safe
        },
        edits: vec![Edit {
            range: TextRange::new(end, range.end),
            content: ".detach()".into(),
        }],
    });
    Finding {
        rule: Rule::DataBypass,
        severity: Severity::Information,
        range,
        message: format!(
            "`{}` bypasses the version counter; `.detach()` gives the same values and keeps autograd's checks",
            ctx.snippet(range)
        ),
        related: Vec::new(),
        fix,
    }
}
