//! Jupyter notebooks (`.ipynb`) on disk: their code cells read out of the JSON, and fixed cells
//! written back into it without touching anything else (indentation, key order, outputs,
//! metadata and the final line break stay byte for byte what they were).

use jsonc_parser::ast::{Array, Object, Value};
use jsonc_parser::{CollectOptions, CommentCollectionStrategy, ParseOptions};
use std::ops::Range;

/// A notebook file and where its code cells' sources lie in its JSON text.
pub struct Notebook {
    raw: String,
    cells: Vec<CodeCell>,
}

struct CodeCell {
    /// 1-based position among all the notebook's cells (markdown and raw ones count too, as in
    /// the editor's "Cell 3 of 10").
    number: usize,
    source: String,
    /// The JSON value of `"source"` (a string or an array of strings).
    value: Range<usize>,
    style: Style,
}

/// How a cell's source is spelled, to spell a fixed one the same way.
enum Style {
    /// One JSON string.
    Text,
    /// An array of lines; what stands between `[` and the first line, between lines (the comma
    /// included), and after the last line.
    Lines {
        open: String,
        sep: String,
        close: String,
    },
}

impl Notebook {
    /// Read a notebook. `Ok(None)` for a notebook whose kernel is not Python.
    pub fn parse(raw: String) -> Result<Option<Notebook>, String> {
        let strict = ParseOptions {
            allow_comments: false,
            allow_loose_object_property_names: false,
            allow_trailing_commas: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        };
        let collect = CollectOptions {
            comments: CommentCollectionStrategy::Off,
            tokens: false,
        };
        let parsed = jsonc_parser::parse_to_ast(&raw, &collect, &strict)
            .map_err(|e| format!("not a valid notebook: {e}"))?;
        let Some(Value::Object(top)) = parsed.value else {
            return Err("not a valid notebook: the JSON is not an object".into());
        };
        let Some(cells) = top.get_array("cells") else {
            return Err("not a valid notebook: it has no `cells`".into());
        };
        if cells.elements.is_empty() {
            return Err("the notebook has no cells".into());
        }
        if !is_python(&top) {
            return Ok(None);
        }
        let mut code = Vec::new();
        for (i, cell) in cells.elements.iter().enumerate() {
            let Value::Object(cell) = cell else {
                return Err(format!(
                    "not a valid notebook: cell {} is not an object",
                    i + 1
                ));
            };
            if cell.get_string("cell_type").map(|t| t.value.as_ref()) != Some("code") {
                continue;
            }
            let Some(prop) = cell.get("source") else {
                return Err(format!(
                    "not a valid notebook: cell {} has no source",
                    i + 1
                ));
            };
            let (source, value, style) = match &prop.value {
                Value::StringLit(s) => (s.value.to_string(), s.range, Style::Text),
                Value::Array(a) => (lines(a, i)?, a.range, array_style(&raw, a, prop.range)),
                _ => {
                    return Err(format!(
                        "not a valid notebook: the source of cell {} is not text",
                        i + 1
                    ))
                }
            };
            code.push(CodeCell {
                number: i + 1,
                source,
                value: value.start..value.end,
                style,
            });
        }
        Ok(Some(Notebook { raw, cells: code }))
    }

    /// The code cells' sources, in order.
    pub fn sources(&self) -> Vec<&str> {
        self.cells.iter().map(|c| c.source.as_str()).collect()
    }

    /// Each code cell's 1-based number among all cells.
    pub fn numbers(&self) -> Vec<usize> {
        self.cells.iter().map(|c| c.number).collect()
    }

    /// The notebook's text with the code cells' sources replaced by `sources` (one per code
    /// cell); only the sources that changed are rewritten.
    pub fn with_sources(&self, sources: &[String]) -> String {
        let mut out = String::with_capacity(self.raw.len());
        let mut at = 0;
        for (cell, new) in self.cells.iter().zip(sources) {
            if *new == cell.source {
                continue;
            }
            out.push_str(&self.raw[at..cell.value.start]);
            out.push_str(&spell(new, &cell.style));
            at = cell.value.end;
        }
        out.push_str(&self.raw[at..]);
        out
    }
}

/// Whether a notebook runs Python (or does not say).
fn is_python(top: &Object) -> bool {
    let Some(meta) = top.get_object("metadata") else {
        return true;
    };
    let language = meta
        .get_object("kernelspec")
        .and_then(|k| k.get_string("language"))
        .or_else(|| {
            meta.get_object("language_info")
                .and_then(|l| l.get_string("name"))
        });
    language.is_none_or(|l| l.value.eq_ignore_ascii_case("python"))
}

fn lines(a: &Array, cell: usize) -> Result<String, String> {
    let mut out = String::new();
    for v in &a.elements {
        match v {
            Value::StringLit(s) => out.push_str(&s.value),
            _ => {
                return Err(format!(
                    "not a valid notebook: the source of cell {} holds a value that is not text",
                    cell + 1
                ))
            }
        }
    }
    Ok(out)
}

fn array_style(raw: &str, a: &Array, prop: jsonc_parser::common::Range) -> Style {
    let inner = a.range.start + 1..a.range.end - 1;
    let ranges: Vec<_> = a
        .elements
        .iter()
        .map(|v| match v {
            Value::StringLit(s) => s.range.start..s.range.end,
            _ => inner.clone(),
        })
        .collect();
    match (ranges.first(), ranges.last()) {
        (Some(first), Some(last)) => {
            let open = raw[inner.start..first.start].to_string();
            let sep = match ranges.get(1) {
                Some(second) => raw[first.end..second.start].to_string(),
                None => format!(",{open}"),
            };
            Style::Lines {
                open,
                sep,
                close: raw[last.end..inner.end].to_string(),
            }
        }
        _ => {
            // `[]`: indent one step (nbformat's one space) past the `"source"` key's line.
            let line_start = raw[..prop.start].rfind('\n').map_or(0, |i| i + 1);
            let indent: String = raw[line_start..prop.start]
                .chars()
                .take_while(|c| c.is_whitespace())
                .collect();
            Style::Lines {
                open: format!("\n{indent} "),
                sep: format!(",\n{indent} "),
                close: format!("\n{indent}"),
            }
        }
    }
}

/// A cell's source spelled as JSON in `style`.
fn spell(source: &str, style: &Style) -> String {
    let quote = |s: &str| serde_json::to_string(s).expect("a string serialises");
    match style {
        Style::Text => quote(source),
        Style::Lines { .. } if source.is_empty() => "[]".into(),
        Style::Lines { open, sep, close } => {
            let lines: Vec<String> = source.split_inclusive('\n').map(quote).collect();
            format!("[{open}{}{close}]", lines.join(sep))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": ["# Title é"]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "metadata": {},
   "outputs": [],
   "source": [
    "import torch\n",
    "x = 1"
   ]
  },
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [],
   "source": []
  },
  {
   "cell_type": "code",
   "metadata": {},
   "outputs": [],
   "source": "y = 2\n"
  }
 ],
 "metadata": {"kernelspec": {"language": "python"}},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    #[test]
    fn reads_code_cells_with_their_numbers() {
        let nb = Notebook::parse(NB.into()).unwrap().unwrap();
        assert_eq!(nb.sources(), ["import torch\nx = 1", "", "y = 2\n"]);
        assert_eq!(nb.numbers(), [2, 3, 4]);
        let same: Vec<String> = nb.sources().iter().map(|s| s.to_string()).collect();
        assert_eq!(nb.with_sources(&same), NB);
    }

    #[test]
    fn writes_back_only_changed_sources_in_their_style() {
        let nb = Notebook::parse(NB.into()).unwrap().unwrap();
        let new = nb.with_sources(&[
            "import torch\nx = \"é\"\n".into(),
            "z = 3\nw = 4".into(),
            "y = 2\n\n".into(),
        ]);
        let expected = NB
            .replace(
                "    \"import torch\\n\",\n    \"x = 1\"\n",
                "    \"import torch\\n\",\n    \"x = \\\"é\\\"\\n\"\n",
            )
            .replace(
                "\"source\": []",
                "\"source\": [\n    \"z = 3\\n\",\n    \"w = 4\"\n   ]",
            )
            .replace("\"source\": \"y = 2\\n\"", "\"source\": \"y = 2\\n\\n\"");
        assert_eq!(new, expected);
        let again = Notebook::parse(new).unwrap().unwrap();
        assert_eq!(
            again.sources(),
            ["import torch\nx = \"é\"\n", "z = 3\nw = 4", "y = 2\n\n"]
        );
    }

    #[test]
    fn bad_notebooks_say_why() {
        for (raw, why) in [
            ("{", "not a valid notebook"),
            ("[]", "not an object"),
            ("{\"metadata\": {}}", "no `cells`"),
            ("{\"cells\": []}", "no cells"),
            ("{\"cells\": [{\"cell_type\": \"code\"}]}", "no source"),
            (
                "{\"cells\": [{\"cell_type\": \"code\", \"source\": 1}]}",
                "not text",
            ),
        ] {
            let err = Notebook::parse(raw.into()).err().unwrap();
            assert!(err.contains(why), "{raw}: {err}");
        }
        let r = r#"{"cells": [{"cell_type": "code", "source": ""}],
                    "metadata": {"kernelspec": {"language": "R"}}}"#;
        assert!(Notebook::parse(r.into()).unwrap().is_none());
    }
}
