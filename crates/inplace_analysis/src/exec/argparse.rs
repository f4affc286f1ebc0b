//! Command-line settings: an `argparse.ArgumentParser` collects its options' defaults, and
//! `parse_args()` gives a namespace that holds them (`args.enc_activation` is the default
//! `"relu"`), so a layer a script picks by a setting (`ACTIVATION[args.act]()`) is the one it
//! builds when run without flags: the configuration that exists. A string default is taken as
//! the value; a flag (`store_true`, a boolean default) may be either; anything else is its
//! default or what the command line gives (unknown). `parse_args` of a list of known strings
//! sets what it names; a token it cannot place makes every setting unknown.

use super::*;

/// How an option takes its value on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OptionKind {
    /// `store_true` / `store_false`: given, it is this.
    Flag(bool),
    /// One string after it (`--act gelu`, `--act=gelu`); `converted` by a `type` other than
    /// `str` (then unknown here).
    Value { converted: bool },
    /// Anything else (`nargs`, `append`, `count`, a positional): not followed.
    Other,
}

/// One option of a parser: its strings (`-a`, `--act`), where it is stored, how it is given.
#[derive(Debug, Clone)]
pub(crate) struct ParserOption {
    strings: SmallVec<[String; 2]>,
    dest: Name,
    kind: OptionKind,
}

impl Interp<'_, '_> {
    /// `argparse.ArgumentParser(...)`: a namespace of defaults, filled by `add_argument`.
    pub(super) fn new_arg_parser(&mut self) -> Vals {
        let d = self.keyed_dict(Vec::new());
        self.arg_parsers.insert(d, Vec::new());
        smallvec![d]
    }

    /// A method of parser `p`, when it is one: `add_argument` stores the option's default under
    /// its destination, groups add to the parser itself, `set_defaults` overrides defaults,
    /// `parse_args`/`parse_known_args` give a namespace of them.
    pub(super) fn arg_parser_method(
        &mut self,
        p: ObjId,
        meth: Name,
        args: &Args,
        call: Span,
    ) -> Option<Vals> {
        if !self.arg_parsers.contains_key(&p) {
            return None;
        }
        let meth = self.name(meth).to_string();
        Some(match meth.as_str() {
            "add_argument" => {
                if let Some(option) = self.parser_option(args) {
                    let value = self.option_value(args, &option);
                    self.store_entry(p, Some(option.dest), Index::Key, &Vals::new(), &value, call);
                    if let Some(options) = self.arg_parsers.get_mut(&p) {
                        options.push(option);
                    }
                }
                smallvec![self.alloc(Obj::Unknown)]
            }
            "add_argument_group" | "add_mutually_exclusive_group" => smallvec![p],
            "set_defaults" => {
                for (k, v, ..) in args.keywords.clone() {
                    let v = self.setting_value(&v);
                    self.store_entry(p, Some(k), Index::Key, &Vals::new(), &v, call);
                }
                smallvec![NONE]
            }
            m @ ("parse_args" | "parse_known_args") => {
                let mut entries = self.keyed_entries(&smallvec![p]).unwrap_or_default();
                self.apply_argv(p, args, &mut entries);
                let ns = self.keyed_dict(
                    (entries.into_iter())
                        .map(|(k, v, at)| (Some((k, at)), v))
                        .collect(),
                );
                if m == "parse_args" {
                    smallvec![ns]
                } else {
                    let rest = self.alloc(Obj::Unknown);
                    smallvec![self.alloc(Obj::Seq(vec![smallvec![ns], smallvec![rest]]))]
                }
            }
            _ => smallvec![self.alloc(Obj::Unknown)],
        })
    }

    /// `parse_args(["--enc_activation", "gelu", "--amp"])` (or `args=[...]`) of a list of known
    /// strings: each option named there (by one of its strings, or a prefix of one long name
    /// only) set to the string after it, or to the flag's value. A token not placed so (a
    /// positional, an unknown option, `nargs`) leaves every setting unknown.
    fn apply_argv(&mut self, p: ObjId, args: &Args, entries: &mut [(Name, Vals, Span)]) {
        let key = self.intern("args");
        let Some(argv) = args.first().or(args.keyword(key).map(|k| k.0)).cloned() else {
            return;
        };
        let options = self.arg_parsers.get(&p).cloned().unwrap_or_default();
        let given = self
            .exact_strings(&argv)
            .and_then(|tokens| place_tokens(&options, &tokens));
        let Some(given) = given else {
            for (_, v, _) in entries.iter_mut() {
                *v = or_unknown(std::mem::take(v));
            }
            return;
        };
        for (dest, value) in given {
            let Some(entry) = entries.iter_mut().find(|(k, ..)| *k == dest) else {
                continue;
            };
            entry.1 = match value {
                Given::Flag(on) => smallvec![if on { TRUE } else { FALSE }],
                Given::Text(v) => {
                    let v = self.intern(&v);
                    smallvec![self.string(v)]
                }
                Given::Unknown => smallvec![UNKNOWN],
            };
        }
    }

    /// The strings of a list or tuple whose every slot is one known string, in order.
    fn exact_strings(&self, vals: &Vals) -> Option<Vec<String>> {
        let [one] = vals.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*one) else {
            return None;
        };
        if !self.exact_seqs.contains(one) {
            return None;
        }
        (items.iter())
            .map(|v| self.one_exact_str(v).map(|n| self.name(n).to_string()))
            .collect()
    }

    /// An `add_argument(...)` call's option: its strings and where it is stored (`dest=`, else
    /// its first long name, `--enc-activation` -> `enc_activation`, else its first short one,
    /// else the positional's name).
    fn parser_option(&mut self, args: &Args) -> Option<ParserOption> {
        let strings: SmallVec<[String; 2]> = (args.positional.iter())
            .filter_map(|(v, _)| self.one_exact_str(v))
            .map(|n| self.name(n).to_string())
            .collect();
        let word = |it: &mut Self, k: &str| {
            let k = it.intern(k);
            args.keyword(k).map(|(v, ..)| v.clone())
        };
        let dest = match word(self, "dest") {
            Some(v) => self.one_exact_str(&v)?,
            None => {
                let chosen = (strings.iter().find(|n| n.starts_with("--")))
                    .or_else(|| strings.iter().find(|n| n.starts_with('-')))
                    .or_else(|| strings.first())?;
                let dest = chosen.trim_start_matches('-').replace('-', "_");
                self.intern(&dest)
            }
        };
        let action = word(self, "action").and_then(|a| self.one_exact_str(&a));
        let action = action.map(|a| self.name(a).to_string());
        let positional = strings.iter().all(|s| !s.starts_with('-'));
        let (nargs, kind_arg) = (word(self, "nargs"), word(self, "type"));
        // (`type=int`: argparse converts the value, a string default included.)
        let converted = kind_arg.is_some_and(|t| {
            !matches!(t.as_slice(), [one]
                if matches!(self.obj(*one), Obj::Path(p) if self.name(*p) == "builtins.str"))
        });
        let kind = match action.as_deref() {
            Some("store_true") => OptionKind::Flag(true),
            Some("store_false") => OptionKind::Flag(false),
            Some("store") | None if !positional && nargs.is_none() => {
                OptionKind::Value { converted }
            }
            _ => OptionKind::Other,
        };
        Some(ParserOption {
            strings,
            dest,
            kind,
        })
    }

    /// What the option holds when the command line does not set it (see the module's note).
    fn option_value(&mut self, args: &Args, option: &ParserOption) -> Vals {
        let key = self.intern("default");
        let default = args.keyword(key).map(|(v, ..)| v.clone());
        match (option.kind, default) {
            (OptionKind::Flag(_), _) => smallvec![TRUE, FALSE],
            (OptionKind::Value { converted: false }, Some(d)) => self.setting_value(&d),
            (_, Some(d)) => or_unknown(d),
            (_, None) => smallvec![NONE, UNKNOWN],
        }
    }

    /// A default as a setting: a string as itself, a flag either way, anything else itself or
    /// another value.
    fn setting_value(&self, v: &Vals) -> Vals {
        if self.one_exact_str(v).is_some() {
            return v.clone();
        }
        if v.iter().any(|x| matches!(*x, TRUE | FALSE)) {
            return smallvec![TRUE, FALSE];
        }
        or_unknown(v.clone())
    }
}

/// `v`, or what the command line gives instead (unknown).
fn or_unknown(mut v: Vals) -> Vals {
    if !v.contains(&UNKNOWN) {
        v.push(UNKNOWN);
    }
    v
}

/// What the command line gave an option.
enum Given {
    Flag(bool),
    Text(String),
    Unknown,
}

/// The settings `tokens` give, by destination; `None` when a token is not placed (a
/// positional, an option the parser does not have, one taking several values).
fn place_tokens(options: &[ParserOption], tokens: &[String]) -> Option<Vec<(Name, Given)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        i += 1;
        if !token.starts_with('-') || token == "-" || token == "--" {
            return None;
        }
        let (name, inline) = match token.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (token.as_str(), None),
        };
        let exact = options.iter().find(|o| o.strings.iter().any(|s| s == name));
        // (A long option may be given by a prefix that names one only.)
        let option = exact.or_else(|| {
            let mut by_prefix = (options.iter()).filter(|o| {
                name.starts_with("--") && o.strings.iter().any(|s| s.starts_with(name))
            });
            match (by_prefix.next(), by_prefix.next()) {
                (Some(o), None) => Some(o),
                _ => None,
            }
        })?;
        let given = match (option.kind, inline) {
            (OptionKind::Flag(on), None) => Given::Flag(on),
            (OptionKind::Value { converted }, inline) => {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let v = tokens.get(i)?.clone();
                        i += 1;
                        v
                    }
                };
                if converted {
                    Given::Unknown
                } else {
                    Given::Text(value)
                }
            }
            _ => return None,
        };
        out.push((option.dest, given));
    }
    Some(out)
}
