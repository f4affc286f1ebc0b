//! One file per rule. Each file's `//!` doc comment is the rule's documentation; it holds the
//! rule's predicate over events ([`RuleImpl::claims`]: does this event make a finding of this
//! rule, and at which range), and its rendering (message, related locations, fix).

pub(crate) mod ip101_leaf_inplace;
pub(crate) mod ip102_out_arg_requires_grad;
pub(crate) mod ip201_leaf_view_inplace;
pub(crate) mod ip202_refused_view_inplace;
pub(crate) mod ip301_saved_output_inplace;
pub(crate) mod ip302_saved_input_inplace;
pub(crate) mod ip303_inplace_activation_after_saving_op;
pub(crate) mod ip304_step_before_backward;
pub(crate) mod ip401_data_bypass;
pub(crate) mod ip402_clobbered_alias;
pub(crate) mod ip403_param_rebind;
pub(crate) mod ip410_data_access;
pub(crate) mod ip501_anomaly_mode_left_on;

use crate::domain::Save;
use crate::events::{Event, Trigger, Write, WriteId};
use crate::exec::UnitOutput;
use crate::finding::{Finding, Related, Severity};
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

/// The verbatim start of the form ③ runtime error (torch 2.15).
pub const FORM3_MESSAGE: &str =
    "one of the variables needed for gradient computation has been modified by an inplace operation";
/// Form ① (torch 2.15).
pub const FORM1_MESSAGE: &str =
    "a leaf Variable that requires grad is being used in an in-place operation.";
/// Form ② (torch 2.15).
pub const FORM2_MESSAGE: &str =
    "a view of a leaf Variable that requires grad is being used in an in-place operation.";

/// A rule's part in turning events into findings.
pub(crate) struct RuleImpl {
    pub rule: Rule,
    /// The range of the finding this rule makes of an event, if it makes one.
    pub claims: fn(&Event, &UnitOutput) -> Option<Span>,
    pub render: fn(&RenderCtx<'_>, &Event) -> Option<Finding>,
    /// Form ③ rules: how specific (lower wins when several claim one write).
    pub form3_rank: Option<u8>,
}

const RULES: &[RuleImpl] = &[
    ip101_leaf_inplace::RULE,
    ip102_out_arg_requires_grad::RULE,
    ip201_leaf_view_inplace::RULE,
    ip202_refused_view_inplace::RULE,
    ip304_step_before_backward::RULE,
    ip303_inplace_activation_after_saving_op::RULE,
    ip301_saved_output_inplace::RULE,
    ip302_saved_input_inplace::RULE,
    ip401_data_bypass::RULE,
    ip402_clobbered_alias::RULE,
    ip403_param_rebind::RULE,
    ip410_data_access::RULE,
    ip501_anomaly_mode_left_on::RULE,
];

fn rule_impl(rule: Rule) -> &'static RuleImpl {
    RULES
        .iter()
        .find(|r| r.rule == rule)
        .expect("every rule has an implementation")
}

/// Which rule claims an event, and where its finding is.
pub(crate) fn classify(ev: &Event, u: &UnitOutput) -> Option<(Rule, Span)> {
    RULES
        .iter()
        .find_map(|r| (r.claims)(ev, u).map(|span| (r.rule, span)))
}

pub(crate) fn render(rule: Rule, ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    (rule_impl(rule).render)(ctx, ev)
}

pub(crate) fn form3_rank(rule: Rule) -> Option<u8> {
    rule_impl(rule).form3_rank
}

/// The write and save of a form ③ event.
pub(crate) fn clobber<'u>(ev: &Event, u: &'u UnitOutput) -> Option<(&'u Write, &'u Save, Trigger)> {
    clobber_any(ev, u).filter(|(w, save, _)| save.stash.is_none() && !silent_through_data(w, save))
}

/// A save made through a `.data` alias, written other than through that alias: the alias's
/// own counter does not move, so the backward reads the new values without an error (IP401).
/// So is one made through the tensor itself and written through another tensor made to show
/// its memory (`pk.data = pq.data`, then `pk.mul_(m)`), which keeps a counter of its own.
pub(crate) fn silent_through_data(w: &Write, save: &Save) -> bool {
    save.through_data != w.data_alias
}

/// [`clobber`], of a tensor a custom Function kept on `ctx` (IP402's) or saved through `.data`
/// (IP401's) too: torch checks no version of those, the write is silent.
pub(crate) fn clobber_any<'u>(
    ev: &Event,
    u: &'u UnitOutput,
) -> Option<(&'u Write, &'u Save, Trigger)> {
    match ev {
        Event::Clobber {
            write,
            save,
            trigger,
        } => Some((u.writes.get(*write as usize)?, u.saves.get(save)?, *trigger)),
        _ => None,
    }
}

/// Related locations from `(range, message)` pairs, those with a range.
pub(crate) fn located<const N: usize>(
    pairs: [(Option<crate::finding::TextRange>, String); N],
) -> Vec<Related> {
    (pairs.into_iter())
        .filter_map(|(range, message)| {
            Some(Related {
                source: None,
                range: range?,
                message,
            })
        })
        .collect()
}

/// The write of an event that names one.
pub(crate) fn write_of(u: &UnitOutput, w: WriteId) -> Option<&Write> {
    u.writes.get(w as usize)
}

/// Related locations every write finding shares: the view and the call it came through.
pub(crate) fn write_related(ctx: &RenderCtx<'_>, w: &Write, out: &mut Vec<Related>) {
    if let Some(v) = w.view_origin {
        if v != w.site && !w.site.contains(v) {
            if let Some(range) = ctx.range(v) {
                out.push(Related {
                    source: None,
                    range,
                    message: format!(
                        "`{}` is a view: it shares the storage and version counter it writes",
                        ctx.snippet(v)
                    ),
                });
            }
        }
    }
    if let Some(c) = w.call_site {
        if !c.contains(w.range) {
            if let Some(range) = ctx.range(c) {
                out.push(Related {
                    source: None,
                    range,
                    message: format!("the write runs inside this call: `{}`", ctx.snippet(c)),
                });
            }
        }
    }
}

/// "`loss.backward()` (line 9) will raise: ..." / "the graph is returned (line 9), and ..."
pub(crate) fn trigger_clause(ctx: &RenderCtx<'_>, t: &Trigger, save: &Save) -> String {
    // A save made only when an argument requires grad raises only then: say so.
    let condition = save
        .assumes
        .map(|g| format!(" if `{}` requires grad", param_name(&ctx.snippet(g.at))))
        .unwrap_or_default();
    if t.backward {
        format!(
            "`{}` ({}) will raise{condition}: {}",
            ctx.snippet(t.range),
            ctx.line(t.range),
            FORM3_MESSAGE
        )
    } else {
        format!(
            "the graph is returned ({}), and a `backward()` through it will raise{condition}: {}",
            ctx.line(t.range),
            FORM3_MESSAGE
        )
    }
}

/// A form ③ finding is an error, or a warning when the save it needs rests on an argument
/// that is not the model's data (`scale` of a helper): no caller may ever pass one that
/// requires grad.
pub(crate) fn form3_severity(save: &Save) -> Severity {
    if save.assumes.is_some_and(|g| g.non_data) {
        Severity::Warning
    } else {
        Severity::Error
    }
}

/// The name a parameter's text binds (`x` of `x: Tensor = None`, `*args`).
fn param_name(text: &str) -> &str {
    let end = text.find([':', '=']).unwrap_or(text.len());
    text[..end].trim().trim_start_matches('*')
}

/// Related entries for a form ③ finding: the saving op, the trigger, the view and call.
pub(crate) fn form3_related(
    ctx: &RenderCtx<'_>,
    w: &Write,
    save: &Save,
    t: &Trigger,
) -> Vec<Related> {
    let what = if save.output {
        "its output"
    } else {
        "this input"
    };
    let mut related = Vec::new();
    if let Some(range) = ctx.range(save.range) {
        related.push(Related {
            source: None,
            range,
            message: format!("`{}` saved {what} for backward here", ctx.op(save.op)),
        });
    }
    if let Some(range) = ctx.range(t.range) {
        related.push(Related {
            source: None,
            range,
            message: if t.backward {
                "the runtime raises here, at `backward()`".to_string()
            } else {
                "the graph leaves the function here; a `backward()` through it raises".to_string()
            },
        });
    }
    write_related(ctx, w, &mut related);
    related
}

/// How safe rewriting a write out of place (or into a copy) is: safe when the name written
/// through was bound here by an assignment that made no alias and the tensor is no view, so
/// nothing else sees the write; unsafe when the tensor came in as a parameter (the caller, or
/// the module a hook serves, saw the write), through an alias, or is a view.
pub(crate) fn rewrite_applicability(w: &Write) -> crate::Applicability {
    let local = w.through_bound.is_some_and(|b| b.alias_of.is_none());
    if w.view_origin.is_none() && local {
        crate::Applicability::Safe
    } else {
        crate::Applicability::Unsafe
    }
}

/// A write into a leaf that is no parameter but an activation a forward hook made require
/// grad (`enable_input_require_grads`), or a view of one, of a value that requires grad
/// (`result += x @ B`, `e[mask] = proj(feats)`): the write is part of the computation, which
/// `no_grad` would cut from the value's gradient (the adapter or projection would learn
/// nothing). So is a write through a local alias of a parameter with such a value. It is
/// rewritten out of place or into a copy instead: `Some(None)` when neither
/// applies; `None` for any other write (where `no_grad` may be the fix).
pub(crate) fn computed_write_into_leaf(
    ctx: &RenderCtx<'_>,
    w: &Write,
) -> Option<Option<crate::Fix>> {
    // (A copy of such a leaf is what the computation wants; no optimizer or module holds it.
    // The name written is copied, a view included: the leaf itself stays one, and gets its
    // gradient through the copy.)
    // So is a local alias of a parameter written with a value that has a graph (`weight =
    // self.weight; weight -= weight.mean(...)` in a `forward`): a computation on the weight,
    // not an update of it (`no_grad` would standardize the parameter itself on every call).
    // (Only a name for the whole parameter, computed with after the write: written in a
    // `merge()` that uses it no more, it is an update of the parameter.)
    // So is a parameter a loop takes, written so and read after (MAML's fast weights:
    // `val.sub_(lr * grad)` with `create_graph=True` gradients, then `fast[key] = val`):
    // `no_grad` would cut the graph the meta-gradient flows through.
    let read_after = || {
        w.view_origin.is_none()
            && w.stmt.is_some_and(|s| {
                ctx.body(s.item).is_some_and(|body| {
                    crate::fix::written_name_in_function(&body, s.stmt, w)
                        .is_some_and(|(_, _, read_after)| read_after)
                })
            })
    };
    let alias = || w.through_bound.is_some_and(|b| b.alias_of.is_some()) && read_after();
    let element = || {
        w.stmt.is_some_and(|s| {
            (ctx.body(s.item)).is_some_and(|b| crate::fix::stored_after_in_loop(ctx, &b, s.stmt, w))
        }) && read_after()
    };
    if !(w.value_grad && !w.under_no_grad && (w.own_leaf || alias() || element())) {
        return None;
    }
    let copyable = Write {
        into_leaf: false,
        view_origin: None,
        ..w.clone()
    };
    Some(out_of_place(ctx, &copyable, crate::Applicability::Unsafe))
}

/// The write under `no_grad`, unless it is part of the computation (see
/// [`computed_write_into_leaf`]): then out of place, or no fix.
pub(crate) fn no_grad_unless_computed(ctx: &RenderCtx<'_>, w: &Write) -> Option<crate::Fix> {
    match computed_write_into_leaf(ctx, w) {
        Some(fix) => fix,
        None => crate::fix::write_under_no_grad(ctx, w),
    }
}

/// The fix that rewrites a write out of place, when its kind has one; else a write into a
/// copy made before it (subscript writes, `out=`, methods without an out-of-place twin, writes
/// under `no_grad`, writes through views).
pub(crate) fn out_of_place(
    ctx: &RenderCtx<'_>,
    w: &Write,
    applicability: crate::Applicability,
) -> Option<crate::Fix> {
    use crate::events::WriteKind;
    // A write in an imported module's code is fixed where this file passed it the tensor.
    if w.stmt
        .is_some_and(|s| crate::project::is_module_item(s.item))
    {
        return crate::fix::clone_argument(ctx, w, true);
    }
    // Rebinding under `no_grad` would leave a tensor without history; rebinding a loop's
    // element would leave its container unchanged.
    if ip402_clobbered_alias::loop_element(ctx, w) {
        return None;
    }
    // A helper's change of what its caller passed, its product: copied by the caller.
    if let Some(fix) = crate::fix::copy_in_caller(ctx, w) {
        return fix;
    }
    let rewrite = if w.under_no_grad {
        None
    } else {
        match w.kind {
            WriteKind::AugAssign => crate::fix::aug_assign_out_of_place(ctx, w, applicability),
            WriteKind::Method(name) | WriteKind::TorchFn(name) => {
                let method = matches!(w.kind, WriteKind::Method(_));
                crate::fix::call_out_of_place(ctx, w, name, method, applicability)
            }
            _ => None,
        }
    };
    // A forward pre-hook's arguments are replaced only by what it returns: no rewrite or copy
    // in the hook takes the write's place.
    if w.hook_args {
        return None;
    }
    match w.kind {
        WriteKind::InplaceModule { .. }
        | WriteKind::InplaceFunctional
        | WriteKind::InplaceOption => crate::fix::inplace_false(ctx, w.range, applicability),
        WriteKind::AugAssign
        | WriteKind::Method(_)
        | WriteKind::TorchFn(_)
        | WriteKind::Subscript { .. }
        | WriteKind::OutArg => {
            let fix = rewrite.or_else(|| crate::fix::clone_before(ctx, w))?;
            // A forward hook's output rebound is lost unless the hook returns it.
            match w.hook_output {
                Some((hook, name)) => crate::fix::return_from_hook(ctx, hook, name, fix),
                None => Some(fix),
            }
        }
        _ => None,
    }
}
