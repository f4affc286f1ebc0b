//! The fix that takes a loop's row by index names its index where nothing else uses that name.

use inplace_analysis::Rule;

fn row_fix_title(text: &str) -> String {
    let a = inplace_analysis::analyze_text(text);
    let f = (a.findings.iter())
        .find(|f| f.rule == Rule::from_code_or_name("IP202").unwrap())
        .unwrap_or_else(|| panic!("an IP202 finding: {:?}", a.findings));
    f.fix.as_ref().expect("a row fix").title.clone()
}

/// At module level each statement is an item of its own: a function elsewhere in the file that
/// reads a global `i` (bound by whoever imports the module; the function does nothing the
/// analysis lowers) keeps its `i`.
#[test]
fn a_module_level_loop_leaves_a_global_other_code_reads() {
    let text = "import torch\n\n\
        def show():\n    \
            print(i)\n\n\
        bias = torch.randn(3, requires_grad=True)\n\
        table = torch.zeros(4, 3)\n\
        for row in table:\n    \
            row += bias\n";
    let title = row_fix_title(text);
    assert!(title.contains("table[k]"), "{title}");
}

/// In a function, only its own body's names count: `i` is free in the one that does not use it,
/// taken in the one that counts with it.
#[test]
fn a_function_uses_the_first_name_its_body_leaves_free() {
    let body = |uses_i: bool| {
        let count = if uses_i {
            "    for i in range(2):\n        h = h * i\n"
        } else {
            ""
        };
        format!(
            "import torch\n\n\
             def scale(h, s):\n{count}    \
                 for row in h:\n        \
                     row.mul_(s)\n    \
                 return h\n\n\
             def other():\n    \
                 return [i for i in range(3)]\n\n\
             scale(torch.randn(4, 3, requires_grad=True) * 2, 2.0).sum().backward()\n"
        )
    };
    assert!(row_fix_title(&body(false)).contains("h[i]"));
    assert!(row_fix_title(&body(true)).contains("h[k]"));
}
