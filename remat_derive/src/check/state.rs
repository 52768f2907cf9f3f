//! The analysis's state at one point of the body, and what each IR node
//! does to it.
//!
//! The state maps places (a local and field/index projections; every index
//! is one place `[_]`) to the values they may hold, and each existing value
//! (a site and a generation) to the element paths marked on *every* path.
//! A value is an instance of a site: `Cur` the latest one, `Old` all
//! earlier ones together (in a loop, the previous iterations'), which
//! `needs` can never mark, since it names one instance. States form a
//! finite lattice under `join`, which is what lets loops reach a fixpoint.
//!
//! Marks are also kept by place: `needs p;` marks whatever `p` holds at
//! run time, whichever instance that is, so a read of `p` (or of a place
//! under it) before `p` is written again is safe even where the values
//! `p` may hold cannot be told apart (an earlier loop iteration's, one of
//! several joined). Held marks are on *every* path too (joins intersect).

use std::collections::{BTreeMap, BTreeSet};

use crate::check::ir::{Operand, Proj, SiteId};

/// Element paths longer than this are cut, ending in "any element".
const MAX_ELEMS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Gen {
    Cur,
    Old,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Val {
    /// Anything the check does not track.
    Other,
    /// Element `elems` (empty: the whole output) of an instance of `site`.
    Saved {
        site: SiteId,
        gen: Gen,
        elems: Vec<Proj>,
    },
}

type Key = (usize, Vec<Proj>);

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct State {
    places: BTreeMap<Key, BTreeSet<Val>>,
    /// Existing values → element paths marked on every path.
    marks: BTreeMap<(SiteId, Gen), BTreeSet<Vec<Proj>>>,
    /// Places marked by a `needs` of the place itself and not written
    /// since, on every path. Only places without an index: `needs v[0];`
    /// names one element, but every index of `v` is one place here.
    held: BTreeSet<Key>,
}

fn place_key(projs: &[Proj]) -> Vec<Proj> {
    projs
        .iter()
        .map(|p| match p {
            Proj::Index(_) => Proj::Index(None),
            other => other.clone(),
        })
        .collect()
}

/// A projection applied to a value: `.0` and `[0]` are element 0.
fn elem(proj: &Proj) -> Proj {
    match proj {
        Proj::Field(name) => match name.parse::<u32>() {
            Ok(i) => Proj::Index(Some(i)),
            Err(_) => Proj::Field(name.clone()),
        },
        Proj::Index(i) => Proj::Index(*i),
        Proj::Split => Proj::Split,
    }
}

fn extend(val: &Val, projs: &[Proj]) -> Val {
    match val {
        Val::Other => Val::Other,
        Val::Saved { site, gen, elems } => {
            let mut elems = elems.clone();
            elems.extend(projs.iter().map(elem));
            if elems.len() > MAX_ELEMS {
                elems.truncate(MAX_ELEMS);
                elems.push(Proj::Index(None));
            }
            Val::Saved {
                site: *site,
                gen: *gen,
                elems,
            }
        }
    }
}

/// A value tree: relative place path → values (the root `[]` for the whole).
pub(crate) type Tree = BTreeMap<Vec<Proj>, BTreeSet<Val>>;

fn union_into(tree: &mut Tree, other: Tree) {
    for (k, v) in other {
        tree.entry(k).or_default().extend(v);
    }
}

fn single(vals: BTreeSet<Val>) -> Tree {
    let mut tree = Tree::new();
    tree.insert(Vec::new(), vals);
    tree
}

/// The tree at `projs` inside `tree`: the longest prefix's values extended
/// by the rest of the path, and every longer path re-rooted.
fn project(tree: &Tree, projs: &[Proj]) -> Tree {
    let key = place_key(projs);
    let mut out = Tree::new();
    let mut root: Option<BTreeSet<Val>> = None;
    for len in (0..=key.len()).rev() {
        if let Some(vals) = tree.get(&key[..len]) {
            root = Some(vals.iter().map(|v| extend(v, &projs[len..])).collect());
            break;
        }
    }
    if let Some(root) = root {
        out.insert(Vec::new(), root);
    }
    for (k, vals) in tree {
        if k.len() > key.len() && k.starts_with(&key) {
            out.entry(k[key.len()..].to_vec())
                .or_default()
                .extend(vals.iter().cloned());
        }
    }
    out
}

impl State {
    fn tree_of(&self, local: usize) -> Tree {
        self.places
            .range((local, Vec::new())..)
            .take_while(|((l, _), _)| *l == local)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect()
    }

    pub(crate) fn eval(&self, op: &Operand) -> Tree {
        match op {
            Operand::Place(local, projs) => project(&self.tree_of(*local), projs),
            Operand::Fresh(site) => single(BTreeSet::from([Val::Saved {
                site: *site,
                gen: Gen::Cur,
                elems: Vec::new(),
            }])),
            Operand::Parts(parts) => {
                let mut tree = single(BTreeSet::new());
                for (proj, part) in parts {
                    let key = place_key(std::slice::from_ref(proj));
                    for (k, v) in self.eval(part) {
                        let mut path = key.clone();
                        path.extend(k);
                        tree.entry(path).or_default().extend(v);
                    }
                }
                tree
            }
            Operand::Update(base, parts) => {
                let mut tree = self.eval(base);
                for (proj, part) in parts {
                    let key = place_key(std::slice::from_ref(proj));
                    tree.retain(|k, _| !k.starts_with(&key));
                    tree.insert(key.clone(), BTreeSet::new());
                    for (k, v) in self.eval(part) {
                        let mut path = key.clone();
                        path.extend(k);
                        tree.entry(path).or_default().extend(v);
                    }
                }
                tree
            }
            Operand::Union(ops) => {
                let mut tree = Tree::new();
                for op in ops {
                    union_into(&mut tree, self.eval(op));
                }
                tree
            }
            Operand::Proj(inner, proj) => project(&self.eval(inner), std::slice::from_ref(proj)),
            Operand::Refresh(inner, sites) => self
                .eval(inner)
                .into_iter()
                .map(|(k, vals)| {
                    let vals = vals
                        .into_iter()
                        .map(|v| match v {
                            Val::Saved { site, elems, .. } if sites.contains(&site) => Val::Saved {
                                site,
                                gen: Gen::Cur,
                                elems,
                            },
                            other => other,
                        })
                        .collect();
                    (k, vals)
                })
                .collect(),
            Operand::Other => single(BTreeSet::from([Val::Other])),
            Operand::Nothing => single(BTreeSet::new()),
        }
    }

    pub(crate) fn assign(&mut self, local: usize, projs: &[Proj], value: Tree, weak: bool) {
        let key = place_key(projs);
        let mut tree = if weak {
            // The old contents stay: what the place held before, too. Read
            // through the key, not `projs`: `p[_]` stands for every index,
            // so after `p[0] = ..` it holds what any element held (`p[1]`
            // is read from it too), not element 0 alone.
            let mut old = project(&self.tree_of(local), &key);
            union_into(&mut old, value);
            old
        } else {
            value
        };
        self.unhold(local, &key);
        // Remove the place and everything under it, then write.
        let doomed: Vec<Key> = self
            .places
            .keys()
            .filter(|(l, k)| *l == local && k.starts_with(&key))
            .cloned()
            .collect();
        for k in doomed {
            self.places.remove(&k);
        }
        tree.entry(Vec::new()).or_default();
        for (k, v) in tree {
            let mut path = key.clone();
            path.extend(k);
            self.places.insert((local, path), v);
        }
    }

    /// Adds every value of `value` to every place under `local.projs`
    /// (itself included): a write that may land anywhere there.
    pub(crate) fn smear(&mut self, local: usize, projs: &[Proj], value: Tree) {
        let key = place_key(projs);
        self.unhold(local, &key);
        let vals: BTreeSet<Val> = value.into_values().flatten().collect();
        if !self.places.contains_key(&(local, key.clone())) {
            // Through the key, as in a weak `assign`.
            let here = project(&self.tree_of(local), &key)
                .remove(&Vec::new())
                .unwrap_or_default();
            self.places.insert((local, key.clone()), here);
        }
        for ((l, k), held) in self.places.iter_mut() {
            if *l == local && k.starts_with(&key) {
                held.extend(vals.iter().cloned());
            }
        }
    }

    /// A write to `local.key` changes what it and every place above or
    /// under it hold.
    fn unhold(&mut self, local: usize, key: &[Proj]) {
        self.held
            .retain(|(l, k)| *l != local || !(k.starts_with(key) || key.starts_with(k)));
    }

    /// Whether a read of `local.projs` reads a place that a `needs` of it
    /// (or of a place above it) marked, with no write since.
    pub(crate) fn is_held(&self, local: usize, projs: &[Proj]) -> bool {
        let key = place_key(projs);
        (0..=key.len()).any(|len| self.held.contains(&(local, key[..len].to_vec())))
    }

    pub(crate) fn is_marked(&self, val: &Val) -> bool {
        match val {
            Val::Other => true,
            Val::Saved { site, gen, elems } => self
                .marks
                .get(&(*site, *gen))
                .is_some_and(|marked| marked.iter().any(|m| elems.starts_with(m))),
        }
    }

    pub(crate) fn def(&mut self, site: SiteId) {
        let rename = |v: &Val| match v {
            Val::Saved {
                site: s,
                gen: Gen::Cur,
                elems,
            } if *s == site => Val::Saved {
                site,
                gen: Gen::Old,
                elems: elems.clone(),
            },
            other => other.clone(),
        };
        for vals in self.places.values_mut() {
            *vals = vals.iter().map(rename).collect();
        }
        let cur = self.marks.remove(&(site, Gen::Cur));
        let old = self.marks.remove(&(site, Gen::Old));
        let merged = match (old, cur) {
            (Some(o), Some(c)) => Some(o.intersection(&c).cloned().collect()),
            (o, c) => o.or(c),
        };
        if let Some(merged) = merged {
            self.marks.insert((site, Gen::Old), merged);
        }
        self.marks.insert((site, Gen::Cur), BTreeSet::new());
    }

    /// `needs op`; `by_place`: whether a mark of a place counts for later
    /// reads of that place (see `held`).
    pub(crate) fn needs(&mut self, op: &Operand, by_place: bool) {
        if let Operand::Place(local, projs) = op {
            if by_place
                && !projs
                    .iter()
                    .any(|p| matches!(p, Proj::Index(_) | Proj::Split))
            {
                self.held.insert((*local, projs.clone()));
            }
        }
        let vals: BTreeSet<Val> = self.eval(op).into_values().flatten().collect();
        if vals.len() != 1 {
            return;
        }
        if let Some(Val::Saved {
            site,
            gen: Gen::Cur,
            elems,
        }) = vals.into_iter().next()
        {
            // The runtime keeps a tensor's whole storage: marking a piece of
            // a split view marks what was split.
            let mut elems = elems;
            if let Some(split) = elems.iter().position(|p| *p == Proj::Split) {
                elems.truncate(split);
            }
            if elems.contains(&Proj::Index(None)) {
                return;
            }
            if let Some(marked) = self.marks.get_mut(&(site, Gen::Cur)) {
                marked.insert(elems);
            }
        }
    }
}

/// Joins two states (either may be unreachable: `None`).
pub(crate) fn join(a: Option<State>, b: Option<State>) -> Option<State> {
    let (a, b) = match (a, b) {
        (None, x) | (x, None) => return x,
        (Some(a), Some(b)) => (a, b),
    };
    let mut places = BTreeMap::new();
    let keys: BTreeSet<&Key> = a.places.keys().chain(b.places.keys()).collect();
    for key in keys {
        let mut vals = BTreeSet::new();
        for side in [&a, &b] {
            match side.places.get(key) {
                Some(v) => vals.extend(v.iter().cloned()),
                None => {
                    // What this side's place holds there, through a prefix.
                    let tree = project(&side.tree_of(key.0), &key.1);
                    if let Some(v) = tree.get(&Vec::new()) {
                        vals.extend(v.iter().cloned());
                    }
                }
            }
        }
        places.insert(key.clone(), vals);
    }
    let mut marks = BTreeMap::new();
    let mkeys: BTreeSet<&(SiteId, Gen)> = a.marks.keys().chain(b.marks.keys()).collect();
    for key in mkeys {
        // A value that does not exist on one path is vacuously marked there.
        let merged = match (a.marks.get(key), b.marks.get(key)) {
            (Some(x), Some(y)) => x.intersection(y).cloned().collect(),
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (None, None) => BTreeSet::new(),
        };
        marks.insert(*key, merged);
    }
    let held = a.held.intersection(&b.held).cloned().collect();
    Some(State {
        places,
        marks,
        held,
    })
}

/// Joins the arms of `if is_recomputing()` from `start`: the forward arm
/// `fwd`, the recomputation arm `rep`. Places join (either arm's holdings,
/// as seen by the code after); marks are the forward's, since `needs` asks
/// on the forward and recomputation only reads what it kept, except for a
/// value the recomputation arm made again (a region in it), whose marks
/// join as usual.
pub(crate) fn phase_join(
    start: Option<&State>,
    fwd: Option<State>,
    rep: Option<State>,
) -> Option<State> {
    let (Some(start), Some(f), Some(r)) = (start, fwd.clone(), rep.clone()) else {
        return join(fwd, rep);
    };
    let mut out = join(Some(f.clone()), Some(r.clone()))?;
    // A place marked on the forward holds the same tensor on recomputation
    // only if neither arm wrote it: what was marked before the `if` and
    // still is after both arms (a `needs` in the recomputation arm is not
    // in the IR, so that arm only loses places).
    out.held.retain(|key| start.held.contains(key));
    for (key, marked) in out.marks.iter_mut() {
        if r.marks.get(key) == start.marks.get(key) {
            if let Some(m) = f.marks.get(key) {
                *marked = m.clone();
            }
        }
    }
    Some(out)
}
