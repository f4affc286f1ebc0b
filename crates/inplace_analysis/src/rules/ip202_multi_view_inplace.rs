//! # IP202 multi-view-inplace
//!
//! **What it finds.** An in-place write into one of the views that a function returning
//! several views made: `q, k, v = qkv.chunk(3, dim=-1)` then `q *= scale`; `x.split(2)`,
//! `x.split([1, 3])`, `x.unbind(0)`, `torch.chunk(x, 2)`; the rows of `for row in x` (iterating
//! over a tensor unbinds it) or of `a, b = x`; and views of such a view (`q[0] += 1`,
//! `q.view(-1).add_(1)`), written while grad mode is on when the tensor split requires grad (a
//! parameter, or anything computed from one), or when the value written does.
//! `tensor_split`, `hsplit`, `vsplit` and `unsafe_chunk` views may be written (measured).
//!
//! **Why it breaks.** Autograd records an in-place write into a view by rebasing the view's
//! history onto its base; for the outputs of a multi-output view function it cannot do that
//! for one output alone, so it refuses the write (it raises even on a leaf, with this message
//! rather than form ②'s).
//!
//! **Runtime message** (raised at the write itself, torch 2.15):
//! `RuntimeError: Output 0 of Split is a view and is being modified inplace. This view is the
//! output of a function that returns multiple views. Such functions do not allow the output
//! views to be modified inplace. You should replace the inplace operation by an out-of-place
//! one.` (`SplitWithSizes`, `Unbind`, or the last view op for a view of one; when only the
//! value requires grad it starts `A view was created in no_grad mode and is being modified
//! inplace with grad mode enabled.`)
//!
//! **Example**
//! ```python
//! q, k = (x @ w).chunk(2, dim=-1)
//! q *= 0.125          # IP202
//! ```
//!
//! **Fix.** Write out of place: `q = q * 0.125` (offered), `q = q.mul(0.125)`, `inplace=False`;
//! for a subscript write, a copy first (`q = q.clone()`). Rows of a parameter (an
//! initialisation): the write under `with torch.no_grad():` (offered). A row of a loop over a
//! tensor gets no fix: rebinding the loop's name changes nothing the loop leaves behind; write
//! the whole tensor out of place (`z = z / z.norm(dim=1, keepdim=True)`).
//!
//! **Fix safety.** *Unsafe*: the tensor that was split no longer sees the write (it never
//! could while autograd recorded, but code after it may have read it expecting the change);
//! under `no_grad` the write succeeds unrecorded.

use super::{out_of_place, write_of, write_related, RuleImpl};
use super::{MULTI_VIEW_MESSAGE, MULTI_VIEW_NO_GRAD};
use crate::domain::SplitOp;
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::{Finding, Related, Severity};
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::MultiViewInplace,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::MultiViewWrite { write, .. } => Some(write_of(u, *write)?.range),
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let Event::MultiViewWrite { write, view, plain } = ev else {
        return None;
    };
    let w = ctx.write(*write);
    // The views' origin is said here; the write's own view (the split call) is not repeated.
    let mut own = w.clone();
    own.view_origin = own.view_origin.filter(|v| *v != view.at);
    let mut related = Vec::new();
    if let Some(range) = ctx.range(view.at) {
        let what = match view.op {
            SplitOp::Iteration => "iterating over this tensor unbinds it into views".to_string(),
            _ => format!("`{}` returns several views here", ctx.snippet(view.at)),
        };
        related.push(Related {
            source: None,
            range,
            message: what,
        });
    }
    write_related(ctx, &own, &mut related);
    let whose = match view.op {
        SplitOp::Iteration => format!("a row of the tensor iterated over ({})", ctx.line(view.at)),
        _ => format!(
            "one of the views `{}` returns ({})",
            ctx.snippet(view.at),
            ctx.line(view.at)
        ),
    };
    // The runtime names the split's node for its own outputs, the last view op otherwise (an
    // indexed write takes a view first: `Output 0 of Select`).
    let indexed = matches!(w.kind, WriteKind::Subscript { whole: false });
    let node = if !indexed && w.view_origin.is_none_or(|v| v == view.at) {
        view.op.node()
    } else {
        "…"
    };
    let runtime = if *plain {
        format!("{MULTI_VIEW_NO_GRAD} This view is the output of a function that returns multiple views. …")
    } else {
        format!("Output N of {node} {MULTI_VIEW_MESSAGE}")
    };
    Some(Finding {
        rule: Rule::MultiViewInplace,
        severity: Severity::Error,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes in place into {whose}; it raises here: {runtime}",
            ctx.snippet(w.site),
        ),
        related,
        fix: fix(ctx, w, view.op),
    })
}

/// Into a parameter's rows (an initialisation): the write under `torch.no_grad()`, where
/// autograd allows it and the parameter still changes. A loop's row rebound out of place would
/// change nothing the loop leaves behind: no fix. Else out of place, or into a copy.
fn fix(ctx: &RenderCtx<'_>, w: &crate::events::Write, op: SplitOp) -> Option<crate::Fix> {
    if w.into_leaf {
        return crate::fix::write_under_no_grad(ctx, w);
    }
    if op == SplitOp::Iteration {
        return None;
    }
    out_of_place(ctx, &own_copy(w), crate::Applicability::Unsafe)
}

/// The write as if into a tensor of its own: the fix rewrites it out of place, or copies the
/// name it writes through (not the tensor that was split, whose copy splits the same way).
fn own_copy(w: &crate::events::Write) -> crate::events::Write {
    let mut w = w.clone();
    w.view_origin = None;
    w
}
