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
/// (Wall time, CPU time of this thread.)
pub fn parse_only(c: &Corpus) -> (Duration, Duration) {
    let mut parser = inplace_analysis::python_parser();
    let (start, cpu) = (Instant::now(), thread_cpu());
    for (_, text) in &c.files {
        std::hint::black_box(parser.parse(text, None));
    }
    (start.elapsed(), thread_cpu().saturating_sub(cpu))
}

/// CPU time used by the calling thread so far.
fn thread_cpu() -> Duration {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What a child process took.
pub struct Run {
    pub wall: Duration,
    /// User + system CPU time.
    pub cpu: Duration,
    /// Peak RSS, KiB.
    pub rss: u64,
    pub code: i32,
}

pub fn timed(cmd: &mut Command) -> Result<Run> {
    let start = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if r != pid {
        bail!("wait4 failed for {cmd:?}");
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok(Run {
        wall: start.elapsed(),
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        rss: usage.ru_maxrss as u64,
        code,
    })
}

pub fn check_run(binary: &Path, paths: &[&Path], threads: Option<usize>) -> Result<Run> {
    let mut cmd = Command::new(binary);
    cmd.args(["check", "--exit-zero", "--output-format", "json"])
        .args(paths);
    on_threads(&mut cmd, threads, "check")
}

/// Run `cmd` on `threads` rayon threads (all when `None`); it must exit 0.
fn on_threads(cmd: &mut Command, threads: Option<usize>, what: &str) -> Result<Run> {
    if let Some(n) = threads {
        cmd.env("RAYON_NUM_THREADS", n.to_string());
    }
    let run = timed(cmd)?;
    if run.code != 0 {
        bail!("{what} exited with {}", run.code);
    }
    Ok(run)
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
    Ok(on_threads(&mut cmd, threads, "ruff")?.wall)
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
    // This machine's speed drifts by tens of percent over minutes: each round measures the
    // floor, one thread and all threads back to back, and each figure is the median over the
    // rounds of the ratio within a round. Ratios are of CPU time (user + system; for the
    // floor, of its thread), which waits and other tenants' load disturb less than wall time.
    const ROUNDS: usize = 3;
    let (mut parse, mut single, mut all) = (Vec::new(), Vec::new(), Vec::new());
    let mut rss = 0;
    for _ in 0..ROUNDS {
        parse.push(parse_only(c));
        single.push(check_run(binary, &[dir], Some(1))?);
        let run = check_run(binary, &[dir], None)?;
        rss = rss.max(run.rss);
        all.push(run);
    }
    let ratios: Vec<f64> = (0..ROUNDS)
        .map(|i| parse[i].1.as_secs_f64() / single[i].cpu.as_secs_f64())
        .collect();
    let speedups: Vec<f64> = (0..ROUNDS)
        .map(|i| single[i].wall.as_secs_f64() / all[i].wall.as_secs_f64())
        .collect();
    let (ratio, speedup) = (median(&ratios), median(&speedups));
    let secs = |d: Duration| d.as_secs_f64();
    let parse_cpu = median(&parse.iter().map(|p| secs(p.1)).collect::<Vec<_>>());
    let single_cpu = median(&single.iter().map(|r| secs(r.cpu)).collect::<Vec<_>>());
    let all_wall = median(&all.iter().map(|r| secs(r.wall)).collect::<Vec<_>>());
    report.figure(
        &format!("tree-sitter parse only, 1 thread (the floor; median of {ROUNDS} rounds)"),
        format!(
            "{parse_cpu:.2} s CPU = {:.0} lines/s, {:.1} MB/s",
            c.lines as f64 / parse_cpu,
            c.bytes as f64 / 1e6 / parse_cpu
        ),
    );
    let rounds = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    report.target(
        "inplace-lsp check, 1 thread",
        format!(
            "{single_cpu:.2} s CPU = {:.0} lines/s, {ratio:.2}x parse-only throughput (rounds: {})",
            c.lines as f64 / single_cpu,
            rounds(&ratios)
        ),
        ">= 0.85x parse-only",
        ratio >= 0.85,
    );
    report.target(
        &format!("inplace-lsp check, {cores} threads"),
        format!(
            "{all_wall:.2} s wall = {:.0} lines/s, {speedup:.2}x single-threaded wall time (rounds: {})",
            c.lines as f64 / all_wall,
            rounds(&speedups)
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
        t.lowered_by_plan += p.lowered_by_plan;
        t.units += p.units;
        for k in 0..5 {
            t.lowered_by_kind[k] += p.lowered_by_kind[k];
            t.bytes_by_kind[k] += p.bytes_by_kind[k];
        }
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
            "{} of {} items, {:.0}% of the bytes of files that mention torch ({:.0}% by the plan, the rest reached by the units); {} units",
            t.lowered,
            t.items,
            100.0 * t.lowered_bytes as f64 / parsed_all.max(1) as f64,
            100.0 * t.lowered_by_plan as f64 / parsed_all.max(1) as f64,
            t.units
        ),
    );
    let kinds = [
        "module statements",
        "class headers",
        "class-body statements",
        "module functions",
        "methods",
    ];
    let by_kind: Vec<String> = (kinds.iter().enumerate())
        .map(|(k, name)| {
            format!(
                "{name} {:.1} of {:.1} MB",
                t.lowered_by_kind[k] as f64 / 1e6,
                t.bytes_by_kind[k] as f64 / 1e6
            )
        })
        .collect();
    report.figure("profile: lowered by kind", by_kind.join(" | "));
}

/// The median of a few numbers.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
