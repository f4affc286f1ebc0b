//! Dicts whose entries are read as attributes (`model = Munch(gen=..., disc=...)`, then
//! `model.disc(x)`): the libraries' (`munch`, `easydict`, `addict`: not installed for the
//! oracle) and the program's own (`__getattr__` returning `self[k]`, or `__getattr__ =
//! dict.__getitem__`). Under torch with a class of the file: `tests/fixtures/gan/munch_*`.

mod common;
use common::codes_at;

/// A GAN step whose discriminator steps before the generator's loss, computed through it, is
/// differentiated; `nets` is made by `{make}`.
fn gan(import: &str, make: &str) -> String {
    format!(
        r#"
import torch
import torch.nn as nn
{import}

nets = {make}(gen=nn.Linear(4, 4), disc=nn.Linear(4, 1))
opt_d = torch.optim.SGD(nets.disc.parameters(), lr=0.1)
opt_g = torch.optim.SGD(nets.gen.parameters(), lr=0.1)
d_out = nets.disc(nets.gen(torch.randn(2, 4)))
opt_d.zero_grad()
d_out.mean().backward(retain_graph=True)
opt_d.step()
opt_g.zero_grad()
(-d_out.mean()).backward()
opt_g.step()
"#
    )
}

#[test]
fn library_attribute_dicts_hold_their_entries() {
    for (import, make) in [
        ("from easydict import EasyDict", "EasyDict"),
        ("from munch import Munch", "Munch"),
        ("import munch", "munch.Munch"),
        ("from addict import Dict", "Dict"),
    ] {
        let text = gan(import, make);
        assert_eq!(codes_at(&text, "opt_d.step()"), ["IP304"], "{make}");
    }
}

#[test]
fn a_dict_subclass_with_getattr_as_dict_getitem_holds_its_entries() {
    let class = "class AttrDict(dict):\n    __getattr__ = dict.__getitem__\n";
    let text = gan(class, "AttrDict");
    assert_eq!(codes_at(&text, "opt_d.step()"), ["IP304"]);
}

#[test]
fn a_plain_dict_entry_is_no_attribute_of_an_unknown_library_object() {
    // (`Config` of an unknown library may be anything: nothing is assumed about its attributes.)
    let text = gan("from somewhere import Config", "Config");
    assert!(codes_at(&text, "opt_d.step()").is_empty());
}

#[test]
fn entries_named_like_dict_methods_stay_methods() {
    let text = r#"
import torch
import torch.nn as nn
from easydict import EasyDict

cfg = EasyDict(items=nn.Sigmoid(), act=nn.Sigmoid())
x = torch.randn(2, 4, requires_grad=True)
for k in cfg.items():
    pass
y = cfg.act(x * 2)
y += 1
y.sum().backward()
"#;
    assert_eq!(codes_at(text, "y += 1"), ["IP301"]);
}
