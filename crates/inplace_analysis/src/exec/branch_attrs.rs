//! Module attributes set inside the arms of an `if`. A module's attributes live in the heap,
//! which paths share, so without care the last arm run wins: `if act == "relu": self.act =
//! nn.ReLU(inplace=True) else: self.act = nn.Identity()` would leave only the `Identity`. Each
//! arm instead starts from the attributes as they were before the `if`, and after it every
//! attribute an arm set holds what each path left (the value before, for a path that did not
//! set it).

use super::Interp;
use crate::domain::*;
use crate::ir::Name;

/// What one arm did: per attribute it set, the value before the `if` and the value it left.
pub(super) type Arm = Vec<((ObjId, Name), Vals, Vals)>;

impl Interp<'_, '_> {
    /// Start following the attribute writes of an `if`'s arms; returns the mark to pass on.
    pub(super) fn arms_begin(&mut self) -> usize {
        self.branching += 1;
        self.attr_log.len()
    }

    /// Note a module attribute about to be replaced (its value before), inside an `if`.
    pub(super) fn note_attr_write(&mut self, o: ObjId, attr: Name, old: &Vals) {
        if self.branching > 0 {
            self.attr_log.push((o, attr, old.clone()));
        }
    }

    /// The attributes the arm just run set (since `mark`), put back as they were before it.
    pub(super) fn arm_end(&mut self, mark: usize) -> Arm {
        let mut arm: Arm = Vec::new();
        let log: Vec<_> = self.attr_log.drain(mark..).collect();
        for (o, attr, old) in log {
            if arm.iter().any(|(k, ..)| *k == (o, attr)) {
                continue;
            }
            let now = self.set_module_attr(o, attr, old.clone());
            arm.push(((o, attr), old, now));
        }
        arm
    }

    /// After the last arm: each attribute any arm set holds every arm's value (and the value
    /// before when a path runs no arm that set it).
    pub(super) fn arms_end(&mut self, arms: Vec<Arm>, falls_through: bool) {
        self.branching -= 1;
        // Every attribute some arm set, in order, with its value before the `if` (the same in
        // every arm: each starts from it).
        let mut keys: Vec<((ObjId, Name), Vals)> = Vec::new();
        for (key, before, _) in arms.iter().flatten() {
            if !keys.iter().any(|(k, _)| k == key) {
                keys.push((*key, before.clone()));
            }
        }
        for (key, before) in keys {
            let mut value = Vals::new();
            let arm_values = arms.iter().map(|arm| {
                arm.iter()
                    .find(|(k, ..)| *k == key)
                    .map_or(&before, |(.., now)| now)
            });
            let fallthrough = falls_through.then_some(&before);
            for v in arm_values.chain(fallthrough).flatten() {
                if !value.contains(v) {
                    value.push(*v);
                }
            }
            self.note_attr_write(key.0, key.1, &before);
            self.set_module_attr(key.0, key.1, value);
        }
    }

    /// Set a module's attribute (none when `vals` is empty); the value it had.
    fn set_module_attr(&mut self, o: ObjId, attr: Name, vals: Vals) -> Vals {
        let Obj::Module(m) = self.obj_mut(o) else {
            return Vals::new();
        };
        if vals.is_empty() {
            m.attrs.remove(&attr).unwrap_or_default()
        } else {
            m.attrs.insert(attr, vals).unwrap_or_default()
        }
    }
}
