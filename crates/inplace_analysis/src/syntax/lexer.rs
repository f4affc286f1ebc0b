//! A tokenizer for the part of Python's lexical grammar the outline needs: names, numbers,
//! strings (every prefix, triple quotes, f-string replacement fields), comments, brackets,
//! operators, logical lines and their indentation. It never fails: unterminated strings end at
//! the end of their line (or of the text, when triple-quoted), as Python's tokenizer would
//! report an error there and tree-sitter recovers there.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tk {
    Name,
    Number,
    Str,
    Op,
    Open,
    Close,
    /// The end of a logical line.
    Newline,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Tok {
    pub kind: Tk,
    pub start: u32,
    pub end: u32,
    /// First token of a logical line, at this column (tabs to multiples of 8, as Python).
    pub first: Option<u32>,
    /// Bracket depth before the token.
    pub depth: u32,
    /// A name inside an f-string's replacement field (not part of the statement's structure).
    pub in_fstring: bool,
}

/// Receives the tokens and comments of a text, in order.
pub(crate) trait Sink {
    fn token(&mut self, t: &Tok);
    fn comment(&mut self, start: u32, end: u32);
}

/// Feeds every token and comment of `text` to `sink`.
pub(crate) fn tokenize(text: &str, sink: &mut impl Sink) {
    Lexer {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
        line_has_tokens: false,
    }
    .run(sink);
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
    line_has_tokens: bool,
}

/// Bytes that continue a name (non-ASCII bytes are parts of identifier characters).
const NAME_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        i += 1;
    }
    t
};

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

fn is_string_prefix(p: &[u8]) -> bool {
    p.len() <= 2
        && p.iter()
            .all(|c| matches!(c.to_ascii_lowercase(), b'r' | b'b' | b'u' | b'f' | b't'))
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> u8 {
        self.b.get(self.i + k).copied().unwrap_or(0)
    }

    fn run(&mut self, sink: &mut impl Sink) {
        let mut at_line_start = true;
        while self.i < self.b.len() {
            let mut first = None;
            if at_line_start && self.depth == 0 {
                at_line_start = false;
                let col = self.indentation();
                match self.peek(0) {
                    _ if self.i >= self.b.len() => {}
                    b'\n' | b'\r' | b'#' => {}
                    b'\\' if matches!(self.peek(1), b'\n' | b'\r') => {}
                    _ => first = Some(col),
                }
                if self.i >= self.b.len() {
                    // Indentation up to the end of the text: nothing follows.
                    break;
                }
            }
            let c = self.peek(0);
            let start = self.i;
            match c {
                b' ' | b'\t' | b'\x0c' => {
                    self.i += 1;
                    continue;
                }
                b'\\' if matches!(self.peek(1), b'\n' | b'\r') => {
                    // An explicit line join: the logical line goes on.
                    self.i += 1;
                    self.newline_bytes();
                    continue;
                }
                b'\n' | b'\r' => {
                    self.newline_bytes();
                    if self.depth == 0 {
                        if self.line_has_tokens {
                            self.line_has_tokens = false;
                            sink.token(&self.tok(Tk::Newline, start, start, None, false));
                        }
                        at_line_start = true;
                    }
                    continue;
                }
                b'#' => {
                    while self.i < self.b.len() && !matches!(self.b[self.i], b'\n' | b'\r') {
                        self.i += 1;
                    }
                    sink.comment(start as u32, self.i as u32);
                    continue;
                }
                _ => {}
            }
            self.line_has_tokens = true;
            let depth = self.depth;
            let kind = if is_name_start(c) {
                self.name_or_string(sink)
            } else if c == b'"' || c == b'\'' {
                self.string(0, sink);
                Tk::Str
            } else if c.is_ascii_digit() || (c == b'.' && self.peek(1).is_ascii_digit()) {
                self.number();
                Tk::Number
            } else if matches!(c, b'(' | b'[' | b'{') {
                self.i += 1;
                self.depth += 1;
                Tk::Open
            } else if matches!(c, b')' | b']' | b'}') {
                self.i += 1;
                self.depth = self.depth.saturating_sub(1);
                Tk::Close
            } else {
                // A stray byte (`$`, `?`, a NUL) is an operator of one byte: it keeps the rest.
                self.i += self.operator_len();
                Tk::Op
            };
            let mut t = self.tok(kind, start, self.i, first, false);
            t.depth = depth;
            sink.token(&t);
        }
        if self.line_has_tokens {
            let end = self.b.len();
            sink.token(&self.tok(Tk::Newline, end, end, None, false));
        }
    }

    /// The length of the operator at `self.i` (at least one byte).
    fn operator_len(&self) -> usize {
        let (c, d, e) = (self.peek(0), self.peek(1), self.peek(2));
        match (c, d) {
            (b'*', b'*') | (b'/', b'/') | (b'>', b'>') | (b'<', b'<') => {
                if e == b'=' {
                    3
                } else {
                    2
                }
            }
            (b'.', b'.') if e == b'.' => 3,
            (b'-', b'>') => 2,
            (b'+' | b'-' | b'*' | b'/' | b'%' | b'@' | b'&' | b'|' | b'^', b'=') => 2,
            (b'=' | b'!' | b'<' | b'>' | b':', b'=') => 2,
            _ => 1,
        }
    }

    fn tok(&self, kind: Tk, start: usize, end: usize, first: Option<u32>, f: bool) -> Tok {
        Tok {
            kind,
            start: start as u32,
            end: end as u32,
            first,
            depth: self.depth,
            in_fstring: f,
        }
    }

    /// Skips `\n`, `\r\n` or a lone `\r` (all line breaks for Python).
    fn newline_bytes(&mut self) {
        if self.peek(0) == b'\r' && self.peek(1) == b'\n' {
            self.i += 2;
        } else {
            self.i += 1;
        }
    }

    /// Skips the indentation of a line and returns its column.
    fn indentation(&mut self) -> u32 {
        let mut col = 0u32;
        loop {
            match self.peek(0) {
                b' ' => col += 1,
                b'\t' => col = (col / 8 + 1) * 8,
                b'\x0c' => col = 0,
                _ => return col,
            }
            self.i += 1;
        }
    }

    fn name_or_string(&mut self, sink: &mut impl Sink) -> Tk {
        let start = self.i;
        while self.i < self.b.len() && NAME_CHAR[self.b[self.i] as usize] {
            self.i += 1;
        }
        let q = self.peek(0);
        if (q == b'"' || q == b'\'') && is_string_prefix(&self.b[start..self.i]) {
            let prefix = self.i - start;
            self.i = start;
            self.string(prefix, sink);
            return Tk::Str;
        }
        Tk::Name
    }

    fn number(&mut self) {
        while self.i < self.b.len() {
            let c = self.b[self.i];
            let exp_sign = (c == b'+' || c == b'-')
                && self.i > 0
                && matches!(self.b[self.i - 1], b'e' | b'E')
                && !self.b[..self.i].starts_with(b"0x");
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || exp_sign {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    /// A string starting at `self.i` with a prefix of `prefix` bytes.
    fn string(&mut self, prefix: usize, sink: &mut impl Sink) {
        let fmt = self.b[self.i..self.i + prefix]
            .iter()
            .any(|c| matches!(c.to_ascii_lowercase(), b'f' | b't'));
        self.i += prefix;
        let q = self.b[self.i];
        let triple = self.peek(1) == q && self.peek(2) == q;
        self.i += if triple { 3 } else { 1 };
        while self.i < self.b.len() {
            let c = self.b[self.i];
            if c == b'\\' {
                self.i += 1;
                if self.i < self.b.len() {
                    self.newline_or_byte();
                }
                continue;
            }
            if c == q {
                if !triple {
                    self.i += 1;
                    return;
                }
                if self.peek(1) == q && self.peek(2) == q {
                    self.i += 3;
                    return;
                }
            }
            if !triple && (c == b'\n' || c == b'\r') {
                // Unterminated: the string ends with its line.
                return;
            }
            if fmt && c == b'{' {
                if self.peek(1) == b'{' {
                    self.i += 2;
                    continue;
                }
                self.i += 1;
                self.field(sink);
                continue;
            }
            self.i += 1;
        }
    }

    fn newline_or_byte(&mut self) {
        if matches!(self.peek(0), b'\n' | b'\r') {
            self.newline_bytes();
        } else {
            self.i += 1;
        }
    }

    /// An f-string replacement field after its `{`: names inside are reported (they are code),
    /// up to the `}` that closes it; a format spec after `:` or `!` may hold fields too.
    fn field(&mut self, sink: &mut impl Sink) {
        let mut depth = 0u32;
        let mut spec = false;
        while self.i < self.b.len() {
            let c = self.b[self.i];
            if spec {
                match c {
                    b'{' => {
                        self.i += 1;
                        self.field(sink);
                    }
                    b'}' => {
                        self.i += 1;
                        return;
                    }
                    _ => self.i += 1,
                }
                continue;
            }
            match c {
                b'(' | b'[' | b'{' => {
                    depth += 1;
                    self.i += 1;
                }
                b')' | b']' => {
                    depth = depth.saturating_sub(1);
                    self.i += 1;
                }
                b'}' if depth == 0 => {
                    self.i += 1;
                    return;
                }
                b'}' => {
                    depth -= 1;
                    self.i += 1;
                }
                b':' | b'!' if depth == 0 && self.peek(1) != b'=' => {
                    spec = true;
                    self.i += 1;
                }
                b'"' | b'\'' => self.string(0, sink),
                c if is_name_start(c) => {
                    let start = self.i;
                    let kind = self.name_or_string(sink);
                    if kind == Tk::Name {
                        let mut t = self.tok(Tk::Name, start, self.i, None, true);
                        t.depth = self.depth + 1 + depth;
                        sink.token(&t);
                    }
                }
                _ => self.i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect<'a> {
        text: &'a str,
        toks: Vec<(Tk, String, Option<u32>)>,
        comments: Vec<String>,
    }

    impl Sink for Collect<'_> {
        fn token(&mut self, t: &Tok) {
            let s = self.text[t.start as usize..t.end as usize].to_string();
            self.toks.push((t.kind, s, t.first));
        }
        fn comment(&mut self, start: u32, end: u32) {
            self.comments
                .push(self.text[start as usize..end as usize].to_string());
        }
    }

    fn collect(text: &str) -> Collect<'_> {
        let mut c = Collect {
            text,
            toks: Vec::new(),
            comments: Vec::new(),
        };
        tokenize(text, &mut c);
        c
    }

    fn toks(text: &str) -> Vec<(Tk, String, Option<u32>)> {
        collect(text).toks
    }

    #[test]
    fn logical_lines_and_indentation() {
        let t = toks("def f(a,\n      b):\n\treturn a  # c\n\n# x\nx = 1\\\n  + 2\n");
        let firsts: Vec<_> = t
            .iter()
            .filter_map(|(_, s, f)| f.map(|c| (s.clone(), c)))
            .collect();
        assert_eq!(
            firsts,
            [("def".into(), 0), ("return".into(), 8), ("x".into(), 0)]
        );
        let newlines = t.iter().filter(|(k, _, _)| *k == Tk::Newline).count();
        assert_eq!(newlines, 3);
    }

    /// Every token and comment lies within the text (found by fuzzing: a run of quotes after a
    /// triple-quoted string ran past the end).
    #[test]
    fn tokens_stay_within_the_text() {
        struct Spans(Vec<(u32, u32)>);
        impl Sink for Spans {
            fn token(&mut self, t: &Tok) {
                self.0.push((t.start, t.end));
            }
            fn comment(&mut self, start: u32, end: u32) {
                self.0.push((start, end));
            }
        }
        let texts = [
            r#""""torch"""""""""""""""""""""""""""
 "#,
            "''''",
            "'''a''''",
            r#"x = """""#,
            r#"""""""#,
            "'''",
            "f'''{x'",
            "'\\",
            "x = 1\n  ",
            "\t",
        ];
        for text in texts {
            let mut s = Spans(Vec::new());
            tokenize(text, &mut s);
            for (a, b) in s.0 {
                assert!(a <= b && b as usize <= text.len(), "{a}..{b} in {text:?}");
            }
        }
    }

    #[test]
    fn strings_of_every_kind() {
        let t = toks("a = rb'x\\'' + '''\nb\n''' + f\"{y.add_(1)!r:>{w}}\" + \"open\nz = 2\n");
        let names: Vec<_> = t
            .iter()
            .filter(|(k, _, _)| *k == Tk::Name)
            .map(|(_, s, _)| s.as_str())
            .collect();
        assert_eq!(names, ["a", "y", "add_", "w", "z"]);
        let strs = t.iter().filter(|(k, _, _)| *k == Tk::Str).count();
        assert_eq!(strs, 4);
    }

    #[test]
    fn comments_and_crlf() {
        let c = collect("x = 1  # noqa\r\ny = 2\r# tail");
        assert_eq!(c.comments, ["# noqa", "# tail"]);
        assert_eq!(c.toks.iter().filter(|t| t.0 == Tk::Newline).count(), 2);
        let ops: Vec<_> = toks("a **= b // c ... -> := != >>= x.y")
            .into_iter()
            .filter(|t| t.0 == Tk::Op)
            .map(|t| t.1)
            .collect();
        assert_eq!(ops, ["**=", "//", "...", "->", ":=", "!=", ">>=", "."]);
    }
}
