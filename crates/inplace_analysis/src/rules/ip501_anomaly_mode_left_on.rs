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
//! **Fix.** Turn it off once the culprit is found (`set_detect_anomaly(False)`,
//! `set_anomaly_enabled(False)`; a `with detect_anomaly():` block becomes
//! `with set_detect_anomaly(False):`), or guard it behind a debug flag.
//!
//! **Fix safety.** *Unsafe*: no number changes, but the debugging aid someone turned on on
//! purpose goes away.

use super::RuleImpl;
use crate::events::Event;
use crate::exec::UnitOutput;
use crate::finding::{Applicability, Edit, Finding, Fix, Severity, TextRange};
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
        fix: turn_off(ctx, *call),
        alternatives: Vec::new(),
    })
}

/// `set_detect_anomaly(True)` -> `set_detect_anomaly(False)` (and `set_anomaly_enabled`);
/// `detect_anomaly(...)` -> `set_detect_anomaly(False)`.
fn turn_off(ctx: &RenderCtx<'_>, call: Span) -> Option<Fix> {
    let r = ctx.range(call)?;
    let text = ctx.slice(r);
    let open = text.find('(')?;
    let func = &text[..open];
    let (range, content) =
        if func.ends_with("set_detect_anomaly") || func.ends_with("set_anomaly_enabled") {
            let args = &text[open + 1..];
            let first = args.find([',', ')'])?;
            let lead = args.len() - args.trim_start().len();
            if args[..first].trim() != "True" {
                return None;
            }
            let at = r.start + open + 1 + lead;
            (TextRange::new(at, at + "True".len()), "False".to_string())
        } else if func.ends_with("detect_anomaly") {
            let at = r.start + open - "detect_anomaly".len();
            (
                TextRange::new(at, r.end),
                "set_detect_anomaly(False)".to_string(),
            )
        } else {
            return None;
        };
    Some(Fix {
        title: "Turn anomaly detection off".into(),
        applicability: Applicability::Unsafe,
        edits: vec![Edit { range, content }],
    })
}
