//! # IP201 leaf-view-inplace
//!
//! **What it finds.** An in-place write into a *view* of a leaf tensor that requires grad:
//! `x[0] = 1.0`, `x[0:2] += 1`, `x.t().mul_(2)`, or a write through a name bound to such a view,
//! while grad mode is on. Subscript assignment on a leaf is this form, not IP101: Python runs
//! `x[0] = v` as "take the view `x[0]`, then copy into it". Except when the index covers the
//! whole tensor (`x[:] = v`, `x[...] = v`): torch 2.15 then copies into the leaf itself and
//! raises form ① (IP101); `x[:] += v` takes the view first and stays this form. Indexing with
//! arrays only (a boolean mask, an index tensor, a list, with whole dimensions beside them:
//! `w[w.abs() < t] = 0`, `w[:, [0, 2]] *= s`, `w[mask] += v`) writes the leaf itself through
//! `index_put_`: form ① too; an int or a partial slice among the parts takes a view first.
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
//! **Fix.** To initialise or edit a parameter (weight surgery, pruning, a fixed row of an
//! embedding): the write under `with torch.no_grad():` (offered; `import torch` is added when
//! the file only imports `torch.nn`). To compute a new value, build it out of place and
//! combine the pieces (`torch.cat`, `torch.where`, `x + torch.tensor([1.0, 0.0, 0.0])`); where
//! the write goes through a name bound to the view that the function reads again
//! (`cls = self.cls_token.expand(b, -1, -1); cls += pos; torch.cat((cls, x), 1)`), the rewrite
//! `cls = cls + pos` is offered instead: the parameter stays as it was. A function that writes a
//! value requiring grad into a slice of a name it goes on with (`inputs[s] = proj(x); return
//! inputs`, a helper given a parameter, or `forward` itself) computes with the write: a copy
//! first (`inputs = inputs.clone()`, offered), since `no_grad` would cut the value's gradient.
//!
//! A write outside a module (a forward hook, the caller) into an activation its `forward`
//! returned as a view of a parameter (`self.W_pos[:n].unsqueeze(0).expand(b, -1, -1)`) meant the
//! activation: the view is copied where `forward` makes it (offered), since `no_grad` would make
//! the write change the parameter for good.
//!
//! **Fix safety.** *Unsafe*: the write then succeeds, unrecorded, which is right for an update
//! of a parameter and changes the gradient where the leaf was meant to be computed with; the
//! rewrite leaves the parameter unchanged, which is wrong where changing it was the point.

use super::{write_of, write_related, RuleImpl, FORM2_MESSAGE};
use crate::events::Event;
use crate::exec::UnitOutput;
use crate::finding::{Finding, Related, Severity};
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::LeafViewInplace,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::LeafWrite {
            write,
            through_view: true,
            ..
        } => Some(write_of(u, *write)?.range),
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let Event::LeafWrite { write, view, .. } = ev else {
        return None;
    };
    let w = ctx.write(*write);
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    if related.is_empty() {
        if let Some(range) = view.and_then(|v| ctx.range(v)) {
            related.push(Related {
                source: None,
                range,
                message: "the view of the leaf is taken here".into(),
            });
        }
    }
    Some(Finding {
        rule: Rule::LeafViewInplace,
        severity: Severity::Error,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes in place into a view of a leaf tensor that requires grad; it raises here: {}",
            ctx.snippet(w.site),
            FORM2_MESSAGE
        ),
        related,
        // A name bound to the view and read again after the write (`cls = self.cls_token.
        // expand(b, -1, -1); cls += pos; torch.cat((cls, x))`) wanted a new tensor, not a
        // change of the parameter.
        // (Not in a `forward` that reads the view's base after the write, which was meant to
        // change it: weight standardisation through `w = self.weight.view(n, -1)`, then
        // `F.conv2d(x, self.weight)`, wants the new weight computed with, not an update of the
        // parameter that no gradient goes through.)
        // (Not either for a leaf the program made of an activation, written with a value that
        // requires grad: a copy, whatever is read after.)
        // (A custom Function that marks a view of a leaf dirty is passed a copy.)
        fix: if let crate::events::WriteKind::DirtyArg { arg } = w.kind {
            arg.and_then(|a| crate::fix::clone_dirty_argument(ctx, w.range.item, a))
        } else if in_forward(ctx, w)
            && crate::fix::view_base_read_after(ctx, w)
            && super::computed_write_into_leaf(ctx, w).is_none()
        {
            None
        } else {
            // (A value that requires grad, written into the view of a name the function reads
            // on, `inputs[s] = proj(x); return inputs`: the write is part of the computation,
            // which `no_grad` would cut from the value's gradient: a copy first.)
            // (A leaf of the program's own, not a parameter, whose view the function writes and
            // whose base it reads on, `patch = img[:, c:]; patch *= g; return img`: a
            // differentiable edit of a copy, which `no_grad` would make a lasting change of
            // the leaf that no gradient goes through.)
            crate::fix::rebind_read_again(ctx, w, false)
                .or_else(|| crate::fix::clone_leaf_before_computed_write(ctx, w))
                .or_else(|| {
                    // (Only in a called function: a leaf of the script's own, copied where it
                    // is, would no longer be the tensor an optimizer holds.)
                    let helper = !w.param && !w.call_path.is_empty();
                    helper.then(|| crate::fix::clone_view_base(ctx, w))?
                })
                // (An activation a module's `forward` made as a view of a parameter, written
                // elsewhere, a hook: the activation was meant, not the parameter.)
                .or_else(|| crate::fix::clone_activation_view(ctx, w))
                .or_else(|| super::no_grad_unless_computed(ctx, w))
        },
        alternatives: Vec::new(),
    })
}

/// Whether the write is made in a method named `forward`.
fn in_forward(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> bool {
    let body = w.stmt.and_then(|s| ctx.body(s.item));
    body.is_some_and(|b| {
        b.root_def()
            .is_some_and(|f| ctx.name(b.func(f).name) == "forward")
    })
}
