//! Byte offsets <-> lines and columns in the three encodings editors use.

/// Column unit of a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Bytes of UTF-8.
    Utf8,
    /// UTF-16 code units (the LSP default).
    Utf16,
    /// Unicode scalar values ("characters"; what `check` prints).
    Utf32,
}

/// Line starts of a text. Lines end at `\n`; a `\r` before it belongs to the line ending.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(memchr_newlines(text.as_bytes()));
        Self {
            starts,
            len: text.len(),
        }
    }

    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// 0-based line of a byte offset (clamped to the text).
    pub fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.len);
        match self.starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.len)
    }

    /// Byte range of a line without its line ending.
    pub fn line_range(&self, text: &str, line: usize) -> (usize, usize) {
        let start = self.line_start(line);
        let mut end = self.starts.get(line + 1).copied().unwrap_or(self.len);
        let bytes = text.as_bytes();
        if end > start && bytes.get(end - 1) == Some(&b'\n') {
            end -= 1;
            // A `\r` belongs to the line ending only before a `\n`.
            if end > start && bytes.get(end - 1) == Some(&b'\r') {
                end -= 1;
            }
        }
        (start, end)
    }

    /// 0-based (line, column) of a byte offset, the column counted in `enc` units.
    /// An offset inside a multi-byte character is moved back to that character's start.
    pub fn position(&self, text: &str, offset: usize, enc: Encoding) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_of(offset);
        let prefix = &text[self.line_start(line)..offset];
        (line, column_len(prefix, enc))
    }

    /// Byte offset of a 0-based (line, column). Columns past the end of the line clamp to its
    /// end; lines past the end clamp to the end of the text. `None` never happens for clamped
    /// input; a column inside a surrogate pair rounds down.
    pub fn offset(&self, text: &str, line: usize, column: usize, enc: Encoding) -> usize {
        if line >= self.starts.len() {
            return text.len();
        }
        let (start, end) = self.line_range(text, line);
        let mut units = 0;
        for (i, ch) in text[start..end].char_indices() {
            let w = char_len(ch, enc);
            if units + w > column {
                return start + i;
            }
            units += w;
        }
        end
    }
}

fn char_len(ch: char, enc: Encoding) -> usize {
    match enc {
        Encoding::Utf8 => ch.len_utf8(),
        Encoding::Utf16 => ch.len_utf16(),
        Encoding::Utf32 => 1,
    }
}

fn column_len(s: &str, enc: Encoding) -> usize {
    match enc {
        Encoding::Utf8 => s.len(),
        Encoding::Utf16 => s.encode_utf16().count(),
        Encoding::Utf32 => s.chars().count(),
    }
}

fn memchr_newlines(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_in_each_encoding() {
        let text = "a = 1\n# 注释 😀 x\r\ny";
        let idx = LineIndex::new(text);
        let x = text.find('x').unwrap();
        assert_eq!(idx.position(text, x, Encoding::Utf8), (1, 14));
        assert_eq!(idx.position(text, x, Encoding::Utf16), (1, 8));
        assert_eq!(idx.position(text, x, Encoding::Utf32), (1, 7));
        assert_eq!(idx.offset(text, 1, 8, Encoding::Utf16), x);
        assert_eq!(idx.offset(text, 1, 7, Encoding::Utf32), x);
        assert_eq!(idx.line_range(text, 1), (6, x + 1));
        assert_eq!(idx.offset(text, 9, 0, Encoding::Utf16), text.len());
        assert_eq!(idx.offset(text, 2, 99, Encoding::Utf16), text.len());
    }

    /// Found by the `positions` fuzz target: a `\r` not followed by `\n` (here at the end of
    /// the text) is part of its line, so every offset round-trips through a position.
    #[test]
    fn lone_carriage_return_round_trips() {
        for text in [">\r", "a\rb\n", "\r\r\n"] {
            let idx = LineIndex::new(text);
            for off in 0..=text.len() {
                let (l, c) = idx.position(text, off, Encoding::Utf16);
                let back = idx.offset(text, l, c, Encoding::Utf16);
                // The `\r` of a `\r\n` is inside the line ending: it maps to the line's end.
                let crlf = text.as_bytes().get(off.wrapping_sub(1)) == Some(&b'\r')
                    && text.as_bytes().get(off) == Some(&b'\n');
                assert!(
                    back == off || crlf && back == off - 1,
                    "{text:?} {off} -> ({l}, {c}) -> {back}"
                );
            }
        }
    }
}
