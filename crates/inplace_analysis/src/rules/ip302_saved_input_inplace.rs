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
//! `ctx.save_for_backward(x)` makes its `apply` an op that saved `x`. An in-place product
//! whose operand is the tensor it writes (`x *= x`, `x.mul_(a)` with `a = x`, a memory-saving
//! hard swish `x.mul_(hard_sigmoid(x, inplace=True))`, whose hard sigmoid returns `x` written)
//! saves that operand itself and then writes it.
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
//! that op reads a copy (`self.queue.clone()`, unsafe). An operand that wrote the tensor
//! itself works on a copy (`hard_sigmoid(x.clone(), inplace=True)`, unsafe); one that reads it
//! as it is (`x *= x`) is rewritten out of place.
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
    // The write's own op saved its operand, which is the tensor written (`x.mul_(x)`).
    if save.range == w.site {
        return Some(Finding {
            rule: Rule::SavedInputInplace,
            severity: form3_severity(save),
            range: ctx.range(w.range)?,
            message: format!(
                "`{}` saves its operand for its backward, and that operand is the tensor it \
                 writes in place (the same memory); {}",
                ctx.snippet(w.site),
                trigger_clause(ctx, &t, save)
            ),
            related: form3_related(ctx, w, save, &t),
            fix: crate::fix::clone_target_in_operand(ctx, w).or_else(|| {
                own_operand_read_plainly(ctx, w)
                    .then(|| out_of_place(ctx, w, applicability))
                    .flatten()
            }),
            alternatives: Vec::new(),
        });
    }
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
        fix: save_id(ev)
            .and_then(|sid| crate::fix::clone_reads_in_value(ctx, w, (sid, save)))
            .or_else(|| crate::fix::clone_renormalised_weight(ctx, w, save.range))
            .or_else(
                || match crate::fix::clone_between_save_and_write(ctx, w, save.range) {
                    Some(between) => between,
                    None => out_of_place(ctx, w, applicability),
                },
            )
            .or_else(|| crate::fix::parameter_write_after(ctx, w, &t))
            .or_else(|| crate::fix::parameter_write_before(ctx, w, save.range))
            // `self.queue[:, p:p + b] = keys.T` after `einsum(..., [q, self.queue])`.
            .or_else(|| crate::fix::clone_saved_read(ctx, w, save.range))
            .or_else(|| crate::fix::loop_list_out_of_place(ctx, w)),
        alternatives: Vec::new(),
    })
}

/// Whether the operand of a write whose own op saved it reads the written tensor as it is
/// (`x.mul_(x)`, `x *= a`): then the out-of-place rewrite computes what the code means. (An
/// operand that writes the tensor itself first, `x.mul_(f_(x))`, would be computed from the
/// written values by the rewrite too: no rewrite.)
fn own_operand_read_plainly(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> bool {
    let Some(s) = w.stmt else {
        return false;
    };
    let Some(body) = ctx.body(s.item) else {
        return false;
    };
    use crate::ir::{Expr, Stmt};
    let operand = match (w.call, *body.stmt(s.stmt)) {
        (Some(call), _) => match *body.expr(call) {
            Expr::Call { args, .. } => body.exprs_of(body.args[args as usize].positional).last(),
            _ => None,
        },
        (None, Stmt::AugAssign { value, .. }) => Some(value),
        _ => None,
    };
    operand.is_some_and(|e| {
        matches!(
            body.expr(e),
            Expr::Name { .. } | Expr::Attr { .. } | Expr::Subscript { .. }
        )
    })
}

/// The save a form ③ event is about.
fn save_id(ev: &Event) -> Option<crate::domain::SaveId> {
    match ev {
        Event::Clobber { save, .. } => Some(*save),
        _ => None,
    }
}
