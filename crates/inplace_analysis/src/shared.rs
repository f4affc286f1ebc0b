//! Outlines and lowered bodies of imported modules, shared by the analyses of many files.
//!
//! Every file of a package that imports `models.py` reads the same module text: `check` keeps
//! one [`SharedModules`] for the run, so each module is tokenized once and each of its items
//! parsed and lowered once, by the first file that needs it, instead of once per importer. A
//! body is keyed by its item's [`Version`] (a fingerprint of what its parse reads) and stored
//! with its own table of names, so each file's analysis takes a copy renamed into its interner.

use crate::ir::{Body, Interner, Name};
use crate::program::Version;
use crate::project::ModuleSource;
use crate::syntax::outline::{outline, Outline};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Most bytes of bodies kept (about their heap size); past it the cache starts over.
const MAX_SHARED_BYTES: usize = 64 << 20;

/// A module's text, and its outline.
type Outlined = (Arc<str>, Arc<Outline>);

/// Most module outlines kept.
const MAX_SHARED_OUTLINES: usize = 4096;

/// A body whose names index its own table.
struct Portable {
    body: Body,
    names: Vec<Box<str>>,
}

#[derive(Default)]
struct Inner {
    bodies: FxHashMap<Version, Arc<Portable>>,
    bytes: usize,
}

/// Outlines of modules and bodies of their items, for analyses running on any thread.
#[derive(Default)]
pub struct SharedModules {
    inner: Mutex<Inner>,
    /// By origin: the text outlined, and its outline.
    outlines: Mutex<FxHashMap<Arc<str>, Outlined>>,
}

impl std::fmt::Debug for SharedModules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        write!(f, "SharedModules({} bodies)", inner.bodies.len())
    }
}

impl SharedModules {
    /// The outline of a module's text, tokenized once.
    pub(crate) fn outline(&self, m: &ModuleSource) -> Arc<Outline> {
        let same = |(t, _): &Outlined| Arc::ptr_eq(t, &m.text) || **t == *m.text;
        let lock = || self.outlines.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, o)) = lock().get(&m.origin).filter(|e| same(e)) {
            return o.clone();
        }
        let o = Arc::new(outline(&m.text));
        let mut outlines = lock();
        if outlines.len() >= MAX_SHARED_OUTLINES {
            outlines.clear();
        }
        outlines.insert(m.origin.clone(), (m.text.clone(), o.clone()));
        o
    }

    /// The body of an item of this version, its names in `names`, if one was kept.
    pub(crate) fn get(&self, version: Version, names: &mut Interner) -> Option<Body> {
        let portable = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bodies
            .get(&version)?
            .clone();
        let map: Vec<Name> = portable.names.iter().map(|s| names.intern(s)).collect();
        let mut body = portable.body.clone();
        body.rename(&map);
        Some(body)
    }

    /// Keep a body just lowered (its names in `names`).
    pub(crate) fn put(&self, version: Version, body: &Body, names: &Interner) {
        let mut table: Vec<Box<str>> = Vec::new();
        let mut local: FxHashMap<Name, Name> = FxHashMap::default();
        let mut portable = body.clone();
        portable.rename_with(|n| {
            *local.entry(n).or_insert_with(|| {
                table.push(names.resolve(n).into());
                Name::from_idx(table.len() - 1)
            })
        });
        let bytes = portable.heap_bytes() + table.iter().map(|s| s.len() + 16).sum::<usize>();
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.bytes + bytes > MAX_SHARED_BYTES {
            *inner = Inner::default();
        }
        inner.bytes += bytes;
        inner.bodies.insert(
            version,
            Arc::new(Portable {
                body: portable,
                names: table,
            }),
        );
    }
}
