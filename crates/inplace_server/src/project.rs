//! Where a file's project modules are on disk: the roots imports are resolved from, the file's
//! own module name, and a reader of module files (shared by `check` and the server, whose
//! open documents' unsaved text wins over the disk).
//!
//! Roots, in the order Python's `sys.path` would try them for a script run from its folder
//! with the project installed: the file's own folder, then the folder above the outermost
//! package holding the file (folders with an `__init__.py`), then the project root's `src/` (a
//! src layout), then the project root (the nearest folder up with a `pyproject.toml`,
//! `setup.py` or `setup.cfg`; else the workspace folder the caller gives, else the file's
//! folder). Nothing outside the roots is read: third-party and standard-library modules stay
//! as the analysis knows them.

use inplace_analysis::project::{ModuleLookup, ModuleName, ModuleSource};
use rustc_hash::{FxHashMap, FxHashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Largest module file read (a bigger one stays opaque).
const MAX_MODULE_FILE: u64 = 4 << 20;

/// Most import lists kept (one per module text seen).
const MAX_CACHED_IMPORT_LISTS: usize = 4096;

/// A module file found under a layout's roots, read once per run.
struct Located {
    path: PathBuf,
    text: Arc<str>,
    is_package: bool,
}

/// The module files of a name, in search order.
type Found = Arc<[Located]>;

/// Texts that win over the disk's, by path.
pub type Overlay<'a> = &'a dyn Fn(&Path) -> Option<Arc<str>>;

/// A module's text, and the paths it imports.
type ImportList = (Arc<str>, Arc<Vec<String>>);

/// Module files read from disk, each once per run, and the paths each imports.
#[derive(Default)]
pub struct DiskReader {
    cache: Mutex<FxHashMap<PathBuf, Option<Arc<str>>>>,
    /// By origin: the text read, and the paths it imports.
    imports: Mutex<FxHashMap<Arc<str>, ImportList>>,
    /// By a root searched, then a dotted name: the module files found under that root. Each
    /// file checked resolves every import of the modules it reads, and the roots above its
    /// own folder are shared by the whole package; the name is looked up without building a
    /// key.
    found: Mutex<FxHashMap<PathBuf, FxHashMap<Box<str>, Found>>>,
    /// The names in each folder looked into (most imported names are not the project's: one
    /// listing of a root answers them all, without a system call per candidate file).
    listings: Mutex<FxHashMap<PathBuf, Arc<FxHashSet<OsString>>>>,
}

impl DiskReader {
    /// The paths a module imports, found once per text of it.
    pub fn imports_of(&self, module: &ModuleSource) -> Arc<Vec<String>> {
        let lock = || self.imports.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, paths)) = lock()
            .get(&module.origin)
            .filter(|(t, _)| Arc::ptr_eq(t, &module.text) || **t == *module.text)
        {
            return paths.clone();
        }
        let paths = Arc::new(inplace_analysis::project::imported_paths(&module.text));
        let mut c = lock();
        // A long session sees many versions of the modules it edits: start over now and then
        // rather than keep them all.
        if c.len() >= MAX_CACHED_IMPORT_LISTS {
            c.clear();
        }
        c.insert(module.origin.clone(), (module.text.clone(), paths.clone()));
        paths
    }
}

/// A Python source file's text, if it is one we can read.
pub fn read_source(path: &Path) -> Option<Arc<str>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_MODULE_FILE {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    Some(Arc::from(text.strip_prefix('\u{feff}').unwrap_or(&text)))
}

impl DiskReader {
    /// Read this file again next time (it changed on disk).
    pub fn forget(&self, path: &Path) {
        if let Ok(mut c) = self.cache.lock() {
            c.remove(path);
        }
        if let Ok(mut c) = self.found.lock() {
            c.clear();
        }
        if let Ok(mut c) = self.listings.lock() {
            c.clear();
        }
    }

    /// The names in a folder (none if it cannot be read), listed once.
    fn listing(&self, dir: &Path) -> Arc<FxHashSet<OsString>> {
        let lock = || self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = lock().get(dir) {
            return hit.clone();
        }
        let names: Arc<FxHashSet<OsString>> = Arc::new(
            std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok().map(|e| e.file_name()))
                        .collect()
                })
                .unwrap_or_default(),
        );
        lock().insert(dir.to_path_buf(), names.clone());
        names
    }

    /// Whether `path` below `root` may exist: each of its components is listed in the folder
    /// above it (the folders are listed once each, from the root down).
    fn listed(&self, root: &Path, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(root) else {
            return true;
        };
        let mut dir = root.to_path_buf();
        for part in rel.iter() {
            if !self.listing(&dir).contains(part) {
                return false;
            }
            dir.push(part);
        }
        true
    }

    /// The readable module files of a dotted name under the `i`th of a layout's roots, in
    /// search order (searched once per root and name).
    fn found(&self, root: &Path, name: &str) -> Found {
        let lock = || self.found.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = lock().get(root).and_then(|m| m.get(name)) {
            return hit.clone();
        }
        let first = name.split('.').next().unwrap_or(name);
        // Most imported names are not the project's: the root's listing rules them out before
        // any path is built.
        let paths: Found = if self.may_hold(root, first, name.len() == first.len()) {
            candidates(root, name)
                .filter(|p| self.listed(root, p))
                .filter_map(|path| {
                    Some(Located {
                        text: self.read(&path)?,
                        is_package: path.ends_with("__init__.py"),
                        path,
                    })
                })
                .collect()
        } else {
            Arc::new([])
        };
        lock()
            .entry(root.to_path_buf())
            .or_default()
            .insert(Box::from(name), paths.clone());
        paths
    }

    /// Whether a root may hold a module whose dotted name starts with `first`: a folder of
    /// that name, or (for a name of one part) a `first.py`.
    fn may_hold(&self, root: &Path, first: &str, one_part: bool) -> bool {
        let listing = self.listing(root);
        listing.contains(std::ffi::OsStr::new(first))
            || one_part && listing.contains(std::ffi::OsStr::new(&format!("{first}.py")))
    }

    /// Read every file again next time (files appeared or went away).
    pub fn forget_all(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
        if let Ok(mut c) = self.imports.lock() {
            c.clear();
        }
        if let Ok(mut c) = self.found.lock() {
            c.clear();
        }
    }

    /// A module file's text (`None`: missing, too large, binary or not UTF-8), read once.
    pub fn read(&self, path: &Path) -> Option<Arc<str>> {
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(path).cloned()) {
            return hit;
        }
        let text = read_source(path);
        if let Ok(mut c) = self.cache.lock() {
            c.insert(path.to_path_buf(), text.clone());
        }
        text
    }
}

/// The project around a file: where its imports resolve from, and its own module name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectLayout {
    /// Absolute folders, in search order.
    pub roots: Vec<PathBuf>,
    /// The project root (labels of modules are relative to it).
    pub root: PathBuf,
    /// The file's module name (`pkg.train`), when it lies under a root other than its folder.
    pub entry: Option<ModuleName>,
}

/// Whether a folder is a project root.
fn is_project_root(dir: &Path) -> bool {
    ["pyproject.toml", "setup.py", "setup.cfg"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

impl ProjectLayout {
    /// The layout around `file` (an absolute path); `workspace`: the folder to use as the
    /// project root when no marker file is found above the file.
    pub fn of(file: &Path, workspace: Option<&Path>) -> ProjectLayout {
        let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        let root = dir
            .ancestors()
            .find(|d| is_project_root(d))
            .map(Path::to_path_buf)
            .or_else(|| {
                workspace
                    .filter(|w| file.starts_with(w))
                    .map(Path::to_path_buf)
            })
            .unwrap_or_else(|| dir.clone());
        // The folder above the outermost package holding the file (folders with an
        // `__init__.py`): where an installed package's absolute imports start.
        let mut base = dir.as_path();
        while base.join("__init__.py").is_file() {
            match base.parent() {
                Some(p) => base = p,
                None => break,
            }
        }
        let src = root.join("src");
        let mut roots = vec![dir.clone()];
        for r in [base.to_path_buf(), src, root.clone()] {
            if r.is_dir() && !roots.contains(&r) {
                roots.push(r);
            }
        }
        let entry = roots[1..]
            .iter()
            .find_map(|r| module_name_of(file, r))
            .or_else(|| module_name_of(file, &dir));
        ProjectLayout { roots, root, entry }
    }

    /// The layout with the folders the file's text adds to `sys.path` as further roots
    /// (`sys.path.append('model')` next to the script: its modules import each other by bare
    /// name), after the others, when they exist.
    pub fn with_sys_path(mut self, file: &Path, text: &str) -> ProjectLayout {
        let dir = file.parent().unwrap_or(Path::new("/"));
        for added in inplace_analysis::project::sys_path_additions(text) {
            let Ok(folder) = dir.join(&added).canonicalize() else {
                continue;
            };
            if folder.is_dir() && !self.roots.contains(&folder) {
                self.roots.push(folder);
            }
        }
        self
    }

    /// Where a dotted module name's file is, under the roots.
    pub fn locate(&self, name: &str) -> Vec<PathBuf> {
        self.roots
            .iter()
            .flat_map(|r| candidates(r, name))
            .collect()
    }
}

/// Where a dotted module name's file may be under one root: `a/b.py`, `a/b/__init__.py`.
fn candidates(root: &Path, name: &str) -> impl Iterator<Item = PathBuf> {
    let base: PathBuf = root.join(name.split('.').collect::<PathBuf>());
    [base.with_extension("py"), base.join("__init__.py")].into_iter()
}

/// The dotted module name of `file` under `root` (`root/pkg/m.py`: `pkg.m`;
/// `root/pkg/__init__.py`: the package `pkg`).
pub fn module_name_of(file: &Path, root: &Path) -> Option<ModuleName> {
    let rel = file.strip_prefix(root).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last
        .strip_suffix(".py")
        .or_else(|| last.strip_suffix(".pyi"))?;
    let is_package = stem == "__init__";
    if !is_package {
        parts.push(stem.to_string());
    }
    let valid = |p: &String| !p.is_empty() && !p.contains('.') && !p.contains('-');
    (!parts.is_empty() && parts.iter().all(valid)).then(|| ModuleName {
        name: parts.join("."),
        is_package,
    })
}

/// A [`ModuleLookup`] over the files under a layout's roots.
pub struct FileLookup<'a> {
    pub layout: &'a ProjectLayout,
    pub reader: &'a DiskReader,
    /// How findings name a module's file (`check`: a path as the user gave them; the server:
    /// a URI).
    pub origin: &'a dyn Fn(&Path) -> String,
    /// The file being analysed (never read as a module of itself).
    pub file: &'a Path,
    /// Texts that win over the disk's (the server's open documents, unsaved edits included).
    pub overlay: Option<Overlay<'a>>,
}

impl ModuleLookup for FileLookup<'_> {
    fn find(&self, name: &str) -> Option<ModuleSource> {
        let source = |path: &Path, text: Arc<str>, is_package: bool| {
            let label = path.strip_prefix(&self.layout.root).unwrap_or(path);
            Some(ModuleSource {
                name: ModuleName::new(name, is_package),
                origin: Arc::from((self.origin)(path)),
                label: Arc::from(label.display().to_string()),
                text,
            })
        };
        let Some(overlay) = self.overlay else {
            for root in &self.layout.roots {
                let found = self.reader.found(root, name);
                if let Some(m) = found
                    .iter()
                    .find(|m| m.path.as_os_str() != self.file.as_os_str())
                {
                    return source(&m.path, m.text.clone(), m.is_package);
                }
            }
            return None;
        };
        for path in self.layout.locate(name) {
            if path == self.file {
                continue;
            }
            let Some(text) = overlay(&path).or_else(|| self.reader.read(&path)) else {
                continue;
            };
            return source(&path, text, path.ends_with("__init__.py"));
        }
        None
    }

    fn imports_of(&self, module: &ModuleSource) -> Arc<Vec<String>> {
        self.reader.imports_of(module)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_follow_the_folders() {
        let root = Path::new("/p");
        let m = module_name_of(Path::new("/p/pkg/sub/m.py"), root).unwrap();
        assert_eq!((m.name.as_str(), m.is_package), ("pkg.sub.m", false));
        let p = module_name_of(Path::new("/p/pkg/__init__.py"), root).unwrap();
        assert_eq!((p.name.as_str(), p.is_package), ("pkg", true));
        assert_eq!(module_name_of(Path::new("/p/my-scripts/a.py"), root), None);
        assert_eq!(module_name_of(Path::new("/q/a.py"), root), None);
    }

    #[test]
    fn layout_finds_the_project_root_and_a_src_layout() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("pyproject.toml"), "").unwrap();
        std::fs::create_dir_all(root.join("src/pkg")).unwrap();
        let file = root.join("src/pkg/train.py");
        let layout = ProjectLayout::of(&file, None);
        assert_eq!(layout.root, root);
        assert_eq!(
            layout.roots,
            vec![root.join("src/pkg"), root.join("src"), root.clone()]
        );
        let entry = layout.entry.unwrap();
        assert_eq!(entry.name, "pkg.train");
    }
}
