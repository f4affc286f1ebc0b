//! Every corpus file alone: its analysis time and the most memory it held (parse included),
//! measured in process; the slowest ten are printed.

use crate::corpus::Corpus;
use crate::report::Report;
use std::time::{Duration, Instant};

pub fn each_file(c: &Corpus, root: &std::path::Path, report: &mut Report) {
    let mut rows: Vec<(Duration, usize, String)> = Vec::new();
    for (path, text) in &c.files {
        let t = Instant::now();
        let (_, peak) = crate::alloc::peak_of(|| inplace_analysis::analyze_text(text));
        let name = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        rows.push((t.elapsed(), peak, name));
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let slowest = rows.first().map_or(Duration::ZERO, |r| r.0);
    let most = rows.iter().map(|r| r.1).max().unwrap_or(0);
    report.target(
        "every corpus file alone: slowest, most memory",
        format!(
            "{:.3} s, {:.1} MB",
            slowest.as_secs_f64(),
            most as f64 / 1e6
        ),
        "each < 1 s and < 200 MB",
        slowest < Duration::from_secs(1) && most < 200_000_000,
    );
    println!("the slowest ten files (time, peak memory of the analysis):");
    for (d, peak, name) in rows.iter().take(10) {
        println!(
            "  {:.3} s  {:6.1} MB  {name}",
            d.as_secs_f64(),
            *peak as f64 / 1e6
        );
    }
}
