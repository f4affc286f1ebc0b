//! Interned names: every identifier, attribute, keyword and import path of a file is a small
//! integer, so environments and attribute maps hash integers, not strings. The interner belongs
//! to a file (or to an open document, across its versions); the names the analysis looks for
//! are interned first, at fixed ids.

use lasso::{Key, Rodeo, Spur};
use rustc_hash::FxBuildHasher;

/// An interned string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(u32);

impl Name {
    /// Its place in its interner.
    pub(crate) fn idx(self) -> usize {
        self.0 as usize
    }

    /// The name at place `i` of a table of names (not of an interner).
    pub(crate) fn from_idx(i: usize) -> Name {
        Name(i as u32)
    }
}

macro_rules! known {
    ($( $konst:ident = $text:literal, )*) => {
        /// Names the analysis looks for, interned at fixed ids.
        pub mod known {
            use super::Name;
            known!(@consts 0u32; $( $konst, )*);
        }
        const KNOWN: &[&str] = &[ $( $text, )* ];
    };
    (@consts $n:expr; $first:ident, $( $rest:ident, )*) => {
        pub const $first: Name = Name($n);
        known!(@consts $n + 1u32; $( $rest, )*);
    };
    (@consts $n:expr;) => {};
}

known! {
    SELF = "self",
    TRUE = "True",
    FALSE = "False",
    NONE = "None",
    INIT = "__init__",
    CALL = "__call__",
    FORWARD = "forward",
    DATA = "data",
    GRAD = "grad",
    REQUIRES_GRAD = "requires_grad",
    INPLACE = "inplace",
    OUT = "out",
    SUPER = "super",
    TORCH = "torch",
    MODULE = "module",
    TRAINING = "training",
    P = "p",
    PARAMS = "params",
    WEIGHT = "weight",
    RETAIN_GRAPH = "retain_graph",
    HX = "hx",
    DEVICE = "device",
    NON_BLOCKING = "non_blocking",
    DTYPE = "dtype",
    MODULES = "_modules",
    CREATE_GRAPH = "create_graph",
    OUTPUTS = "outputs",
    MODE = "mode",
    DIM = "dim",
    GETITEM = "__getitem__",
    LEN = "__len__",
    BOOL = "__bool__",
    ITER = "__iter__",
    INPUT = "input",
    OTHER = "other",
    MAT2 = "mat2",
    TARGET = "target",
    EXPONENT = "exponent",
    VEC = "vec",
    APPLY = "apply",
    MAX_NORM = "max_norm",
    SAVE_FOR_BACKWARD = "save_for_backward",
    BACKWARD = "backward",
    VJP = "vjp",
    SETUP_CONTEXT = "setup_context",
    SAVED_TENSORS = "saved_tensors",
    MARK_DIRTY = "mark_dirty",
    MARK_NON_DIFFERENTIABLE = "mark_non_differentiable",
    FUNCTION_CTX = "FunctionCtx",
    SET_TO_NONE = "set_to_none",
    CLOSURE = "closure",
    COPY = "copy",
    EMPTY = "",
    DICT_ITEMS = "<dict items>",
    DROPOUT_P = "dropout_p",
    ASSIGN = "assign",
    SHAPE = "shape",
    SIZE = "size",
    NDIM = "ndim",
    BUILTIN_LEN = "len",
    TRAIN = "train",
}

/// The interner of one file or document.
#[derive(Clone)]
pub struct Interner {
    rodeo: Rodeo<Spur, FxBuildHasher>,
    /// `a.b` for pairs of names, interned once.
    joins: rustc_hash::FxHashMap<(Name, Name), Name>,
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Interner({} names)", self.rodeo.len())
    }
}

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

impl Interner {
    pub fn new() -> Self {
        let mut rodeo = Rodeo::with_hasher(FxBuildHasher);
        for (i, k) in KNOWN.iter().enumerate() {
            let key: Spur = rodeo.get_or_intern_static(k);
            debug_assert_eq!(key.into_usize(), i);
        }
        Interner {
            rodeo,
            joins: Default::default(),
        }
    }

    /// The name `a.b` (a qualified path).
    pub fn join(&mut self, a: Name, b: Name) -> Name {
        if let Some(p) = self.joins.get(&(a, b)) {
            return *p;
        }
        let s = format!("{}.{}", self.resolve(a), self.resolve(b));
        let p = self.intern(&s);
        self.joins.insert((a, b), p);
        p
    }

    pub fn intern(&mut self, s: &str) -> Name {
        Name(self.rodeo.get_or_intern(s).into_usize() as u32)
    }

    /// The name of `s` if it was interned.
    pub fn get(&self, s: &str) -> Option<Name> {
        self.rodeo.get(s).map(|k| Name(k.into_usize() as u32))
    }

    pub fn resolve(&self, n: Name) -> &str {
        Spur::try_from_usize(n.0 as usize)
            .and_then(|k| self.rodeo.try_resolve(&k))
            .unwrap_or("")
    }

    pub fn len(&self) -> usize {
        self.rodeo.len()
    }

    /// Intern every name of `other` here: the result maps each of `other`'s names (by id) to
    /// this interner's (see [`crate::ir::Body::rename`]).
    pub fn absorb(&mut self, other: &Interner) -> Vec<Name> {
        other.rodeo.strings().map(|s| self.intern(s)).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.rodeo.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_have_fixed_ids() {
        let mut i = Interner::new();
        assert_eq!(i.intern("self"), known::SELF);
        assert_eq!(i.intern("forward"), known::FORWARD);
        assert_eq!(i.resolve(known::EMPTY), "");
        let x = i.intern("x");
        assert_eq!(i.resolve(x), "x");
        assert_eq!(i.get("x"), Some(x));
        assert_eq!(i.get("y"), None);
    }

    #[test]
    fn absorb_maps_each_name_to_the_same_text() {
        let mut here = Interner::new();
        let a = here.intern("a");
        let mut other = Interner::new();
        let ob = other.intern("b");
        let oa = other.intern("a");
        let map = here.absorb(&other);
        assert_eq!(map[oa.0 as usize], a);
        assert_eq!(here.resolve(map[ob.0 as usize]), "b");
        assert_eq!(map[known::SELF.0 as usize], known::SELF);
    }
}
