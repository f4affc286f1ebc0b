//! Command-line settings: an `argparse.ArgumentParser` collects its options' defaults, and
//! `parse_args()` gives a namespace that holds them (`args.enc_activation` is the default
//! `"relu"`), so a layer a script picks by a setting (`ACTIVATION[args.act]()`) is the one it
//! builds when run without flags: the configuration that exists. A string default is taken as
//! the value; a flag (`store_true`, a boolean default) may be either; anything else is its
//! default or what the command line gives (unknown).

use super::*;

impl Interp<'_, '_> {
    /// `argparse.ArgumentParser(...)`: a namespace of defaults, filled by `add_argument`.
    pub(super) fn new_arg_parser(&mut self) -> Vals {
        let d = self.keyed_dict(Vec::new());
        self.arg_parsers.insert(d);
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
        if !self.arg_parsers.contains(&p) {
            return None;
        }
        let meth = self.name(meth).to_string();
        Some(match meth.as_str() {
            "add_argument" => {
                if let Some(dest) = self.option_dest(args) {
                    let value = self.option_value(args);
                    self.store_entry(p, Some(dest), Index::Key, &Vals::new(), &value, call);
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
                self.apply_argv(args, &mut entries);
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

    /// `parse_args(["--enc_activation", "gelu", "--amp"])` of a list of known strings: each
    /// option named there (by its long name) set to the string after it, or on for a flag.
    /// (An option converted by a `type` is unknown then.)
    fn apply_argv(&mut self, args: &Args, entries: &mut [(Name, Vals, Span)]) {
        let Some(argv) = args.first().cloned() else {
            return;
        };
        let Some(tokens) = self.exact_strings(&argv) else {
            return;
        };
        let mut i = 0;
        while i < tokens.len() {
            let token = tokens[i].clone();
            i += 1;
            let Some(option) = token.strip_prefix("--") else {
                continue;
            };
            let (option, inline) = match option.split_once('=') {
                Some((o, v)) => (o, Some(v.to_string())),
                None => (option, None),
            };
            let dest = self.intern(&option.replace('-', "_"));
            let Some(entry) = entries.iter_mut().find(|(k, ..)| *k == dest) else {
                continue;
            };
            let flag = entry.1.as_slice() == [TRUE, FALSE];
            let given_inline = inline.is_some();
            let value = match inline {
                Some(v) => Some(v),
                None if flag => None,
                None => tokens.get(i).filter(|t| !t.starts_with('-')).cloned(),
            };
            if value.is_some() && !given_inline {
                i += 1;
            }
            entry.1 = match value {
                None => smallvec![TRUE],
                Some(_) if entry.1.contains(&UNKNOWN) => smallvec![UNKNOWN],
                Some(v) => {
                    let v = self.intern(&v);
                    smallvec![self.string(v)]
                }
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

    /// Where an option is stored: `dest=`, else its first long name (`--enc-activation` ->
    /// `enc_activation`), else its first short one, else the positional's name.
    fn option_dest(&mut self, args: &Args) -> Option<Name> {
        let dest = self.intern("dest");
        if let Some((v, ..)) = args.keyword(dest) {
            return self.one_exact_str(v);
        }
        let names: SmallVec<[String; 2]> = (args.positional.iter())
            .filter_map(|(v, _)| self.one_exact_str(v))
            .map(|n| self.name(n).to_string())
            .collect();
        let chosen = (names.iter().find(|n| n.starts_with("--")))
            .or_else(|| names.iter().find(|n| n.starts_with('-')))
            .or_else(|| names.first())?;
        let dest = chosen.trim_start_matches('-').replace('-', "_");
        Some(self.intern(&dest))
    }

    /// What the option holds when the command line does not set it (see the module's note).
    fn option_value(&mut self, args: &Args) -> Vals {
        let mut word = |k: &str| {
            let k = self.intern(k);
            args.keyword(k).map(|(v, ..)| v.clone())
        };
        let (action, kind, default) = (word("action"), word("type"), word("default"));
        match action
            .and_then(|a| self.one_exact_str(&a))
            .map(|a| self.name(a))
        {
            Some("store_true" | "store_false") => return smallvec![TRUE, FALSE],
            Some(_) => return smallvec![UNKNOWN],
            None => {}
        }
        // (`type=int, default="3"`: argparse converts a string default; no longer that string.)
        let converted = kind.is_some_and(|t| {
            !matches!(t.as_slice(), [one]
                if matches!(self.obj(*one), Obj::Path(p) if self.name(*p) == "builtins.str"))
        });
        match default {
            Some(d) if !converted => self.setting_value(&d),
            Some(mut d) => {
                d.push(UNKNOWN);
                d
            }
            None => smallvec![NONE, UNKNOWN],
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
        let mut out = v.clone();
        if !out.contains(&UNKNOWN) {
            out.push(UNKNOWN);
        }
        out
    }
}
