//! Command-line settings: `argparse` options hold their defaults (a string as itself, a flag
//! either way, a converted value unknown), and `parse_args` of a list of known strings sets
//! what it names.

mod common;
use common::codes;

/// A sigmoid, then the activation a setting picks; the parser's options are `options`, parsed
/// from `argv`.
fn script(options: &str, argv: &str) -> String {
    format!(
        r#"import argparse
import torch
import torch.nn as nn

ACTS = {{"relu": nn.ReLU, "gelu": nn.GELU}}
parser = argparse.ArgumentParser()
{options}
args = parser.parse_args({argv})
gate = nn.Sigmoid()
if args.inplace:
    act = nn.Hardtanh(inplace=True)
else:
    act = ACTS[args.act]()
x = torch.randn(2, 3, requires_grad=True)
act(gate(x)).sum().backward()
"#
    )
}

const FLAG: &str = "parser.add_argument(\"--inplace\", action=\"store_true\")";

#[test]
fn a_flag_may_be_on_or_off() {
    let options = format!("{FLAG}\nparser.add_argument(\"--act\", default=\"gelu\")");
    // (Off by default; the command line may turn it on: the in-place arm is followed.)
    assert_eq!(codes(&script(&options, "")), ["IP303"]);
    assert_eq!(codes(&script(&options, "[\"--inplace\"]")), ["IP303"]);
}

/// The activation a string setting picks, after a sigmoid.
fn picked(default: &str, argv: &str) -> String {
    format!(
        r#"import argparse
import torch
import torch.nn as nn

ACTS = {{"relu": nn.ReLU, "gelu": nn.GELU}}
parser = argparse.ArgumentParser()
parser.add_argument("--act", default="{default}", type=str)
parser.add_argument("--width", default=3, type=int)
args = parser.parse_args({argv})
gate = nn.Sigmoid()
act = ACTS[args.act](inplace=True) if args.act == "relu" else ACTS[args.act]()
x = torch.randn(2, args.width, requires_grad=True)
act(gate(x)).sum().backward()
"#
    )
}

#[test]
fn a_string_default_is_the_setting_unless_the_arguments_name_another() {
    assert!(codes(&picked("gelu", "")).is_empty());
    assert_eq!(codes(&picked("relu", "")), ["IP303"]);
    assert!(codes(&picked("relu", "[\"--act\", \"gelu\"]")).is_empty());
    assert_eq!(
        codes(&picked("gelu", "[\"--width\", \"4\", \"--act=relu\"]")),
        ["IP303"]
    );
}
