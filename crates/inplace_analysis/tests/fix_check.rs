//! `check --fix` applies a fix only when the statement it fixes no longer raises.

use inplace_analysis::{Applicability, Severity};

/// `w.div_(2 * w.abs().max()).add_(0.5)` after `w = torch.tanh(...)` clobbers both tanh's
/// output (IP301) and abs's input (IP302): a copy made before the statement is what abs saves
/// and what the write changes, so it fixes nothing and is not applied (the chain has no
/// out-of-place rewrite of one statement).
#[test]
fn a_copy_the_same_statement_still_clobbers_is_not_applied() {
    let text = "import torch\n\n\
        def scaled(v):\n    \
            w = torch.tanh(v)\n    \
            w.div_(2 * w.abs().max()).add_(0.5)\n    \
            return w\n\n\
        v = torch.randn(4, requires_grad=True)\n\
        scaled(v).sum().backward()\n";
    let before = inplace_analysis::analyze_text(text);
    assert!(
        (before.findings.iter()).any(|f| f.severity == Severity::Error && f.fix.is_some()),
        "the first finding offers a copy: {:?}",
        before.findings
    );
    let fixed = inplace_analysis::fix_all_filtered(text, Applicability::Unsafe, &|_| true);
    assert!(!fixed.text.contains("w = w.clone()"), "{}", fixed.text);
    assert!(
        (fixed.remaining.iter()).any(|f| f.severity == Severity::Error),
        "{:?}",
        fixed.remaining
    );
}
