//! One file per rule. Each file's `//!` doc comment is the rule's documentation; its functions
//! turn what the engine observed into a [`Finding`] with a message, related locations and a fix.

pub(crate) mod ip101_leaf_inplace;
pub(crate) mod ip201_leaf_view_inplace;
pub(crate) mod ip301_saved_output_inplace;
pub(crate) mod ip302_saved_input_inplace;
pub(crate) mod ip303_inplace_activation_after_saving_op;
pub(crate) mod ip304_step_before_backward;
pub(crate) mod ip401_data_bypass;
pub(crate) mod ip402_clobbered_alias;
pub(crate) mod ip403_param_rebind;
pub(crate) mod ip501_anomaly_mode_left_on;

use crate::engine::model::{Save, Write, WriteKind};
use crate::finding::{Finding, Related, TextRange};
use crate::line_index::LineIndex;
use crate::syntax::NodeExt;
use tree_sitter::Node;

/// The verbatim start of the form ③ runtime error (torch 2.15).
pub const FORM3_MESSAGE: &str =
    "one of the variables needed for gradient computation has been modified by an inplace operation";
/// Form ① (torch 2.15).
pub const FORM1_MESSAGE: &str =
    "a leaf Variable that requires grad is being used in an in-place operation.";
/// Form ② (torch 2.15).
pub const FORM2_MESSAGE: &str =
    "a view of a leaf Variable that requires grad is being used in an in-place operation.";

/// What the rules need to know of the file.
pub(crate) struct Ctx<'t> {
    pub src: &'t str,
    pub lines: &'t LineIndex,
    pub root: Node<'t>,
    /// The local name of the `torch` module, for fixes that write `torch.no_grad()`.
    pub torch: Option<String>,
}

impl<'t> Ctx<'t> {
    pub fn text(&self, r: TextRange) -> &'t str {
        self.src.get(r.start..r.end).unwrap_or("")
    }

    /// 1-based line of a range's start.
    pub fn line(&self, r: TextRange) -> usize {
        self.lines.line_of(r.start) + 1
    }

    /// The source of a range as it reads in a message: one line, at most 60 characters.
    pub fn snippet(&self, r: TextRange) -> String {
        let text = self.text(r);
        let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one.chars().count() > 60 {
            one.chars().take(57).collect::<String>() + "..."
        } else {
            one
        }
    }

    /// The syntax node covering exactly this range (the outermost one).
    pub fn node(&self, r: TextRange) -> Option<Node<'t>> {
        let mut n = self.root.descendant_for_byte_range(r.start, r.end)?;
        if n.start_byte() != r.start || n.end_byte() != r.end {
            return None;
        }
        while let Some(p) = n.parent() {
            if p.start_byte() == r.start && p.end_byte() == r.end && p.k() != "expression_statement"
            {
                n = p;
            } else {
                break;
            }
        }
        Some(n)
    }
}

/// How the write reads in a message: the statement or call, or the module call for `inplace=True`.
pub(crate) fn write_snippet(ctx: &Ctx<'_>, w: &Write) -> String {
    ctx.snippet(w.site)
}

/// Related locations every write finding shares: the view and the call it came through.
pub(crate) fn write_related(ctx: &Ctx<'_>, w: &Write, out: &mut Vec<Related>) {
    if let Some(v) = w.view_origin {
        if v != w.site && !w.site.contains(v) {
            out.push(Related {
                range: v,
                message: format!(
                    "`{}` is a view: it shares the storage and version counter it writes",
                    ctx.snippet(v)
                ),
            });
        }
    }
    if let Some(c) = w.call_site {
        if !c.contains(w.range) {
            out.push(Related {
                range: c,
                message: format!("the write runs inside this call: `{}`", ctx.snippet(c)),
            });
        }
    }
}

/// Which form ③ rule a clobbered save is.
pub(crate) fn form3_rule(w: &Write, save: &Save) -> crate::Rule {
    use crate::Rule::*;
    match w.kind {
        WriteKind::Step => StepBeforeBackward,
        WriteKind::InplaceModule { .. } | WriteKind::InplaceFunctional => {
            InplaceActivationAfterSavingOp
        }
        _ if save.output => SavedOutputInplace,
        _ => SavedInputInplace,
    }
}

/// A form ③ finding: `w` clobbered `save`, and `trigger` (a `backward()` or a return of the
/// graph) needs it.
pub(crate) fn form3_finding(
    ctx: &Ctx<'_>,
    w: &Write,
    save: &Save,
    trigger: TextRange,
    is_backward: bool,
) -> Finding {
    let t = Trigger {
        range: trigger,
        is_backward,
    };
    match form3_rule(w, save) {
        crate::Rule::StepBeforeBackward => ip304_step_before_backward::finding(ctx, w, save, &t),
        crate::Rule::InplaceActivationAfterSavingOp => {
            ip303_inplace_activation_after_saving_op::finding(ctx, w, save, &t)
        }
        crate::Rule::SavedOutputInplace => ip301_saved_output_inplace::finding(ctx, w, save, &t),
        _ => ip302_saved_input_inplace::finding(ctx, w, save, &t),
    }
}

/// Where the runtime will raise form ③.
pub(crate) struct Trigger {
    pub range: TextRange,
    pub is_backward: bool,
}

impl Trigger {
    /// "`loss.backward()` (line 9) will raise" / "it is returned (line 9); a `backward()` through it will raise"
    pub fn clause(&self, ctx: &Ctx<'_>) -> String {
        if self.is_backward {
            format!(
                "`{}` (line {}) will raise: {}",
                ctx.snippet(self.range),
                ctx.line(self.range),
                FORM3_MESSAGE
            )
        } else {
            format!(
                "the graph is returned (line {}), and a `backward()` through it will raise: {}",
                ctx.line(self.range),
                FORM3_MESSAGE
            )
        }
    }

    pub fn related(&self) -> Related {
        Related {
            range: self.range,
            message: if self.is_backward {
                "the runtime raises here, at `backward()`".to_string()
            } else {
                "the graph leaves the function here; a `backward()` through it raises".to_string()
            },
        }
    }
}

/// Related entries for a form ③ finding: the saving op, the trigger, the view and call.
pub(crate) fn form3_related(ctx: &Ctx<'_>, w: &Write, save: &Save, t: &Trigger) -> Vec<Related> {
    let what = if save.output {
        "its output"
    } else {
        "this input"
    };
    let mut related = vec![Related {
        range: save.range,
        message: format!("`{}` saved {what} for backward here", save.op),
    }];
    related.push(t.related());
    write_related(ctx, w, &mut related);
    related
}
