//! A table that continues a frozen one: the heap and the graph of a scope analysed on its own
//! start from the module's final heap and graph (shared, never copied); the scope's changes to
//! those entries are copies of its own, and what it adds is numbered after them.

use rustc_hash::FxHashMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub(crate) struct Layered<T> {
    base: Arc<Vec<T>>,
    changed: FxHashMap<u32, T>,
    added: Vec<T>,
}

impl<T: Clone> Default for Layered<T> {
    fn default() -> Self {
        Layered {
            base: Arc::new(Vec::new()),
            changed: FxHashMap::default(),
            added: Vec::new(),
        }
    }
}

impl<T: Clone> Layered<T> {
    /// A table continuing `base`.
    pub fn on(base: Arc<Vec<T>>) -> Self {
        Layered {
            base,
            changed: FxHashMap::default(),
            added: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.base.len() + self.added.len()
    }

    pub fn push(&mut self, v: T) -> u32 {
        self.added.push(v);
        (self.len() - 1) as u32
    }

    #[inline]
    pub fn get(&self, i: u32) -> &T {
        let b = self.base.len();
        if (i as usize) < b {
            if self.changed.is_empty() {
                return &self.base[i as usize];
            }
            self.changed.get(&i).unwrap_or(&self.base[i as usize])
        } else {
            &self.added[i as usize - b]
        }
    }

    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut T {
        let b = self.base.len();
        if (i as usize) < b {
            let base = &self.base;
            self.changed
                .entry(i)
                .or_insert_with(|| base[i as usize].clone())
        } else {
            &mut self.added[i as usize - b]
        }
    }

    /// Everything, frozen: the base of the tables of later scopes.
    pub fn freeze(self) -> Arc<Vec<T>> {
        if self.changed.is_empty() && self.added.is_empty() {
            return self.base;
        }
        let mut all: Vec<T> = Vec::with_capacity(self.len());
        all.extend(self.base.iter().cloned());
        for (i, v) in self.changed {
            all[i as usize] = v;
        }
        all.extend(self.added);
        Arc::new(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_stay_in_the_layer() {
        let base = Arc::new(vec![1, 2, 3]);
        let mut a = Layered::on(base.clone());
        *a.get_mut(1) = 20;
        let i = a.push(4);
        assert_eq!((a.get(1), a.get(i), a.len()), (&20, &4, 4));
        assert_eq!(base[1], 2);
        let b = Layered::on(base);
        assert_eq!(b.get(1), &2);
        assert_eq!(*a.freeze(), vec![1, 20, 3, 4]);
    }
}
