//! `do_rule`: evaluate a rule for one input, bit-exact with Ceph's
//! `crush_do_rule` (firstn and indep choices, retries, local fallback,
//! vary_r, stable, device reweights and choose_args weight sets).
//!
//! The mapper is a pure function of (map, rule, x, num_rep, weights,
//! choose_args); the `Workspace` only caches bucket permutations within one
//! call. It never allocates on the hot path once the workspace is warm and
//! never panics on a compiled map.

use crate::compiled::{bucket_index, AlgData, CArg, CBucket, CStep, ChooseArgMap, CompiledMap};

use crate::error::{CrushError, Result};
use crate::hash::{hash32_2, hash32_3, hash32_4};
use crate::ln::crush_ln;
use crate::map::ItemId;

/// Marks an unfilled position in `indep` results (a hole).
pub const ITEM_NONE: ItemId = 0x7fff_ffff;
/// Internal marker for "not decided yet" during `indep`.
const ITEM_UNDEF: ItemId = 0x7fff_fffe;

/// Most replicas (or EC shards) one call may ask for: room for k + m = 64
/// erasure-code shards, above Ceph's default rule `max_size` of 20.
pub const MAX_NUM_REP: usize = 64;

/// Scratch space for `do_rule`; reuse it across calls on the same map.
#[derive(Debug, Default)]
pub struct Workspace {
    /// Per bucket: (x the permutation belongs to, entries computed, generation).
    perm_state: Vec<PermState>,
    perm: Vec<u32>,
    perm_offset: Vec<usize>,
    generation: u32,
    a: Vec<ItemId>,
    b: Vec<ItemId>,
    c: Vec<ItemId>,
    /// Histogram of retries per choice, when profiling (`crushtool
    /// --show-choose-tries`): entry n counts choices that took n retries.
    choose_tries: Option<Vec<u32>>,
}

#[derive(Clone, Copy, Debug, Default)]
struct PermState {
    x: u32,
    n: u32,
    generation: u32,
}

impl Workspace {
    /// A workspace sized for `map`.
    pub fn new(map: &CompiledMap) -> Workspace {
        let mut ws = Workspace::default();
        ws.fit(map);
        ws
    }

    fn fit(&mut self, map: &CompiledMap) {
        if self.perm_offset.len() == map.buckets.len() + 1 {
            return;
        }
        self.perm_offset.clear();
        let mut off = 0usize;
        for b in &map.buckets {
            self.perm_offset.push(off);
            off += b.as_ref().map_or(0, |b| b.items.len());
        }
        self.perm_offset.push(off);
        self.perm = vec![0; off];
        self.perm_state = vec![PermState::default(); map.buckets.len()];
        self.generation = 0;
    }

    /// Count retries per choice from now on, in a histogram of `size`
    /// entries (crushtool sizes it by the map's `choose_total_tries`;
    /// choices that took more retries are not counted).
    pub fn start_choose_profile(&mut self, size: usize) {
        self.choose_tries = Some(vec![0; size]);
    }

    /// The retry histogram since `start_choose_profile`.
    pub fn choose_profile(&self) -> Option<&[u32]> {
        self.choose_tries.as_deref()
    }

    #[inline]
    fn note_tries(&mut self, ftotal: i64) {
        if let Some(h) = &mut self.choose_tries {
            if let Some(n) = usize::try_from(ftotal).ok().and_then(|i| h.get_mut(i)) {
                *n += 1;
            }
        }
    }

    /// Start a new `do_rule` call: forget every cached permutation.
    fn begin(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: reset explicitly so stale states cannot match.
            for s in &mut self.perm_state {
                *s = PermState::default();
            }
            self.generation = 1;
        }
    }
}

/// Parameters that stay fixed during one `do_rule` call.
struct Ctx<'a> {
    map: &'a CompiledMap,
    weights: &'a [u32],
    args: Option<&'a ChooseArgMap>,
    x: u32,
    /// Balance parameter for `linear` buckets, 16.16 fixed point.
    balance: u32,
}

/// 1.0 in the 16.16 fixed point of [`MapOptions::balance_param`].
pub const BALANCE_ONE: u32 = 0x10000;

/// Per-call inputs beyond the rule and x.
#[derive(Clone, Copy, Debug)]
pub struct MapOptions<'a> {
    /// Device reweights (0x10000 = in, 0 = out); missing devices are out.
    pub weights: &'a [u32],
    /// The choose_args weight set to use, if any.
    pub choose_args: Option<&'a ChooseArgMap>,
    /// Balance parameter of `linear` buckets (Loligo extension), 16.16
    /// fixed point, must be >= 1.0 ([`BALANCE_ONE`]). Ignored by Ceph's
    /// bucket algorithms.
    pub balance_param: u32,
}

impl CompiledMap {
    /// Map input `x` through rule `rule_id`, asking for `num_rep` items.
    ///
    /// `weights[d]` is device d's reweight (0x10000 = in, 0 = out);
    /// devices past the end count as out. `out` receives the result, which
    /// may be shorter than `num_rep` (firstn) or hold [`ITEM_NONE`] holes
    /// (indep).
    #[allow(clippy::too_many_arguments)] // mirrors crush_do_rule; all are needed
    pub fn do_rule(
        &self,
        rule_id: i32,
        x: u32,
        num_rep: usize,
        weights: &[u32],
        choose_args: Option<&ChooseArgMap>,
        ws: &mut Workspace,
        out: &mut Vec<ItemId>,
    ) -> Result<()> {
        let opts = MapOptions {
            weights,
            choose_args,
            balance_param: BALANCE_ONE,
        };
        self.do_rule_with(rule_id, x, num_rep, &opts, ws, out)
    }

    /// `do_rule` with every per-call option (see [`MapOptions`]).
    pub fn do_rule_with(
        &self,
        rule_id: i32,
        x: u32,
        num_rep: usize,
        opts: &MapOptions,
        ws: &mut Workspace,
        out: &mut Vec<ItemId>,
    ) -> Result<()> {
        out.clear();
        if opts.balance_param < BALANCE_ONE {
            return Err(CrushError::Placement(format!(
                "balance parameter {:.4} is below 1.0",
                f64::from(opts.balance_param) / 65536.0
            )));
        }
        let steps = self
            .rules
            .get(&rule_id)
            .ok_or(CrushError::UnknownRule(rule_id))?;
        if num_rep == 0 || num_rep > MAX_NUM_REP {
            return Err(CrushError::BadNumRep {
                got: num_rep as i64,
                max: MAX_NUM_REP,
            });
        }
        ws.fit(self);
        ws.begin();
        let ctx = Ctx {
            map: self,
            weights: opts.weights,
            args: opts.choose_args,
            x,
            balance: opts.balance_param,
        };
        run_steps(&ctx, steps, num_rep, ws, out);
        debug_assert!(out.len() <= num_rep);
        Ok(())
    }
}

fn run_steps(
    ctx: &Ctx,
    steps: &[CStep],
    result_max: usize,
    ws: &mut Workspace,
    result: &mut Vec<ItemId>,
) {
    let map = ctx.map;
    let t = &map.tunables;
    let mut choose_tries = t.choose_total_tries as i64 + 1;
    let mut choose_leaf_tries: i64 = 0;
    let mut local_retries = i64::from(t.choose_local_tries);
    let mut local_fallback_retries = i64::from(t.choose_local_fallback_tries);
    let mut vary_r = i64::from(t.chooseleaf_vary_r);
    let mut stable = i64::from(t.chooseleaf_stable);

    let mut w = std::mem::take(&mut ws.a);
    let mut o = std::mem::take(&mut ws.b);
    let mut c = std::mem::take(&mut ws.c);
    for v in [&mut w, &mut o, &mut c] {
        v.clear();
        v.resize(result_max, 0);
    }
    let mut wsize = 0usize;

    for step in steps {
        match *step {
            CStep::Take(item) => {
                w[0] = item;
                wsize = 1;
            }
            CStep::SetChooseTries(n) => {
                if n > 0 {
                    choose_tries = i64::from(n);
                }
            }
            CStep::SetChooseleafTries(n) => {
                if n > 0 {
                    choose_leaf_tries = i64::from(n);
                }
            }
            CStep::SetChooseLocalTries(n) => {
                if n >= 0 {
                    local_retries = i64::from(n);
                }
            }
            CStep::SetChooseLocalFallbackTries(n) => {
                if n >= 0 {
                    local_fallback_retries = i64::from(n);
                }
            }
            CStep::SetChooseleafVaryR(n) => {
                if n >= 0 {
                    vary_r = i64::from(n);
                }
            }
            CStep::SetChooseleafStable(n) => {
                if n >= 0 {
                    stable = i64::from(n);
                }
            }
            CStep::Choose {
                leaf,
                firstn,
                count,
                type_id,
            } => {
                if wsize == 0 {
                    continue;
                }
                let mut osize = 0usize;
                for &wi in w.iter().take(wsize) {
                    let mut numrep = i64::from(count);
                    if numrep <= 0 {
                        numrep += result_max as i64;
                        if numrep <= 0 {
                            continue;
                        }
                    }
                    let Some(bucket) = map.bucket(wi) else {
                        continue;
                    };
                    if firstn {
                        let recurse_tries = if choose_leaf_tries > 0 {
                            choose_leaf_tries
                        } else if t.chooseleaf_descend_once != 0 {
                            1
                        } else {
                            choose_tries
                        };
                        let p = FirstnParams {
                            tries: choose_tries,
                            recurse_tries,
                            local_retries,
                            local_fallback_retries,
                            vary_r,
                            stable: stable != 0,
                        };
                        let got = choose_firstn(
                            ctx,
                            ws,
                            bucket,
                            numrep,
                            type_id,
                            &mut o[osize..],
                            0,
                            (result_max - osize) as i64,
                            &p,
                            leaf.then_some(&mut c[osize..]),
                            0,
                        );
                        osize += got;
                    } else {
                        let out_size = (numrep as usize).min(result_max - osize);
                        let recurse_tries = if choose_leaf_tries > 0 {
                            choose_leaf_tries
                        } else {
                            1
                        };
                        choose_indep(
                            ctx,
                            ws,
                            bucket,
                            out_size,
                            numrep,
                            type_id,
                            &mut o[osize..],
                            0,
                            choose_tries,
                            recurse_tries,
                            leaf.then_some(&mut c[osize..]),
                            0,
                        );
                        osize += out_size;
                    }
                }
                if leaf {
                    o[..osize].copy_from_slice(&c[..osize]);
                }
                std::mem::swap(&mut o, &mut w);
                wsize = osize;
            }
            CStep::Emit => {
                for &item in w.iter().take(wsize) {
                    if result.len() >= result_max {
                        break;
                    }
                    result.push(item);
                }
                wsize = 0;
            }
        }
    }
    ws.a = w;
    ws.b = o;
    ws.c = c;
}

struct FirstnParams {
    tries: i64,
    recurse_tries: i64,
    local_retries: i64,
    local_fallback_retries: i64,
    vary_r: i64,
    stable: bool,
}

/// Is device `item` rejected by its reweight for this input?
#[inline]
fn is_out(ctx: &Ctx, item: ItemId, x: u32) -> bool {
    let Some(&w) = ctx.weights.get(item as usize) else {
        return true;
    };
    if w >= 0x10000 {
        return false;
    }
    if w == 0 {
        return true;
    }
    (hash32_2(x, item as u32) & 0xffff) >= w
}

#[inline]
fn item_type(map: &CompiledMap, item: ItemId) -> Option<i32> {
    if item >= 0 {
        Some(0)
    } else {
        map.bucket(item).map(|b| b.type_id)
    }
}

#[allow(clippy::too_many_arguments)]
fn choose_firstn(
    ctx: &Ctx,
    ws: &mut Workspace,
    bucket: &CBucket,
    numrep: i64,
    type_id: i32,
    out: &mut [ItemId],
    mut outpos: usize,
    out_size: i64,
    p: &FirstnParams,
    mut out2: Option<&mut [ItemId]>,
    parent_r: i64,
) -> usize {
    let map = ctx.map;
    let x = ctx.x;
    let mut count = out_size;
    let mut rep: i64 = if p.stable { 0 } else { outpos as i64 };
    while rep < numrep && count > 0 {
        let mut ftotal: i64 = 0;
        let mut skip_rep = false;
        let mut item: ItemId = 0;
        'descent: loop {
            let mut retry_descent = false;
            let mut inb = bucket;
            let mut flocal: i64 = 0;
            'bucket: loop {
                let mut collide = false;
                let r = rep + parent_r + ftotal;
                let reject;
                if inb.items.is_empty() {
                    reject = true;
                } else {
                    item = if p.local_fallback_retries > 0
                        && flocal >= (inb.items.len() as i64 >> 1)
                        && flocal > p.local_fallback_retries
                    {
                        perm_choose(ws, inb, x, r)
                    } else {
                        bucket_choose(ctx, ws, inb, x, r, outpos)
                    };
                    if item >= map.max_devices {
                        skip_rep = true;
                        break 'bucket;
                    }
                    let Some(itemtype) = item_type(map, item) else {
                        skip_rep = true;
                        break 'bucket;
                    };
                    if itemtype != type_id {
                        match map.bucket(item) {
                            Some(b) if item < 0 => {
                                inb = b;
                                continue 'bucket;
                            }
                            _ => {
                                skip_rep = true;
                                break 'bucket;
                            }
                        }
                    }
                    collide = out[..outpos].contains(&item);
                    let mut rej = false;
                    if !collide {
                        if let Some(o2) = out2.as_deref_mut() {
                            if item < 0 {
                                let sub_r = if p.vary_r != 0 {
                                    r >> (p.vary_r - 1)
                                } else {
                                    0
                                };
                                let sub = FirstnParams {
                                    tries: p.recurse_tries,
                                    recurse_tries: 0,
                                    local_retries: p.local_retries,
                                    local_fallback_retries: p.local_fallback_retries,
                                    vary_r: p.vary_r,
                                    stable: p.stable,
                                };
                                let child = match map.bucket(item) {
                                    Some(b) => b,
                                    None => {
                                        skip_rep = true;
                                        break 'bucket;
                                    }
                                };
                                let got = choose_firstn(
                                    ctx,
                                    ws,
                                    child,
                                    if p.stable { 1 } else { outpos as i64 + 1 },
                                    0,
                                    o2,
                                    outpos,
                                    count,
                                    &sub,
                                    None,
                                    sub_r,
                                );
                                if got <= outpos {
                                    rej = true;
                                }
                            } else {
                                o2[outpos] = item;
                            }
                        }
                    }
                    if !rej && itemtype == 0 {
                        rej = is_out(ctx, item, x);
                    }
                    reject = rej;
                }
                if reject || collide {
                    ftotal += 1;
                    flocal += 1;
                    let retry_bucket = (collide && flocal <= p.local_retries)
                        || (p.local_fallback_retries > 0
                            && flocal <= inb.items.len() as i64 + p.local_fallback_retries);
                    if retry_bucket {
                        continue 'bucket;
                    } else if ftotal < p.tries {
                        retry_descent = true;
                    } else {
                        skip_rep = true;
                    }
                }
                break 'bucket;
            }
            if !retry_descent || skip_rep {
                break 'descent;
            }
        }
        rep += 1;
        if skip_rep {
            continue;
        }
        out[outpos] = item;
        outpos += 1;
        count -= 1;
        ws.note_tries(ftotal);
    }
    outpos
}

#[allow(clippy::too_many_arguments)]
fn choose_indep(
    ctx: &Ctx,
    ws: &mut Workspace,
    bucket: &CBucket,
    left: usize,
    numrep: i64,
    type_id: i32,
    out: &mut [ItemId],
    outpos: usize,
    tries: i64,
    recurse_tries: i64,
    mut out2: Option<&mut [ItemId]>,
    parent_r: i64,
) {
    let map = ctx.map;
    let x = ctx.x;
    let endpos = outpos + left;
    let mut left = left;
    for rep in outpos..endpos {
        out[rep] = ITEM_UNDEF;
        if let Some(o2) = out2.as_deref_mut() {
            o2[rep] = ITEM_UNDEF;
        }
    }
    let mut ftotal: i64 = 0;
    while left > 0 && ftotal < tries {
        for rep in outpos..endpos {
            if out[rep] != ITEM_UNDEF {
                continue;
            }
            let mut inb = bucket;
            loop {
                let mut r = rep as i64 + parent_r;
                if matches!(inb.alg, AlgData::Uniform) && inb.items.len() as i64 % numrep == 0 {
                    r += (numrep + 1) * ftotal;
                } else {
                    r += numrep * ftotal;
                }
                if inb.items.is_empty() {
                    break;
                }
                let item = bucket_choose(ctx, ws, inb, x, r, outpos);
                let itemtype = if item >= map.max_devices {
                    None
                } else {
                    item_type(map, item)
                };
                let Some(itemtype) = itemtype else {
                    out[rep] = ITEM_NONE;
                    if let Some(o2) = out2.as_deref_mut() {
                        o2[rep] = ITEM_NONE;
                    }
                    left -= 1;
                    break;
                };
                if itemtype != type_id {
                    match map.bucket(item) {
                        Some(b) if item < 0 => {
                            inb = b;
                            continue;
                        }
                        _ => {
                            out[rep] = ITEM_NONE;
                            if let Some(o2) = out2.as_deref_mut() {
                                o2[rep] = ITEM_NONE;
                            }
                            left -= 1;
                            break;
                        }
                    }
                }
                if out[outpos..endpos].contains(&item) {
                    break;
                }
                if let Some(o2) = out2.as_deref_mut() {
                    if item < 0 {
                        let Some(child) = map.bucket(item) else { break };
                        choose_indep(
                            ctx,
                            ws,
                            child,
                            1,
                            numrep,
                            0,
                            o2,
                            rep,
                            recurse_tries,
                            0,
                            None,
                            r,
                        );
                        if o2[rep] == ITEM_NONE {
                            break;
                        }
                    } else {
                        o2[rep] = item;
                    }
                }
                if itemtype == 0 && is_out(ctx, item, x) {
                    break;
                }
                out[rep] = item;
                left -= 1;
                break;
            }
        }
        ftotal += 1;
    }
    ws.note_tries(ftotal);
    for rep in outpos..endpos {
        if out[rep] == ITEM_UNDEF {
            out[rep] = ITEM_NONE;
        }
        if let Some(o2) = out2.as_deref_mut() {
            if o2[rep] == ITEM_UNDEF {
                o2[rep] = ITEM_NONE;
            }
        }
    }
}

/// Dispatch on the bucket algorithm. `position` selects the choose_args
/// weight vector.
#[inline]
fn bucket_choose(
    ctx: &Ctx,
    ws: &mut Workspace,
    b: &CBucket,
    x: u32,
    r: i64,
    position: usize,
) -> ItemId {
    let r32 = r as u32;
    match &b.alg {
        AlgData::Uniform => perm_choose(ws, b, x, r),
        AlgData::List { sum_weights } => list_choose(b, sum_weights, x, r32),
        AlgData::Tree { node_weights } => tree_choose(b, node_weights, x, r32),
        AlgData::Straw { straws } => straw_choose(b, straws, x, r32),
        AlgData::Linear => linear_choose(b, x, r32, ctx.balance),
        AlgData::Straw2 => {
            let arg = ctx
                .args
                .and_then(|a| bucket_index(b.id).and_then(|i| a.args.get(i)))
                .and_then(|a| a.as_ref());
            straw2_choose(b, arg, x, r32, position)
        }
    }
}

/// Uniform buckets and the local-fallback path: a pseudo-random
/// permutation of the items, computed lazily up to position `r % size`.
fn perm_choose(ws: &mut Workspace, b: &CBucket, x: u32, r: i64) -> ItemId {
    let size = b.items.len() as u32;
    let pr = (r as u32) % size;
    let Some(idx) = bucket_index(b.id) else {
        return b.items[0];
    };
    let off = ws.perm_offset[idx];
    let generation = ws.generation;
    let st = &mut ws.perm_state[idx];
    let perm = &mut ws.perm[off..off + size as usize];
    if st.generation != generation {
        *st = PermState {
            x: 0,
            n: 0,
            generation,
        };
    }
    let bid = b.id as u32;
    if st.x != x || st.n == 0 {
        st.x = x;
        if pr == 0 {
            let s = hash32_3(x, bid, 0) % size;
            perm[0] = s;
            st.n = 0xffff;
            return b.items[s as usize];
        }
        for (i, p) in perm.iter_mut().enumerate() {
            *p = i as u32;
        }
        st.n = 0;
    } else if st.n == 0xffff {
        for (i, p) in perm.iter_mut().enumerate().skip(1) {
            *p = i as u32;
        }
        let first = perm[0] as usize;
        perm[first] = 0;
        st.n = 1;
    }
    while st.n <= pr {
        let p = st.n;
        if p < size - 1 {
            let i = hash32_3(x, bid, p) % (size - p);
            if i != 0 {
                perm.swap((p + i) as usize, p as usize);
            }
        }
        st.n += 1;
    }
    b.items[perm[pr as usize] as usize]
}

/// Linear buckets (Loligo extension, after the ceph-devel proposal of an optimized CRUSH with a "linear" bucket): plain modulo selection on
/// the balance-adjusted key, `(floor(x / balance) + r) mod size`. Item
/// weights are ignored (like `uniform`): with a placement seed that is a
/// permutation of a contiguous range, every residue class is (almost)
/// equally large, so a host's PGs split evenly among its devices.
fn linear_choose(b: &CBucket, x: u32, r: u32, balance: u32) -> ItemId {
    let key = (u64::from(x) << 16) / u64::from(balance.max(1));
    let idx = (key + u64::from(r)) % b.items.len() as u64;
    b.items[idx as usize]
}

fn list_choose(b: &CBucket, sum_weights: &[u32], x: u32, r: u32) -> ItemId {
    for i in (0..b.items.len()).rev() {
        let mut w = u64::from(hash32_4(x, b.items[i] as u32, r, b.id as u32) & 0xffff);
        w = (w * u64::from(sum_weights[i])) >> 16;
        if w < u64::from(b.item_weights[i]) {
            return b.items[i];
        }
    }
    b.items[0]
}

fn tree_choose(b: &CBucket, node_weights: &[u32], x: u32, r: u32) -> ItemId {
    let mut n = (node_weights.len() >> 1) as u32;
    while n & 1 == 0 {
        let w = u64::from(node_weights[n as usize]);
        let t = (u64::from(hash32_4(x, n, r, b.id as u32)) * w) >> 32;
        let h = crate::compiled::tree_height(n);
        let l = n - (1 << (h - 1));
        n = if t < u64::from(node_weights[l as usize]) {
            l
        } else {
            n + (1 << (h - 1))
        };
    }
    // A compiled tree has exactly as many leaves as items; labels of
    // unused leaves carry weight 0 and are never chosen.
    b.items
        .get((n >> 1) as usize)
        .copied()
        .unwrap_or(b.items[0])
}

fn straw_choose(b: &CBucket, straws: &[u32], x: u32, r: u32) -> ItemId {
    let mut high = 0usize;
    let mut high_draw: u64 = 0;
    for (i, &item) in b.items.iter().enumerate() {
        let draw = u64::from(hash32_3(x, item as u32, r) & 0xffff) * u64::from(straws[i]);
        if i == 0 || draw > high_draw {
            high = i;
            high_draw = draw;
        }
    }
    b.items[high]
}

/// Items hashed per batch in straw2: the hash loop over a batch is plain
/// lane-wise u32 arithmetic, which the compiler vectorises.
const STRAW2_BATCH: usize = 64;

fn straw2_choose(b: &CBucket, arg: Option<&CArg>, x: u32, r: u32, position: usize) -> ItemId {
    let (weights, recips): (&[u32], &[Recip]) = match arg {
        Some(a) if !a.weight_set.is_empty() => {
            let p = position.min(a.weight_set.len() - 1);
            (&a.weight_set[p], &a.recips[p])
        }
        _ => (&b.item_weights, &b.recips),
    };
    let ids: &[ItemId] = match arg.and_then(|a| a.ids.as_deref()) {
        Some(ids) => ids,
        None => &b.items,
    };
    debug_assert!(weights.len() == ids.len() && recips.len() == ids.len());
    let mut high = 0usize;
    let mut high_draw: i64 = 0;
    let mut u = [0u32; STRAW2_BATCH];
    for (chunk, base) in ids.chunks(STRAW2_BATCH).zip((0..).step_by(STRAW2_BATCH)) {
        for (slot, &id) in u.iter_mut().zip(chunk) {
            *slot = hash32_3(x, id as u32, r);
        }
        for (j, &uj) in u[..chunk.len()].iter().enumerate() {
            let i = base + j;
            let draw = if weights[i] != 0 {
                // ln(u) - 2^48 is in [-2^48, 0]; Ceph divides with C's
                // truncation toward zero, i.e. -(|ln| / w).
                let neg_ln = 0x1_0000_0000_0000 - crush_ln(uj & 0xffff);
                -(recips[i].div(neg_ln) as i64)
            } else {
                i64::MIN
            };
            if i == 0 || draw > high_draw {
                high = i;
                high_draw = draw;
            }
        }
    }
    b.items[high]
}

/// Exact division of numerators below 2^49 by a fixed 32-bit divisor, by
/// multiplication (Granlund & Montgomery): with `2^(l-1) < d <= 2^l` and
/// `m = ceil(2^(49+l) / d)`, `n / d == (n * m) >> (49 + l)` for every
/// `n < 2^49`. Straw2 divides by the same item weights millions of times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Recip {
    m: u64,
    shift: u32,
}

impl Recip {
    const N_BITS: u32 = 49;

    pub(crate) fn new(d: u32) -> Recip {
        if d == 0 {
            return Recip::default();
        }
        let l = 32 - (d - 1).leading_zeros();
        let shift = Self::N_BITS + l;
        let m = (1u128 << shift).div_ceil(u128::from(d));
        debug_assert!(m < 1u128 << (Self::N_BITS + 1));
        Recip { m: m as u64, shift }
    }

    #[inline(always)]
    pub(crate) fn div(self, n: u64) -> u64 {
        debug_assert!(n < 1 << Self::N_BITS);
        ((u128::from(n) * u128::from(self.m)) >> self.shift) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::Recip;

    fn check(d: u32, n: u64) {
        assert_eq!(Recip::new(d).div(n), n / u64::from(d), "{n} / {d}");
    }

    #[test]
    fn reciprocal_division_is_exact() {
        let ds = [
            1u32,
            2,
            3,
            7,
            0x10000,
            0x10001,
            0xffff,
            19660,
            0x8000_0000,
            0x8000_0001,
            u32::MAX,
        ];
        let ns = [
            0u64,
            1,
            2,
            (1 << 48) - 1,
            1 << 48,
            (1 << 49) - 1,
            123_456_789_012_345,
        ];
        for &d in &ds {
            for &n in &ns {
                check(d, n);
            }
        }
        // Pseudo-random sweep (xorshift) over both operands.
        let mut rng = loligo_testkit::Rng::new(0);
        for _ in 0..200_000 {
            let s = rng.next_u64();
            let d = (s >> 32) as u32 | 1;
            let n = s & ((1 << 49) - 1);
            check(d, n);
            check((d >> (s % 31)).max(1), n >> (s % 40));
        }
    }
}
