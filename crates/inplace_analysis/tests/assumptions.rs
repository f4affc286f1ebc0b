//! Findings that hold only if an argument requires grad say which one; when it is not the
//! model's data (an argument of a method other than `forward`), they are warnings.
//! (Checked under torch 2.15: the grid below raises at backward exactly when `scale` requires
//! grad; with weights in the history, the sigmoid's output is saved whatever the input.)

use inplace_analysis::{analyze_text, Finding, Severity};

const MODEL: &str = r#"
import torch
import torch.nn as nn


class Rope(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def grid(self, n, scale: torch.Tensor):
        g = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 2)
        g[:, 0:1] = g[:, 0:1] * scale
        return g

    def forward(self, x):
        y = torch.sigmoid(x)
        y += 1
        z = torch.sigmoid(self.fc(x))
        z += 1
        return y + z
"#;

fn finding_at(findings: &[Finding], needle: &str) -> Finding {
    let start = MODEL.find(needle).expect("the line");
    findings
        .iter()
        .find(|f| f.range.start == start)
        .unwrap_or_else(|| panic!("no finding at `{needle}`: {findings:#?}"))
        .clone()
}

#[test]
fn a_non_data_argument_makes_a_qualified_warning() {
    let a = analyze_text(MODEL);
    let f = finding_at(&a.findings, "g[:, 0:1] =");
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message.contains("will raise if `scale` requires grad:"),
        "{}",
        f.message
    );
}

#[test]
fn a_forward_argument_makes_a_qualified_error() {
    let a = analyze_text(MODEL);
    let f = finding_at(&a.findings, "y += 1");
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.message.contains("will raise if `x` requires grad:"),
        "{}",
        f.message
    );
}

#[test]
fn weights_in_the_history_make_it_certain() {
    let a = analyze_text(MODEL);
    let f = finding_at(&a.findings, "z += 1");
    assert_eq!(f.severity, Severity::Error);
    assert!(!f.message.contains("requires grad"), "{}", f.message);
}

/// A method that `forward` hands its argument to (`self.standardize(x)`) may get grad where
/// `forward` does: with no call of the model in the file, the qualified finding stays; where
/// every call passes a batch that requires no grad, it goes (checked under torch 2.15: the
/// script below runs; with `batch.requires_grad_()` it raises at backward).
const PASSED_ON: &str = r#"
import torch
import torch.nn as nn


class Normalized(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def standardize(self, x):
        x = x - x.mean(1, keepdim=True)
        scale = x.std(1, keepdim=True) + 1e-5
        x /= scale
        return self.proj(x)

    def forward(self, batch):
        return self.standardize(batch)
"#;

#[test]
fn an_argument_passed_on_by_forward_follows_forwards_callers() {
    let at = PASSED_ON.find("x /= scale").expect("the write");
    let write = |a: &inplace_analysis::Analysis| a.findings.iter().any(|f| f.range.start == at);
    let library = analyze_text(PASSED_ON);
    assert!(write(&library), "no caller: {:#?}", library.findings);
    let data = format!("{PASSED_ON}\nm = Normalized()\nm(torch.randn(2, 5, 3)).sum().backward()\n");
    let script = analyze_text(&data);
    assert!(!write(&script), "a data batch: {:#?}", script.findings);
    let grad = data.replace(
        "torch.randn(2, 5, 3)",
        "torch.randn(2, 5, 3, requires_grad=True)",
    );
    let trained = analyze_text(&grad);
    assert!(
        write(&trained),
        "a batch that requires grad: {:#?}",
        trained.findings
    );
}
