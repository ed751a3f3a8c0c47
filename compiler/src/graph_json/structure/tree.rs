//! The region tree the structurizer builds: the flow body is region 0, and
//! every arm of a control marker is a region whose parent is the region the
//! marker sits in. Ancestor and lowest-common-ancestor queries use jump
//! pointers (O(log depth) each), so placing every node costs O(E log R)
//! however deeply the markers nest, with no recursion.

/// One region: where it hangs and which arm of which marker it is.
#[derive(Clone, Copy, Debug)]
pub struct Arm {
    /// Index of the marker in the structurizer's list (not a node index).
    pub ctl: usize,
    /// The arm's position among the marker's regions.
    pub arm: usize,
}

pub struct Tree {
    depth: Vec<usize>,
    /// `up[r][k]` is the ancestor `2^k` levels above `r` (the root is its
    /// own ancestor).
    up: Vec<Vec<usize>>,
    pub arm: Vec<Option<Arm>>,
}

impl Tree {
    pub fn new() -> Tree {
        Tree {
            depth: vec![0],
            up: vec![vec![0]],
            arm: vec![None],
        }
    }

    pub fn add(&mut self, parent: usize, arm: Arm) -> usize {
        let id = self.depth.len();
        let depth = self.depth[parent] + 1;
        let mut up = vec![parent];
        let mut k = 0;
        while (1usize << (k + 1)) <= depth {
            let mid = up[k];
            let next = self.up[mid].get(k).copied().unwrap_or(0);
            up.push(next);
            k += 1;
        }
        self.depth.push(depth);
        self.up.push(up);
        self.arm.push(Some(arm));
        id
    }

    pub fn depth(&self, r: usize) -> usize {
        self.depth[r]
    }

    pub fn parent(&self, r: usize) -> usize {
        self.up[r][0]
    }

    /// The ancestor of `r` at depth `d` (`d <= depth(r)`).
    fn lift(&self, mut r: usize, d: usize) -> usize {
        let mut diff = self.depth[r].saturating_sub(d);
        let mut k = 0;
        ais_ir::work::add(1 + usize::BITS as usize - diff.leading_zeros() as usize);
        while diff > 0 {
            if diff & 1 == 1 {
                r = self.up[r].get(k).copied().unwrap_or(0);
            }
            diff >>= 1;
            k += 1;
        }
        r
    }

    /// Whether `a` is `b` or encloses it.
    pub fn encloses(&self, a: usize, b: usize) -> bool {
        self.depth[a] <= self.depth[b] && self.lift(b, self.depth[a]) == a
    }

    pub fn lca(&self, a: usize, b: usize) -> usize {
        let d = self.depth[a].min(self.depth[b]);
        let (mut a, mut b) = (self.lift(a, d), self.lift(b, d));
        if a == b {
            return a;
        }
        let mut k = self.up[a].len();
        while k > 0 {
            k -= 1;
            let (ua, ub) = (
                self.up[a].get(k).copied().unwrap_or(0),
                self.up[b].get(k).copied().unwrap_or(0),
            );
            if ua != ub {
                a = ua;
                b = ub;
            }
        }
        self.parent(a)
    }

    /// The child of `outer` on the way down to `inner` (`outer` strictly
    /// encloses `inner`).
    pub fn child_towards(&self, outer: usize, inner: usize) -> usize {
        self.lift(inner, self.depth[outer] + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_and_lca_on_a_deep_chain_and_a_fork() {
        let mut t = Tree::new();
        let mut chain = vec![0];
        let mut last = 0;
        for i in 0..100 {
            last = t.add(last, Arm { ctl: i, arm: 0 });
            chain.push(last);
        }
        let fork = t.add(chain[40], Arm { ctl: 999, arm: 1 });
        assert!(t.encloses(chain[10], chain[90]));
        assert!(!t.encloses(chain[90], chain[10]));
        assert_eq!(t.lca(chain[90], fork), chain[40]);
        assert_eq!(t.lca(chain[90], chain[3]), chain[3]);
        assert_eq!(t.child_towards(chain[40], chain[90]), chain[41]);
        assert_eq!(t.depth(fork), 41);
    }
}
