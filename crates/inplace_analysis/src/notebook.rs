//! A notebook's code cells as one program.
//!
//! The cells run in order in one namespace, so a tensor made in one cell and written in place in
//! a later one is one hazard: the analysis sees the cells joined, each followed by a line break.
//! IPython syntax that is not Python (`%magic` and `!shell` lines, `x = !cmd`, `name?` help,
//! whole `%%cell` magics) is blanked byte for byte (the offsets of everything else stay those of
//! the cell's own text), and a fix may not touch it.

use crate::finding::{Finding, TextRange};
use crate::{Applicability, FileState, Fixed, LineIndex};

/// One code cell inside the joined text.
#[derive(Debug, Clone)]
pub struct CellSpan {
    /// The cell's text in the joined text, without the line break that follows it.
    pub range: TextRange,
    /// 0-based line of the joined text where the cell starts.
    pub first_line: usize,
}

/// The code cells of a notebook joined into one analysable text.
#[derive(Debug, Clone)]
pub struct NotebookSource {
    /// The cells, each followed by `\n`, with IPython syntax blanked.
    pub text: String,
    cells: Vec<CellSpan>,
    /// The blanked pieces: where they are and what they were.
    blanked: Vec<(TextRange, String)>,
    /// Each cell's 1-based number in the notebook (markdown cells count too).
    numbers: Vec<usize>,
    /// The project modules the cells import.
    /// What each analysis of the cells starts from (the project modules they import).
    seed: FileState,
}

/// How messages name a line of a notebook's joined cells: `cell 3, line 2`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellLines {
    /// Per cell, its first line in the joined text (0-based) and its number in the notebook.
    cells: Vec<(usize, usize)>,
}

impl CellLines {
    /// The label of a 0-based line of the joined text.
    pub fn label(&self, line: usize) -> String {
        let i = self.cells.partition_point(|(first, _)| *first <= line);
        match i.checked_sub(1).and_then(|i| self.cells.get(i)) {
            Some((first, number)) => format!("cell {number}, line {}", line - first + 1),
            None => format!("line {}", line + 1),
        }
    }
}

/// Where an offset of the joined text lies in its notebook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellOffset {
    /// 0-based index of the cell (among the cells given).
    pub cell: usize,
    /// Byte offset in the cell's own text.
    pub offset: usize,
}

impl NotebookSource {
    /// Join `cells` (the sources of the code cells, in order).
    pub fn new<S: AsRef<str>>(cells: &[S]) -> Self {
        let mut text = String::new();
        let mut spans = Vec::with_capacity(cells.len());
        let mut blanked = Vec::new();
        let mut first_line = 0;
        for cell in cells {
            let cell = cell.as_ref();
            let start = text.len();
            for piece in ipython_pieces(cell) {
                let range = TextRange::new(start + piece.start, start + piece.end);
                blanked.push((range, cell[piece.clone()].to_string()));
            }
            text.push_str(cell);
            spans.push(CellSpan {
                range: TextRange::new(start, text.len()),
                first_line,
            });
            text.push('\n');
            first_line += cell.bytes().filter(|&b| b == b'\n').count() + 1;
        }
        let mut bytes = std::mem::take(&mut text).into_bytes();
        for (range, _) in &blanked {
            blank(&mut bytes[range.start..range.end]);
        }
        let text = String::from_utf8(bytes).expect("blanking writes ASCII over whole lines");
        Self {
            text,
            numbers: (1..=spans.len()).collect(),
            cells: spans,
            blanked,
            seed: FileState::default(),
        }
    }

    /// Analyse the cells from `seed`: a fresh state with the project modules they import
    /// (and where module bodies are shared).
    pub fn with_state(mut self, seed: FileState) -> Self {
        self.seed = seed;
        self
    }

    /// Number the cells as the notebook does (one number per cell given, 1-based); by
    /// default they are numbered 1, 2, 3, ...
    pub fn with_numbers(mut self, numbers: Vec<usize>) -> Self {
        if numbers.len() == self.cells.len() {
            self.numbers = numbers;
        }
        self
    }

    pub fn cells(&self) -> &[CellSpan] {
        &self.cells
    }

    /// The 1-based number in the notebook of the cell at `index` among those given.
    pub fn number(&self, index: usize) -> usize {
        self.numbers.get(index).copied().unwrap_or(index + 1)
    }

    /// How messages name the joined text's lines.
    pub fn cell_lines(&self) -> CellLines {
        CellLines {
            cells: self
                .cells
                .iter()
                .zip(&self.numbers)
                .map(|(c, n)| (c.first_line, *n))
                .collect(),
        }
    }

    /// A fresh analysis state whose messages name cells.
    pub fn state(&self) -> FileState {
        let mut state = self.seed.clone();
        state.cells = Some(self.cell_lines());
        state
    }

    /// The cell holding a byte offset of the joined text (the line break after a cell counts as
    /// the cell's end).
    pub fn locate(&self, offset: usize) -> CellOffset {
        let i = self
            .cells
            .partition_point(|c| c.range.end < offset)
            .min(self.cells.len().saturating_sub(1));
        let start = self.cells.get(i).map_or(0, |c| c.range.start);
        let end = self.cells.get(i).map_or(0, |c| c.range.end);
        CellOffset {
            cell: i,
            offset: offset.clamp(start, end) - start,
        }
    }

    /// The cell that holds a range whole, if one does.
    pub fn cell_of(&self, range: TextRange) -> Option<usize> {
        crate::region_of(&self.cell_ranges(), range)
    }

    fn cell_ranges(&self) -> Vec<TextRange> {
        self.cells.iter().map(|c| c.range).collect()
    }

    /// The text a fix may change: each cell less its blanked pieces.
    fn editable(&self) -> Vec<TextRange> {
        let mut out = Vec::new();
        let mut pieces = self.blanked.iter().map(|(r, _)| *r).peekable();
        for c in &self.cells {
            let mut at = c.range.start;
            while let Some(p) = pieces.next_if(|p| p.end <= c.range.end) {
                out.push(TextRange::new(at, p.start));
                at = p.end;
            }
            out.push(TextRange::new(at, c.range.end));
        }
        out
    }

    /// Drop the fixes that would span two cells or rewrite IPython syntax.
    pub fn fence(&self, findings: &mut [Finding]) {
        crate::fence_fixes(findings, &self.editable());
    }

    /// All findings of the notebook, fixes fenced.
    pub fn analyze(&self) -> Vec<Finding> {
        self.analyze_with(&mut self.state())
    }

    /// [`NotebookSource::analyze`] with a state kept between versions (an open notebook's);
    /// its cell labels are brought up to date.
    pub fn analyze_with(&self, state: &mut FileState) -> Vec<Finding> {
        let lines = self.cell_lines();
        if state.cells.as_ref() != Some(&lines) {
            state.cells = Some(lines);
        }
        let mut findings = state.analyze(&self.text).findings;
        self.fence(&mut findings);
        findings
    }

    /// Apply fixes as [`crate::fix_all_filtered`] does, inside the cells. Returns each cell's
    /// fixed text (blanked syntax restored) and what was fixed; the remaining findings refer to
    /// the returned [`NotebookSource`].
    pub fn fix_all(
        &self,
        min: Applicability,
        keep: &dyn Fn(&Finding) -> bool,
    ) -> (Vec<String>, NotebookSource, Fixed) {
        let mut regions = self.editable();
        let mut fixed =
            crate::fix_all_in_regions(&self.text, min, keep, &mut self.state(), &mut regions);
        // The text outside the regions did not change: what lies between two of them in the
        // fixed text is what lay between them before (a blanked piece, a cell's line break).
        let old = self.editable();
        let mut restored = String::with_capacity(fixed.text.len());
        let mut at_old = 0;
        let mut at_new = 0;
        for (o, n) in old.iter().zip(&regions) {
            restored.push_str(&self.original(at_old, o.start));
            restored.push_str(&fixed.text[n.start..n.end]);
            at_old = o.end;
            at_new = n.end;
        }
        restored.push_str(&self.original(at_old, self.text.len()));
        debug_assert_eq!(fixed.text.len() - at_new, self.text.len() - at_old);
        // Split into cells: a cell's end is the end of its last region.
        let mut cells = Vec::with_capacity(self.cells.len());
        let mut r = 0;
        let mut shift = 0isize;
        for c in &self.cells {
            let start = (c.range.start as isize + shift) as usize;
            while r < old.len() && old[r].end <= c.range.end {
                shift = regions[r].end as isize - old[r].end as isize;
                r += 1;
            }
            let end = (c.range.end as isize + shift) as usize;
            cells.push(restored[start..end].to_string());
        }
        let source = NotebookSource::new(&cells).with_numbers(self.numbers.clone());
        if !fixed.applied.is_empty() {
            // The remaining findings name cells and lines of the last round's text: analyse
            // the fixed cells once more, as the user will see them.
            fixed.remaining = source.analyze().into_iter().filter(|f| keep(f)).collect();
        }
        (cells, source, fixed)
    }

    /// The original (unblanked) text of `start..end` of the joined text.
    fn original(&self, start: usize, end: usize) -> String {
        let mut out = self.text[start..end].to_string();
        // The blanked pieces are sorted and keep their length: replace them in place.
        let first = self.blanked.partition_point(|(r, _)| r.start < start);
        for (r, orig) in self.blanked[first..]
            .iter()
            .take_while(|(r, _)| r.end <= end)
        {
            out.replace_range(r.start - start..r.end - start, orig);
        }
        out
    }

    /// 0-based (line, column) of a joined-text offset inside its cell, with its cell.
    pub fn cell_position(&self, index: &LineIndex, offset: usize) -> (usize, usize, usize) {
        let at = self.locate(offset);
        let global = at.offset + self.cells.get(at.cell).map_or(0, |c| c.range.start);
        let line = index.line_of(global);
        let first = self.cells.get(at.cell).map_or(0, |c| c.first_line);
        let col = self.text[index.line_start(line)..global].chars().count();
        (at.cell, line - first, col)
    }
}

/// Overwrite a piece of IPython syntax with spaces (line breaks kept), starting with `pass`
/// where the first line has room (so a block whose body was a magic stays a block).
fn blank(bytes: &mut [u8]) {
    let first_line = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    for b in bytes.iter_mut() {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
    if first_line >= 4 {
        bytes[..4].copy_from_slice(b"pass");
    }
}

/// Byte ranges of a cell that are IPython syntax rather than Python: each starts after a line's
/// indentation and runs to the end of the line (and of the lines it continues onto with `\`).
fn ipython_pieces(cell: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let first_code = cell.lines().map(str::trim).find(|l| !l.is_empty());
    if first_code.is_some_and(|l| l.starts_with("%%")) {
        // A cell magic: the whole cell is its input, not Python.
        let start = cell.len() - cell.trim_start().len();
        let end = cell.trim_end().len();
        if start < end {
            out.push(start..end);
        }
        return out;
    }
    let mut offset = 0;
    let mut lines = cell.split_inclusive('\n').peekable();
    let mut in_string: Option<&str> = None;
    while let Some(line) = lines.next() {
        let start = offset;
        offset += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        if let Some(q) = in_string {
            if count_unescaped(body, q) % 2 == 1 {
                in_string = None;
            }
            continue;
        }
        let indent = body.len() - body.trim_start().len();
        let code = &body[indent..];
        if is_ipython_line(code) {
            let mut end = start + body.len();
            // `\` at the end continues the command on the next line.
            let mut last = body;
            while last.ends_with('\\') {
                let Some(next) = lines.next() else { break };
                let next_start = offset;
                offset += next.len();
                last = next.trim_end_matches(['\n', '\r']);
                end = next_start + last.len();
            }
            out.push(start + indent..end);
            continue;
        }
        // Lines inside a triple-quoted string are not IPython syntax.
        for q in ["\"\"\"", "'''"] {
            if count_unescaped(body, q) % 2 == 1 {
                in_string = Some(q);
                break;
            }
        }
    }
    out
}

fn count_unescaped(line: &str, quote: &str) -> usize {
    line.match_indices(quote)
        .filter(|(i, _)| !line[..*i].ends_with('\\'))
        .count()
}

/// Whether a line (indentation removed) is IPython syntax: `%magic`, `!shell`, `name = %magic`,
/// `name = !shell`, `?name`, `name?` and `name??`.
fn is_ipython_line(code: &str) -> bool {
    if code.starts_with('%') || code.starts_with('!') || code.starts_with('?') {
        return true;
    }
    if let Some((target, value)) = code.split_once('=') {
        let value = value.trim_start();
        let target = target.trim();
        if !target.is_empty()
            && target
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == ',' || c == ' ')
            && (value.starts_with('%') || value.starts_with('!'))
        {
            return true;
        }
    }
    let trimmed = code.trim_end();
    trimmed.ends_with('?')
        && !trimmed.contains('#')
        && trimmed
            .trim_end_matches('?')
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '(' || c == ')')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_are_blanked_in_place() {
        let nb = NotebookSource::new(&[
            "%matplotlib inline\nimport torch\n!pip install x \\\n  y\n",
            "files = !ls\nx?\nfor i in range(3):\n    %time f(i)\n",
            "%%bash\necho hi\n",
            "s = '''\n%not a magic\n'''\ny = 1 % 2\n",
        ]);
        let expected = "pass              \nimport torch\npass            \n   \n\n\
                        pass       \n  \nfor i in range(3):\n    pass      \n\n\
                        pass  \n       \n\n\
                        s = '''\n%not a magic\n'''\ny = 1 % 2\n\n";
        assert_eq!(nb.text, expected);
        assert_eq!(nb.cells().len(), 4);
        assert_eq!(nb.cells()[1].first_line, 5);
    }

    #[test]
    fn offsets_map_to_cells() {
        let nb = NotebookSource::new(&["a = 1", "b = 2\nc = 3\n"]);
        assert_eq!(nb.text, "a = 1\nb = 2\nc = 3\n\n");
        assert_eq!(nb.locate(2), CellOffset { cell: 0, offset: 2 });
        assert_eq!(nb.locate(5), CellOffset { cell: 0, offset: 5 });
        assert_eq!(nb.locate(6), CellOffset { cell: 1, offset: 0 });
        assert_eq!(nb.locate(12), CellOffset { cell: 1, offset: 6 });
        let idx = LineIndex::new(&nb.text);
        assert_eq!(nb.cell_position(&idx, 12), (1, 1, 0));
        assert_eq!(nb.cell_of(TextRange::new(4, 7)), None);
    }

    #[test]
    fn a_hazard_across_cells_is_found_and_fixed_in_its_cell() {
        let cells = [
            "%matplotlib inline\nimport torch\nx = torch.randn(3, requires_grad=True)\n",
            "y = x.exp()\n",
            "!nvidia-smi\ny.add_(1)\ny.sum().backward()",
        ];
        let nb = NotebookSource::new(&cells);
        let findings = nb.analyze();
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let at = nb.locate(findings[0].range.start);
        assert_eq!(at.cell, 2);
        assert!(cells[2][at.offset..].starts_with("y.add_(1)"));
        let (fixed, source, result) = nb.fix_all(Applicability::Unsafe, &|_| true);
        assert_eq!(fixed[0], cells[0]);
        assert_eq!(fixed[1], cells[1]);
        assert!(fixed[2].starts_with("!nvidia-smi\n"), "{}", fixed[2]);
        assert!(fixed[2].ends_with("y.sum().backward()"), "{}", fixed[2]);
        assert_ne!(fixed[2], cells[2]);
        assert!(result.remaining.is_empty(), "{:#?}", result.remaining);
        assert!(source.analyze().is_empty());
    }
}
