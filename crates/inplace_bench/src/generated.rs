//! Generated inputs: a 20 MB file of small functions with one hazard each (all must be found,
//! in at most twice its parse time), and linearity (10x the input, at most 13x the time).

use crate::report::Report;
use crate::throughput::check_run;
use anyhow::Result;
use std::path::Path;
use std::time::Instant;

fn generated_module(classes: usize) -> String {
    let mut s = String::from("import torch\nimport torch.nn as nn\n\n");
    for i in 0..classes {
        s.push_str(&format!(
            "class Block{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n        self.act = nn.ReLU(inplace=True)\n\n    def forward(self, x):\n        h = self.fc(x)\n        y = torch.sigmoid(h)\n        y = self.act(y)\n        return y * 2\n\n\n"
        ));
    }
    s
}

fn generated_function(statements: usize) -> String {
    let mut s =
        String::from("import torch\n\ndef big(x):\n    w = torch.ones(8, requires_grad=True)\n");
    for i in 0..statements {
        s.push_str(&format!("    h{i} = torch.tanh(x * w + {i})\n"));
    }
    s.push_str("    return w\n");
    s
}

/// A function of training code with one IP301 (a sigmoid output written in place).
fn small_function(i: usize) -> String {
    format!(
        "def step_{i}(batch, target):\n    w = torch.randn(3, requires_grad=True)\n    h = batch.float() * w\n    y = torch.sigmoid(h)\n    y += 1\n    loss = (y - target).pow(2).mean()\n    loss.backward()\n    return loss.item()\n\n\n"
    )
}

/// Seconds to analyse `text` (best of `runs`).
fn analyse_time(text: &str, runs: usize) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(inplace_analysis::analyze_text(text));
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

pub fn linearity(report: &mut Report) {
    let small = generated_module(770); // ~10,000 lines
    let large = generated_module(7_700); // ~100,000 lines
    let (ts, tl) = (analyse_time(&small, 5), analyse_time(&large, 2));
    let r = tl / ts;
    report.target(
        &format!(
            "linearity: {}-line file vs {}-line file",
            large.lines().count(),
            small.lines().count()
        ),
        format!("{tl:.3} s vs {ts:.3} s, ratio {r:.1} for 10x the size"),
        "ratio <= 13 (linear)",
        r <= 13.0,
    );
    let small = generated_function(500);
    let large = generated_function(5_000);
    let (ts, tl) = (analyse_time(&small, 5), analyse_time(&large, 3));
    let r = tl / ts;
    report.target(
        "linearity: 5,000-statement function vs 500",
        format!("{tl:.3} s vs {ts:.3} s, ratio {r:.1} for 10x the size"),
        "ratio <= 13 (linear)",
        r <= 13.0,
    );
}

/// The 20 MB file through `check` (a process), against its parse-only time.
pub fn twenty_megabytes(binary: &Path, dir: &Path, report: &mut Report) -> Result<()> {
    let mut text = String::from("import torch\n\n\n");
    let mut n = 0;
    while text.len() < 20 << 20 {
        text.push_str(&small_function(n));
        n += 1;
    }
    let path = dir.join("generated-20mb.py");
    std::fs::write(&path, &text)?;
    let mut parser = inplace_analysis::python_parser();
    let mut parse = f64::INFINITY;
    let mut check = f64::INFINITY;
    for _ in 0..2 {
        let t = Instant::now();
        std::hint::black_box(parser.parse(&text, None));
        parse = parse.min(t.elapsed().as_secs_f64());
        check = check.min(check_run(binary, &[&path], Some(1))?.wall.as_secs_f64());
    }
    let found = inplace_analysis::analyze_text(&text)
        .findings
        .iter()
        .filter(|f| f.rule.code() == "IP301")
        .count();
    report.target(
        &format!(
            "generated {:.0} MB file ({n} functions, one hazard each)",
            text.len() as f64 / 1e6
        ),
        format!(
            "check {check:.2} s = {:.2}x its parse-only {parse:.2} s; {found} of {n} hazards found",
            check / parse
        ),
        "<= 2x parse-only, all found",
        check <= 2.0 * parse && found == n,
    );
    Ok(())
}
