//! What a method analysed on its own may assume of its instance: the constant constructor
//! arguments every call gives (when the module's run made every instance the text names), not
//! those a spread argument may hide; members a `del` takes off only where the `del` always runs.
//! (The shapes under torch: `tests/fixtures/models/constructor_setting_*`,
//! `tests/fixtures/ip403/spectral_norm_*`.)

mod common;
use common::codes;

fn blocks_made_with(args: &str) -> String {
    format!(
        r#"
import json
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim, activation="lrelu"):
        super().__init__()
        if activation == "relu":
            self.act = nn.ReLU(inplace=True)
        else:
            self.act = nn.LeakyReLU(0.2)
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        x_s = x
        dx = self.lin(self.act(x))
        return x_s + dx


opts = json.loads(open("cfg.json").read())
block = Block({args})
"#
    )
}

#[test]
fn constant_arguments_every_call_gives_decide_the_instance() {
    assert!(codes(&blocks_made_with("4")).is_empty());
    assert!(codes(&blocks_made_with("4, activation='lrelu'")).is_empty());
    assert_eq!(codes(&blocks_made_with("4, 'relu'")), ["IP402"]);
}

#[test]
fn a_comment_naming_the_class_makes_no_instance_but_a_string_may() {
    // (A comment, `# Block(4, 'relu') would ...`, is no call; a string may be given to `eval`,
    // as yolov5 builds its layers from names, so the instances made may not be all.)
    let commented = blocks_made_with("4").replace(
        "block = Block(4)",
        "# Block(4, 'relu') would rectify the shortcut; 'lrelu' does not\nblock = Block(4)",
    );
    assert!(codes(&commented).is_empty());
    let named =
        blocks_made_with("4").replace("block = Block(4)", "LAYERS = ['Block']\nblock = Block(4)");
    assert_eq!(codes(&named), ["IP402"]);
}

#[test]
fn a_spread_argument_may_give_any_setting() {
    assert_eq!(codes(&blocks_made_with("4, **opts")), ["IP402"]);
    assert_eq!(codes(&blocks_made_with("*opts")), ["IP402"]);
}

#[test]
fn a_member_deleted_under_a_branch_stays_on_the_other_path() {
    let del = |guard: &str| {
        format!(
            r#"
import sys
import torch
import torch.nn as nn

net = nn.Linear(3, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
{guard}del net.bias
for _ in range(2):
    loss = net(torch.randn(2, 3)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    net.bias = nn.Parameter(torch.zeros(3))
"#
        )
    };
    assert_eq!(codes(&del("if len(sys.argv) > 1:\n    ")), ["IP403"]);
    // (Deleted on every path: the new parameter replaces nothing the optimizer holds.)
    assert!(codes(&del("")).is_empty());
}
