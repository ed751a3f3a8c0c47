//! The structurizer: the reference's flat control flow (markers whose
//! labels name nodes: `BRANCH_ON_VALUE`, a flat `SWITCH`, `TRY_CATCH` with
//! `try_subgraph`/`catch_subgraph`; `LOOP_START` ... `LOOP_END` pairs)
//! rewritten into our nested form (`regions` on a control node, `parent` on
//! the nodes of each arm, `YIELD` nodes for the values that leave an arm),
//! before the graph is lowered.
//!
//! A node belongs to an arm when it runs only if the arm's first node ran:
//! it is the node the label names, or everything it depends on (by any
//! edge) lies in that arm or around the marker. A node that depends on two
//! arms of one marker is a join and runs after the marker; each value it
//! takes from the arms becomes a result of the control node, the arms'
//! values paired in edge order (a phi: whichever arm ran gives it; an arm
//! with fewer values gives `null`). Result 0 of every control node is the
//! last unused value of the arm that ran, so a graph without `RETURN`
//! still returns what the reference returns (its last node's value).
//!
//! Nodes are placed in one topological pass over a region tree with jump
//! pointers (`tree.rs`): O((N + E) log R) for N nodes, E edges and R arms,
//! no recursion. Flow that does not nest (a label naming a node that runs
//! before its marker, a node named by two labels, an arm's first node that
//! also depends on another arm) is `G0013`.

mod build;
mod markers;
mod tree;

use super::errors::GraphError;
use super::lower::Locator;
use super::schema::{Dependency, Edge, Graph, Node, Parent};
use super::spans::Seg;
use build::{const_node, count, data_edge, has_value, reference_of, region_spec, topo};
use markers::{Kind, Marker, Names};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, HashMap};
use tree::{Arm, Tree};

/// Structures every graph of the document in place.
pub fn structurize(doc: &mut Graph, loc: &Locator) -> Result<(), GraphError> {
    one(doc, &[], loc)?;
    for (i, g) in doc.graphs.iter_mut().enumerate() {
        one(g, &[Seg::Key("graphs"), Seg::Index(i)], loc)?;
    }
    Ok(())
}

/// A value an arm hands on: a node's result.
#[derive(Clone, Copy, Debug)]
struct Src {
    from: u64,
    result: Option<usize>,
    /// The first edge it stands for, to keep operand order.
    order: usize,
}

/// Per arm of one control node, the values one consumer takes from it.
type ArmValues = Vec<(usize, Vec<Src>)>;

struct Ctl {
    /// Id of the control node (the marker's, or a new one for `if`).
    id: u64,
    /// Region the control node is in.
    region: usize,
    /// Region of each arm (created on first use).
    arms: Vec<Option<usize>>,
    /// Per arm, the values its `YIELD` gives (None: `null`).
    yields: Vec<Vec<Option<Src>>>,
    /// Results so far (slot 0 is the arm's last unused value).
    results: usize,
}

fn one(g: &mut Graph, prefix: &[Seg<'static>], loc: &Locator) -> Result<(), GraphError> {
    // Our own nested documents, and documents the lowering will reject for
    // their ids, are left as they are.
    if g.nodes
        .iter()
        .any(|n| n.results.is_some() || n.parent.is_some() || !n.regions.is_empty())
    {
        return Ok(());
    }
    let n = g.nodes.len();
    let mut ids: HashMap<u64, usize> = HashMap::with_capacity(n);
    for (i, node) in g.nodes.iter().enumerate() {
        match node.id {
            Some(id) if !ids.contains_key(&id) => {
                ids.insert(id, i);
            }
            _ => return Ok(()),
        }
    }
    let names = Names::new(g, ids.clone());
    let mut found = markers::find(g, &names);
    let op_is = |i: usize, op: &str| g.nodes[i].op.as_deref() == Some(op);
    let loops = (0..n).any(|i| op_is(i, "LOOP_START")) && (0..n).any(|i| op_is(i, "LOOP_END"));
    // `JUMP`s whose label names another node.
    let jumps: Vec<(usize, usize)> = (0..n)
        .filter(|&i| op_is(i, "JUMP"))
        .filter_map(|i| {
            let x = names.resolve(g.nodes[i].attributes.get("label")?)?;
            (x != i).then_some((i, x))
        })
        .collect();
    if found.is_empty() && !loops && jumps.is_empty() {
        return Ok(());
    }
    let attr_span = |i: usize, key: &str| {
        let mut p: Vec<Seg<'_>> = prefix.to_vec();
        p.extend([
            Seg::Key("nodes"),
            Seg::Index(i),
            Seg::Key("attributes"),
            Seg::Key(key),
        ]);
        loc.at(&p)
    };
    let idv: Vec<u64> = g.nodes.iter().map(|x| x.id.unwrap_or(0)).collect();
    let id_of = |i: usize| idv[i];
    let unstructured = |m: &Marker, arm: usize, message: String| GraphError::Unstructured {
        message,
        span: attr_span(m.node, &m.keys[arm]),
    };

    // Arm targets: each node is named by at most one label.
    let mut target: Vec<Option<(usize, usize)>> = vec![None; n];
    for (c, m) in found.iter().enumerate() {
        for (a, t) in m.targets.iter().enumerate() {
            let Some(t) = *t else { continue };
            if t == m.node {
                return Err(unstructured(
                    m,
                    a,
                    format!("the label of node {} names the node itself", id_of(m.node)),
                ));
            }
            if let Some((c2, _)) = target[t] {
                return Err(unstructured(
                    m,
                    a,
                    format!(
                        "node {} is named by the labels of nodes {} and {}: an arm has one entry",
                        id_of(t),
                        id_of(found[c2].node),
                        id_of(m.node)
                    ),
                ));
            }
            target[t] = Some((c, a));
        }
    }

    // Predecessors by every edge; edges naming unknown nodes are the
    // lowering's to report.
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for e in &g.edges {
        let (Some(f), Some(&t)) = (e.from.and_then(|f| ids.get(&f)), ids.get(&e.to)) else {
            continue;
        };
        preds[t].push(*f);
    }
    let Some(order) = topo(n, &preds, &target, &found, true) else {
        // A cycle of the document's own edges is G0005 (the lowering's);
        // otherwise a label names a node that runs before its marker.
        let Some(plain) = topo(n, &preds, &target, &found, false) else {
            return Ok(());
        };
        let mut pos = vec![0usize; n];
        for (k, &i) in plain.iter().enumerate() {
            pos[i] = k;
        }
        for m in &found {
            for (a, t) in m.targets.iter().enumerate() {
                if let Some(t) = *t {
                    if pos[t] < pos[m.node] {
                        return Err(unstructured(
                            m,
                            a,
                            format!(
                                "the label of node {} names node {}, which runs before it (a backward jump)",
                                id_of(m.node),
                                id_of(t)
                            ),
                        ));
                    }
                }
            }
        }
        return Ok(());
    };

    // A `JUMP` back to a node it depends on is a loop with no bound (the
    // reference bounds every loop: `LOOP_START` has a count); one forward
    // orders nothing here, and is its value (its first input).
    for &(j, x) in &jumps {
        let mut seen = vec![false; n];
        let mut stack = vec![j];
        while let Some(v) = stack.pop() {
            ais_ir::work::add(1 + preds[v].len());
            for &p in &preds[v] {
                if !seen[p] {
                    seen[p] = true;
                    stack.push(p);
                }
            }
        }
        if seen[x] {
            let m = Marker {
                node: j,
                kind: Kind::If,
                targets: vec![Some(x)],
                keys: vec!["label".into()],
            };
            return Err(unstructured(
                &m,
                0,
                format!(
                    "the `JUMP` at node {} goes back to node {}: a loop without a bound; write it as `LOOP_START` (with its count) ... `LOOP_END`",
                    id_of(j),
                    id_of(x)
                ),
            ));
        }
    }
    // A `LOOP_START` from which a `LOOP_END` can be reached is a loop: its
    // body is what depends on it, up to the `LOOP_END` (the reference's code
    // generator writes a loop so). One without stays a flat marker.
    if loops {
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (v, ps) in preds.iter().enumerate() {
            for &p in ps {
                succ[p].push(v);
            }
        }
        let mut reaches_end = vec![false; n];
        for &v in order.iter().rev() {
            reaches_end[v] = succ[v]
                .iter()
                .any(|&w| op_is(w, "LOOP_END") || reaches_end[w]);
        }
        for (v, &ends) in reaches_end.iter().enumerate() {
            if ends && op_is(v, "LOOP_START") {
                found.push(Marker {
                    node: v,
                    kind: Kind::Loop,
                    targets: vec![None],
                    keys: vec!["count_token".into()],
                });
            }
        }
        if found.is_empty() {
            return Ok(());
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let found = found;

    // Place every node in the region tree, in topological order.
    let mut tree = Tree::new();
    let mut region = vec![0usize; n];
    let mut ctl_of: Vec<Option<usize>> = vec![None; n];
    // New nodes (an `if`, `YIELD`s, constants) take ids after the largest;
    // there are fewer than 4 per node and edge of the document.
    let largest = g.nodes.iter().filter_map(|x| x.id).max().unwrap_or(0);
    let room = 4 * (n as u64 + g.edges.len() as u64) + 8;
    let Some(mut next_id) = largest
        .checked_add(1)
        .filter(|b| b.checked_add(room).is_some())
    else {
        return Err(unstructured(
            &found[0],
            0,
            format!("node id {largest} leaves no ids for the nodes the structured graph needs"),
        ));
    };
    let mut ctls: Vec<Ctl> = Vec::with_capacity(found.len());
    for (c, m) in found.iter().enumerate() {
        ctl_of[m.node] = Some(c);
        let id = if m.kind == Kind::If {
            next_id += 1;
            next_id - 1
        } else {
            id_of(m.node)
        };
        ctls.push(Ctl {
            id,
            region: 0,
            arms: vec![None; m.targets.len()],
            yields: vec![Vec::new(); m.targets.len()],
            results: 1,
        });
    }
    let is_loop = |c: usize| found[c].kind == Kind::Loop;
    let mut closed = vec![false; found.len()];
    let mut loop_ends: Vec<usize> = Vec::new();
    for &v in &order {
        ais_ir::work::add(1 + preds[v].len());
        // What depends on a loop's `LOOP_START` is in its body.
        let at = |p: usize, ctls: &[Ctl]| match ctl_of[p] {
            Some(c) if is_loop(c) => ctls[c].arms[0].unwrap_or(region[p]),
            _ => region[p],
        };
        let mut deepest = 0usize;
        for &p in &preds[v] {
            if tree.depth(at(p, &ctls)) > tree.depth(deepest) {
                deepest = at(p, &ctls);
            }
        }
        let chain = preds[v]
            .iter()
            .all(|&p| tree.encloses(at(p, &ctls), deepest));
        let mut placed = if chain {
            deepest
        } else {
            preds[v]
                .iter()
                .fold(deepest, |acc, &p| tree.lca(acc, at(p, &ctls)))
        };
        // A `LOOP_END` closes the innermost loop around it, and runs after
        // the loop.
        if op_is(v, "LOOP_END") && ctl_of[v].is_none() {
            let mut r = placed;
            while r != 0 {
                match tree.arm[r] {
                    Some(a) if is_loop(a.ctl) => {
                        if r != placed {
                            return Err(unstructured(
                                &found[a.ctl],
                                0,
                                format!(
                                    "the `LOOP_END` node {} of the loop at node {} is inside a branch of the loop's body",
                                    id_of(v),
                                    id_of(found[a.ctl].node)
                                ),
                            ));
                        }
                        closed[a.ctl] = true;
                        loop_ends.push(v);
                        placed = tree.parent(r);
                        break;
                    }
                    _ => {
                        ais_ir::work::add(1);
                        r = tree.parent(r)
                    }
                }
            }
        }
        region[v] = match target[v] {
            Some((c, a)) => {
                let rc = region[found[c].node];
                if let Some(&p) = preds[v].iter().find(|&&p| !tree.encloses(region[p], rc)) {
                    return Err(unstructured(
                        &found[c],
                        a,
                        format!(
                            "node {} begins an arm of node {} but also depends on node {}, which is in another arm",
                            id_of(v),
                            id_of(found[c].node),
                            id_of(p)
                        ),
                    ));
                }
                let r = tree.add(rc, Arm { ctl: c, arm: a });
                ctls[c].arms[a] = Some(r);
                r
            }
            None => placed,
        };
        if let Some(c) = ctl_of[v] {
            ctls[c].region = region[v];
            if is_loop(c) {
                ctls[c].arms[0] = Some(tree.add(region[v], Arm { ctl: c, arm: 0 }));
            }
        }
    }
    if let Some(c) = (0..found.len()).find(|&c| is_loop(c) && !closed[c]) {
        return Err(unstructured(
            &found[c],
            0,
            format!(
                "the loop at node {} has no `LOOP_END` of its own (another loop's closes first)",
                id_of(found[c].node)
            ),
        ));
    }
    for (c, ctl) in ctls.iter_mut().enumerate() {
        for (a, r) in ctl.arms.iter_mut().enumerate() {
            if r.is_none() {
                *r = Some(tree.add(ctl.region, Arm { ctl: c, arm: a }));
            }
        }
    }
    let arm_region = |ctls: &[Ctl], c: usize, a: usize| ctls[c].arms[a].unwrap_or(0);
    // Whether region `r` is inside an arm of control `c`.
    let inside = |tree: &Tree, ctls: &[Ctl], c: usize, r: usize| {
        let rc = ctls[c].region;
        rc != r && tree.encloses(rc, r) && {
            let child = tree.child_towards(rc, r);
            tree.arm[child].is_some_and(|x| x.ctl == c)
        }
    };

    // Slot 0: each arm's last unused value (a nested control node's slot 0
    // counts as unused).
    let mut used = vec![false; n];
    for e in &g.edges {
        if e.dependency == Dependency::Data {
            if let Some(&f) = e.from.and_then(|f| ids.get(&f)) {
                used[f] = true;
            }
        }
    }
    let mut last: HashMap<usize, Src> = HashMap::new();
    for (k, &v) in order.iter().enumerate() {
        let src = match ctl_of[v] {
            Some(c) => Some(Src {
                from: ctls[c].id,
                result: Some(0),
                order: k,
            }),
            None if !used[v] && has_value(&g.nodes[v]) => Some(Src {
                from: id_of(v),
                result: None,
                order: k,
            }),
            None => None,
        };
        if let (Some(s), r) = (src, region[v]) {
            if r != 0 {
                last.insert(r, s);
            }
        }
    }
    for c in 0..ctls.len() {
        for a in 0..ctls[c].arms.len() {
            let r = arm_region(&ctls, c, a);
            let s = last.get(&r).copied();
            ctls[c].yields[a].push(s);
        }
    }

    // Edges.
    let pass_through: Vec<Option<Edge>> = (0..found.len())
        .map(|c| {
            let id = id_of(found[c].node);
            g.edges
                .iter()
                .find(|e| e.to == id && e.dependency == Dependency::Data)
                .cloned()
        })
        .collect();
    // The switch's discriminant: the input `discriminant` names, else the
    // first data input.
    let discriminant: Vec<Option<usize>> = (0..found.len())
        .map(|c| {
            if found[c].kind == Kind::Loop {
                let id = id_of(found[c].node);
                return g
                    .edges
                    .iter()
                    .position(|e| e.to == id && e.dependency == Dependency::Data);
            }
            if !matches!(found[c].kind, Kind::Switch(_)) {
                return None;
            }
            let m = &found[c];
            let id = id_of(m.node);
            let named = g.nodes[m.node]
                .attributes
                .get("discriminant")
                .and_then(|d| names.resolve(&reference_of(d)?))
                .map(id_of);
            g.edges
                .iter()
                .position(|e| {
                    e.to == id
                        && e.dependency == Dependency::Data
                        && (named.is_none() || e.from == named)
                })
                .or_else(|| {
                    g.edges
                        .iter()
                        .position(|e| e.to == id && e.dependency == Dependency::Data)
                })
        })
        .collect();
    let mut keep: Vec<Option<Edge>> = Vec::with_capacity(g.edges.len());
    let mut added: Vec<Edge> = Vec::new();
    // Values leaving arms: (region, consumer node) -> sources, by depth.
    let mut pending: BTreeMap<usize, BTreeMap<(usize, usize), Vec<Src>>> = BTreeMap::new();
    let mut first_cut: HashMap<usize, usize> = HashMap::new();
    for (k, e) in g.edges.iter().enumerate() {
        let (Some(from), Some(&v)) = (e.from, ids.get(&e.to)) else {
            keep.push(Some(e.clone()));
            continue;
        };
        let Some(&u) = ids.get(&from) else {
            keep.push(Some(e.clone()));
            continue;
        };
        let (ru, rv) = (region[u], region[v]);
        let data = e.dependency == Dependency::Data;
        // Into an in-place control node: its operands are ours now.
        if let Some(c) = ctl_of[v].filter(|&c| found[c].kind != Kind::If) {
            let operand = discriminant[c] == Some(k);
            let mut e = e.clone();
            if data && !operand {
                e.dependency = Dependency::Control;
            }
            if operand {
                e.operand = Some(0);
            }
            keep.push(Some(e));
            continue;
        }
        // Out of an in-place control node: its flat value is its first
        // input passed on (what the reference's runtime gives).
        if let Some(c) = ctl_of[u].filter(|&c| found[c].kind != Kind::If) {
            let into_arm = inside(&tree, &ctls, c, rv);
            if is_loop(c) && into_arm && data {
                // The item of the iteration.
                let mut e2 = e.clone();
                e2.region_arg = Some([0, 0]);
                e2.result = None;
                keep.push(Some(e2));
                continue;
            }
            match (&pass_through[c], data) {
                (Some(p), true) => {
                    let mut e2 = e.clone();
                    e2.from = p.from;
                    e2.param = p.param.clone();
                    e2.result = p.result;
                    keep.push(Some(e2));
                }
                _ if into_arm => keep.push(None),
                _ => {
                    let mut e2 = e.clone();
                    e2.dependency = Dependency::Control;
                    e2.result = None;
                    keep.push(Some(e2));
                }
            }
            continue;
        }
        if tree.encloses(ru, rv) {
            keep.push(Some(e.clone()));
            continue;
        }
        if !data {
            // Ordering only: after the outermost control node left.
            let a = tree.lca(ru, rv);
            let child = tree.child_towards(a, ru);
            let c = tree.arm[child].map_or(0, |x| x.ctl);
            let mut e2 = e.clone();
            e2.from = Some(ctls[c].id);
            e2.dependency = Dependency::Control;
            e2.result = None;
            keep.push(Some(e2));
            continue;
        }
        first_cut.entry(v).or_insert(k);
        keep.push(None);
        pending
            .entry(tree.depth(ru))
            .or_default()
            .entry((ru, v))
            .or_default()
            .push(Src {
                from,
                result: e.result,
                order: k,
            });
    }
    // Lift the values leaving arms, deepest arms first: one result per
    // position for each (control node, consumer), the arms paired.
    let mut finals: HashMap<usize, Vec<Src>> = HashMap::new();
    while let Some((_, items)) = pending.pop_last() {
        let mut groups: BTreeMap<(usize, usize), ArmValues> = BTreeMap::new();
        for ((r, v), mut srcs) in items {
            ais_ir::work::add(srcs.len());
            srcs.sort_by_key(|s| s.order);
            let arm = tree.arm[r].unwrap_or(Arm { ctl: 0, arm: 0 });
            groups
                .entry((arm.ctl, v))
                .or_default()
                .push((arm.arm, srcs));
        }
        for ((c, v), arms) in groups {
            let width = arms.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
            let order = arms
                .iter()
                .flat_map(|(_, s)| s.iter().map(|x| x.order))
                .min()
                .unwrap_or(0);
            let base = ctls[c].results;
            ctls[c].results += width;
            for a in 0..ctls[c].arms.len() {
                let srcs = arms
                    .iter()
                    .find(|(x, _)| *x == a)
                    .map(|(_, s)| s.as_slice())
                    .unwrap_or(&[]);
                for k in 0..width {
                    let s = srcs.get(k).copied();
                    ctls[c].yields[a].push(s);
                }
            }
            let out: Vec<Src> = (0..width)
                .map(|k| Src {
                    from: ctls[c].id,
                    result: Some(base + k),
                    order,
                })
                .collect();
            let rc = ctls[c].region;
            if tree.encloses(rc, region[v]) {
                finals.entry(v).or_default().extend(out);
            } else {
                pending
                    .entry(tree.depth(rc))
                    .or_default()
                    .entry((rc, v))
                    .or_default()
                    .extend(out);
            }
        }
    }

    // The rewritten graph: the document's nodes and edges keep their
    // places (diagnostics point at them); new ones follow.
    let mut edges: Vec<Edge> = Vec::with_capacity(keep.len() + added.len());
    for (k, e) in keep.into_iter().enumerate() {
        match e {
            Some(e) => edges.push(e),
            None => {
                let to = g.edges[k].to;
                let Some(&v) = ids.get(&to) else { continue };
                if first_cut.get(&v) == Some(&k) {
                    let mut srcs = finals.remove(&v).unwrap_or_default();
                    srcs.sort_by_key(|s| s.order);
                    for s in srcs {
                        edges.push(Edge {
                            from: Some(s.from),
                            to,
                            dependency: Dependency::Data,
                            param: None,
                            result: s.result,
                            region_arg: None,
                            operand: None,
                        });
                    }
                }
            }
        }
    }
    let mut nodes_added: Vec<Node> = Vec::new();
    for (c, m) in found.iter().enumerate() {
        let ctl = &ctls[c];
        let results = Some(vec!["json".to_string(); ctl.results]);
        let parent = tree.arm[ctl.region].map(|x| Parent {
            node: ctls[x.ctl].id,
            region: x.arm,
        });
        match &m.kind {
            Kind::If => {
                nodes_added.push(Node {
                    id: Some(ctl.id),
                    name: format!("{}_if", g.nodes[m.node].name),
                    op: Some("IF".into()),
                    attributes: Default::default(),
                    results,
                    parent,
                    regions: vec![
                        region_spec("then", None, &[]),
                        region_spec("else", None, &[]),
                    ],
                });
                added.push(data_edge(id_of(m.node), ctl.id, None, Some(0)));
            }
            Kind::Switch(keys) => {
                let node = &mut g.nodes[m.node];
                node.attributes.clear();
                node.results = results;
                node.regions = keys
                    .iter()
                    .map(|k| region_spec("case", Some(k.clone()), &[]))
                    .chain(std::iter::once(region_spec("default", None, &[])))
                    .collect();
            }
            Kind::Try => {
                let node = &mut g.nodes[m.node];
                node.attributes.clear();
                node.results = results;
                node.regions = vec![
                    region_spec("try", None, &[]),
                    region_spec("catch", None, &["json"]),
                ];
            }
            Kind::Loop => {
                // Over its input, else over 0..count; every carried value
                // starts as `null` and is the last iteration's value after.
                let outer = tree.arm[ctl.region].map(|x| Parent {
                    node: ctls[x.ctl].id,
                    region: x.arm,
                });
                let node = &mut g.nodes[m.node];
                let count =
                    count(&node.attributes).map_err(|message| GraphError::BadAttribute {
                        message,
                        span: attr_span(m.node, "count_token"),
                    })?;
                node.op = Some("LOOP".into());
                node.attributes.clear();
                node.results = results;
                let mut args = vec!["json", "number"];
                args.extend(std::iter::repeat_n("json", ctl.results));
                node.regions = vec![region_spec("body", None, &args)];
                if discriminant[c].is_none() {
                    let z = next_id;
                    next_id += 1;
                    let items: Vec<Json> = (0..count).map(|i| json!(i)).collect();
                    nodes_added.push(const_node(z, "json", json!(items), outer.clone()));
                    added.push(data_edge(z, ctl.id, None, Some(0)));
                }
                for k in 0..ctl.results {
                    let z = next_id;
                    next_id += 1;
                    nodes_added.push(const_node(z, "json", Json::Null, outer.clone()));
                    added.push(data_edge(z, ctl.id, None, Some(1 + k)));
                }
            }
        }
        for (a, ys) in ctl.yields.iter().enumerate() {
            let parent = Some(Parent {
                node: ctl.id,
                region: a,
            });
            let y = next_id;
            next_id += 1;
            for (k, s) in ys.iter().enumerate() {
                let s = match s {
                    Some(s) => *s,
                    None => {
                        let z = next_id;
                        next_id += 1;
                        nodes_added.push(const_node(z, "json", Json::Null, parent.clone()));
                        Src {
                            from: z,
                            result: None,
                            order: 0,
                        }
                    }
                };
                added.push(data_edge(s.from, y, s.result, Some(k)));
            }
            nodes_added.push(Node {
                id: Some(y),
                name: format!("yield_{y}"),
                op: Some("YIELD".into()),
                attributes: Default::default(),
                results: Some(Vec::new()),
                parent,
                regions: Vec::new(),
            });
        }
    }
    // A `LOOP_END` that closes a loop is the loop's last value (its input,
    // now the loop's result), passed on.
    for &v in &loop_ends {
        let id = id_of(v);
        if edges
            .iter()
            .any(|e| e.to == id && e.dependency == Dependency::Data)
        {
            g.nodes[v].op = Some("JUMP".into());
        }
    }
    for (v, node) in g.nodes.iter_mut().enumerate() {
        if let Some(x) = tree.arm[region[v]] {
            node.parent = Some(Parent {
                node: ctls[x.ctl].id,
                region: x.arm,
            });
        }
        // Reference nodes mixed with ours: ours are told apart by
        // `results`, so the reference nodes keep none.
    }
    g.nodes.extend(nodes_added);
    edges.extend(added);
    g.edges = edges;
    Ok(())
}
