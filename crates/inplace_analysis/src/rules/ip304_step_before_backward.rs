//! # IP304 step-before-backward
//!
//! **What it finds.** `optimizer.step()` called after a forward pass and before a later
//! `backward()` through that forward pass, when the forward saved one of the parameters the
//! optimizer holds (a layer whose input needs grad saves its weight). Typical in GANs
//! (the discriminator steps, then the generator loss computed before the step backpropagates
//! through the discriminator) and actor-critic code (the critic steps before the actor loss
//! that used it backpropagates).
//!
//! **Why it breaks.** `step()` updates every parameter that has a gradient in place (under
//! `no_grad`, which still bumps versions); the saved weights no longer match (form ③). A
//! parameter whose `.grad` is `None` is skipped by every optimizer: after `zero_grad()` (which
//! sets grads to `None`), a head that no backward reached since is not written, and its
//! saves stay valid (a value head that only the critic's loss reaches is safe to step past).
//!
//! **Runtime message** (raised at the later `backward()`, torch 2.15): `one of the variables
//! needed for gradient computation has been modified by an inplace operation:
//! [torch.FloatTensor [4, 1]], which is output 0 of AsStridedBackward0, is at version 2;
//! expected version 1 instead. ...`
//!
//! **Example**
//! ```python
//! d_loss = crit(D(x), real) + crit(D(G(z)), fake)
//! g_loss = crit(D(G(z)), real)
//! d_loss.backward(retain_graph=True)
//! opt_d.step()            # IP304
//! g_loss.backward()       # raises here
//! ```
//!
//! **Fix.** Call every `backward()` that goes through the parameters before `step()`: the
//! fix moves the `step()` to just after the `backward()` that would raise, when both are in
//! the same block. Or recompute the forward pass after the step; for a GAN, detach the
//! generator's output in the discriminator's loss (`D(fake.detach())`). When a training loop
//! carries a recurrent state from one step into the next (`out, hidden = model(x, hidden)`),
//! the fix detaches it right after that call (`hidden = hidden.detach()`). When the loop's
//! `backward()` goes through a tensor computed once before the loop (PPO's `old_log_probs`
//! kept with its graph), the fix detaches that tensor just before the loop. Otherwise, when
//! the forward that made the stale save runs before the step in the same block, it is
//! repeated after the step (a GAN's `d_fake = netD(fake)` before the generator's loss). When
//! only whole updates run between the step and the `backward()` (each `zero_grad()`,
//! `backward()`, clipping, `step()`), the later loss's update moves before them (rlkit's SAC:
//! "optimize the actor before the critic"); the gradients its `backward()` leaves in their
//! parameters are zeroed by their own `zero_grad()`; the same where each update is a call of
//! one helper that zeroes, differentiates and steps (`update_params(opt, loss)`).
//!
//! **Fix safety.** *Unsafe*: the moved step also applies the gradients that the later
//! `backward()` accumulates into its parameters (for a GAN: the generator loss's gradients
//! reach the discriminator), so what is trained changes. A detached tensor no longer passes
//! gradients to what computed it: right for PPO's old log-probabilities (constants of the
//! update); where that computation should train, move it into the loop instead. An update
//! run first no longer sees the steps it now precedes (the actor is trained against the
//! critic before the critic's step).

use super::{clobber, form3_related, form3_severity, trigger_clause, RuleImpl};
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::Finding;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::StepBeforeBackward,
    claims,
    render,
    form3_rank: Some(0),
};

/// An optimizer step clobbering a save.
fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    let (w, _, _) = clobber(ev, u)?;
    (w.kind == WriteKind::Step).then_some(w.range)
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let (w, save, t) = clobber(ev, ctx.unit)?;
    Some(Finding {
        rule: Rule::StepBeforeBackward,
        severity: form3_severity(save),
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` updates parameters in place that `{}` ({}) saved for a backward that has not run yet; {}",
            ctx.snippet(w.site),
            ctx.op(save.op),
            ctx.line(save.range),
            trigger_clause(ctx, &t, save)
        ),
        related: form3_related(ctx, w, save, &t),
        // (Moved past another optimizer's `zero_grad()`, a step would apply the later loss's
        // gradients instead of its own: computing the forward again is preferred there. Where
        // another optimizer steps later (a GAN's `g_loss.backward(); opt_g.step()`), the later
        // loss is its: moved after that backward, the step would add its gradients: no move.)
        fix: w.stmt.filter(|_| t.backward).and_then(|s| {
            let moves = !loss_of_another_optimizer(ctx, w);
            let move_after = |z| {
                moves
                    .then(|| crate::fix::move_after(ctx, s, t.range, z))
                    .flatten()
            };
            move_after(crate::fix::ZeroGrad::Blocks)
                .or_else(|| crate::fix::detach_carried_state(ctx, s))
                .or_else(|| {
                    let callers = save.callers.iter().flat_map(|c| c.iter().rev().copied());
                    crate::fix::detach_attribute_state(ctx, save.inner.into_iter().chain(callers))
                })
                .or_else(|| {
                    let origin = origin_beside(ctx, save, s);
                    crate::fix::detach_loop_input(ctx, s, origin, t.range)
                })
                .or_else(|| {
                    let others = other_origins(ctx, ev, s);
                    let origin = origin_beside(ctx, save, s);
                    crate::fix::recompute_after_step(ctx, s, origin, &others, t.range)
                })
                .or_else(|| crate::fix::update_first(ctx, s, t.range))
                .or_else(|| crate::fix::update_call_first(ctx, w, &t))
                // (Past another optimizer's `zero_grad()` only where the step has no backward
                // of its own before it: else the later loss is another's, whose gradients the
                // moved step would apply too (tianshou's SAC: a critic stepped on the actor's).)
                .or_else(|| {
                    (!crate::fix::backward_before(ctx, s))
                        .then(|| move_after(crate::fix::ZeroGrad::Crossed))
                        .flatten()
                })
        }),
        alternatives: Vec::new(),
    })
}

/// The statements that made the other saves the same step clobbers (`out_fake = D(x_fake)`
/// beside `out_true = D(x)`).
fn other_origins(
    ctx: &RenderCtx<'_>,
    ev: &Event,
    step: crate::ir::StmtRef,
) -> Vec<crate::ir::StmtRef> {
    let Event::Clobber { write, save, .. } = ev else {
        return Vec::new();
    };
    (ctx.unit.events.iter())
        .filter_map(|e| match e {
            Event::Clobber {
                write: w, save: s, ..
            } if w == write && s != save => origin_beside(ctx, ctx.unit.saves.get(s)?, step),
            _ => None,
        })
        .collect()
}

/// The statement that made `save`, in the scope of `step` where there is one: the unit's own
/// (`out = D(x)` at module level), or, when the step runs in a called function (`t.fit_batch()`
/// from a script), its own statement that made it, itself or through a call (`fake =
/// netG(noise)`, where `netG`'s forward made the save).
fn origin_beside(
    ctx: &RenderCtx<'_>,
    save: &crate::domain::Save,
    step: crate::ir::StmtRef,
) -> Option<crate::ir::StmtRef> {
    let callers = save.callers.iter().flat_map(|c| c.iter().copied());
    (save.stmt.into_iter().chain(callers).chain(save.inner))
        .find(|o| ctx.same_scope(o.item, step.item))
        .or(save.stmt)
}

/// Whether another optimizer steps after step `w` (by what its call spells: `opt_g.step()`,
/// `scaler.step(opt_g)`), in this scope or a called one: the later backward `w`'s step would be
/// moved past then is that optimizer's loss, and it also fills the gradients of the parameters
/// `w` steps on (an op in it saved one of them), so the moved step would step on both losses.
fn loss_of_another_optimizer(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> bool {
    let key = |x: &crate::events::Write| ctx.text(x.site).split_whitespace().collect::<String>();
    let this = key(w);
    let at = (ctx.unit.writes.iter()).position(|x| std::ptr::eq(x, w));
    (ctx.unit.writes.iter())
        .skip(at.map_or(0, |i| i + 1))
        .filter(|x| x.kind == WriteKind::Step)
        .any(|x| key(x) != this)
}
