//! # IP101 leaf-inplace
//!
//! **What it finds.** An in-place write (`x += 1`, `x.add_(1)`, `torch.relu_(x)`, and a
//! subscript write that covers the whole tensor: `x[:] = v`, `x[...] = v`, `x[:, :] = v`, which
//! copies into `x` itself, or that indexes with arrays only: `x[mask] = 0`, `x[idx] += v`,
//! `x[:, [0, 2]] *= s`, which `index_put_` writes into `x` itself) into a *leaf* tensor that requires grad: one made with
//! `requires_grad=True`, `.requires_grad_()`, an `nn.Parameter`, or a module parameter, while
//! grad mode is on. A custom `torch.autograd.Function` whose `forward` writes an argument in
//! place and marks it with `ctx.mark_dirty` is such a write at its `apply`.
//!
//! **Why it breaks.** Autograd accumulates gradients into leaves; it has no op to record for
//! "the leaf was overwritten", so it refuses the write (form ①).
//!
//! **Runtime message** (raised at the write itself, torch 2.15):
//! `RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.`
//! (`out=x` refuses before it writes: IP102. A Function's `apply` with a dirty leaf says
//! `has been used` instead.)
//!
//! **Example**
//! ```python
//! x = torch.tensor([1.0, 2.0], requires_grad=True)
//! x += 1          # IP101
//! ```
//!
//! **Fix.** A parameter update belongs under `with torch.no_grad():` (that is how
//! `optimizer.step()` does it). To compute a new value, write it out of place (`y = x + 1`):
//! offered where the call's result is bound to another name (`gates = zeros.scatter_(1, idx,
//! src)` -> `zeros.scatter(...)`, where `no_grad` would cut `src`'s gradient). An
//! in-place activation applied to a parameter (`self.weight_relu(self.weight)` with
//! `nn.ReLU(inplace=True)`, or `F.relu(w, inplace=True)`) computes out of place with
//! `inplace=False` (offered: the parameter keeps learning through it). A Function that marks
//! its argument dirty is passed a copy (`F.apply(w.clone())`, offered).
//!
//! **Fix safety.** Wrapping in `torch.no_grad()` is *unsafe*: it makes the write succeed, which
//! changes what the program does from then on; apply it when the write is an update.
//! `inplace=False` is *safe*: the same values, in a new tensor.

use super::{write_of, write_related, RuleImpl, FORM1_MESSAGE};

/// Form ① as a custom Function's `apply` raises it for an argument marked dirty (torch 2.15).
const DIRTY_LEAF_MESSAGE: &str =
    "a leaf Variable that requires grad has been used in an in-place operation.";
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::{Applicability, Finding, Related, Severity};
use crate::fix;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::LeafInplace,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::LeafWrite {
            write,
            through_view: false,
            ..
        } => Some(write_of(u, *write)?.range),
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let Event::LeafWrite { write, .. } = ev else {
        return None;
    };
    let w = ctx.write(*write);
    let mut related = Vec::new();
    // An in-place layer (`nn.ReLU(inplace=True)` applied to a parameter) is reported at its
    // `inplace=` and raises where it is called; computing out of place (`inplace=False`) keeps
    // the parameter learning, where `no_grad` would cut it off.
    let (message, fix) = match w.kind {
        WriteKind::InplaceModule { call, ctor } => {
            if let Some(range) = ctx.range(call) {
                related.push(Related {
                    source: None,
                    range,
                    message: format!("`{}` raises here", ctx.snippet(call)),
                });
            }
            let message = format!(
                "`{}` writes in place into a leaf tensor that requires grad when `{}` calls it ({}); it raises there: {}",
                ctx.snippet(ctor),
                ctx.snippet(call),
                ctx.line(call),
                FORM1_MESSAGE
            );
            (
                message,
                fix::inplace_false(ctx, w.range, Applicability::Safe),
            )
        }
        WriteKind::DirtyArg { arg } => {
            let message = format!(
                "`{}` writes in place into a leaf tensor that requires grad: its `forward` marks the argument dirty with `ctx.mark_dirty`; it raises here: {}",
                ctx.snippet(w.site),
                DIRTY_LEAF_MESSAGE
            );
            (
                message,
                arg.and_then(|a| fix::clone_dirty_argument(ctx, w.range.item, a)),
            )
        }
        kind => {
            let message = format!(
                "`{}` writes in place into a leaf tensor that requires grad; it raises here: {}",
                ctx.snippet(w.site),
                FORM1_MESSAGE
            );
            let fix = match kind {
                WriteKind::InplaceFunctional | WriteKind::InplaceOption => {
                    fix::inplace_false(ctx, w.range, Applicability::Safe)
                }
                // A leaf the caller passed in (`inputs_embeds *= scale` in a `forward` given
                // the caller's leaf, a saliency input): updating it under `no_grad` would change
                // the caller's tensor; a new tensor under the same name leaves it alone.
                WriteKind::AugAssign | WriteKind::Method(_)
                    if w.call_site.is_some() && w.through_bound.is_none() =>
                {
                    fix::rebind_read_again(ctx, w, true)
                        .or_else(|| super::no_grad_unless_computed(ctx, w))
                }
                // (A value computed by the call, bound to another name: out of place.)
                _ => fix::result_out_of_place(ctx, w)
                    .or_else(|| super::no_grad_unless_computed(ctx, w)),
            };
            (message, fix)
        }
    };
    write_related(ctx, w, &mut related);
    Some(Finding {
        rule: Rule::LeafInplace,
        severity: Severity::Error,
        range: ctx.range(w.range)?,
        message,
        related,
        fix,
        alternatives: Vec::new(),
    })
}
