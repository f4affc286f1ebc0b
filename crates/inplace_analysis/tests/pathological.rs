//! Hostile input finishes with a sensible result: deep nesting, NUL bytes, syntax errors,
//! long lines, mixed line endings. Run on a thread with the stack the server and `check` give
//! analysis (16 MiB), in debug builds.

use inplace_analysis::{analyze_source, apply_fixes, Applicability};

fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn five_thousand_nested_brackets() {
    let text = format!(
        "import torch\nx = {}torch.randn(3){}\nx += 1\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let findings = on_big_stack(move || analyze_source(&text));
    assert!(findings.is_empty());
}

#[test]
fn two_thousand_nested_blocks() {
    let mut text = "import torch\n".to_string();
    for i in 0..2000 {
        text.push_str(&" ".repeat(i));
        text.push_str("if True:\n");
    }
    text.push_str(&" ".repeat(2000));
    text.push_str("x = torch.randn(3, requires_grad=True)\n");
    let findings = on_big_stack(move || analyze_source(&text));
    assert!(findings.is_empty());
}

#[test]
fn nul_bytes_and_syntax_errors_keep_the_rest() {
    let text = "import torch\n\0\0 garbage $$ = = 1\nx = torch.tensor([1.0], requires_grad=True)\ny = torch.exp(x)\ny += 1\ny.sum().backward()\n";
    let codes: Vec<_> = analyze_source(text).iter().map(|f| f.rule.code()).collect();
    assert_eq!(codes, ["IP301"]);
    let broken = "import torch\n".to_string() + &"def (((: ] } + = ,\n".repeat(2000);
    assert!(on_big_stack(move || analyze_source(&broken)).is_empty());
}

#[test]
fn a_long_line() {
    let text = format!("import torch\nx = [{}]\ny = torch.exp(torch.ones(1, requires_grad=True))\ny += 1\ny.sum().backward()\n", "1, ".repeat(30_000));
    let codes: Vec<_> = on_big_stack(move || analyze_source(&text))
        .iter()
        .map(|f| f.rule.code())
        .collect();
    assert_eq!(codes, ["IP301"]);
}

#[test]
fn crlf_and_tabs_are_kept_by_fixes() {
    let text = "import torch\r\n\r\ndef f(x):\r\n\tw = torch.ones(2, requires_grad=True)\r\n\tw -= x\r\n\treturn w\r\n";
    let findings = analyze_source(text);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let (fixed, used) = apply_fixes(text, &findings, Applicability::Unsafe);
    assert_eq!(used.len(), 1);
    assert!(
        fixed.contains("\twith torch.no_grad():\r\n\t\tw -= x\r\n"),
        "{fixed:?}"
    );
}
