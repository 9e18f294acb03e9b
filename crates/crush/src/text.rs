//! Ceph's text CRUSH map format: parse what `crushtool -d` prints and write
//! it back byte for byte. Weights are converted exactly as Ceph's compiler
//! does (`(u32)(strtof(text) * 65536.0f)`) and printed as Ceph's
//! decompiler does (`%.3f` of the single-precision quotient).
//!
//! The parser must never panic, whatever the input: every problem is a
//! `CrushError::Parse` with the line number.

use crate::error::{CrushError, Result};
use crate::map::{
    Bucket, BucketAlg, BucketItem, BucketType, ChooseArg, ChooseMode, CrushMap, Device, ItemId,
    Rule, Step, Tunables,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

/// Largest text map accepted (bytes): far above real maps, bounded so a
/// hostile input cannot exhaust memory.
pub const MAX_TEXT_LEN: usize = 64 << 20;
/// Most items one bucket may hold.
pub const MAX_BUCKET_ITEMS: usize = 1 << 16;

#[derive(Clone, Debug)]
struct Tok<'a> {
    s: &'a str,
    line: usize,
}

fn tokenize(text: &str) -> Vec<Tok<'_>> {
    let mut toks = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let mut start: Option<usize> = None;
        for (i, ch) in line.char_indices() {
            let punct = matches!(ch, '{' | '}' | '[' | ']');
            if ch.is_whitespace() || punct {
                if let Some(s) = start.take() {
                    toks.push(Tok {
                        s: &line[s..i],
                        line: n + 1,
                    });
                }
                if punct {
                    toks.push(Tok {
                        s: &line[i..i + 1],
                        line: n + 1,
                    });
                }
            } else if start.is_none() {
                start = Some(i);
            }
        }
        if let Some(s) = start {
            toks.push(Tok {
                s: &line[s..],
                line: n + 1,
            });
        }
    }
    toks
}

struct Parser<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
    last_line: usize,
}

fn perr<T>(line: usize, msg: impl Into<String>) -> Result<T> {
    Err(CrushError::Parse {
        line,
        msg: msg.into(),
    })
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Tok<'a>> {
        self.toks.get(self.pos)
    }
    fn line(&self) -> usize {
        self.peek().map_or(self.last_line, |t| t.line)
    }
    fn next(&mut self, what: &str) -> Result<Tok<'a>> {
        match self.toks.get(self.pos) {
            Some(t) => {
                self.pos += 1;
                Ok(t.clone())
            }
            None => perr(
                self.last_line,
                format!("unexpected end of map, expected {what}"),
            ),
        }
    }
    fn expect(&mut self, word: &str) -> Result<()> {
        let t = self.next(word)?;
        if t.s != word {
            return perr(t.line, format!("expected '{word}', found '{}'", t.s));
        }
        Ok(())
    }
    fn int<T: std::str::FromStr>(&mut self, what: &str) -> Result<T> {
        let t = self.next(what)?;
        t.s.parse::<T>().or_else(|_| {
            perr(
                t.line,
                format!("expected {what} (an integer), found '{}'", t.s),
            )
        })
    }
}

/// Convert a text weight exactly as Ceph's compiler does.
pub fn parse_weight(s: &str) -> Option<u32> {
    let f: f32 = s.parse().ok()?;
    if !f.is_finite() || f < 0.0 {
        return None;
    }
    let scaled = f * 65536.0f32;
    if scaled >= 4_294_967_296.0f32 {
        return None;
    }
    Some(scaled as u32)
}

/// Print a 16.16 weight as Ceph's decompiler does.
pub fn format_weight(w: u32) -> String {
    let f = w as f32 / 65536.0f32;
    format!("{:.3}", f64::from(f))
}

/// Parse a text CRUSH map.
pub fn parse(text: &str) -> Result<CrushMap> {
    if text.len() > MAX_TEXT_LEN {
        return perr(0, format!("map is larger than {MAX_TEXT_LEN} bytes"));
    }
    let toks = tokenize(text);
    let last_line = toks.last().map_or(1, |t| t.line);
    let mut p = Parser {
        toks,
        pos: 0,
        last_line,
    };
    let mut map = CrushMap {
        tunables: Tunables::LEGACY,
        ..CrushMap::default()
    };
    // Names -> ids for devices and buckets; types by name.
    let mut names: HashMap<String, ItemId> = HashMap::new();
    let mut type_ids: HashMap<String, i32> = HashMap::new();
    while let Some(t) = p.peek().cloned() {
        match t.s {
            "tunable" => {
                p.pos += 1;
                let name = p.next("tunable name")?;
                let v: u32 = p.int("tunable value")?;
                if !map.tunables.set(name.s, v) {
                    return perr(name.line, format!("unknown tunable '{}'", name.s));
                }
            }
            "device" => {
                p.pos += 1;
                let id: i32 = p.int("device id")?;
                let name = p.next("device name")?;
                let mut class = None;
                if p.peek().is_some_and(|t| t.s == "class") {
                    p.pos += 1;
                    class = Some(p.next("class name")?.s.to_string());
                }
                if id < 0 {
                    return perr(t.line, format!("device id {id} is negative"));
                }
                if names.insert(name.s.to_string(), id).is_some() {
                    return perr(name.line, format!("name '{}' is defined twice", name.s));
                }
                map.devices.push(Device {
                    id,
                    name: name.s.to_string(),
                    class,
                });
            }
            "type" => {
                p.pos += 1;
                let id: i32 = p.int("type id")?;
                let name = p.next("type name")?;
                if type_ids.insert(name.s.to_string(), id).is_some() {
                    return perr(name.line, format!("type '{}' is defined twice", name.s));
                }
                map.types.push(BucketType {
                    id,
                    name: name.s.to_string(),
                });
            }
            "rule" => {
                p.pos += 1;
                let rule = parse_rule(&mut p, &names, &type_ids)?;
                map.rules.push(rule);
            }
            "choose_args" => {
                p.pos += 1;
                let (idx, args) = parse_choose_args(&mut p)?;
                if map.choose_args.insert(idx, args).is_some() {
                    return perr(t.line, format!("choose_args {idx} is defined twice"));
                }
            }
            word => {
                let Some(&type_id) = type_ids.get(word) else {
                    return perr(
                        t.line,
                        format!("unexpected '{word}' (not a keyword or a known type)"),
                    );
                };
                p.pos += 1;
                let mut bucket = parse_bucket(&mut p, type_id, &names, &map)?;
                if names.contains_key(&bucket.name) {
                    return perr(t.line, format!("name '{}' is defined twice", bucket.name));
                }
                if bucket.id == 0 {
                    bucket.id = lowest_free_bucket_id(&map, &bucket);
                }
                names.insert(bucket.name.clone(), bucket.id);
                map.buckets.push(bucket);
            }
        }
    }
    Ok(map)
}

/// Ceph gives a bucket without an `id` line the highest unused negative id.
fn lowest_free_bucket_id(map: &CrushMap, new: &Bucket) -> ItemId {
    let mut used: BTreeSet<ItemId> = map.buckets.iter().map(|b| b.id).collect();
    for b in map.buckets.iter().chain(std::iter::once(new)) {
        used.extend(b.class_ids.values().copied());
    }
    let mut id = -1;
    while used.contains(&id) {
        id -= 1;
    }
    id
}

fn parse_bucket(
    p: &mut Parser,
    type_id: i32,
    names: &HashMap<String, ItemId>,
    map: &CrushMap,
) -> Result<Bucket> {
    let name = p.next("bucket name")?;
    let start_line = name.line;
    p.expect("{")?;
    let mut id: Option<ItemId> = None;
    let mut class_ids = BTreeMap::new();
    let mut alg = None;
    let mut hash = 0u8;
    // (item, weight if given, pos if given)
    let mut raw: Vec<(ItemId, Option<u32>, Option<usize>, usize)> = Vec::new();
    loop {
        let t = p.next("'}'")?;
        match t.s {
            "}" => break,
            "id" => {
                let v: i32 = p.int("bucket id")?;
                if p.peek().is_some_and(|t| t.s == "class") {
                    p.pos += 1;
                    let c = p.next("class name")?;
                    if class_ids.insert(c.s.to_string(), v).is_some() {
                        return perr(c.line, format!("class '{}' given twice", c.s));
                    }
                } else {
                    if v >= 0 {
                        return perr(t.line, format!("bucket id {v} must be negative"));
                    }
                    id = Some(v);
                }
            }
            "alg" => {
                let a = p.next("bucket algorithm")?;
                alg = Some(BucketAlg::from_name(a.s).ok_or_else(|| CrushError::Parse {
                    line: a.line,
                    msg: format!("unknown bucket algorithm '{}'", a.s),
                })?);
            }
            "hash" => {
                let h = p.next("hash")?;
                hash = match h.s {
                    "0" | "rjenkins1" => 0,
                    other => return perr(h.line, format!("unknown hash '{other}'")),
                };
            }
            "item" => {
                let iname = p.next("item name")?;
                let Some(&iid) = names.get(iname.s) else {
                    return perr(iname.line, format!("item '{}' is not defined", iname.s));
                };
                let mut weight = None;
                let mut pos = None;
                while let Some(k) = p.peek().map(|t| t.s) {
                    match k {
                        "weight" => {
                            p.pos += 1;
                            let w = p.next("weight")?;
                            weight = Some(parse_weight(w.s).ok_or_else(|| CrushError::Parse {
                                line: w.line,
                                msg: format!("bad weight '{}' (must be a finite number >= 0)", w.s),
                            })?);
                        }
                        "pos" => {
                            p.pos += 1;
                            let v: usize = p.int("item position")?;
                            pos = Some(v);
                        }
                        _ => break,
                    }
                }
                if raw.len() >= MAX_BUCKET_ITEMS {
                    return perr(
                        iname.line,
                        format!("bucket has more than {MAX_BUCKET_ITEMS} items"),
                    );
                }
                raw.push((iid, weight, pos, iname.line));
            }
            other => return perr(t.line, format!("unexpected '{other}' in bucket {}", name.s)),
        }
    }
    let Some(alg) = alg else {
        return perr(start_line, format!("bucket {} has no 'alg' line", name.s));
    };
    // Place items by pos (tree buckets print them); the rest in order.
    let n = raw.len();
    let mut slots: Vec<Option<(ItemId, Option<u32>)>> = vec![None; n];
    for &(iid, w, pos, line) in &raw {
        if let Some(pos) = pos {
            if pos >= n {
                return perr(
                    line,
                    format!("item position {pos} out of range (bucket has {n} items)"),
                );
            }
            if slots[pos].is_some() {
                return perr(line, format!("item position {pos} used twice"));
            }
            slots[pos] = Some((iid, w));
        }
    }
    let mut free = 0usize;
    for &(iid, w, pos, _) in &raw {
        if pos.is_none() {
            while free < n && slots[free].is_some() {
                free += 1;
            }
            if free < n {
                slots[free] = Some((iid, w));
            }
        }
    }
    // An item may appear twice: crushtool compiles such a bucket and maps
    // with it (each entry is a separate candidate), so Loligo does too.
    let mut items = Vec::with_capacity(n);
    for s in slots {
        let Some((iid, w)) = s else {
            return perr(start_line, "item positions leave a gap");
        };
        let weight = match w {
            Some(w) => w,
            None if iid >= 0 => 0x10000,
            // A bucket item without a weight takes the child's total.
            None => map.bucket(iid).and_then(|c| c.weight()).unwrap_or(0),
        };
        items.push(BucketItem { id: iid, weight });
    }
    // Id 0 marks "not given"; the caller assigns one.
    Ok(Bucket {
        id: id.unwrap_or(0),
        name: name.s.to_string(),
        type_id,
        alg,
        hash,
        items,
        class_ids,
    })
}

fn parse_rule(
    p: &mut Parser,
    names: &HashMap<String, ItemId>,
    type_ids: &HashMap<String, i32>,
) -> Result<Rule> {
    let name = p.next("rule name")?;
    p.expect("{")?;
    let mut rule = Rule {
        id: -1,
        name: name.s.to_string(),
        rule_type: 1,
        min_size: 1,
        max_size: 10,
        steps: Vec::new(),
    };
    loop {
        let t = p.next("'}'")?;
        match t.s {
            "}" => break,
            "id" | "ruleset" => rule.id = p.int("rule id")?,
            "type" => {
                let ty = p.next("rule type")?;
                rule.rule_type = match ty.s {
                    "replicated" => 1,
                    "erasure" => 3,
                    other => other
                        .parse()
                        .or_else(|_| perr(ty.line, format!("unknown rule type '{other}'")))?,
                };
            }
            "min_size" => rule.min_size = p.int("min_size")?,
            "max_size" => rule.max_size = p.int("max_size")?,
            "step" => rule.steps.push(parse_step(p, names, type_ids)?),
            other => return perr(t.line, format!("unexpected '{other}' in rule {}", name.s)),
        }
    }
    if rule.id < 0 {
        return perr(name.line, format!("rule {} has no id", name.s));
    }
    Ok(rule)
}

fn parse_step(
    p: &mut Parser,
    names: &HashMap<String, ItemId>,
    type_ids: &HashMap<String, i32>,
) -> Result<Step> {
    let op = p.next("step operation")?;
    Ok(match op.s {
        "take" => {
            let item = p.next("item name")?;
            let Some(&id) = names.get(item.s) else {
                return perr(item.line, format!("take: item '{}' is not defined", item.s));
            };
            let class = if p.peek().is_some_and(|t| t.s == "class") {
                p.pos += 1;
                Some(p.next("class name")?.s.to_string())
            } else {
                None
            };
            Step::Take { item: id, class }
        }
        "choose" | "chooseleaf" => {
            let mode = p.next("firstn or indep")?;
            let mode = match mode.s {
                "firstn" => ChooseMode::Firstn,
                "indep" => ChooseMode::Indep,
                other => {
                    return perr(
                        mode.line,
                        format!("expected firstn or indep, found '{other}'"),
                    )
                }
            };
            let count: i32 = p.int("replica count")?;
            p.expect("type")?;
            let ty = p.next("type name")?;
            let type_id = match type_ids.get(ty.s) {
                Some(&t) => t,
                None => return perr(ty.line, format!("unknown type '{}'", ty.s)),
            };
            Step::Choose {
                leaf: op.s == "chooseleaf",
                mode,
                count,
                type_id,
            }
        }
        "emit" => Step::Emit,
        "set_choose_tries" => Step::SetChooseTries(p.int("count")?),
        "set_chooseleaf_tries" => Step::SetChooseleafTries(p.int("count")?),
        "set_choose_local_tries" => Step::SetChooseLocalTries(p.int("count")?),
        "set_choose_local_fallback_tries" => Step::SetChooseLocalFallbackTries(p.int("count")?),
        "set_chooseleaf_vary_r" => Step::SetChooseleafVaryR(p.int("value")?),
        "set_chooseleaf_stable" => Step::SetChooseleafStable(p.int("value")?),
        other => return perr(op.line, format!("unknown step '{other}'")),
    })
}

fn parse_choose_args(p: &mut Parser) -> Result<(i64, Vec<ChooseArg>)> {
    let idx_tok = p.next("choose_args index")?;
    let idx = match idx_tok.s.parse::<u64>() {
        Ok(v) => v as i64,
        Err(_) => idx_tok.s.parse::<i64>().or_else(|_| {
            perr(
                idx_tok.line,
                format!("bad choose_args index '{}'", idx_tok.s),
            )
        })?,
    };
    p.expect("{")?;
    let mut args = Vec::new();
    loop {
        let t = p.next("'{' or '}'")?;
        match t.s {
            "}" => break,
            "{" => {}
            other => return perr(t.line, format!("unexpected '{other}' in choose_args")),
        }
        let mut arg = ChooseArg {
            bucket_id: 0,
            weight_set: Vec::new(),
            ids: None,
        };
        let mut have_id = false;
        loop {
            let t = p.next("'}'")?;
            match t.s {
                "}" => break,
                "bucket_id" => {
                    arg.bucket_id = p.int("bucket id")?;
                    have_id = true;
                }
                "weight_set" => {
                    p.expect("[")?;
                    loop {
                        let t = p.next("'[' or ']'")?;
                        match t.s {
                            "]" => break,
                            "[" => {
                                let mut ws = Vec::new();
                                loop {
                                    let w = p.next("weight or ']'")?;
                                    if w.s == "]" {
                                        break;
                                    }
                                    ws.push(parse_weight(w.s).ok_or_else(|| {
                                        CrushError::Parse {
                                            line: w.line,
                                            msg: format!("bad weight '{}'", w.s),
                                        }
                                    })?);
                                    if ws.len() > MAX_BUCKET_ITEMS {
                                        return perr(w.line, "weight_set row too long");
                                    }
                                }
                                arg.weight_set.push(ws);
                            }
                            other => {
                                return perr(t.line, format!("unexpected '{other}' in weight_set"))
                            }
                        }
                    }
                }
                "ids" => {
                    p.expect("[")?;
                    let mut ids = Vec::new();
                    loop {
                        let t = p.next("id or ']'")?;
                        if t.s == "]" {
                            break;
                        }
                        ids.push(
                            t.s.parse::<i32>()
                                .or_else(|_| perr(t.line, format!("bad id '{}'", t.s)))?,
                        );
                        if ids.len() > MAX_BUCKET_ITEMS {
                            return perr(t.line, "ids list too long");
                        }
                    }
                    arg.ids = Some(ids);
                }
                other => return perr(t.line, format!("unexpected '{other}' in choose_args entry")),
            }
        }
        if !have_id {
            return perr(p.line(), "choose_args entry without bucket_id");
        }
        args.push(arg);
    }
    Ok((idx, args))
}

/// Write a map in `crushtool -d` syntax.
pub fn write(map: &CrushMap) -> String {
    let mut s = String::new();
    s.push_str("# begin crush map\n");
    let legacy = Tunables::LEGACY.named();
    for (i, (name, v)) in map.tunables.named().iter().enumerate() {
        if *v != legacy[i].1 {
            let _ = writeln!(s, "tunable {name} {v}");
        }
    }
    s.push_str("\n# devices\n");
    let mut devices: Vec<&Device> = map.devices.iter().collect();
    devices.sort_by_key(|d| d.id);
    for d in devices {
        let _ = write!(s, "device {} {}", d.id, d.name);
        if let Some(c) = &d.class {
            let _ = write!(s, " class {c}");
        }
        s.push('\n');
    }
    s.push_str("\n# types\n");
    for t in &map.types {
        let _ = writeln!(s, "type {} {}", t.id, t.name);
    }
    s.push_str("\n# buckets\n");
    for b in ceph_bucket_order(map) {
        write_bucket(&mut s, map, b);
    }
    s.push_str("\n# rules\n");
    for r in &map.rules {
        write_rule(&mut s, map, r);
    }
    if !map.choose_args.is_empty() {
        s.push_str("\n# choose_args\n");
        for (idx, args) in &map.choose_args {
            let _ = writeln!(s, "choose_args {} {{", *idx as u64);
            for a in args {
                s.push_str("  {\n");
                let _ = writeln!(s, "    bucket_id {}", a.bucket_id);
                if !a.weight_set.is_empty() {
                    s.push_str("    weight_set [\n");
                    for row in &a.weight_set {
                        s.push_str("      [ ");
                        for w in row {
                            let _ = write!(s, "{} ", format_weight(*w));
                        }
                        s.push_str("]\n");
                    }
                    s.push_str("    ]\n");
                }
                if let Some(ids) = &a.ids {
                    s.push_str("    ids [ ");
                    for id in ids {
                        let _ = write!(s, "{id} ");
                    }
                    s.push_str("]\n");
                }
                s.push_str("  }\n");
            }
            s.push_str("}\n");
        }
    }
    s.push_str("\n# end crush map\n");
    s
}

/// The order `crushtool -d` prints buckets in: for ids -1, -2, ... each
/// bucket after its children (post-order), each bucket once. Buckets that
/// are part of a cycle (an invalid map) are printed last, in map order.
fn ceph_bucket_order(map: &CrushMap) -> Vec<&Bucket> {
    let by_id: HashMap<ItemId, &Bucket> = map.buckets.iter().map(|b| (b.id, b)).collect();
    let mut ids: Vec<ItemId> = by_id.keys().copied().collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let mut done: BTreeSet<ItemId> = BTreeSet::new();
    let mut out = Vec::with_capacity(map.buckets.len());
    for start in ids {
        // Iterative post-order walk; `entered` guards against cycles.
        let mut stack: Vec<(ItemId, usize)> = vec![(start, 0)];
        let mut entered: BTreeSet<ItemId> = BTreeSet::new();
        while let Some((id, next)) = stack.pop() {
            if done.contains(&id) {
                continue;
            }
            let Some(b) = by_id.get(&id) else { continue };
            entered.insert(id);
            let child = b.items[next..]
                .iter()
                .position(|it| it.id < 0 && !done.contains(&it.id) && !entered.contains(&it.id));
            match child {
                Some(off) => {
                    stack.push((id, next + off + 1));
                    stack.push((b.items[next + off].id, 0));
                }
                None => {
                    done.insert(id);
                    out.push(*b);
                }
            }
        }
    }
    for b in &map.buckets {
        if !done.contains(&b.id) {
            out.push(b);
        }
    }
    out
}

fn item_name(map: &CrushMap, id: ItemId) -> String {
    map.item_name(id).map(str::to_string).unwrap_or_else(|| {
        if id >= 0 {
            format!("device{id}")
        } else {
            format!("bucket{}", -1 - id)
        }
    })
}

fn write_bucket(s: &mut String, map: &CrushMap, b: &Bucket) {
    let tname = map
        .type_name(b.type_id)
        .map(str::to_string)
        .unwrap_or_else(|| format!("type{}", b.type_id));
    let _ = writeln!(s, "{tname} {} {{", b.name);
    let _ = writeln!(s, "\tid {}\t\t# do not change unnecessarily", b.id);
    // Ceph prints class ids in class-number order, i.e. first appearance
    // among the devices.
    let mut class_order: Vec<&str> = Vec::new();
    for d in &map.devices {
        if let Some(c) = d.class.as_deref() {
            if !class_order.contains(&c) {
                class_order.push(c);
            }
        }
    }
    let mut classes: Vec<(&String, &ItemId)> = b.class_ids.iter().collect();
    classes.sort_by_key(|(c, _)| {
        class_order
            .iter()
            .position(|x| x == c)
            .unwrap_or(usize::MAX)
    });
    for (c, id) in classes {
        let _ = writeln!(s, "\tid {id} class {c}\t\t# do not change unnecessarily");
    }
    let _ = writeln!(
        s,
        "\t# weight {}",
        format_weight(b.weight().unwrap_or(u32::MAX))
    );
    match b.alg {
        BucketAlg::Uniform => {
            let _ = writeln!(
                s,
                "\talg uniform\t# do not change bucket size ({}) unnecessarily",
                b.items.len()
            );
        }
        BucketAlg::List => s.push_str(
            "\talg list\t# add new items at the end; do not change order unnecessarily\n",
        ),
        BucketAlg::Tree => {
            s.push_str("\talg tree\t# do not change pos for existing items unnecessarily\n")
        }
        BucketAlg::Straw => s.push_str("\talg straw\n"),
        BucketAlg::Straw2 => s.push_str("\talg straw2\n"),
        BucketAlg::Linear => s.push_str("\talg linear\t# Loligo extension: not readable by Ceph\n"),
    }
    let _ = writeln!(s, "\thash {}\t# rjenkins1", b.hash);
    let with_pos = matches!(b.alg, BucketAlg::Uniform | BucketAlg::Tree);
    for (i, it) in b.items.iter().enumerate() {
        let _ = write!(
            s,
            "\titem {} weight {}",
            item_name(map, it.id),
            format_weight(it.weight)
        );
        if with_pos {
            let _ = write!(s, " pos {i}");
        }
        s.push('\n');
    }
    s.push_str("}\n");
}

fn write_rule(s: &mut String, map: &CrushMap, r: &Rule) {
    let _ = writeln!(s, "rule {} {{", r.name);
    let _ = writeln!(s, "\tid {}", r.id);
    let _ = writeln!(s, "\ttype {}", r.type_name());
    let _ = writeln!(s, "\tmin_size {}", r.min_size);
    let _ = writeln!(s, "\tmax_size {}", r.max_size);
    for st in &r.steps {
        match st {
            Step::Take { item, class } => {
                let _ = write!(s, "\tstep take {}", item_name(map, *item));
                if let Some(c) = class {
                    let _ = write!(s, " class {c}");
                }
                s.push('\n');
            }
            Step::Choose {
                leaf,
                mode,
                count,
                type_id,
            } => {
                let _ = writeln!(
                    s,
                    "\tstep {} {} {} type {}",
                    if *leaf { "chooseleaf" } else { "choose" },
                    match mode {
                        ChooseMode::Firstn => "firstn",
                        ChooseMode::Indep => "indep",
                    },
                    count,
                    map.type_name(*type_id)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("type{type_id}"))
                );
            }
            Step::Emit => s.push_str("\tstep emit\n"),
            Step::SetChooseTries(n) => {
                let _ = writeln!(s, "\tstep set_choose_tries {n}");
            }
            Step::SetChooseleafTries(n) => {
                let _ = writeln!(s, "\tstep set_chooseleaf_tries {n}");
            }
            Step::SetChooseLocalTries(n) => {
                let _ = writeln!(s, "\tstep set_choose_local_tries {n}");
            }
            Step::SetChooseLocalFallbackTries(n) => {
                let _ = writeln!(s, "\tstep set_choose_local_fallback_tries {n}");
            }
            Step::SetChooseleafVaryR(n) => {
                let _ = writeln!(s, "\tstep set_chooseleaf_vary_r {n}");
            }
            Step::SetChooseleafStable(n) => {
                let _ = writeln!(s, "\tstep set_chooseleaf_stable {n}");
            }
        }
    }
    s.push_str("}\n");
}
