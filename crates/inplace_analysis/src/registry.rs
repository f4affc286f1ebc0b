//! The rules: codes, names, default severities and documentation.
//!
//! Each rule lives in one file under `rules/`; its `//!` doc comment is the rule's documentation
//! and is read from that file at compile time, so hover, `inplace-lsp explain` and the docs
//! share one text.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Information,
    Hint,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Information => "information",
            Severity::Hint => "hint",
        }
    }
}

/// How a rule's hazard shows at run time (the four forms of the chapter, and cost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// Form ①: raises at the write, on a leaf that requires grad.
    Leaf,
    /// Form ②: raises at the write, on a view of such a leaf.
    LeafView,
    /// Raises at the call: an op given `out=` while one of its tensors requires grad.
    OutArg,
    /// Raises at the write, on a view autograd refuses to rebase (a split's, one made under
    /// `no_grad`, a hooked layer's input or output).
    RefusedView,
    /// Form ③: raises at `backward()`, a saved tensor was modified.
    Saved,
    /// Form ④: never raises; the numbers are silently wrong.
    Silent,
    /// Nothing is wrong, it is slow.
    Cost,
    /// Nothing is wrong here; a habit that would hide a mistake elsewhere.
    Habit,
}

macro_rules! rules {
    ($( $variant:ident => $code:literal, $name:literal, $sev:ident, $form:ident, $default:literal, $file:literal, $summary:literal; )*) => {
        /// Every rule this analyzer knows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        pub enum Rule { $( $variant, )* }

        impl Rule {
            pub const ALL: &'static [Rule] = &[ $( Rule::$variant, )* ];

            /// The code, e.g. `IP301`.
            pub fn code(self) -> &'static str { match self { $( Rule::$variant => $code, )* } }
            /// The kebab-case name, e.g. `saved-output-inplace`.
            pub fn name(self) -> &'static str { match self { $( Rule::$variant => $name, )* } }
            /// The severity of its typical finding (a finding may carry a different one).
            pub fn default_severity(self) -> Severity { match self { $( Rule::$variant => Severity::$sev, )* } }
            /// One line on what it finds.
            pub fn summary(self) -> &'static str { match self { $( Rule::$variant => $summary, )* } }
            /// How its hazard shows at run time.
            pub fn form(self) -> Form { match self { $( Rule::$variant => Form::$form, )* } }
            /// Whether it runs when no selection names it (opt-in rules do not).
            pub fn default_enabled(self) -> bool { match self { $( Rule::$variant => $default, )* } }
            /// The rule's documentation (markdown), from its source file's doc comment.
            pub fn doc(self) -> String {
                let src = match self { $( Rule::$variant => include_str!(concat!("rules/", $file)), )* };
                module_doc(src)
            }
        }
    };
}

rules! {
    LeafInplace => "IP101", "leaf-inplace", Error, Leaf, true, "ip101_leaf_inplace.rs",
        "in-place write to a leaf tensor that requires grad (raises at that line)";
    OutArgRequiresGrad => "IP102", "out-arg-requires-grad", Error, OutArg, true, "ip102_out_arg_requires_grad.rs",
        "an op called with `out=` while one of its tensors requires grad (raises at that line)";
    LeafViewInplace => "IP201", "leaf-view-inplace", Error, LeafView, true, "ip201_leaf_view_inplace.rs",
        "in-place write to a view of a leaf that requires grad, e.g. `x[0] = v` (raises at that line)";
    RefusedViewInplace => "IP202", "refused-view-inplace", Error, RefusedView, true, "ip202_refused_view_inplace.rs",
        "in-place write to a view autograd refuses to rebase: an output of `chunk`/`split`/`unbind` or iteration, a view made under `no_grad`, a hooked layer's output (raises at that line)";
    SavedOutputInplace => "IP301", "saved-output-inplace", Error, Saved, true, "ip301_saved_output_inplace.rs",
        "in-place write to an op's output that its backward needs (raises at `backward()`)";
    SavedInputInplace => "IP302", "saved-input-inplace", Error, Saved, true, "ip302_saved_input_inplace.rs",
        "in-place write to a tensor a later-differentiated op saved as input (raises at `backward()`)";
    InplaceActivationAfterSavingOp => "IP303", "inplace-activation-after-saving-op", Error, Saved, true,
        "ip303_inplace_activation_after_saving_op.rs",
        "`inplace=True` activation right after an op that saved the tensor it overwrites";
    StepBeforeBackward => "IP304", "step-before-backward", Error, Saved, true, "ip304_step_before_backward.rs",
        "`optimizer.step()` between a forward pass and a later `backward()` through it";
    DataBypass => "IP401", "data-bypass", Warning, Silent, true, "ip401_data_bypass.rs",
        "a write through `.data` into a tensor a backward still reads: gradients silently wrong";
    ClobberedAlias => "IP402", "clobbered-alias", Warning, Silent, true, "ip402_clobbered_alias.rs",
        "an in-place write changes a value that is still read later through another name";
    ParamRebind => "IP403", "param-rebind", Warning, Silent, true, "ip403_param_rebind.rs",
        "a parameter is replaced by a new object: the optimizer keeps updating the orphan";
    DataAccess => "IP410", "data-access", Information, Habit, false, "ip410_data_access.rs",
        "opt-in: any other `.data` use (a read, `x.data = v`, a write into what nothing saved)";
    AnomalyModeLeftOn => "IP501", "anomaly-mode-left-on", Information, Cost, true, "ip501_anomaly_mode_left_on.rs",
        "autograd anomaly detection left on slows every op";
}

impl Rule {
    /// Look a rule up by code (`IP301`, case-insensitive) or name (`saved-output-inplace`).
    pub fn from_code_or_name(s: &str) -> Option<Rule> {
        Rule::ALL
            .iter()
            .copied()
            .find(|r| r.code().eq_ignore_ascii_case(s) || r.name() == s)
    }

    /// The address of the rule's documentation.
    pub fn url(self) -> String {
        format!(
            "https://github.com/inplace-lsp/inplace-lsp/blob/main/crates/inplace_analysis/src/rules/{}.rs",
            self.file_stem()
        )
    }

    fn file_stem(self) -> String {
        format!(
            "{}_{}",
            self.code().to_lowercase(),
            self.name().replace('-', "_")
        )
    }
}

/// The `//!` lines at the top of a Rust source file, without their prefix.
fn module_doc(src: &str) -> String {
    let mut out = String::new();
    for line in src.lines() {
        let Some(rest) = line.strip_prefix("//!") else {
            break;
        };
        out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        out.push('\n');
    }
    out.trim_end().to_string() + "\n"
}

/// Selects rules by code, code prefix (`IP3`) or name, as `--select` / `--ignore` do.
#[derive(Debug, Clone, Default)]
pub struct RuleSelection {
    pub select: Vec<String>,
    pub ignore: Vec<String>,
}

impl RuleSelection {
    /// Whether a selector matches a rule: `ALL`, a code prefix, or the exact name.
    pub fn matches(selector: &str, rule: Rule) -> bool {
        let s = selector.trim();
        s.eq_ignore_ascii_case("ALL")
            || (!s.is_empty() && rule.code().starts_with(&s.to_ascii_uppercase()))
            || rule.name() == s
    }

    /// A selector that matches no rule (a typo) is reported by callers.
    pub fn is_known_selector(selector: &str) -> bool {
        Rule::ALL.iter().any(|r| Self::matches(selector, *r))
    }

    /// Enabled: selected (or, with no selection, on by default) and not ignored.
    pub fn enabled(&self, rule: Rule) -> bool {
        let selected = if self.select.is_empty() {
            rule.default_enabled()
        } else {
            self.select.iter().any(|s| Self::matches(s, rule))
        };
        selected && !self.ignore.iter().any(|s| Self::matches(s, rule))
    }

    /// Not excluded by this selection: named by its `select` (or it has none) and not ignored.
    /// (A second selection layered on another, as the editor's over a project's, restricts
    /// without turning opt-in rules off.)
    pub fn allows(&self, rule: Rule) -> bool {
        (self.select.is_empty() || self.select.iter().any(|s| Self::matches(s, rule)))
            && !self.ignore.iter().any(|s| Self::matches(s, rule))
    }
}
