//! Comparisons of known integers decide branches: orderings (`n < 0`) as well as equality
//! (a branch that cannot run writes nothing), but not the ordering of a loop position, which
//! a loop over a summarised container does not pin down.

mod common;
use common::codes;

fn aliased_write_under(test: &str) -> String {
    format!(
        "import torch\nx = torch.randn(3) * 2\ny = x\nn = 0\nif {test}:\n    y.relu_()\nprint(x.sum())\n"
    )
}

#[test]
fn orderings_of_known_integers_decide_the_branch() {
    for dead in ["n < 0", "n > 0", "n >= 1", "0 < 0", "n + 1 <= 0"] {
        assert!(codes(&aliased_write_under(dead)).is_empty(), "{dead}");
    }
    for live in ["n < 1", "n >= 0", "n <= 0", "1 > n"] {
        assert_eq!(codes(&aliased_write_under(live)), ["IP402"], "{live}");
    }
}

#[test]
fn a_position_in_a_summarised_container_is_not_ordered() {
    // (`nn.ModuleList(<generator>)` holds one summary slot: its position 0 is not the last.)
    let text = r#"
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, dims, num_layers):
        super().__init__()
        self.num_layers = num_layers
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip(dims, dims[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x


mlp = MLP([4, 8, 8, 2], 3)
out = mlp(torch.randn(2, 4))
out += 1
out.sum().backward()
"#;
    assert!(codes(text).is_empty());
}

#[test]
fn an_attribute_a_method_may_move_is_not_ordered() {
    // (`self.epoch` is 0 as `__init__` set it, but `set_epoch` moves it: a warm-up gate.)
    let text = r#"
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.epoch = 0

    def set_epoch(self, e):
        self.epoch = e

    def forward(self, x):
        y = torch.sigmoid(self.lin(x))
        if self.epoch > 4:
            y.mul_(0.5)
        return y
"#;
    assert_eq!(codes(text), ["IP301"]);
}

#[test]
fn torch_layers_keep_their_constructor_sizes() {
    // (Each layer's own signature: `nn.Bilinear(in1, in2, out)`, `nn.LazyLinear(out)`, whose
    // `in_features` is known only at the first call; `nn.LSTM`'s `num_layers` defaults to 1.)
    let gated = |layer: &str, test: &str| {
        format!(
            "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.layer = {layer}\n        self.fc = nn.Linear(3, 3)\n\n    def forward(self, x):\n        y = torch.sigmoid(self.fc(x))\n        if {test}:\n            y.mul_(2)\n        return y\n\n\nm = M()\nm(torch.randn(2, 3)).sum().backward()\n"
        )
    };
    let cases = [
        ("nn.Linear(4, 5)", "self.layer.out_features == 5", true),
        ("nn.Linear(4, 5)", "self.layer.out_features == 4", false),
        ("nn.Bilinear(4, 5, 3)", "self.layer.out_features == 3", true),
        (
            "nn.Bilinear(4, 5, 3)",
            "self.layer.in2_features == 4",
            false,
        ),
        ("nn.LazyLinear(3)", "self.layer.in_features != 3", true),
        ("nn.LSTM(4, 8)", "self.layer.num_layers == 1", true),
        ("nn.LSTM(4, 8, 2)", "self.layer.num_layers == 1", false),
    ];
    for (layer, test, fires) in cases {
        let found = codes(&gated(layer, test));
        assert_eq!(found.is_empty(), !fires, "{layer}: {test}: {found:?}");
    }
}
