//! The nesting tree of a graph's nodes (`parent`), for lifting an edge into
//! the innermost region both its ends share.
//!
//! Walking parent by parent costs each edge the depth it spans, so a graph
//! nested N deep whose inner nodes read outer values costs O(N²). Each node
//! here keeps a jump pointer (Myers' skew-binary scheme: a node jumps to an
//! ancestor such that from any node a walk of O(log depth) jumps and parent
//! steps reaches any ancestor), so building is O(nodes) and one lift is
//! O(log depth). Every step counts as work (`ais_ir::work`): tests double
//! the nesting and check that the count at most doubles.

/// Where a node sits: the flow body (`None`) or region `k` of node `p`.
type Scope = Option<(usize, usize)>;

#[derive(Default)]
pub(super) struct Nesting {
    /// Parent of each node; `root` (the node count) for a body node.
    parent: Vec<usize>,
    /// Depth of each node (body nodes are 1, the virtual root 0).
    depth: Vec<usize>,
    jump: Vec<usize>,
}

impl Nesting {
    /// The tree of `scope`, or the index of a node nested in itself.
    pub(super) fn new(scope: &[Scope]) -> Result<Nesting, usize> {
        let n = scope.len();
        let root = n;
        let mut parent: Vec<usize> = scope.iter().map(|s| s.map_or(root, |(p, _)| p)).collect();
        parent.push(root);
        // Depths: each node is walked once; a walk stops at a node whose
        // depth is known. `seen[i] == w + 1` marks the nodes of walk `w`.
        const UNKNOWN: usize = usize::MAX;
        let mut depth = vec![UNKNOWN; n + 1];
        depth[root] = 0;
        let mut seen = vec![0usize; n];
        let mut path = Vec::new();
        for w in 0..n {
            let mut at = w;
            path.clear();
            while depth[at] == UNKNOWN {
                if seen[at] == w + 1 {
                    return Err(at);
                }
                seen[at] = w + 1;
                path.push(at);
                at = parent[at];
            }
            let mut d = depth[at];
            for &i in path.iter().rev() {
                d += 1;
                depth[i] = d;
            }
            ais_ir::work::add(path.len() + 1);
        }
        // Jump pointers, parents before children (nodes bucketed by depth).
        let max = depth.iter().copied().max().unwrap_or(0);
        let mut by_depth: Vec<Vec<usize>> = vec![Vec::new(); max + 1];
        for (i, &d) in depth.iter().enumerate().take(n) {
            by_depth[d].push(i);
        }
        let mut jump = vec![root; n + 1];
        for level in by_depth.iter().skip(1) {
            for &i in level {
                let p = parent[i];
                let (jp, jjp) = (jump[p], jump[jump[p]]);
                jump[i] = if depth[p] - depth[jp] == depth[jp] - depth[jjp] {
                    jjp
                } else {
                    p
                };
            }
            ais_ir::work::add(level.len());
        }
        Ok(Nesting {
            parent,
            depth,
            jump,
        })
    }

    /// The ancestor of `v` (or `v`) at depth `d` (at most `v`'s).
    fn ancestor(&self, mut v: usize, d: usize) -> usize {
        while self.depth[v] > d {
            ais_ir::work::add(1);
            v = if self.depth[self.jump[v]] >= d {
                self.jump[v]
            } else {
                self.parent[v]
            };
        }
        v
    }

    /// The ancestors of `a` and `b` (each itself included) that are
    /// children of the same node, or both body nodes; `None` when one of
    /// `a`, `b` is inside (or is) the other.
    pub(super) fn siblings(&self, a: usize, b: usize) -> Option<(usize, usize)> {
        let d = self.depth[a].min(self.depth[b]);
        let (mut x, mut y) = (self.ancestor(a, d), self.ancestor(b, d));
        if x == y {
            return None;
        }
        // Same depth, so the jumps of `x` and `y` land at the same depth;
        // where they differ, the common ancestor is above them.
        while self.parent[x] != self.parent[y] {
            ais_ir::work::add(1);
            if self.jump[x] != self.jump[y] {
                (x, y) = (self.jump[x], self.jump[y]);
            } else {
                (x, y) = (self.parent[x], self.parent[y]);
            }
        }
        Some((x, y))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain nested `n` deep: node `i` is in region 0 of node `i - 1`.
    fn chain(n: usize) -> Vec<Scope> {
        (0..n).map(|i| i.checked_sub(1).map(|p| (p, 0))).collect()
    }

    #[test]
    fn siblings_in_a_chain_and_a_fork() {
        // 0 { 1 { 2, 3 }, 4 } and 5 in the body.
        let scope = vec![
            None,
            Some((0, 0)),
            Some((1, 0)),
            Some((1, 0)),
            Some((0, 1)),
            None,
        ];
        let t = Nesting::new(&scope).expect("a tree");
        assert_eq!(t.siblings(2, 3), Some((2, 3)));
        assert_eq!(t.siblings(2, 4), Some((1, 4)));
        assert_eq!(t.siblings(3, 5), Some((0, 5)));
        assert_eq!(t.siblings(0, 3), None);
        assert_eq!(t.siblings(3, 1), None);
    }

    #[test]
    fn a_node_nested_in_itself_is_reported() {
        let scope = vec![Some((1, 0)), Some((0, 0)), None];
        assert!(Nesting::new(&scope).is_err());
    }

    #[test]
    fn lifting_from_the_bottom_to_the_top_is_logarithmic() {
        let work = |n: usize| {
            let t = Nesting::new(&chain(n)).expect("a tree");
            ais_ir::work::take();
            // Every node against the deepest one: O(n log n), not O(n²).
            for i in 0..n {
                assert_eq!(t.siblings(i, n - 1), None);
            }
            ais_ir::work::take()
        };
        let (w1, w2) = (work(2_000), work(4_000));
        assert!(w1 > 0);
        let ratio = w2 as f64 / w1 as f64;
        assert!(
            ratio <= 2.3,
            "work grew {ratio:.2}x for 2x the depth ({w1} -> {w2})"
        );
    }
}
