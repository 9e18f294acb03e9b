//! Every case under `testdata/ceph/placement` must reproduce osdmaptool's
//! object and PG lines byte for byte.

mod common;

use loligo_crush::placement::{map_pg, object_line, pg_dump_line, OsdStates, PgId, PoolPlacement};
use loligo_crush::{text, CompiledMap, Workspace};

#[test]
fn objects_and_pgs_match_osdmaptool() {
    for case in common::cases("placement") {
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("case.json")).unwrap())
                .unwrap();
        let crush_txt = std::fs::read_to_string(case.join("crush.txt")).unwrap();
        let crush = CompiledMap::compile(&text::parse(&crush_txt).unwrap()).unwrap();
        let pool = PoolPlacement {
            pgp_num: meta["pgp_num"].as_u64().unwrap() as u32,
            ..PoolPlacement::replicated(
                meta["pool_id"].as_u64().unwrap(),
                meta["pg_num"].as_u64().unwrap() as u32,
                meta["size"].as_u64().unwrap() as u32,
                0,
            )
        };
        pool.validate().unwrap();
        let mut osds = OsdStates::all_up_in(meta["max_osd"].as_i64().unwrap() as i32);
        let args = std::fs::read_to_string(case.join("args")).unwrap();
        let words: Vec<&str> = args.split_whitespace().collect();
        for w in words.windows(2) {
            if w[0] == "--mark-out" {
                osds.mark_out(w[1].parse().unwrap()).unwrap();
            }
        }
        let mut ws = Workspace::new(&crush);
        let name = case.display();

        let expected_pgs = std::fs::read_to_string(case.join("pgs.txt")).unwrap();
        let mut got = String::new();
        for ps in 0..pool.pg_num {
            let m = map_pg(&crush, &pool, &osds, ps, &mut ws).unwrap();
            got.push_str(&pg_dump_line(
                PgId {
                    pool: pool.pool_id,
                    ps,
                },
                &m,
            ));
            got.push('\n');
        }
        assert_eq!(got, expected_pgs, "{name}: pgs differ");

        let expected_objs = std::fs::read_to_string(case.join("objects.txt")).unwrap();
        let mut got = String::new();
        for line in expected_objs.lines() {
            let obj = line.split('\'').nth(1).expect("object name");
            let ps = pool.object_ps(obj.as_bytes());
            let m = map_pg(&crush, &pool, &osds, ps, &mut ws).unwrap();
            got.push_str(&object_line(
                obj,
                PgId {
                    pool: pool.pool_id,
                    ps,
                },
                &m.acting,
            ));
            got.push('\n');
        }
        assert_eq!(got, expected_objs, "{name}: objects differ");
    }
}
