//! Tests of identity decide branches where the analysis knows both sides are one object: `a is
//! b`, `a.data_ptr() == b.data_ptr()` (of tensors that are not views), `torch.equal(a, b)`, as
//! fairseq's attention picks its fused projection. Anything else stays undecided.

mod common;
use common::codes;

/// A chunk view written in place on the branch `test` picks; a new tensor on the other. The
/// function is called with `args`.
fn chunk_view_scaled_when(test: &str, args: &str) -> String {
    format!(
        r#"import torch
import torch.nn.functional as F

w = torch.randn(8, 4, requires_grad=True)


def attend(a, b):
    if {test}:
        q, k = F.linear(a, w).chunk(2, dim=-1)
    else:
        q = F.linear(a, w[:4])
        k = F.linear(b, w[4:])
    q *= 0.5
    return (q * k).sum()


x = torch.randn(3, 4)
z = torch.randn(3, 4)
ts = [torch.randn(3, 4) for _ in range(2)]
a0, b0 = ts
attend({args}).backward()
"#
    )
}

#[test]
fn one_object_on_both_sides_decides_the_branch() {
    for test in [
        "a is b",
        "a.data_ptr() == b.data_ptr()",
        "a.data_ptr() == b.data_ptr() == a.data_ptr()",
        "torch.equal(a, b)",
    ] {
        assert_eq!(
            codes(&chunk_view_scaled_when(test, "x, x")),
            ["IP202"],
            "{test}"
        );
    }
    // (A `.detach()` alias has the same address.)
    assert_eq!(
        codes(&chunk_view_scaled_when(
            "a.data_ptr() == b.data_ptr()",
            "x, x.detach()"
        )),
        ["IP202"]
    );
    for test in ["a is not b", "a.data_ptr() != b.data_ptr()"] {
        assert!(
            codes(&chunk_view_scaled_when(test, "x, x")).is_empty(),
            "{test}"
        );
    }
}

#[test]
fn distinct_objects_or_views_leave_it_undecided() {
    // (Undecided, a tensor that is a view on one path only is not taken for one.)
    for (test, args) in [
        ("a is b", "x, z"),
        ("a.data_ptr() == b.data_ptr()", "x, z"),
        ("a.data_ptr() == b.data_ptr()", "x[0], x[0]"),
        ("torch.equal(a, b)", "x, z"),
        // (A comprehension's element stands for each tensor it makes: distinct at run time.)
        ("a is b", "a0, b0"),
        ("a.data_ptr() == b.data_ptr()", "a0, b0"),
        ("a.data_ptr() == b.data_ptr()", "ts[0], ts[1]"),
    ] {
        assert!(
            codes(&chunk_view_scaled_when(test, args)).is_empty(),
            "{test} with {args}"
        );
    }
}
