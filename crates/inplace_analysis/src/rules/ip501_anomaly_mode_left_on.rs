//! # IP501 anomaly-mode-left-on
//!
//! **What it finds.** `torch.autograd.set_detect_anomaly(True)` or
//! `torch.autograd.detect_anomaly()` (as a call or a `with` block), or the low-level
//! `torch.set_anomaly_enabled(True)`, in code. A mode read from a
//! variable, an attribute or a setting (`set_detect_anomaly(self.debug)`) is the guard this rule
//! recommends and is not reported; `detect_anomaly(False)` is (its argument is `check_nan`, the
//! mode is on either way).
//!
//! **Why it matters.** Anomaly mode records a Python stack trace for every op in forward and
//! checks every backward result for NaN: it is the tool for finding the op behind a form ③
//! error, and it slows every step a lot when left on.
//!
//! **Runtime message.** None; while on, backward errors carry an extra warning with the
//! forward traceback of the failing op.
//!
//! **Example**
//! ```python
//! torch.autograd.set_detect_anomaly(True)   # IP501
//! ```
//!
//! **Fix.** Remove it once the culprit is found, or guard it behind a debug flag.
//!
//! **Fix safety.** No automatic fix.

use super::RuleImpl;
use crate::events::Event;
use crate::exec::UnitOutput;
use crate::finding::{Finding, Severity};
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::AnomalyModeLeftOn,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, _: &UnitOutput) -> Option<Span> {
    match ev {
        Event::Anomaly { call } => Some(*call),
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let Event::Anomaly { call } = ev else {
        return None;
    };
    Some(Finding {
        rule: Rule::AnomalyModeLeftOn,
        severity: Severity::Information,
        range: ctx.range(*call)?,
        message: format!(
            "`{}` turns on anomaly detection, which slows every op; keep it for debugging only",
            ctx.snippet(*call)
        ),
        related: Vec::new(),
        fix: None,
    })
}
