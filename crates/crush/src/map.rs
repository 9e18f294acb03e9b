//! The CRUSH map as users write it: devices, types, buckets, rules,
//! tunables and choose_args weight sets. This is the form Loligo stores (as
//! JSON) and the text parser produces; it is not yet checked. `compile`
//! (in `compiled.rs`) validates it and derives what the mapper needs.
//!
//! Weights are Ceph's 16.16 fixed point (`0x10000` = 1.0) everywhere, so a
//! map round-trips exactly; floats appear only at the text boundary.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An item id: `>= 0` is a device (OSD), `< 0` is a bucket.
pub type ItemId = i32;

/// 1.0 in 16.16 fixed point.
pub const WEIGHT_ONE: u32 = 0x10000;

/// The tunables that change mapping results. Field names follow Ceph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tunables {
    pub choose_local_tries: u32,
    pub choose_local_fallback_tries: u32,
    pub choose_total_tries: u32,
    pub chooseleaf_descend_once: u32,
    pub chooseleaf_vary_r: u32,
    pub chooseleaf_stable: u32,
    pub straw_calc_version: u32,
    pub allowed_bucket_algs: u32,
}

impl Tunables {
    /// Ceph's legacy (argonaut-era) values: what a map without `tunable`
    /// lines means.
    pub const LEGACY: Tunables = Tunables {
        choose_local_tries: 2,
        choose_local_fallback_tries: 5,
        choose_total_tries: 19,
        chooseleaf_descend_once: 0,
        chooseleaf_vary_r: 0,
        chooseleaf_stable: 0,
        straw_calc_version: 0,
        allowed_bucket_algs: 22,
    };

    /// Ceph's current optimal profile (jewel and later).
    pub const OPTIMAL: Tunables = Tunables {
        choose_local_tries: 0,
        choose_local_fallback_tries: 0,
        choose_total_tries: 50,
        chooseleaf_descend_once: 1,
        chooseleaf_vary_r: 1,
        chooseleaf_stable: 1,
        straw_calc_version: 1,
        allowed_bucket_algs: 54,
    };

    /// A named Ceph profile (`legacy`, `argonaut`, `bobtail`, `firefly`,
    /// `hammer`, `jewel`, `optimal`, `default`).
    pub fn profile(name: &str) -> Option<Tunables> {
        let base = Tunables::OPTIMAL;
        Some(match name {
            "legacy" => Tunables::LEGACY,
            "argonaut" => Tunables {
                straw_calc_version: 1,
                ..Tunables::LEGACY
            },
            "bobtail" => Tunables {
                chooseleaf_vary_r: 0,
                chooseleaf_stable: 0,
                allowed_bucket_algs: 22,
                ..base
            },
            "firefly" => Tunables {
                chooseleaf_stable: 0,
                allowed_bucket_algs: 22,
                ..base
            },
            "hammer" => Tunables {
                chooseleaf_stable: 0,
                ..base
            },
            "jewel" | "optimal" | "default" => base,
            _ => return None,
        })
    }

    /// `(name, value)` pairs in the order `crushtool -d` prints them.
    pub fn named(&self) -> [(&'static str, u32); 8] {
        [
            ("choose_local_tries", self.choose_local_tries),
            (
                "choose_local_fallback_tries",
                self.choose_local_fallback_tries,
            ),
            ("choose_total_tries", self.choose_total_tries),
            ("chooseleaf_descend_once", self.chooseleaf_descend_once),
            ("chooseleaf_vary_r", self.chooseleaf_vary_r),
            ("chooseleaf_stable", self.chooseleaf_stable),
            ("straw_calc_version", self.straw_calc_version),
            ("allowed_bucket_algs", self.allowed_bucket_algs),
        ]
    }

    /// Set one tunable by its Ceph name; `false` if the name is unknown.
    pub fn set(&mut self, name: &str, value: u32) -> bool {
        let slot = match name {
            "choose_local_tries" => &mut self.choose_local_tries,
            "choose_local_fallback_tries" => &mut self.choose_local_fallback_tries,
            "choose_total_tries" => &mut self.choose_total_tries,
            "chooseleaf_descend_once" => &mut self.chooseleaf_descend_once,
            "chooseleaf_vary_r" => &mut self.chooseleaf_vary_r,
            "chooseleaf_stable" => &mut self.chooseleaf_stable,
            "straw_calc_version" => &mut self.straw_calc_version,
            "allowed_bucket_algs" => &mut self.allowed_bucket_algs,
            _ => return false,
        };
        *slot = value;
        true
    }
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables::OPTIMAL
    }
}

/// A storage device (an OSD).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub id: ItemId,
    pub name: String,
    /// Device class (`hdd`, `ssd`, ...), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

/// A bucket type (`type 1 host`). Type 0 is the device type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketType {
    pub id: i32,
    pub name: String,
}

/// Bucket selection algorithms, with Ceph's numeric codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BucketAlg {
    Uniform = 1,
    List = 2,
    Tree = 3,
    Straw = 4,
    Straw2 = 5,
    /// Loligo extension (after the ceph-devel proposal of an optimized CRUSH with a "linear" bucket): modulo selection on the
    /// balance-adjusted key. Maps using it are not Ceph-compatible.
    Linear = 6,
}

impl BucketAlg {
    /// The keyword used in text maps.
    pub fn name(self) -> &'static str {
        match self {
            BucketAlg::Uniform => "uniform",
            BucketAlg::List => "list",
            BucketAlg::Tree => "tree",
            BucketAlg::Straw => "straw",
            BucketAlg::Straw2 => "straw2",
            BucketAlg::Linear => "linear",
        }
    }

    /// Parse a text-map keyword.
    pub fn from_name(s: &str) -> Option<BucketAlg> {
        Some(match s {
            "uniform" => BucketAlg::Uniform,
            "list" => BucketAlg::List,
            "tree" => BucketAlg::Tree,
            "straw" => BucketAlg::Straw,
            "straw2" => BucketAlg::Straw2,
            "linear" => BucketAlg::Linear,
            _ => return None,
        })
    }
}

/// One child of a bucket with its weight in the parent (16.16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketItem {
    pub id: ItemId,
    pub weight: u32,
}

/// A bucket as written in the map. For tree buckets the item order is the
/// `pos` order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub id: ItemId,
    pub name: String,
    pub type_id: i32,
    pub alg: BucketAlg,
    /// Always 0 (rjenkins1) in maps Ceph writes.
    pub hash: u8,
    pub items: Vec<BucketItem>,
    /// Ids of this bucket's device-class shadow copies (`id -10 class ssd`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub class_ids: BTreeMap<String, ItemId>,
}

impl Bucket {
    /// Sum of the item weights (what Ceph stores as the bucket weight).
    /// `None` when it does not fit in 32 bits.
    pub fn weight(&self) -> Option<u32> {
        self.items
            .iter()
            .try_fold(0u32, |acc, it| acc.checked_add(it.weight))
    }
}

/// `firstn` (replicated: a prefix) or `indep` (erasure: stable positions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChooseMode {
    Firstn,
    Indep,
}

/// One rule step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op", content = "args")]
pub enum Step {
    /// Start from an item; with a class, from that bucket's shadow copy.
    Take {
        item: ItemId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<String>,
    },
    /// `choose`/`chooseleaf` `firstn`/`indep` `count` `type`.
    Choose {
        leaf: bool,
        mode: ChooseMode,
        /// `<= 0` means relative to the number of replicas asked for.
        count: i32,
        type_id: i32,
    },
    Emit,
    SetChooseTries(i32),
    SetChooseleafTries(i32),
    SetChooseLocalTries(i32),
    SetChooseLocalFallbackTries(i32),
    SetChooseleafVaryR(i32),
    SetChooseleafStable(i32),
}

/// A placement rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: i32,
    pub name: String,
    /// 1 = replicated, 3 = erasure (does not change the mapping).
    pub rule_type: u8,
    pub min_size: i32,
    pub max_size: i32,
    pub steps: Vec<Step>,
}

impl Rule {
    /// The text-map keyword for this rule's type.
    pub fn type_name(&self) -> String {
        match self.rule_type {
            1 => "replicated".into(),
            3 => "erasure".into(),
            n => n.to_string(),
        }
    }
}

/// Per-bucket override of straw2 weights (and optionally item ids).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChooseArg {
    pub bucket_id: ItemId,
    /// One weight vector per position; each as long as the bucket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weight_set: Vec<Vec<u32>>,
    /// Replacement ids fed to the hash, one per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<ItemId>>,
}

/// Index of the compat weight set (`-1`, printed as 2^64 - 1).
pub const CHOOSE_ARGS_COMPAT: i64 = -1;

/// A whole CRUSH map in its editable, serialisable form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrushMap {
    pub tunables: Tunables,
    pub devices: Vec<Device>,
    pub types: Vec<BucketType>,
    /// Buckets in definition order (children before parents).
    pub buckets: Vec<Bucket>,
    pub rules: Vec<Rule>,
    /// Weight sets keyed by index (a pool id, or -1 for the compat set).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub choose_args: BTreeMap<i64, Vec<ChooseArg>>,
}

impl CrushMap {
    /// The name of an item (device or bucket), if it exists.
    pub fn item_name(&self, id: ItemId) -> Option<&str> {
        if id >= 0 {
            self.devices
                .iter()
                .find(|d| d.id == id)
                .map(|d| d.name.as_str())
        } else {
            self.buckets
                .iter()
                .find(|b| b.id == id)
                .map(|b| b.name.as_str())
        }
    }

    /// The name of a type id, if defined.
    pub fn type_name(&self, id: i32) -> Option<&str> {
        self.types
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.name.as_str())
    }

    /// The bucket with this id, if any.
    pub fn bucket(&self, id: ItemId) -> Option<&Bucket> {
        self.buckets.iter().find(|b| b.id == id)
    }

    /// The rule with this id, if any.
    pub fn rule(&self, id: i32) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// `max_devices`: largest device id + 1 (0 without devices).
    pub fn max_devices(&self) -> i32 {
        self.devices
            .iter()
            .map(|d| d.id.saturating_add(1))
            .max()
            .unwrap_or(0)
    }
}
