//! Throughput on the corpus: the tree-sitter parse-only floor, `inplace-lsp check` on one and
//! on all cores, ruff as a reference, and where the analysis spends its time.

use crate::corpus::Corpus;
use crate::report::{per_sec, Report};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// tree-sitter parse of every file, one thread, one parser (the trees dropped, as `check`
/// drops them).
pub fn parse_only(c: &Corpus) -> Duration {
    let mut parser = inplace_analysis::python_parser();
    let start = Instant::now();
    for (_, text) in &c.files {
        std::hint::black_box(parser.parse(text, None));
    }
    start.elapsed()
}

/// Runs a command to completion; its wall time, peak RSS (KiB) and exit status, from wait4.
pub fn timed(cmd: &mut Command) -> Result<(Duration, u64, i32)> {
    let start = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child, with valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if r != pid {
        bail!("wait4 failed for {cmd:?}");
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok((start.elapsed(), usage.ru_maxrss as u64, code))
}

pub fn check_run(
    binary: &Path,
    paths: &[&Path],
    threads: Option<usize>,
) -> Result<(Duration, u64)> {
    let mut cmd = Command::new(binary);
    cmd.args(["check", "--exit-zero", "--output-format", "json"])
        .args(paths);
    if let Some(n) = threads {
        cmd.env("RAYON_NUM_THREADS", n.to_string());
    }
    let (d, rss, code) = timed(&mut cmd)?;
    if code != 0 {
        bail!("check exited with {code}");
    }
    Ok((d, rss))
}

fn ruff_run(ruff: &Path, corpus: &Path, threads: Option<usize>) -> Result<Duration> {
    let mut cmd = Command::new(ruff);
    cmd.args([
        "check",
        "--no-cache",
        "--exit-zero",
        "--quiet",
        "--isolated",
    ])
    .arg(corpus);
    if let Some(n) = threads {
        cmd.env("RAYON_NUM_THREADS", n.to_string());
    }
    let (d, _, code) = timed(&mut cmd)?;
    if code != 0 {
        bail!("ruff exited with {code}");
    }
    Ok(d)
}

/// Parse-only floor and `check` on one thread, alternately, best of two each (the machine's
/// speed drifts); then `check` on all cores, and ruff.
pub fn throughput(
    c: &Corpus,
    dir: &Path,
    binary: &Path,
    ruff: Option<&Path>,
    report: &mut Report,
) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut parse, mut single) = (Duration::MAX, Duration::MAX);
    for _ in 0..2 {
        parse = parse.min(parse_only(c));
        single = single.min(check_run(binary, &[dir], Some(1))?.0);
    }
    let parse_lps = per_sec(c.lines, parse);
    report.figure(
        "tree-sitter parse only, 1 thread (the floor; best of 2)",
        format!(
            "{:.2} s = {:.0} lines/s, {:.1} MB/s",
            parse.as_secs_f64(),
            parse_lps,
            c.bytes as f64 / 1e6 / parse.as_secs_f64()
        ),
    );
    let single_lps = per_sec(c.lines, single);
    report.target(
        "inplace-lsp check, 1 thread (best of 2)",
        format!(
            "{:.2} s = {:.0} lines/s, {:.2}x parse-only throughput",
            single.as_secs_f64(),
            single_lps,
            single_lps / parse_lps
        ),
        ">= 0.85x parse-only",
        single_lps / parse_lps >= 0.85,
    );
    let (all, rss) = check_run(binary, &[dir], None)?;
    let speedup = single.as_secs_f64() / all.as_secs_f64();
    report.target(
        &format!("inplace-lsp check, {cores} threads"),
        format!(
            "{:.2} s = {:.0} lines/s, {speedup:.2}x single-threaded",
            all.as_secs_f64(),
            per_sec(c.lines, all)
        ),
        &format!(">= {:.2}x single-threaded", 0.85 * cores as f64),
        cores == 1 || speedup >= 0.85 * cores as f64,
    );
    report.figure(
        "inplace-lsp check peak RSS (whole corpus, all threads)",
        format!("{:.0} MB", rss as f64 / 1024.0),
    );
    match ruff {
        Some(ruff) => {
            let r1 = ruff_run(ruff, dir, Some(1))?;
            let rn = ruff_run(ruff, dir, None)?;
            report.figure(
                "ruff check (default rules, no cache), reference",
                format!(
                    "1 thread {:.2} s = {:.0} lines/s; {cores} threads {:.2} s",
                    r1.as_secs_f64(),
                    per_sec(c.lines, r1),
                    rn.as_secs_f64()
                ),
            );
        }
        None => report.figure("ruff check", "not installed; skipped".into()),
    }
    Ok(())
}

/// Where the analysis of the corpus spends its time, by phase (one thread, in process).
pub fn profile(c: &Corpus, report: &mut Report) {
    let mut t = inplace_analysis::Phases::default();
    let mut parsed_all = 0usize;
    for (_, text) in &c.files {
        let p = inplace_analysis::analyze_phases(text);
        t.outline += p.outline;
        t.plan += p.plan;
        t.run += p.run;
        t.render += p.render;
        t.items += p.items;
        t.lowered += p.lowered;
        t.bytes += p.bytes;
        t.lowered_bytes += p.lowered_bytes;
        t.units += p.units;
        if inplace_analysis::mentions_torch(text) {
            parsed_all += text.len();
        }
    }
    let total = t.outline + t.plan + t.run + t.render;
    let pct = |d: Duration| 100.0 * d.as_secs_f64() / total.as_secs_f64();
    report.figure(
        "profile: analysis by phase (files that mention torch)",
        format!(
            "outline {:.1}% | which items matter (+ lowering the module) {:.1}% | units (+ parsing and lowering what they reach) {:.1}% | findings {:.1}%; {:.2} s in all",
            pct(t.outline),
            pct(t.plan),
            pct(t.run),
            pct(t.render),
            total.as_secs_f64()
        ),
    );
    report.figure(
        "profile: parsed and lowered",
        format!(
            "{} of {} items, {:.0}% of the bytes of files that mention torch; {} units",
            t.lowered,
            t.items,
            100.0 * t.lowered_bytes as f64 / parsed_all.max(1) as f64,
            t.units
        ),
    );
}
