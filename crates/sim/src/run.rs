//! How a run is asked for (`Run`: the seed, the pool kind, which
//! monitors, which faults, which stores), replayed from the environment,
//! and carried out.
//!
//! It must never choose anything the seed does not: a run replays
//! exactly from its `replay` line.

use super::*;

/// Which monitors a run has (see the `monitor` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Monitors {
    /// The monitors' own map logic, real CRUSH: random runs.
    Real,
    /// The simulator's first monitor model: the seeds that found bugs
    /// under it (`LOLIGO_SIM_MODEL=1` replays one).
    Model,
}

/// One random run: its seed and what it simulates.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub seed: u64,
    /// An erasure-coded pool (Reed-Solomon 2+1 on even seeds, Zigzag 2+2
    /// on odd ones), else replicated (size 3).
    pub ec: bool,
    /// Down OSDs are declared lost now and then, and PGs' unfound objects
    /// marked lost.
    pub lose: bool,
    pub monitor: Monitors,
    /// The model's Zigzag positions move while an OSD is down (as CRUSH's
    /// indep rules move them), in a seed that leaves 3 divided by 4.
    pub moves: bool,
    /// The model refuses every late record while the PG's record is
    /// short, not only one that names none of its members: a stricter
    /// rule than the monitors', whose histories reach corners theirs does
    /// not.
    pub strict_late: bool,
    /// Two OSDs now and then cannot reach each other for a while (the
    /// real monitors only; `LOLIGO_SIM_PARTITIONS=1`).
    pub partitions: bool,
    /// Half the partitions cut one direction only
    /// (`LOLIGO_SIM_ONE_WAY=1`).
    pub one_way: bool,
    /// The OSDs' stores (`LOLIGO_SIM_BLOCK=1`: the block store on media
    /// that lose power).
    pub stores: Stores,
    /// The monitors' leader fails now and then, mid-commit (the real
    /// monitors only; `LOLIGO_SIM_ELECTIONS=1`).
    pub elections: bool,
    /// Replicated runs: the operator asks for scrubs now and then
    /// (`LOLIGO_SIM_SCRUB=1`; see the `scrub` module) ...
    pub scrubs: bool,
    /// ... and copies rot (`LOLIGO_SIM_ROT=1`).
    pub rot: bool,
    /// Erasure-coded objects span four small stripes, so a partial write
    /// leaves some as they were and the shards keep no hash (scrub runs;
    /// `LOLIGO_SIM_EC_STRIPES=1`).
    pub stripes: bool,
    /// A client history that is not linearizable fails the run (the
    /// default; `LOLIGO_SIM_LINEARIZABLE=0` only counts them, in
    /// `Stats::histories_bad`).
    pub linearizable: bool,
    /// The pool's PG count doubles mid-run (the monitors' `pool set
    /// pg_num`; the real monitors only): every copy splits in place as
    /// its OSD takes the map, and pgp_num then climbs a step at a time,
    /// moving the children, while the faults go on; later the PGs may
    /// merge back (the leader's `pg_num::step`) and split again
    /// (`LOLIGO_SIM_SPLITS=1`).
    pub splits: bool,
}

impl Run {
    /// As [`Run::ec`], with [`Run::stripes`] on half the seeds (those
    /// with bit 1 set, Reed-Solomon and Zigzag alike): the random sweeps'
    /// erasure-coded runs.
    pub fn ec_mixed(seed: u64) -> Run {
        Run {
            stripes: seed & 2 != 0,
            ..Run::ec(seed)
        }
    }

    /// A replicated run with the real monitors.
    pub fn replicated(seed: u64) -> Run {
        Run {
            seed,
            ec: false,
            lose: false,
            monitor: Monitors::Real,
            moves: false,
            strict_late: false,
            partitions: false,
            one_way: false,
            stores: Stores::Mem,
            elections: false,
            scrubs: false,
            rot: false,
            stripes: false,
            linearizable: std::env::var("LOLIGO_SIM_LINEARIZABLE").map_or(true, |v| v != "0"),
            splits: false,
        }
    }

    /// This run with the pool's PGs split (and perhaps merged back)
    /// mid-run: see [`Run::splits`].
    pub fn splitting(self) -> Run {
        Run {
            splits: true,
            ..self
        }
    }

    /// With erasure-coded objects over several stripes ([`Run::stripes`]).
    pub fn striped(self) -> Run {
        Run {
            stripes: true,
            ..self
        }
    }

    /// With scrubs asked for.
    pub fn scrubbing(self) -> Run {
        Run {
            scrubs: true,
            stripes: true,
            ..self
        }
    }

    /// With scrubs asked for and copies rotting.
    pub fn rotting(self) -> Run {
        Run {
            scrubs: true,
            rot: true,
            stripes: true,
            ..self
        }
    }

    /// With the monitors' leader failing now and then.
    pub fn electing(self) -> Run {
        Run {
            elections: true,
            ..self
        }
    }

    /// On the block store, each crash a power loss.
    pub fn on_block_store(self) -> Run {
        Run {
            stores: Stores::Block,
            ..self
        }
    }

    /// With partitions between OSDs.
    pub fn partitioned(self) -> Run {
        Run {
            partitions: true,
            ..self
        }
    }

    /// With partitions between OSDs, half of them one-way.
    pub fn partitioned_one_way(self) -> Run {
        Run {
            partitions: true,
            one_way: true,
            ..self
        }
    }

    /// An erasure-coded run with the real monitors.
    pub fn ec(seed: u64) -> Run {
        Run {
            ec: true,
            ..Run::replicated(seed)
        }
    }

    /// With OSDs declared lost.
    pub fn losing(self) -> Run {
        Run { lose: true, ..self }
    }

    /// On the model monitor, positions moving or not, with the strict
    /// late rule or not.
    pub fn on_model(self, moves: bool, strict_late: bool) -> Run {
        Run {
            monitor: Monitors::Model,
            moves,
            strict_late,
            ..self
        }
    }

    /// As the environment asks for a replay: `LOLIGO_SIM_MODEL=1` for
    /// the model monitor, `LOLIGO_SIM_EC_MOVES=1` (model) for moving
    /// positions, `LOLIGO_SIM_STRICT_LATE=1` (model) for the strict rule.
    pub fn as_asked(self) -> Run {
        let set = |v: &str| std::env::var_os(v).is_some();
        let (moves, strict) = (set("LOLIGO_SIM_EC_MOVES"), set("LOLIGO_SIM_STRICT_LATE"));
        let run = match (set("LOLIGO_SIM_PARTITIONS"), set("LOLIGO_SIM_ONE_WAY")) {
            (_, true) => self.partitioned_one_way(),
            (true, false) => self.partitioned(),
            (false, false) => self,
        };
        let run = match set("LOLIGO_SIM_BLOCK") {
            true => run.on_block_store(),
            false => run,
        };
        let run = match set("LOLIGO_SIM_ELECTIONS") {
            true => run.electing(),
            false => run,
        };
        let run = match (set("LOLIGO_SIM_SCRUB"), set("LOLIGO_SIM_ROT")) {
            (_, true) => run.rotting(),
            (true, false) => run.scrubbing(),
            (false, false) => run,
        };
        let run = Run {
            stripes: run.stripes || set("LOLIGO_SIM_EC_STRIPES"),
            splits: run.splits || set("LOLIGO_SIM_SPLITS"),
            ..run
        };
        match set("LOLIGO_SIM_MODEL") || moves || strict {
            true => run.on_model(moves, strict),
            false => run,
        }
    }

    /// The environment that replays this run with the test that runs
    /// its kind (`SEED` names the test's seed variable).
    pub fn replay(&self, seed_var: &str) -> String {
        let mut env = String::new();
        if self.monitor == Monitors::Model {
            env += "LOLIGO_SIM_MODEL=1 ";
        }
        if self.moves {
            env += "LOLIGO_SIM_EC_MOVES=1 ";
        }
        if self.strict_late {
            env += "LOLIGO_SIM_STRICT_LATE=1 ";
        }
        if self.one_way {
            env += "LOLIGO_SIM_ONE_WAY=1 ";
        } else if self.partitions {
            env += "LOLIGO_SIM_PARTITIONS=1 ";
        }
        if self.stores == Stores::Block {
            env += "LOLIGO_SIM_BLOCK=1 ";
        }
        if self.elections {
            env += "LOLIGO_SIM_ELECTIONS=1 ";
        }
        if self.rot {
            env += "LOLIGO_SIM_ROT=1 ";
        } else if self.scrubs {
            env += "LOLIGO_SIM_SCRUB=1 ";
        } else if self.stripes && self.ec {
            env += "LOLIGO_SIM_EC_STRIPES=1 ";
        }
        if !self.linearizable {
            env += "LOLIGO_SIM_LINEARIZABLE=0 ";
        }
        if self.splits {
            env += "LOLIGO_SIM_SPLITS=1 ";
        }
        format!("{env}{seed_var}={}", self.seed)
    }

    /// Run it: its counts, or a panic at the first violation.
    pub fn go(self) -> Stats {
        if std::env::var_os("LOLIGO_SIM_TRACE").is_some() {
            // The PGs' own log lines, between the simulator's events.
            let _ = tracing_subscriber::fmt()
                .with_test_writer()
                .without_time()
                .with_ansi(false)
                .with_max_level(tracing::Level::DEBUG)
                .try_init();
        }
        let mut s = Sim::new(&self);
        s.run(6_000);
        if s.heal_and_check() {
            s.check_linearizable();
            s.check_clean();
            s.check_shipped();
        }
        s.stats
    }

    /// Run it; a failure names the run and how to replay it.
    pub fn go_named(self, seed_var: &str) -> Stats {
        std::panic::catch_unwind(|| self.go()).unwrap_or_else(|_| {
            panic!(
                "{:?} seed {} failed: {} replays it",
                self.monitor,
                self.seed,
                self.replay(seed_var)
            )
        })
    }
}
