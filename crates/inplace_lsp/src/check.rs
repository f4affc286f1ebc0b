//! `inplace-lsp check`.

use crate::config::{self, RunSettings};
use crate::notebook::Notebook;
use crate::output::{self, FileReport, Format};
use anyhow::Context;
use inplace_analysis::notebook::NotebookSource;
use inplace_analysis::project;
use inplace_analysis::shared::SharedModules;
use inplace_analysis::{Applicability, FileState, Finding};
use inplace_server::project::{DiskReader, FileLookup, ProjectLayout};
use rayon::prelude::*;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Files or folders to check: Python files and Jupyter notebooks (`.ipynb`); `-` reads
    /// standard input. Default: the current folder.
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: Format,
    /// Rules to enable: codes (IP301), prefixes (IP3), names, or ALL. Comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Rules to disable, as for `--select`.
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Apply safe fixes (writes the files; with stdin, prints the fixed text).
    #[arg(long)]
    pub fix: bool,
    /// Also apply unsafe fixes (with `--fix` or `--diff`).
    #[arg(long)]
    pub unsafe_fixes: bool,
    /// Print the changes fixes would make, without writing them.
    #[arg(long)]
    pub diff: bool,
    /// The file name to report for standard input.
    #[arg(long)]
    pub stdin_filename: Option<PathBuf>,
    /// A pyproject.toml to read `[tool.inplace-lsp]` from (default: the nearest one).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Skip pyproject.toml discovery.
    #[arg(long)]
    pub isolated: bool,
    /// Exit 0 even when hazards are found.
    #[arg(long)]
    pub exit_zero: bool,
    /// Colour the text output: auto, always or never.
    #[arg(long, default_value = "auto")]
    pub color: String,
}

enum Input {
    File(PathBuf),
    Stdin(String),
}

fn stack_pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .stack_size(64 << 20)
        .build()
        .expect("thread pool")
}

pub fn run(args: CheckArgs) -> ExitCode {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let stdin = args.paths.iter().any(|p| p.as_os_str() == "-")
        || (args.paths.is_empty() && args.stdin_filename.is_some());
    let paths: Vec<PathBuf> = if args.paths.is_empty() && !stdin {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let file_config = if args.isolated {
        None
    } else if let Some(c) = &args.config {
        Some((c.clone(), config::read_pyproject(c)?.unwrap_or_default()))
    } else {
        let start = paths
            .iter()
            .find(|p| p.as_os_str() != "-")
            .cloned()
            .unwrap_or_else(|| PathBuf::from("."));
        config::discover(&start)?
    };
    let settings = config::settings(file_config, &args.select, &args.ignore)?;
    let (mut inputs, mut errors) = collect_inputs(&paths);
    if stdin {
        inputs.push(Input::Stdin(read_stdin()?));
    }
    let stdin_name = args
        .stdin_filename
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "-".into());
    let min = if args.unsafe_fixes {
        Applicability::Unsafe
    } else {
        Applicability::Safe
    };
    let fixing = args.fix || args.diff;
    // The run's caches (module texts, resolved imports, shared bodies) live until the process
    // exits: freeing them one allocation at a time would only delay the exit.
    let reader = std::mem::ManuallyDrop::new(DiskReader::default());
    let cwd = std::env::current_dir().unwrap_or_default();
    let run = std::mem::ManuallyDrop::new(Run {
        settings: &settings,
        fixing,
        min,
        reader: &reader,
        shared: Arc::default(),
        cwd: &cwd,
    });
    let results: Vec<Result<Checked, String>> = stack_pool().install(|| {
        inputs
            .par_iter()
            .map(|input| check_one(input, &stdin_name, &run))
            .collect()
    });
    let mut reports = Vec::new();
    let mut diffs = String::new();
    let mut changed = 0;
    for r in results {
        match r {
            Err(e) => errors.push(e),
            Ok(Checked { report, change }) => {
                if let Some(change) = change {
                    changed += 1;
                    if args.diff {
                        diffs.push_str(&change.diff);
                    } else if report.path == stdin_name && stdin {
                        std::io::stdout().write_all(change.content.as_bytes())?;
                    } else if let Err(e) = std::fs::write(&report.path, &change.content) {
                        errors.push(format!("{}: cannot write fixes: {e}", report.path));
                    }
                }
                reports.push(report);
            }
        }
    }
    drop_repeated_in_checked_modules(&mut reports, &cwd);
    for e in &errors {
        eprintln!("error: {e}");
    }
    let count: usize = reports.iter().map(|r| r.findings.len()).sum();
    if args.diff {
        print!("{diffs}");
        if changed > 0 {
            eprintln!(
                "{changed} file{} would be changed by fixes.",
                if changed == 1 { "" } else { "s" }
            );
        }
    } else if !(args.fix && stdin) {
        let color = match args.color.as_str() {
            "always" => true,
            "never" => false,
            _ => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let written = output::write(args.output_format, &reports, color, &mut out)
            .and_then(|()| std::io::Write::flush(&mut out));
        // Degraded, not wrong: say where the analysis stopped short (as the server logs it).
        let short: Vec<&FileReport> = reports.iter().filter(|r| r.exhausted > 0).collect();
        if args.output_format == output::Format::Text && !short.is_empty() {
            let scopes: usize = short.iter().map(|r| r.exhausted).sum();
            eprintln!(
                "note: {scopes} scope{} in {} stopped at their work budget; findings in them may be missing",
                if scopes == 1 { "" } else { "s" },
                match short.as_slice() {
                    [one] => one.path.clone(),
                    many => format!("{} files", many.len()),
                }
            );
        }
        // A closed pipe (`| head`) is the reader's choice, not an error of ours.
        if let Err(e) = written {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e).context("writing the report");
            }
        }
    }
    let code = if !errors.is_empty() {
        2
    } else if args.exit_zero {
        0
    } else if args.diff {
        u8::from(changed > 0)
    } else {
        u8::from(count > 0)
    };
    Ok(ExitCode::from(code))
}

/// A finding reported at a call in one file for a write inside a project module the same run
/// checks, where that module reports the same rule at that very write (a hazard wholly inside
/// the module, `q *= self.scale` on a `chunk` view, found in the module and again at each
/// call of it): the module's own finding stands (it carries the fix), the repeat is dropped.
fn drop_repeated_in_checked_modules(reports: &mut [FileReport], cwd: &Path) {
    let canonical = |p: &str| std::fs::canonicalize(cwd.join(p)).ok();
    let own: std::collections::HashSet<(PathBuf, inplace_analysis::Rule, usize, usize)> = reports
        .iter()
        .filter(|r| r.cells.is_none())
        .filter_map(|r| Some((canonical(&r.path)?, &r.findings)))
        .flat_map(|(p, fs)| {
            fs.iter()
                .map(move |f| (p.clone(), f.rule, f.range.start, f.range.end))
        })
        .collect();
    if own.is_empty() {
        return;
    }
    for r in reports.iter_mut() {
        r.findings.retain(|f| {
            !f.related.iter().any(|rel| {
                (rel.source.as_deref().and_then(canonical))
                    .is_some_and(|p| own.contains(&(p, f.rule, rel.range.start, rel.range.end)))
            })
        });
    }
}

/// The files to check under `paths` (folders walked, honouring ignore files), and the
/// problems met while looking.
fn collect_inputs(paths: &[PathBuf]) -> (Vec<Input>, Vec<String>) {
    let mut errors = Vec::new();
    let mut inputs = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            continue;
        }
        if !p.exists() {
            errors.push(format!("{}: no such file or folder", p.display()));
            continue;
        }
        if p.is_file() {
            inputs.push(Input::File(p.clone()));
            continue;
        }
        let mut found = Vec::new();
        for entry in ignore::WalkBuilder::new(p).build() {
            match entry {
                Ok(e)
                    if e.file_type().is_some_and(|t| t.is_file())
                        && e.path()
                            .extension()
                            .is_some_and(|x| x == "py" || x == "pyi" || x == "ipynb") =>
                {
                    found.push(e.into_path())
                }
                Ok(_) => {}
                Err(err) => errors.push(format!("{err}")),
            }
        }
        found.sort();
        inputs.extend(found.into_iter().map(Input::File));
    }
    (inputs, errors)
}

fn read_stdin() -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes)?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("standard input is not valid UTF-8"))
}

/// One checked input: its report and, when fixes changed it, the change.
struct Checked {
    report: FileReport,
    change: Option<Change>,
}

/// What fixes made of a file.
struct Change {
    /// The file's new content.
    content: String,
    /// The unified diff `--diff` prints (per cell for a notebook).
    diff: String,
}

fn is_notebook(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "ipynb")
}

/// What every input of a run shares.
struct Run<'a> {
    settings: &'a RunSettings,
    fixing: bool,
    min: Applicability,
    /// Project modules, each read once per run.
    reader: &'a DiskReader,
    /// Their items' bodies, each lowered once per run.
    shared: Arc<SharedModules>,
    cwd: &'a Path,
}

impl Run<'_> {
    /// A fresh analysis state for a file: with the project modules it imports (none for
    /// standard input without a file name), their bodies shared with the run's other files.
    fn state(&self, path: &Path, canonical: &Path, text: &str) -> FileState {
        let mut state = FileState::new();
        if !canonical.is_absolute() || !canonical.is_file() || !project::reads_imports(text) {
            return state;
        }
        let layout = ProjectLayout::of(canonical, None).with_sys_path(canonical, text);
        let given_dir = path.parent().unwrap_or(Path::new(""));
        let canonical_dir = canonical.parent().unwrap_or(Path::new("/"));
        // A module's file is named as the user would: from the folder they named the file
        // by when it lies below it, else from the current folder, else in full.
        let origin = |p: &Path| -> String {
            if let Ok(rel) = p.strip_prefix(canonical_dir) {
                return given_dir.join(rel).display().to_string();
            }
            p.strip_prefix(self.cwd).unwrap_or(p).display().to_string()
        };
        let lookup = FileLookup {
            layout: &layout,
            reader: self.reader,
            origin: &origin,
            file: canonical,
            overlay: None,
        };
        state.imports = Arc::new(project::collect(text, layout.entry.clone(), &lookup));
        state.shared = Some(self.shared.clone());
        state
    }
}

/// Read and analyse one input: its report and, when fixing, what the fixes changed.
fn check_one(input: &Input, stdin_name: &str, run: &Run<'_>) -> Result<Checked, String> {
    let (settings, fixing, min) = (run.settings, run.fixing, run.min);
    let (path, display, raw) = match input {
        Input::File(p) => {
            let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("{}: not valid UTF-8; skipped", p.display()))?;
            (p.clone(), p.display().to_string(), text)
        }
        Input::Stdin(t) => (PathBuf::from(stdin_name), stdin_name.to_string(), t.clone()),
    };
    let canonical = std::fs::canonicalize(&path).unwrap_or(path.clone());
    let keep = |f: &Finding| settings.enabled(f.rule, &canonical);
    let outcome = std::panic::catch_unwind(|| {
        let project = |text: &str| run.state(&path, &canonical, text);
        if is_notebook(&path) {
            check_notebook(display.clone(), raw, &project, &keep, fixing, min)
        } else {
            Ok(check_python(
                display.clone(),
                raw,
                &project,
                &keep,
                fixing,
                min,
            ))
        }
    });
    outcome.map_err(|_| format!("{display}: internal error while analysing; please report it"))?
}

/// Check a Python file.
fn check_python(
    path: String,
    raw: String,
    project: &dyn Fn(&str) -> FileState,
    keep: &dyn Fn(&Finding) -> bool,
    fixing: bool,
    min: Applicability,
) -> Checked {
    let bom = raw.starts_with('\u{feff}');
    let text = if bom {
        raw['\u{feff}'.len_utf8()..].to_string()
    } else {
        raw
    };
    let mut state = project(&text);
    let imports = state.imports.clone();
    let mut exhausted = 0;
    let (text, findings, change) = if fixing {
        let fixed = inplace_analysis::fix_all_with(&text, min, keep, &mut state);
        let remaining = fixed.remaining;
        let change = (fixed.text != text).then(|| Change {
            diff: unified_diff(&text, &fixed.text, &path),
            content: if bom {
                format!("\u{feff}{}", fixed.text)
            } else {
                fixed.text.clone()
            },
        });
        (fixed.text, remaining, change)
    } else {
        let analysis = state.analyze(&text);
        exhausted = analysis.exhausted;
        let mut findings = analysis.findings;
        findings.retain(keep);
        // A fix shown (or given in JSON) is one `--fix` would apply.
        if findings.iter().any(|f| f.fix.is_some()) {
            let fixed = inplace_analysis::fix_all_with(
                &text,
                Applicability::Unsafe,
                &|_| true,
                &mut state.clone(),
            );
            inplace_analysis::drop_rejected_fixes(&mut findings, &fixed);
        }
        (text, findings, None)
    };
    Checked {
        report: FileReport {
            path,
            text,
            findings,
            cells: None,
            modules: imports,
            exhausted,
        },
        change,
    }
}

/// Check a notebook: its code cells as one program, findings reported per cell.
fn check_notebook(
    path: String,
    raw: String,
    project: &dyn Fn(&str) -> FileState,
    keep: &dyn Fn(&Finding) -> bool,
    fixing: bool,
    min: Applicability,
) -> Result<Checked, String> {
    let Some(notebook) = Notebook::parse(raw).map_err(|e| format!("{path}: {e}"))? else {
        // Not a Python notebook: nothing of ours to check.
        return Ok(Checked {
            report: FileReport {
                path,
                text: String::new(),
                findings: Vec::new(),
                cells: None,
                modules: Arc::default(),
                exhausted: 0,
            },
            change: None,
        });
    };
    let numbers = notebook.numbers();
    let source = NotebookSource::new(&notebook.sources()).with_numbers(numbers.clone());
    let seed = project(&source.text);
    let modules = seed.imports.clone();
    let source = source.with_state(seed);
    let (source, findings, change) = if fixing {
        let (cells, fixed_source, fixed) = source.fix_all(min, keep);
        let remaining = fixed.remaining;
        let old = notebook.sources();
        let change = (cells.iter().zip(&old).any(|(new, old)| new != old)).then(|| {
            let mut diff = String::new();
            for ((new, old), n) in cells.iter().zip(&old).zip(&numbers) {
                if new != old {
                    diff.push_str(&unified_diff(old, new, &format!("{path}:cell {n}")));
                }
            }
            Change {
                content: notebook.with_sources(&cells),
                diff,
            }
        });
        (fixed_source, remaining, change)
    } else {
        let mut findings = source.analyze();
        findings.retain(keep);
        // (As for a Python file: only fixes `--fix` would apply, inside the code cells.)
        if findings.iter().any(|f| f.fix.is_some()) {
            let (.., fixed) = source.fix_all(Applicability::Unsafe, &|_| true);
            inplace_analysis::drop_rejected_fixes(&mut findings, &fixed);
        }
        (source, findings, None)
    };
    Ok(Checked {
        report: FileReport {
            path,
            text: source.text.clone(),
            findings,
            cells: Some(source),
            modules,
            exhausted: 0,
        },
        change,
    })
}

fn unified_diff(old: &str, new: &str, name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .header(name, name)
        .to_string()
}
