//! Backwards run by code the analysis cannot see (`accelerator.backward(loss)`, a loss scaler's
//! context manager, a caller in another file given the graph a function returns): the loss's
//! graph is still walked, and no parameter is taken to be without a grad after them, so a later
//! `step()` writes them all. (`accelerate` and `apex` are not
//! installed for the oracle; with a plain `loss.backward()` these shapes are fixtures under
//! torch: `tests/fixtures/optim/actor_critic_*`.)

mod common;
use common::codes_at;

#[test]
fn accelerator_backward_walks_the_loss_graph() {
    let text = r#"
import torch
import torch.nn as nn
from accelerate import Accelerator

accelerator = Accelerator()
model = nn.Linear(4, 4)
y = torch.sigmoid(model(torch.randn(2, 4)))
y.mul_(2)
accelerator.backward(y.sum())
"#;
    assert_eq!(codes_at(text, "y.mul_(2)"), ["IP301"]);
}

#[test]
fn an_opaque_backward_leaves_every_parameter_with_a_grad() {
    let model = r#"
import torch
import torch.nn as nn
from apex import amp


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
        self.pi = nn.Linear(16, 2)
        self.v = nn.Linear(16, 1)

    def forward(self, s):
        h = self.body(s)
        return self.pi(h), self.v(h)


net = ActorCritic()
opt = torch.optim.Adam(net.parameters())
logits, value = net(torch.randn(8, 4))
actor_loss = -logits.log_softmax(-1)[:, 0].mean()
critic_loss = value.pow(2).mean()
opt.zero_grad()
"#;
    // After `zero_grad()` and a backward that reaches only the actor's head, `step()` skips
    // the value head: nothing the critic's backward needs changes.
    let seen = format!(
        "{model}actor_loss.backward(retain_graph=True)\nopt.step()\ncritic_loss.backward()\n"
    );
    assert!(codes_at(&seen, "opt.step()").is_empty());
    // Through a scaler's context manager, what the backward reached is not known.
    let opaque = format!(
        "{model}with amp.scale_loss(actor_loss, opt) as scaled:\n    scaled.backward(retain_graph=True)\nopt.step()\ncritic_loss.backward()\n"
    );
    assert_eq!(codes_at(&opaque, "opt.step()"), ["IP304"]);
}

// A function analysed on its own (no caller in the file: a model module of a project, whose
// training script is elsewhere) that returns a graph: a backward through it may run, so a save
// its in-place write clobbered is reported. The graph may be returned inside the dict the
// function was given (`end_points`, filled by subscript, as point-cloud detectors do). (With a
// caller that runs the backward, the same shape is a fixture under torch:
// `tests/fixtures/projects/dict_outputs_refine_head`.)

const REFINE: &str = r#"
import torch.nn as nn
import torch.nn.functional as F


def decode_scores(net, end_points):
    end_points["center"] = net.transpose(2, 1)
    return end_points


class Refine(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 1)

    def forward(self, feat, end_points):
        original_feature = end_points["aggregated_features"]
        net = F.relu(self.conv(feat))
        net += original_feature
        net = self.conv(net)
        return decode_scores(net, end_points)
"#;

#[test]
fn a_graph_returned_in_the_dict_the_function_was_given_is_walked() {
    assert_eq!(codes_at(REFINE, "net += original_feature"), ["IP301"]);
    // Filled in the function itself, not by a helper.
    let inline = REFINE.replace(
        "return decode_scores(net, end_points)",
        "end_points[\"center\"] = net\n        return end_points",
    );
    assert_eq!(codes_at(&inline, "net += original_feature"), ["IP301"]);
}

#[test]
fn a_dict_returned_without_the_graph_is_not() {
    // The graph is stored nowhere the caller gets: nothing a backward would walk.
    let unused = REFINE.replace("return decode_scores(net, end_points)", "return {\"n\": 1}");
    assert!(codes_at(&unused, "net += original_feature").is_empty());
    // The key stored again with another tensor: the graph the write changed is not returned.
    let replaced = REFINE.replace(
        "return decode_scores(net, end_points)",
        "end_points[\"center\"] = net\n        end_points[\"center\"] = self.conv(feat) * 2\n        return end_points",
    );
    assert!(codes_at(&replaced, "net += original_feature").is_empty());
}
