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

/// An in-place ReLU whose input two names read after it (`identity = x`, then `self.lin(x)`):
/// a copy of the alias, the first fix, leaves `x` read changed, so fix-all rejects it and takes
/// the finding's next fix, `inplace=False`, which `check` then shows.
#[test]
fn a_rejected_fix_gives_way_to_the_next_alternative() {
    let text = "import torch\nimport torch.nn as nn\n\n\n\
        class Block(nn.Module):\n    \
            def __init__(self):\n        \
                super().__init__()\n        \
                self.relu = nn.ReLU(inplace=True)\n        \
                self.lin = nn.Linear(3, 3)\n\n    \
            def forward(self, x):\n        \
                identity = x\n        \
                out = self.relu(x)\n        \
                out = self.lin(out) + identity\n        \
                return out + self.lin(x)\n\n\n\
        Block()(torch.randn(2, 3)).sum().backward()\n";
    let before = inplace_analysis::analyze_text(text);
    let [f] = before.findings.as_slice() else {
        panic!("{:?}", before.findings)
    };
    assert!(
        f.fix.as_ref().is_some_and(|x| x.title.contains("clone")),
        "{f:?}"
    );
    assert!(
        (f.alternatives.iter()).any(|x| x.title.contains("inplace=False")),
        "{f:?}"
    );
    let fixed = inplace_analysis::fix_all_filtered(text, Applicability::Unsafe, &|_| true);
    assert!(
        fixed.text.contains("nn.ReLU(inplace=False)"),
        "{}",
        fixed.text
    );
    assert!(!fixed.text.contains("x.clone()"), "{}", fixed.text);
    assert!(fixed.remaining.is_empty(), "{:?}", fixed.remaining);
    let mut shown = before.findings.clone();
    inplace_analysis::drop_rejected_fixes(&mut shown, &fixed);
    assert!(shown[0]
        .fix
        .as_ref()
        .is_some_and(|x| x.title.contains("inplace=False")));
}
