//! # IP302 saved-input-inplace
//!
//! **What it finds.** An in-place write into a tensor that an earlier op saved as an *input*
//! for its backward, when a later `backward()` (or a graph returned from the function) goes
//! through that op. Ops that save inputs (measured on torch 2.15): `abs`, `log`, `sin`, `cos`,
//! `gelu`, `silu`, `elu`, `leaky_relu`, `t ** 2`, `clamp`, `prod`, `max`, and every product of
//! two tensors that need grad (`a * b`, `a / b`, `a @ b`, `matmul`, `linear`, `conv*`); a layer
//! (`nn.Linear`, `nn.Conv2d`, `nn.LayerNorm`) saves its input and its weight; most losses
//! (`nn.BCELoss`, `nn.MSELoss`, `nn.CrossEntropyLoss`, `nn.NLLLoss`, ...; not `nn.L1Loss`) save
//! their *target* too, so a label tensor refilled between two losses summed before one
//! `backward()` (DCGAN's `label.fill_(fake_label)`) is this hazard.
//! `t * 2`, `t + 1`, `sum`, `mean`, `cat` save nothing. Writes are every in-place op, and two
//! that do not look like one: a call of an `nn.Embedding(..., max_norm=...)`, which
//! renormalises in its weight the rows it looks up, and a custom `torch.autograd.Function`'s
//! `ctx.save_for_backward(x)` makes its `apply` an op that saved `x`.
//!
//! **Why it breaks.** The saved input's version moved between forward and backward (form ③).
//!
//! **Runtime message** (raised at `backward()`, torch 2.15): the same as IP301, naming the op
//! that owned the written tensor, e.g. `one of the variables needed for gradient computation has
//! been modified by an inplace operation: [torch.FloatTensor [2, 3]], which is output 0 of
//! MulBackward0, is at version 1; expected version 0 instead. ...`
//!
//! **Example**
//! ```python
//! h = x * 1.0
//! y = h * w               # saves h (w needs grad)
//! h += 1                  # IP302
//! y.sum().backward()      # raises here
//! ```
//!
//! **Fix.** Write out of place (`h = h + 1`), or, as IP301 does where no one-line rewrite
//! exists, write into a copy made on the line before (`h = h.clone()`). For an embedding's
//! `max_norm`, the op that saved its weight reads a copy (`emb.weight.clone() @ W.t()`, the fix
//! of the `nn.Embedding` documentation; safe). A buffer written in a place of its own after
//! an op read it (MoCo's queue, enqueued under `no_grad` after `einsum(..., [q, self.queue])`):
//! that op reads a copy (`self.queue.clone()`, unsafe).
//!
//! **Fix safety.** As IP301: *safe* when nothing else shares the written tensor; a copy is
//! *unsafe*.

use super::{clobber, form3_related, form3_severity, out_of_place, trigger_clause, RuleImpl};
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::Finding;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::SavedInputInplace,
    claims,
    render,
    form3_rank: Some(2),
};

/// A write that is no step and no in-place activation, clobbering a saved input.
fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    let (w, save, _) = clobber(ev, u)?;
    let plain = !matches!(
        w.kind,
        WriteKind::Step | WriteKind::InplaceModule { .. } | WriteKind::InplaceFunctional
    );
    (plain && !save.output).then_some(w.range)
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let (w, save, t) = clobber(ev, ctx.unit)?;
    let applicability = super::rewrite_applicability(w);
    Some(Finding {
        rule: Rule::SavedInputInplace,
        severity: form3_severity(save),
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` {} a tensor that `{}` ({}) saved as an input for its backward; {}",
            ctx.snippet(w.site),
            match w.kind {
                WriteKind::Renorm => {
                    "renormalises in place (`max_norm`) the embedding rows it looks up, in"
                }
                WriteKind::LoadState => "copies new values in place (under `no_grad`) into",
                _ => "writes in place into",
            },
            ctx.op(save.op),
            ctx.line(save.range),
            trigger_clause(ctx, &t, save)
        ),
        related: form3_related(ctx, w, save, &t),
        // `b[:, 1] = f(b[:, 0])`: the op that saved is in the value the write stores.
        fix: crate::fix::clone_reads_in_value(ctx, w, save.range)
            .or_else(|| crate::fix::clone_renormalised_weight(ctx, w, save.range))
            .or_else(|| out_of_place(ctx, w, applicability))
            .or_else(|| crate::fix::parameter_write_after(ctx, w, &t))
            .or_else(|| crate::fix::parameter_write_before(ctx, w, save.range))
            // `self.queue[:, p:p + b] = keys.T` after `einsum(..., [q, self.queue])`.
            .or_else(|| crate::fix::clone_saved_read(ctx, w, save.range))
            .or_else(|| crate::fix::loop_list_out_of_place(ctx, w)),
    })
}
