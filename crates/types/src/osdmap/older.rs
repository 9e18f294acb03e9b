//! Maps in the formats before this one (`LGM2` to `LGM9`): each is
//! read into today's [`OsdMap`], the fields it lacked at their defaults.
//! A format's fields are the one before it's, then what it added
//! (postcard writes a struct as its fields in order, nothing around
//! them). Incrementals of every version read alike (changes were only
//! added at the end of [`Change`](super::Change)). Nothing here ever
//! writes a map.

use super::*;

/// The magics of the older formats, newest first.
pub(super) const MAGICS: &[[u8; 4]] = &[
    MAGIC_V9, MAGIC_V8, MAGIC_V7, MAGIC_V6, MAGIC_V5, MAGIC_V4, MAGIC_V3, MAGIC_V2,
];

/// A map in an older format, read into today's (unchecked); `None` when
/// `b` is in none of them.
pub(super) fn decode_map(b: &[u8]) -> Option<Result<OsdMap>> {
    let strip = |m: [u8; 4]| b.strip_prefix(m.as_slice());
    Some(if let Some(body) = strip(MAGIC_V2) {
        whole::<v2::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V3) {
        whole::<v3::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V4) {
        whole::<v4::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V5) {
        whole::<v5::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V6) {
        whole::<v6::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V7) {
        whole::<v7::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V8) {
        whole::<v8::OsdMap>("map", body).map(Into::into)
    } else if let Some(body) = strip(MAGIC_V9) {
        whole::<v9::OsdMap>("map", body).map(Into::into)
    } else {
        return None;
    })
}

/// The version before maps held pools' store options.
const MAGIC_V9: [u8; 4] = *b"LGM9";
/// The version before maps held PG merges.
const MAGIC_V8: [u8; 4] = *b"LGM8";
/// The version before maps held destroyed OSDs and the balancer's switch.
const MAGIC_V7: [u8; 4] = *b"LGM7";
/// The version before maps held the monitors' outs and the full ratios:
/// still read (see [`v6`]).
const MAGIC_V6: [u8; 4] = *b"LGM6";
/// The version before maps held flags: still read (see [`v5`]).
const MAGIC_V5: [u8; 4] = *b"LGM5";
/// The version before maps held the monitor map: still read (see [`v4`]).
const MAGIC_V4: [u8; 4] = *b"LGM4";
/// The version before maps held unfound-lost marks: still read (see [`v3`]).
const MAGIC_V3: [u8; 4] = *b"LGM3";
/// The version before maps held users: still read (see [`v2`]).
const MAGIC_V2: [u8; 4] = *b"LGM2";

/// The `LGM6` map: today's without the monitors' outs and the full
/// ratios (the defaults then). Incrementals of every version read alike
/// (changes were only added at the end).
mod v6 {
    use super::*;

    /// The `LGM5` map's fields, then the flags.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm5: v5::OsdMap,
        flags: BTreeSet<OsdFlag>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                flags: m.flags,
                ..m.lgm5.into()
            }
        }
    }
}

/// The `LGM5` map: today's without the flags. Incrementals of every
/// version read alike (changes were only added at the end).
mod v5 {
    use super::*;

    /// The `LGM4` map's fields, then the monitor map.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm4: v4::OsdMap,
        mons: BTreeMap<u64, String>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                mons: m.mons,
                ..m.lgm4.into()
            }
        }
    }
}

/// The `LGM4` map: today's without the monitor map. Incrementals of every
/// version read alike (changes were only added at the end).
mod v4 {
    use super::*;

    /// The `LGM3` map's fields, then the unfound-lost marks.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm3: v3::OsdMap,
        unfound_lost: BTreeMap<PgId, Epoch>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                unfound_lost: m.unfound_lost,
                ..m.lgm3.into()
            }
        }
    }
}

/// The `LGM3` map: today's without the unfound-lost marks. Incrementals
/// of every version read alike (changes were only added at the end).
mod v3 {
    use super::*;

    /// Postcard writes a struct as its fields in order with nothing
    /// around them, so this is the `LGM2` map's fields, then the users.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm2: v2::OsdMap,
        auth: BTreeMap<String, AuthEntry>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                auth: m.auth,
                ..m.lgm2.into()
            }
        }
    }
}

/// The `LGM2` map: today's without the user table. Incrementals of both
/// versions read alike (changes were only added at the end).
mod v2 {
    use super::*;

    #[derive(Deserialize)]
    pub struct OsdMap {
        fsid: String,
        epoch: Epoch,
        osds: BTreeMap<i32, OsdInfo>,
        pools: BTreeMap<u64, Pool>,
        pool_max: u64,
        ec_profiles: BTreeMap<String, EcProfile>,
        #[serde(with = "super::super::crush_as_json")]
        crush: CrushMap,
        pg_temp: BTreeMap<PgId, Vec<i32>>,
        primary_temp: BTreeMap<PgId, i32>,
        pg_upmap_items: BTreeMap<PgId, Vec<(i32, i32)>>,
        write_sets: BTreeMap<PgId, WriteSetRecord>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                fsid: m.fsid,
                epoch: m.epoch,
                osds: m.osds.into(),
                pools: m.pools,
                pool_max: m.pool_max,
                ec_profiles: m.ec_profiles,
                crush: m.crush.into(),
                pg_temp: m.pg_temp,
                primary_temp: m.primary_temp,
                pg_upmap_items: m.pg_upmap_items,
                write_sets: m.write_sets.into_iter().collect(),
                auth: BTreeMap::new(),
                unfound_lost: BTreeMap::new(),
                mons: BTreeMap::new(),
                flags: BTreeSet::new(),
                auto_out: BTreeSet::new(),
                full_ratios: FullRatios::default(),
                destroyed: BTreeSet::new(),
                balancer: false,
                pg_merges: BTreeMap::new(),
                pg_merged: BTreeMap::new(),
                pool_opts: BTreeMap::new(),
            }
        }
    }
}

/// The `LGM7` map: today's without the destroyed OSDs and the balancer's
/// switch.
mod v7 {
    use super::*;

    /// The `LGM6` map's fields, then the monitors' outs and the ratios.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm6: v6::OsdMap,
        auto_out: BTreeSet<i32>,
        full_ratios: FullRatios,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                auto_out: m.auto_out,
                full_ratios: m.full_ratios,
                ..m.lgm6.into()
            }
        }
    }
}

/// The `LGM9` map: today's without the pools' store options.
mod v9 {
    use super::*;

    /// The `LGM8` map's fields, then the PG merges.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm8: v8::OsdMap,
        pg_merges: BTreeMap<u64, PgMerge>,
        pg_merged: BTreeMap<u64, PgMerged>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                pg_merges: m.pg_merges,
                pg_merged: m.pg_merged,
                ..m.lgm8.into()
            }
        }
    }
}

/// The `LGM8` map: today's without the PG merges.
mod v8 {
    use super::*;

    /// The `LGM7` map's fields, then the destroyed OSDs and the
    /// balancer's switch.
    #[derive(Deserialize)]
    pub struct OsdMap {
        lgm7: v7::OsdMap,
        destroyed: BTreeSet<i32>,
        balancer: bool,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(m: OsdMap) -> Self {
            super::OsdMap {
                destroyed: m.destroyed,
                balancer: m.balancer,
                ..m.lgm7.into()
            }
        }
    }
}
