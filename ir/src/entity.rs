//! Entity references and typed arenas.
//!
//! Every IR object lives in an [`Arena`] and is named by a `u32` newtype
//! ([`Value`], [`Op`], [`Region`], [`FlowId`], [`AgentId`]). No API takes a
//! bare `usize` index: the key type says which arena it belongs to.

use std::fmt;
use std::marker::PhantomData;

/// A `u32` key into an [`Arena`].
pub trait EntityRef: Copy + Eq + std::hash::Hash + fmt::Debug {
    fn new(index: usize) -> Self;
    fn index(self) -> usize;
}

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u32);

        impl $name {
            /// The raw number (stable for the lifetime of the arena).
            pub fn as_u32(self) -> u32 {
                self.0
            }

            /// Builds a reference from a raw number; it is only meaningful for
            /// the arena that produced it.
            pub fn from_u32(n: u32) -> Self {
                $name(n)
            }
        }

        impl EntityRef for $name {
            fn new(index: usize) -> Self {
                // Arenas never grow past u32::MAX entries (see `Arena::push`).
                $name(u32::try_from(index).unwrap_or(u32::MAX))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An SSA value (op result, region argument or flow parameter).
    Value,
    "v"
);
entity!(
    /// An operation in a flow's data-flow graph.
    Op,
    "op"
);
entity!(
    /// A region (flow body or a region owned by a control op).
    Region,
    "^r"
);
entity!(
    /// A flow inside an agent.
    FlowId,
    "flow"
);
entity!(
    /// An agent inside a module.
    AgentId,
    "agent"
);

/// A typed, append-only arena: `push` returns a key of type `K`, which
/// indexes back into it.
#[derive(Clone, PartialEq)]
pub struct Arena<K, V> {
    items: Vec<V>,
    _key: PhantomData<K>,
}

impl<K: EntityRef, V> Default for Arena<K, V> {
    fn default() -> Self {
        Arena::new()
    }
}

impl<K: EntityRef, V: fmt::Debug> fmt::Debug for Arena<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: EntityRef, V> Arena<K, V> {
    pub fn new() -> Self {
        Arena {
            items: Vec::new(),
            _key: PhantomData,
        }
    }

    /// Gives back the room kept for more entries (see [`crate::Dfg::shrink_to_fit`]).
    pub fn shrink_to_fit(&mut self) {
        self.items.shrink_to_fit();
    }

    /// Room for `additional` more entries, allocated at once (a flow's
    /// arenas are sized from its statements before lowering: issue 40).
    pub fn reserve(&mut self, additional: usize) {
        self.items.reserve(additional);
    }

    pub fn push(&mut self, value: V) -> K {
        let k = K::new(self.items.len());
        self.items.push(value);
        k
    }

    pub fn get(&self, k: K) -> Option<&V> {
        self.items.get(k.index())
    }

    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.items.get_mut(k.index())
    }

    pub fn contains(&self, k: K) -> bool {
        k.index() < self.items.len()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The key the next `push` will return.
    pub fn next_key(&self) -> K {
        K::new(self.items.len())
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator + use<K, V> {
        (0..self.items.len()).map(K::new)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> + ExactSizeIterator {
        self.items.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (K, &mut V)> + ExactSizeIterator {
        self.items
            .iter_mut()
            .enumerate()
            .map(|(i, v)| (K::new(i), v))
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.items.iter()
    }
}

impl<K: EntityRef, V> std::ops::Index<K> for Arena<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        &self.items[k.index()]
    }
}

impl<K: EntityRef, V> std::ops::IndexMut<K> for Arena<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.items[k.index()]
    }
}

/// A set of keys of one arena as a bit per key: for sets that grow to hold
/// most of a flow's ops or values (the verifier's "seen" and "in scope"), a
/// bit vector indexed by the dense number stays small and in order where a
/// hash set of a million keys was resized, rehashed and missed the cache on
/// every probe (issue 40).
#[derive(Clone, Default, Debug)]
pub struct DenseSet<K> {
    bits: Vec<u64>,
    _key: PhantomData<K>,
}

impl<K: EntityRef> DenseSet<K> {
    /// Room for keys `0..len` without growing (later keys grow it).
    pub fn with_len(len: usize) -> Self {
        DenseSet {
            bits: vec![0; len.div_ceil(64)],
            _key: PhantomData,
        }
    }

    /// Adds `k`; false if it was already there.
    pub fn insert(&mut self, k: K) -> bool {
        let (w, b) = (k.index() / 64, k.index() % 64);
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        let word = &mut self.bits[w];
        let was = *word & (1 << b) != 0;
        *word |= 1 << b;
        !was
    }

    pub fn remove(&mut self, k: K) {
        if let Some(word) = self.bits.get_mut(k.index() / 64) {
            *word &= !(1 << (k.index() % 64));
        }
    }

    pub fn contains(&self, k: K) -> bool {
        self.bits
            .get(k.index() / 64)
            .is_some_and(|w| w & (1 << (k.index() % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_then_index_by_key() {
        let mut a: Arena<Op, &str> = Arena::new();
        let x = a.push("x");
        let y = a.push("y");
        assert_eq!(a[x], "x");
        assert_eq!(a[y], "y");
        assert_eq!(a.keys().collect::<Vec<_>>(), vec![x, y]);
        assert_eq!(a.get(Op::from_u32(7)), None);
        assert_eq!(format!("{y}"), "op1");
    }

    #[test]
    fn dense_set_inserts_removes_and_grows() {
        let mut s: DenseSet<Value> = DenseSet::with_len(3);
        assert!(s.insert(Value::from_u32(1)));
        assert!(!s.insert(Value::from_u32(1)));
        assert!(s.contains(Value::from_u32(1)));
        assert!(!s.contains(Value::from_u32(2)));
        // Past the sized length: grows instead of failing.
        assert!(s.insert(Value::from_u32(200)));
        assert!(s.contains(Value::from_u32(200)));
        assert!(!s.contains(Value::from_u32(199)));
        s.remove(Value::from_u32(1));
        assert!(!s.contains(Value::from_u32(1)));
        // Removing or asking far out of range is a no-op, not a panic.
        s.remove(Value::from_u32(u32::MAX));
        assert!(!s.contains(Value::from_u32(u32::MAX)));
    }
}
