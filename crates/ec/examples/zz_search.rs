use loligo_ec::zigzag::{Construction, Zigzag};
use std::time::Instant;
fn main() {
    let cfgs = [(6,2,1),(6,2,2),(6,2,3),(6,3,1),(6,3,2),(6,3,3),(8,2,1),(8,2,2),(8,2,3),(8,3,2),(8,3,3),(8,3,4),(8,4,2),(8,4,3),(8,4,4),(10,3,2),(10,3,3),(10,3,4),(10,3,5),(10,4,3),(10,4,4),(10,4,5)];
    for (k,r,s) in cfgs {
        let z = Zigzag::new(k,r,s,Construction::Basic).unwrap();
        let t = Instant::now();
        let res = z.coefficients().map(|_| ());
        let t1 = t.elapsed();
        let v = if res.is_ok() { z.verify_mds().map_err(|e| e.to_string()) } else { Err("-".into()) };
        println!("k={k} r={r} s={s} rows={} search {:?} {:?} verify {:?} {:?}", z.shape().rows, t1, res.is_ok(), t.elapsed()-t1, v);
    }
}
