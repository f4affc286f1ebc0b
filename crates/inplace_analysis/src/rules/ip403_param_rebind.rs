//! # IP403 param-rebind
//!
//! **What it finds.** A name or attribute that holds a parameter is rebound to a *new* object:
//! `w = w - lr * w.grad` (out-of-place update of a leaf that requires grad, reported where the
//! code then treats the update as the leaf: reads its `.grad`, asks whether it is a leaf, or
//! gives it to an optimizer; a last step of an attack, or one made a new leaf with
//! `.detach().requires_grad_()` first, is fine), `v = v - 0.1 * v.grad`
//! after `opt = torch.optim.SGD([v])`, `self.w = nn.Parameter(...)`, `setattr(model, "head",
//! nn.Linear(...))`, `model = Net()` or `model = copy.deepcopy(best_model)` after the optimizer
//! was built from the old parameters, or `model.head = weight_norm(model.head)` then (the
//! weight becomes a function of two new parameters; `spectral_norm` keeps the old one).
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
//! optimizer do it (`opt.step()`). A replaced model, submodule or parameter: build the
//! optimizer again right after the replacement (the fix repeats the statement that built it,
//! when that is earlier in the same block or in a block the replacement is nested in, in the
//! same scope; after the call that replaces, when a helper does; once after a loop that only
//! replaces, `for m in model.modules(): prune_(m)`), or build it after the model is final (or restore weights with
//! `model.load_state_dict(...)`, which keeps the parameter objects).
//!
//! **Fix safety.** *Unsafe*: it changes which object the name refers to afterwards; a rebuilt
//! optimizer starts with fresh state (momentum, Adam's moments).

use super::RuleImpl;
use crate::events::{Event, Replacement};
use crate::exec::UnitOutput;
use crate::finding::{Finding, Related, Severity};
use crate::fix;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::ParamRebind,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, _: &UnitOutput) -> Option<Span> {
    match ev {
        Event::Rebind { span, .. } => Some(*span),
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let Event::Rebind {
        stmt,
        span,
        target,
        name,
        optimizer,
        how,
        call_path,
        ..
    } = ev
    else {
        return None;
    };
    let name = ctx.name(*name);
    let mut related = Vec::new();
    if let Some(range) = optimizer.and_then(|o| ctx.range(o)) {
        related.push(Related {
            source: None,
            range,
            message: format!("this optimizer holds the old `{name}` and keeps updating it"),
        });
    }
    let message = match optimizer {
        Some(o) if *how == Replacement::Loads => format!(
            "`{}` puts new parameter objects into `{name}` (`assign=True`); the optimizer built on {} holds the old ones and keeps updating them: training of `{name}` silently stops",
            ctx.snippet(*span),
            ctx.line(*o)
        ),
        Some(o) if *how == Replacement::Wraps => format!(
            "`{}` wraps `{name}` in a module with new parameters of its own, which the optimizer built on {} does not hold: they never train",
            ctx.snippet(*span),
            ctx.line(*o)
        ),
        Some(o) => format!(
            "`{}` replaces `{name}`, which the optimizer built on {} holds; it keeps updating the old object and training of `{name}` silently stops",
            ctx.snippet(*span),
            ctx.line(*o)
        ),
        None => format!(
            "`{}` replaces the leaf `{name}` by a computed tensor: it is no leaf, its `.grad` stays `None`, and the next update fails or does nothing",
            ctx.snippet(*span)
        ),
    };
    Some(Finding {
        rule: Rule::ParamRebind,
        severity: Severity::Warning,
        range: ctx.range(*span)?,
        message,
        related,
        fix: fix::augmented_update(ctx, *stmt, *target)
            .or_else(|| fix::rebuild_optimizer(ctx, *stmt, (*optimizer)?, call_path)),
        alternatives: Vec::new(),
    })
}
