//! Shared pieces of the fuzz targets: the fixture corpus, a tree-sitter-aware splicing mutator,
//! and the invariants every analysis result must keep.

use inplace_analysis::{count_errors, python_parser, Finding, TextRange};
use std::sync::OnceLock;
use tree_sitter::Node;

/// Every Python file under `tests/` (fixtures and the demo), read once.
pub fn corpus() -> &'static [String] {
    static CORPUS: OnceLock<Vec<String>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests");
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "py") {
                    if let Ok(t) = std::fs::read_to_string(&p) {
                        out.push(t);
                    }
                }
            }
        }
        out.sort();
        out
    })
}

/// A small deterministic generator (xorshift64*), seeded by libFuzzer.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Named nodes of a tree, in document order (iteratively: inputs may nest deeply).
fn named_nodes(root: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        out.push(n);
        let mut c = n.walk();
        let children: Vec<_> = n.named_children(&mut c).collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

/// A structure-aware mutation of Python source: replace a random syntax node with a node of the
/// same kind (or, less often, any statement or expression) taken from the fixture corpus or from
/// the input itself; or duplicate a statement; or delete one. Returns `None` when the input has
/// no usable node (the caller then falls back to libFuzzer's byte mutations).
pub fn splice(data: &[u8], seed: u32, max_size: usize) -> Option<Vec<u8>> {
    let text = String::from_utf8_lossy(data).into_owned();
    let mut rng = Rng::new(seed as u64);
    let mut parser = python_parser();
    let tree = parser.parse(&text, None)?;
    let nodes = named_nodes(tree.root_node());
    if nodes.len() < 2 {
        // Nothing to splice into: start from a fixture.
        let c = corpus();
        return (!c.is_empty()).then(|| c[rng.below(c.len())].clone().into_bytes());
    }
    let target = nodes[1 + rng.below(nodes.len() - 1)];
    let (start, end) = (target.start_byte(), target.end_byte());
    let replacement: String = match rng.below(8) {
        0 => String::new(),
        1 => {
            // Duplicate the node (a statement repeated, an expression doubled into a tuple...).
            let s = &text[start..end];
            format!("{s}\n{}{s}", " ".repeat(target.start_position().column))
        }
        _ => {
            let donor_text: &str = if rng.below(4) == 0 || corpus().is_empty() {
                &text
            } else {
                &corpus()[rng.below(corpus().len())]
            };
            let donor_tree = parser.parse(donor_text, None)?;
            let donors = named_nodes(donor_tree.root_node());
            let same: Vec<_> = donors
                .iter()
                .filter(|n| n.kind() == target.kind())
                .copied()
                .collect();
            let pick = if !same.is_empty() && rng.below(5) != 0 {
                same[rng.below(same.len())]
            } else {
                donors[rng.below(donors.len())]
            };
            reindent(
                &donor_text[pick.start_byte()..pick.end_byte()],
                pick.start_position().column,
                target.start_position().column,
            )
        }
    };
    let mut out = String::with_capacity(text.len() + replacement.len());
    out.push_str(&text[..start]);
    out.push_str(&replacement);
    out.push_str(&text[end..]);
    let mut bytes = out.into_bytes();
    bytes.truncate(max_size);
    Some(bytes)
}

/// The custom mutator of the Python targets: three times in four a [`splice`], else (or when
/// splicing finds nothing) libFuzzer's own byte mutation `fallback`.
pub fn mutate(
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    fallback: fn(&mut [u8], usize, usize) -> usize,
) -> usize {
    if seed % 4 == 0 {
        return fallback(data, size, max_size);
    }
    match splice(&data[..size], seed, max_size.min(data.len())) {
        Some(out) => {
            data[..out.len()].copy_from_slice(&out);
            out.len()
        }
        None => fallback(data, size, max_size),
    }
}

/// Moves a multi-line snippet from indentation `from` to `to` (lines after the first).
fn reindent(snippet: &str, from: usize, to: usize) -> String {
    let mut out = String::with_capacity(snippet.len());
    for (i, line) in snippet.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            let trimmed = line.trim_start_matches(' ');
            let had = line.len() - trimmed.len();
            out.push_str(&" ".repeat(had.saturating_sub(from) + to));
            out.push_str(trimmed);
        } else {
            out.push_str(line);
        }
    }
    out
}

fn check_range(text: &str, r: TextRange, what: &str) {
    assert!(
        r.start <= r.end && r.end <= text.len(),
        "{what}: range {r:?} outside the text of {} bytes",
        text.len()
    );
    assert!(
        text.is_char_boundary(r.start) && text.is_char_boundary(r.end),
        "{what}: range {r:?} splits a character"
    );
}

/// What every finding must satisfy: ranges inside the text on character boundaries, the same for
/// related locations and fix edits, and a fix's edits must not overlap each other.
pub fn check_findings(text: &str, findings: &[Finding]) {
    for f in findings {
        check_range(text, f.range, f.rule.code());
        assert!(!f.message.is_empty(), "{}: empty message", f.rule.code());
        for r in &f.related {
            check_range(text, r.range, "related");
        }
        if let Some(fix) = &f.fix {
            let mut edits: Vec<_> = fix.edits.iter().map(|e| e.range).collect();
            edits.sort();
            for e in &edits {
                check_range(text, *e, "fix edit");
            }
            for w in edits.windows(2) {
                assert!(
                    w[0].end <= w[1].start,
                    "overlapping edits in one fix: {w:?}"
                );
            }
        }
    }
}

/// Syntax errors in `text` as tree-sitter parses it.
pub fn syntax_errors(text: &str) -> usize {
    python_parser()
        .parse(text, None)
        .map_or(usize::MAX, |t| count_errors(t.root_node()))
}
