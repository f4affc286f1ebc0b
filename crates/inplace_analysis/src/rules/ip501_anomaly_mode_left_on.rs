//! # IP501 anomaly-mode-left-on
//!
//! **What it finds.** `torch.autograd.set_detect_anomaly(True)` or
//! `torch.autograd.detect_anomaly()` (as a call or a `with` block) in code.
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

use super::Ctx;
use crate::finding::{Finding, Severity, TextRange};
use crate::Rule;

pub(crate) fn finding(ctx: &Ctx<'_>, call: TextRange) -> Finding {
    Finding {
        rule: Rule::AnomalyModeLeftOn,
        severity: Severity::Information,
        range: call,
        message: format!(
            "`{}` turns on anomaly detection, which slows every op; keep it for debugging only",
            ctx.snippet(call)
        ),
        related: Vec::new(),
        fix: None,
    }
}
