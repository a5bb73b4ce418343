//! The LRU of client-go's correlator caches (`k8s.io/utils/lru`, i.e. groupcache's), also the bound of the
//! events.k8s.io/v1 series cache: `Get` promotes; `Add` of a present key promotes it and replaces its value;
//! `Add` of a new key pushes it to the front, then evicts the back when over capacity.
//!
//! Keys are byte strings hashed once by the caller (a miss is a `get` then an `add`). Entries live in a
//! `Vec` linked by index, and an evicted entry's slot (key buffer and value) is reused by the key that
//! evicts it, so a full cache allocates nothing: cheaper than the `lru` crate where keys miss (BENCHMARKS.md).

use std::hash::BuildHasher;
use std::num::NonZeroUsize;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

const NIL: u32 = u32::MAX;

struct Node<V> {
    key: Vec<u8>,
    hash: u64,
    /// Towards the front (more recent).
    prev: u32,
    /// Towards the back.
    next: u32,
    value: V,
}

pub struct Lru<V, S = RandomState> {
    table: HashTable<u32>,
    nodes: Vec<Node<V>>,
    front: u32,
    back: u32,
    max: usize,
    hasher: S,
}

impl<V: Default> Lru<V> {
    /// Room grows with use, up to `max` entries.
    pub fn new(max: NonZeroUsize) -> Self {
        Self::with_hasher(max, RandomState::default())
    }
}

impl<V: Default, S: BuildHasher> Lru<V, S> {
    pub fn with_hasher(max: NonZeroUsize, hasher: S) -> Self {
        Lru { table: HashTable::new(), nodes: Vec::new(), front: NIL, back: NIL, max: max.get(), hasher }
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let nodes = &self.nodes;
        self.table
            .find(hash, |&i| {
                let n = &nodes[i as usize];
                n.hash == hash && n.key == key
            })
            .copied()
    }

    /// `Get`: the value of `key` (whose hash is `hash`), promoted to the front.
    pub fn get(&mut self, hash: u64, key: &[u8]) -> Option<&mut V> {
        let i = self.find(hash, key)?;
        self.promote(i);
        Some(&mut self.nodes[i as usize].value)
    }

    /// The value of `key`, left where it is in the order.
    pub fn peek_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut V> {
        let i = self.find(hash, key)?;
        Some(&mut self.nodes[i as usize].value)
    }

    /// `Add`, with the value written in place by the caller: returns the entry (now at the front) and
    /// whether the key was present. For a new key the value is a default or the evicted entry's old value,
    /// so the caller must set all of it.
    pub fn add(&mut self, hash: u64, key: &[u8]) -> (&mut V, bool) {
        if let Some(i) = self.find(hash, key) {
            self.promote(i);
            return (&mut self.nodes[i as usize].value, true);
        }
        let i = if self.nodes.len() < self.max {
            let i = u32::try_from(self.nodes.len()).ok().filter(|&i| i != NIL).expect("LRU over 2^32 - 1 entries");
            self.nodes.push(Node { key: key.to_vec(), hash, prev: NIL, next: NIL, value: V::default() });
            i
        } else {
            // Pushing the new key and then evicting the back is the same as reusing the back's slot.
            let i = self.back;
            let old_hash = self.nodes[i as usize].hash;
            self.table.find_entry(old_hash, |&j| j == i).expect("back entry is in the table").remove();
            self.unlink(i);
            let n = &mut self.nodes[i as usize];
            n.key.clear();
            n.key.extend_from_slice(key);
            n.hash = hash;
            i
        };
        let nodes = &self.nodes;
        self.table.insert_unique(hash, i, |&j| nodes[j as usize].hash);
        self.link_front(i);
        (&mut self.nodes[i as usize].value, false)
    }

    /// `Add` of a new `key` with `value`: returns the value of the entry it evicted, if the cache was full.
    pub fn push(&mut self, hash: u64, key: &[u8], value: V) -> Option<V> {
        let full = self.nodes.len() == self.max;
        let (slot, found) = self.add(hash, key);
        let old = std::mem::replace(slot, value);
        (full && !found).then_some(old)
    }

    /// The most recently used key and its value, left where it is.
    pub fn front_mut(&mut self) -> Option<(&[u8], &mut V)> {
        let n = self.nodes.get_mut(self.front as usize)?;
        Some((&n.key, &mut n.value))
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<V> {
        let i = self.find(hash, key)?;
        Some(self.remove_at(i))
    }

    /// Removes the least recently used entry.
    pub fn pop_back(&mut self) -> Option<(Vec<u8>, V)> {
        let i = self.back;
        if i == NIL {
            return None;
        }
        let key = std::mem::take(&mut self.nodes[i as usize].key);
        Some((key, self.remove_at(i)))
    }

    /// The keys from the least to the most recently used.
    pub fn keys_oldest_first(&self) -> impl Iterator<Item = (u64, &[u8])> {
        let mut i = self.back;
        std::iter::from_fn(move || {
            let n = self.nodes.get(i as usize)?;
            i = n.prev;
            Some((n.hash, n.key.as_slice()))
        })
    }

    /// Removes the entry in slot `i`; the last slot moves into it, so the slots stay dense.
    fn remove_at(&mut self, i: u32) -> V {
        let hash = self.nodes[i as usize].hash;
        self.table.find_entry(hash, |&j| j == i).expect("entry is in the table").remove();
        self.unlink(i);
        let last = (self.nodes.len() - 1) as u32;
        if i != last {
            let (prev, next, moved_hash) = {
                let n = &self.nodes[last as usize];
                (n.prev, n.next, n.hash)
            };
            match prev {
                NIL => self.front = i,
                p => self.nodes[p as usize].next = i,
            }
            match next {
                NIL => self.back = i,
                n => self.nodes[n as usize].prev = i,
            }
            *self.table.find_mut(moved_hash, |&j| j == last).expect("moved entry is in the table") = i;
        }
        self.nodes.swap_remove(i as usize).value
    }

    fn promote(&mut self, i: u32) {
        if self.front != i {
            self.unlink(i);
            self.link_front(i);
        }
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        match prev {
            NIL => self.front = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.back = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn link_front(&mut self, i: u32) {
        let old = self.front;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        match old {
            NIL => self.back = i,
            o => self.nodes[o as usize].prev = i,
        }
        self.front = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lru(max: usize) -> Lru<u32> {
        Lru::new(NonZeroUsize::new(max).unwrap())
    }

    fn get(c: &mut Lru<u32>, k: &str) -> Option<u32> {
        let h = c.hash(k.as_bytes());
        c.get(h, k.as_bytes()).copied()
    }

    /// `Add(k, v)`; returns whether `k` was present.
    fn add(c: &mut Lru<u32>, k: &str, v: u32) -> bool {
        let h = c.hash(k.as_bytes());
        let (slot, found) = c.add(h, k.as_bytes());
        *slot = v;
        found
    }

    /// Keys from front to back, checking the links both ways.
    fn order(c: &Lru<u32>) -> Vec<String> {
        let mut out = vec![];
        let (mut i, mut prev) = (c.front, NIL);
        while i != NIL {
            let n = &c.nodes[i as usize];
            assert_eq!(n.prev, prev);
            out.push(String::from_utf8(n.key.clone()).unwrap());
            (prev, i) = (i, n.next);
        }
        assert_eq!(c.back, prev);
        assert_eq!((out.len(), c.table.len()), (c.len(), c.len()));
        out
    }

    #[test]
    fn add_of_a_new_key_evicts_the_back() {
        let mut c = lru(3);
        for (k, v) in [("a", 1), ("b", 2), ("c", 3)] {
            assert!(!add(&mut c, k, v));
        }
        assert_eq!(order(&c), ["c", "b", "a"]);
        assert!(!add(&mut c, "d", 4));
        assert_eq!(order(&c), ["d", "c", "b"]);
        assert_eq!(get(&mut c, "a"), None);
        assert!(!add(&mut c, "a", 5));
        assert_eq!(order(&c), ["a", "d", "c"]);
        assert_eq!((get(&mut c, "b"), get(&mut c, "a")), (None, Some(5)));
    }

    #[test]
    fn get_promotes() {
        let mut c = lru(3);
        for (k, v) in [("a", 1), ("b", 2), ("c", 3)] {
            add(&mut c, k, v);
        }
        assert_eq!(get(&mut c, "a"), Some(1));
        assert_eq!(order(&c), ["a", "c", "b"]);
        assert_eq!(get(&mut c, "b"), Some(2));
        assert_eq!(order(&c), ["b", "a", "c"]);
        add(&mut c, "d", 4);
        assert_eq!(order(&c), ["d", "b", "a"]);
        // A miss changes nothing.
        assert_eq!(get(&mut c, "c"), None);
        assert_eq!(order(&c), ["d", "b", "a"]);
    }

    #[test]
    fn add_of_a_present_key_replaces_and_promotes() {
        let mut c = lru(3);
        for (k, v) in [("a", 1), ("b", 2), ("c", 3)] {
            add(&mut c, k, v);
        }
        assert!(add(&mut c, "a", 10));
        assert_eq!(order(&c), ["a", "c", "b"]);
        assert_eq!(get(&mut c, "a"), Some(10));
        add(&mut c, "d", 4);
        assert_eq!(order(&c), ["d", "a", "c"]);
        assert_eq!(get(&mut c, "b"), None);
    }

    #[test]
    fn size_one_keeps_the_newest() {
        let mut c = lru(1);
        add(&mut c, "a", 1);
        add(&mut c, "b", 2);
        assert_eq!(order(&c), ["b"]);
        assert_eq!((get(&mut c, "a"), get(&mut c, "b")), (None, Some(2)));
        assert!(add(&mut c, "b", 3));
        assert_eq!(get(&mut c, "b"), Some(3));
    }

    #[test]
    fn keys_are_compared_as_whole_byte_strings() {
        let mut c = lru(4);
        add(&mut c, "ab", 1);
        assert_eq!(get(&mut c, "a"), None);
        assert_eq!(get(&mut c, "abc"), None);
        assert!(add(&mut c, &["a", "b"].concat(), 2));
        assert_eq!(get(&mut c, "ab"), Some(2));
    }

    #[test]
    fn remove_and_pop_back_keep_the_order_and_the_links() {
        let mut c = lru(4);
        for (k, v) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
            add(&mut c, k, v);
        }
        // "a" is in slot 0: the last slot ("d") moves into it.
        let h = c.hash(b"a");
        assert_eq!(c.remove(h, b"a"), Some(1));
        assert_eq!(c.remove(h, b"a"), None);
        assert_eq!(order(&c), ["d", "c", "b"]);
        assert_eq!(get(&mut c, "d"), Some(4));
        assert_eq!(c.pop_back(), Some((b"b".to_vec(), 2)));
        assert_eq!(order(&c), ["d", "c"]);
        let keys: Vec<_> = c.keys_oldest_first().map(|(_, k)| k.to_vec()).collect();
        assert_eq!(keys, [b"c".to_vec(), b"d".to_vec()]);
        let h = c.hash(b"c");
        assert_eq!(c.peek_mut(h, b"c").copied(), Some(3));
        assert_eq!(order(&c), ["d", "c"], "peek does not promote");
        while c.pop_back().is_some() {}
        assert!(c.is_empty() && c.keys_oldest_first().next().is_none());
        assert_eq!(order(&c), Vec::<String>::new());
    }

    #[test]
    fn push_returns_the_evicted_value() {
        let mut c = lru(2);
        let push = |c: &mut Lru<u32>, k: &str, v| {
            let h = c.hash(k.as_bytes());
            c.push(h, k.as_bytes(), v)
        };
        assert_eq!(push(&mut c, "a", 1), None);
        assert_eq!(push(&mut c, "b", 2), None);
        assert_eq!(push(&mut c, "c", 3), Some(1));
        assert_eq!(order(&c), ["c", "b"]);
    }

    #[test]
    fn matches_a_reference_model_under_churn() {
        // A plain Vec model of groupcache's list, front first.
        let mut model: Vec<(String, u32)> = vec![];
        let mut c = lru(5);
        let mut x = 12345u32;
        for step in 0..2000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let k = format!("k{}", (x >> 16) % 9);
            if (x >> 8) % 5 == 1 {
                let pos = model.iter().position(|(mk, _)| *mk == k);
                let h = c.hash(k.as_bytes());
                assert_eq!(c.remove(h, k.as_bytes()), pos.map(|p| model.remove(p).1), "step {step}");
            } else if (x >> 8) % 5 == 0 {
                let pos = model.iter().position(|(mk, _)| *mk == k);
                let expected = pos.map(|p| {
                    let e = model.remove(p);
                    let v = e.1;
                    model.insert(0, e);
                    v
                });
                assert_eq!(get(&mut c, &k), expected, "step {step}");
            } else {
                let found = match model.iter().position(|(mk, _)| *mk == k) {
                    Some(p) => {
                        model.remove(p);
                        true
                    }
                    None => false,
                };
                model.insert(0, (k.clone(), step));
                if model.len() > 5 {
                    model.pop();
                }
                assert_eq!(add(&mut c, &k, step), found, "step {step}");
            }
            assert_eq!(order(&c), model.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
        }
    }
}
