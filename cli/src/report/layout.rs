//! A layered (Sugiyama-style) layout of a directed graph: layers by longest
//! path from the sources, order within a layer by barycentre sweeps, then
//! coordinates. Edges that would close a cycle are ignored for layering.

/// Where each node goes (its top-left corner) and the drawing's size.
pub struct Layout {
    pub pos: Vec<(f64, f64)>,
    pub width: f64,
    pub height: f64,
}

pub const NODE_W: f64 = 132.0;
pub const NODE_H: f64 = 38.0;
const GAP_X: f64 = 26.0;
const GAP_Y: f64 = 46.0;
/// Barycentre sweeps (down and up count as one each).
const SWEEPS: usize = 8;

/// Lays out `n` nodes joined by `edges` (`from → to`, node indices).
pub fn layered(n: usize, edges: &[(usize, usize)]) -> Layout {
    let edges: Vec<(usize, usize)> = edges
        .iter()
        .copied()
        .filter(|&(a, b)| a < n && b < n && a != b)
        .collect();
    let layer = layers(n, &edges);
    let depth = layer.iter().copied().max().map_or(0, |d| d + 1);
    // Initial order: node index (program order) within each layer.
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (v, &l) in layer.iter().enumerate() {
        rows[l].push(v);
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in &edges {
        succs[a].push(b);
        preds[b].push(a);
    }
    let mut rank = vec![0.0f64; n];
    let set_rank = |rows: &[Vec<usize>], rank: &mut Vec<f64>| {
        for row in rows {
            for (i, &v) in row.iter().enumerate() {
                rank[v] = i as f64;
            }
        }
    };
    set_rank(&rows, &mut rank);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (1..depth).collect()
        } else {
            (0..depth.saturating_sub(1)).rev().collect()
        };
        for l in order {
            let row = &mut rows[l];
            let mut keyed: Vec<(f64, usize)> = row
                .iter()
                .map(|&v| {
                    let near = if down { &preds[v] } else { &succs[v] };
                    let near: Vec<f64> = near.iter().map(|&u| rank[u]).collect();
                    let bary = if near.is_empty() {
                        rank[v]
                    } else {
                        near.iter().sum::<f64>() / near.len() as f64
                    };
                    (bary, v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            *row = keyed.into_iter().map(|(_, v)| v).collect();
            for (i, &v) in row.iter().enumerate() {
                rank[v] = i as f64;
            }
        }
    }
    let widest = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = (widest as f64 * (NODE_W + GAP_X) - GAP_X).max(0.0);
    let mut pos = vec![(0.0, 0.0); n];
    for (l, row) in rows.iter().enumerate() {
        let row_w = row.len() as f64 * (NODE_W + GAP_X) - GAP_X;
        let x0 = ((width - row_w) / 2.0).max(0.0);
        for (i, &v) in row.iter().enumerate() {
            pos[v] = (
                x0 + i as f64 * (NODE_W + GAP_X),
                l as f64 * (NODE_H + GAP_Y),
            );
        }
    }
    Layout {
        pos,
        width: width.max(NODE_W),
        height: (depth as f64 * (NODE_H + GAP_Y) - GAP_Y).max(0.0),
    }
}

/// Longest-path layers (Kahn's order; nodes on a cycle are placed after
/// the layers of their acyclic predecessors).
fn layers(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut indeg = vec![0usize; n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        succs[a].push(b);
        indeg[b] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut done = vec![false; n];
    let mut queue: std::collections::VecDeque<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    loop {
        while let Some(v) = queue.pop_front() {
            done[v] = true;
            for &w in &succs[v] {
                // An edge back into a placed (or released) node closes a
                // cycle: ignored.
                if done[w] || indeg[w] == 0 {
                    continue;
                }
                layer[w] = layer[w].max(layer[v] + 1);
                indeg[w] -= 1;
                if indeg[w] == 0 {
                    queue.push_back(w);
                }
            }
        }
        // A cycle: release its first node and go on.
        match (0..n).find(|&v| !done[v]) {
            Some(v) => {
                indeg[v] = 0;
                queue.push_back(v);
            }
            None => break,
        }
    }
    layer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_point_down_and_nodes_do_not_overlap() {
        // A diamond with a long edge: 0→1, 0→2, 1→3, 2→3, 0→3.
        let l = layered(4, &[(0, 1), (0, 2), (1, 3), (2, 3), (0, 3)]);
        for (a, b) in [(0, 1), (0, 2), (1, 3), (2, 3), (0, 3)] {
            assert!(l.pos[a].1 < l.pos[b].1, "{a}→{b}");
        }
        assert_eq!(l.pos[1].1, l.pos[2].1);
        assert!((l.pos[1].0 - l.pos[2].0).abs() >= NODE_W);
        assert!(l.width >= 2.0 * NODE_W);
    }

    #[test]
    fn a_cycle_still_gets_every_node_placed() {
        let l = layered(3, &[(0, 1), (1, 2), (2, 1)]);
        assert_eq!(l.pos.len(), 3);
        assert!(l.pos[0].1 < l.pos[1].1);
        assert!(l.height > 0.0);
    }

    #[test]
    fn barycentre_sweeps_uncross_a_swapped_pair() {
        // 0→3, 1→2: program order puts 2 under 0, crossing the edges.
        let l = layered(4, &[(0, 3), (1, 2)]);
        assert!(l.pos[3].0 < l.pos[2].0);
    }
}
