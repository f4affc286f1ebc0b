//! Faster spellings of two tree-sitter lookups lowering makes for every node:
//! `Node::kind()` (a `strlen` and UTF-8 check per call) and `Node::child_by_field_name()` (a
//! linear `strncmp` scan over the grammar's field names per call). Both answers are fixed by the
//! grammar, so they are computed once per kind id / field name.

use std::sync::OnceLock;
use tree_sitter::Node;

fn kinds() -> &'static [&'static str] {
    static KINDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        (0..lang.node_kind_count() as u16)
            .map(|id| lang.node_kind_for_id(id).unwrap_or(""))
            .collect()
    })
}

fn field_id(name: &'static str) -> Option<std::num::NonZeroU16> {
    static FIELDS: OnceLock<rustc_hash::FxHashMap<&'static str, std::num::NonZeroU16>> =
        OnceLock::new();
    FIELDS
        .get_or_init(|| {
            let lang: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
            (1..=lang.field_count() as u16)
                .filter_map(|id| {
                    Some((lang.field_name_for_id(id)?, std::num::NonZeroU16::new(id)?))
                })
                .collect()
        })
        .get(name)
        .copied()
}

pub(crate) trait NodeExt<'t>: Sized {
    /// `kind()`, from a table.
    fn k(&self) -> &'static str;
    /// `child_by_field_name(name)`, with the field id from a table.
    fn field(&self, name: &'static str) -> Option<Node<'t>>;
}

impl<'t> NodeExt<'t> for Node<'t> {
    #[inline]
    fn k(&self) -> &'static str {
        kinds()
            .get(self.kind_id() as usize)
            .copied()
            .unwrap_or_else(|| self.kind())
    }

    #[inline]
    fn field(&self, name: &'static str) -> Option<Node<'t>> {
        match field_id(name) {
            Some(id) => self.child_by_field_id(id.get()),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_answers_as_tree_sitter() {
        let text = "def f(x, *a, y=1):\n    return [i for i in x if i]\nclass C(B): pass\n";
        let tree = crate::python_parser().parse(text, None).unwrap();
        let mut stack = vec![tree.root_node()];
        while let Some(n) = stack.pop() {
            assert_eq!(n.k(), n.kind());
            for f in [
                "name",
                "body",
                "parameters",
                "left",
                "right",
                "value",
                "function",
                "arguments",
            ] {
                assert_eq!(n.field(f), n.child_by_field_name(f));
            }
            let mut c = n.walk();
            stack.extend(n.children(&mut c));
        }
    }
}
