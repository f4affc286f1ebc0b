//! The benchmark behind `cargo xtask bench` (run in release; never a timed unit test).
//!
//! `inplace_bench --corpus DIR --binary PATH/inplace-lsp --root REPO [--ruff PATH/ruff]
//! [--only throughput,profile,files,generated,lsp,projects,findings]`
//! measures, in one run and on the same files: the tree-sitter parse-only floor, `inplace-lsp
//! check` on one thread and on all cores, ruff as a reference, where the analysis spends its
//! time, every corpus file alone (time and memory), a generated 20 MB file, linearity, LSP
//! latency over stdio on a 10,000-line file (open, typing in a function body, typing at module
//! level), memory per open document, cross-file figures (project-internal imports resolved, edit in
//! a module to its importer's diagnostics), and the findings on the corpus against the list from
//! before engine v2. It prints every figure with its target and PASS/FAIL, and exits 0 either
//! way (targets are reported, not asserted: the machine's load is not under its control).

mod alloc;
mod corpus;
mod files;
mod findings;
mod generated;
mod lsp;
mod projects;
mod report;
mod throughput;

use anyhow::{Context, Result};
use report::Report;
use std::path::PathBuf;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
    };
    let corpus_dir = get("--corpus").context("--corpus DIR")?;
    let binary = get("--binary").context("--binary PATH")?;
    let root = get("--root").context("--root REPO")?;
    let ruff = get("--ruff");
    // `--only throughput,files,...`: run those parts alone (while working on one target).
    let only: Option<Vec<String>> =
        get("--only").map(|p| p.to_string_lossy().split(',').map(str::to_string).collect());
    let part = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let corpus = corpus::load(&corpus_dir)?;
    let torch_files = corpus
        .files
        .iter()
        .filter(|(_, t)| inplace_analysis::mentions_torch(t))
        .count();
    let mut report = Report::default();
    report.figure(
        "corpus",
        format!(
            "{} files ({} mention torch), {} lines, {:.1} MB, {} cores",
            corpus.files.len(),
            torch_files,
            corpus.lines,
            corpus.bytes as f64 / 1e6,
            cores
        ),
    );
    if part("throughput") {
        throughput::throughput(&corpus, &corpus_dir, &binary, ruff.as_deref(), &mut report)?;
    }
    if part("profile") {
        throughput::profile(&corpus, &mut report);
    }
    if part("files") {
        files::each_file(&corpus, &corpus_dir, &mut report);
    }
    if part("generated") {
        generated::twenty_megabytes(&binary, &root.join("target/bench"), &mut report)?;
        generated::linearity(&mut report);
    }
    if part("lsp") {
        lsp::latency(&binary, &corpus.ten_thousand_lines(), &mut report)?;
        lsp::memory_per_document(&binary, &corpus, &mut report)?;
    }
    if part("projects") {
        projects::import_resolution(&corpus, &corpus_dir, &mut report);
        projects::edit_latency(&binary, &root.join("target/bench"), &mut report)?;
    }
    if part("findings") {
        findings::compare(&binary, &corpus_dir, &root, &mut report)?;
    }
    report.print_summary();
    Ok(())
}
