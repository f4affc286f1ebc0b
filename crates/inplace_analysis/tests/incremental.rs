//! Incremental analysis (what the language server does across versions) must give exactly the
//! findings of a fresh analysis of the same text, while reusing the units an edit did not touch.

use inplace_analysis::{analyze_text, FileState};

mod common;

use common::fixture_files;

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One edit of the kinds typing makes: a character, a new line, a deleted line, a duplicated
/// line, a renamed name.
fn edit(text: &str, rng: &mut Rng) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.is_empty() {
        return "x = 1\n".into();
    }
    let i = rng.below(lines.len());
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match rng.below(6) {
        0 => {
            let l = &out[i];
            let at = (0..=l.len())
                .filter(|c| l.is_char_boundary(*c))
                .nth(rng.below(l.chars().count() + 1))
                .unwrap_or(0);
            let ch = ["1", "x", " ", "_", "(", ".", "#"][rng.below(7)];
            out[i].insert_str(at, ch);
        }
        1 => {
            let indent: String = out[i].chars().take_while(|c| *c == ' ').collect();
            out.insert(i, format!("{indent}_tmp = 0\n"));
        }
        2 => {
            out.remove(i);
        }
        3 => {
            let l = out[i].clone();
            out.insert(i, l);
        }
        4 => {
            out[i] = out[i].replace("x", "z");
        }
        _ => out.push("\ndef _helper(t):\n    return t * 2\n".into()),
    }
    out.concat()
}

fn render(a: &inplace_analysis::Analysis) -> Vec<String> {
    let mut v: Vec<String> = a.findings.iter().map(|f| format!("{f:?}")).collect();
    v.extend(a.sites.iter().map(|s| format!("{s:?}")));
    v
}

#[test]
fn incremental_equals_fresh_on_random_edits() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut reused = 0;
    let mut versions = 0;
    for path in fixture_files() {
        let mut text = std::fs::read_to_string(&path).unwrap();
        let mut state = FileState::new();
        for step in 0..8 {
            let inc = state.analyze(&text);
            let fresh = analyze_text(&text);
            assert_eq!(
                render(&inc),
                render(&fresh),
                "{} after {step} edits differs:\n{text}",
                path.display()
            );
            reused += state.reuse.units_reused;
            versions += 1;
            text = edit(&text, &mut rng);
        }
    }
    assert!(versions > 1000);
    assert!(
        reused * 4 > versions,
        "edits reuse units ({reused} over {versions} versions)"
    );
}

#[test]
fn an_edit_in_one_function_runs_only_what_reads_it() {
    let base = "import torch\n\ndef a(x):\n    y = torch.sigmoid(x)\n    y += 1\n    return y\n\ndef b(x):\n    w = torch.ones(2, requires_grad=True)\n    w.add_(1)\n    return w\n\ndef c(x):\n    return a(x) * 2\n";
    let mut state = FileState::new();
    let first = state.analyze(base);
    assert_eq!(state.reuse.units_reused, 0);
    assert!(!first.findings.is_empty());
    // Typing inside `b`: the module, `a` and `c` are reused; `b` runs again.
    let edited = base.replace("w.add_(1)", "w.add_(2)");
    let second = state.analyze(&edited);
    assert_eq!(state.reuse.units_run, 1, "{:?}", state.reuse);
    assert_eq!(state.reuse.items_lowered, 1);
    assert_eq!(second.findings.len(), first.findings.len());
    // Typing inside `a`: `a` and `c` (which inlines it) run again, `b` does not.
    let edited = edited.replace("y += 1", "y += 10");
    state.analyze(&edited);
    assert_eq!(state.reuse.units_run, 2, "{:?}", state.reuse);
    // A new module-level statement no function reads: only the module runs again.
    let edited = format!("{edited}\n_unused = 3\n");
    state.analyze(&edited);
    assert_eq!(state.reuse.units_run, 1, "{:?}", state.reuse);
}

/// A class the module stops instantiating: the instances unit of the version that did, reused
/// over the module unit that ran again, kept reporting what the class's methods did then (found
/// by the random edits: PAFPN's `neck = PAFPN()` deleted, then its `forward`'s local `outs`).
#[test]
fn a_class_no_longer_instantiated_reports_what_its_methods_do_now() {
    let path = fixture_files()
        .into_iter()
        .find(|p| p.ends_with("gh_mmdet_pafpn_convmodule_relu_inplace_inter_outs_iadd.py"))
        .expect("the PAFPN fixture");
    let v0 = std::fs::read_to_string(path).unwrap();
    let v1 = v0.replacen("neck = PAFPN()\n", "", 1);
    let v2 = v1.replacen("        outs = [inter_outs[0]]\n", "", 1);
    assert!(v0 != v1 && v1 != v2);
    let mut state = FileState::new();
    for text in [&v0, &v1, &v2] {
        let inc = state.analyze(text);
        assert_eq!(render(&inc), render(&analyze_text(text)), "{text}");
    }
}

#[test]
fn a_document_lowered_on_several_threads_equals_fresh() {
    // Every fixture in one text: far more than a thread's share, so opening it lowers on the
    // pool's threads (`Program::prelower`), each with its own interner.
    let once: String = fixture_files()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap() + "\n")
        .collect();
    let text = once.repeat(3);
    assert!(text.len() > 128 * 1024, "{} bytes", text.len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let mut state = FileState::new();
    let inc = pool.install(|| state.analyze(&text));
    let fresh = analyze_text(&text);
    assert!(!fresh.findings.is_empty());
    assert_eq!(render(&inc), render(&fresh));
    // And the next version, one edit later, from those bodies.
    let edited = text.replacen("+= 1", "+= 2", 1);
    let inc = pool.install(|| state.analyze(&edited));
    assert_eq!(render(&inc), render(&analyze_text(&edited)));
}

/// A module-level edit that changes a global the methods read (an `import torch` commented
/// out): the methods run again on the new globals, though their class did not change.
#[test]
fn a_module_edit_reaches_methods_through_their_instances() {
    let text = "import torch\nimport torch.nn as nn\n\n\nclass Recorder(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(3, 3)\n\n    def forward(self, x):\n        self.state = torch.sigmoid(self.lin(x))\n        self.state[:, 0] = 1.0\n        return self.state.sum()\n\n\nm = Recorder()\nloss = m(torch.randn(2, 3))\nloss.backward()\n";
    let mut state = FileState::new();
    assert_eq!(state.analyze(text).findings.len(), 1);
    for edited in [
        text.replacen("import torch\n", "#import torch\n", 1),
        text.to_string(),
        text.replacen("import torch\n", "import numpy as torch\n", 1),
    ] {
        assert_eq!(
            render(&state.analyze(&edited)),
            render(&analyze_text(&edited)),
            "{edited}"
        );
    }
}

/// A base class's method masks through `.data` with an attribute a subclass's `__init__`
/// overrides: whether that is a masking value is read from every assignment in the text, so
/// deleting the subclass's line changes the base method's finding (IP401 -> IP410) though
/// neither the base class nor the instance it runs on changed.
#[test]
fn an_attribute_assignment_elsewhere_reaches_the_method_that_masks_with_it() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/ip401/attention_mask_value_overridden_by_subclass.py");
    let text = std::fs::read_to_string(path).unwrap();
    let mut state = FileState::new();
    let _ = state.analyze(&text);
    for edited in [
        text.replacen("        self._mask_value = 0.0\n", "", 1),
        text.clone(),
    ] {
        assert_eq!(
            render(&state.analyze(&edited)),
            render(&analyze_text(&edited)),
            "{edited}"
        );
    }
}
