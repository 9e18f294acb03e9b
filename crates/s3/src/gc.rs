//! The collector: deletes the data objects of overwritten and deleted
//! objects (garbage records older than `gc_min_wait`, so a reader that
//! started before the delete finishes first) and of uploads whose gateway
//! died (pending records older than `pending_max_age`, first moved to the
//! garbage list by `s3.abandon`, which a late commit then cannot pass).
//!
//! Several gateways may collect at once: deleting a deleted object and
//! removing a removed record are no-ops. It must never delete data
//! before its record is in the garbage list.

use crate::{internal, now_ms, Gateway};
use loligo_client::ClientError;
use loligo_types::s3::{garbage_time, omap_key, Abandon, Garbage, GARBAGE, PENDING};
use s3s::{s3_error, S3Error};

/// Records read from a shard at a time.
const PAGE: u32 = 256;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// Garbage records emptied.
    pub records: u64,
    /// Data objects deleted (or found already gone).
    pub objects: u64,
    /// Pending uploads taken for abandoned.
    pub abandoned: u64,
}

impl std::ops::AddAssign for Collected {
    fn add_assign(&mut self, o: Collected) {
        self.records += o.records;
        self.objects += o.objects;
        self.abandoned += o.abandoned;
    }
}

/// Entries of `shard` with keys starting `prefix`, from `start`.
async fn page(
    gw: &Gateway,
    shard: &str,
    prefix: u8,
    start: &[u8],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, S3Error> {
    match gw.index().omap_list(shard, start, PAGE).await {
        Ok(p) => Ok(p
            .into_iter()
            .take_while(|(k, _)| k.first() == Some(&prefix))
            .collect()),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(internal(e)),
    }
}

impl Gateway {
    /// Collect in index object `shard`: pending records made before
    /// `pending_cutoff_ms` abandoned, garbage records made before
    /// `garbage_cutoff_ms` emptied (`u64::MAX`: everything, as a deleted
    /// bucket's are).
    pub async fn collect_shard(
        &self,
        shard: &str,
        garbage_cutoff_ms: u64,
        pending_cutoff_ms: u64,
    ) -> Result<Collected, S3Error> {
        let mut done = Collected::default();
        let mut start = vec![PENDING];
        loop {
            let p = page(self, shard, PENDING, &start).await?;
            let full = p.len() == PAGE as usize;
            for (k, v) in p {
                let g: Garbage = serde_json::from_slice(&v)
                    .map_err(|e| s3_error!(InternalError, "pending record: {e}"))?;
                if g.ms < pending_cutoff_ms {
                    let tag = String::from_utf8_lossy(&k[1..]).into_owned();
                    let input = postcard::to_stdvec(&Abandon {
                        tag,
                        now_ms: now_ms(),
                    })
                    .map_err(|e| s3_error!(InternalError, "{e}"))?;
                    self.index()
                        .exec(shard, "s3", "abandon", input)
                        .await
                        .map_err(internal)?;
                    done.abandoned += 1;
                }
                start = k;
                start.push(0);
            }
            if !full {
                break;
            }
        }
        let mut start = omap_key(GARBAGE, b"");
        loop {
            let p = page(self, shard, GARBAGE, &start).await?;
            let full = p.len() == PAGE as usize;
            for (k, v) in p {
                if garbage_time(&k).is_none_or(|t| t >= garbage_cutoff_ms) {
                    return Ok(done);
                }
                let g: Garbage = serde_json::from_slice(&v)
                    .map_err(|e| s3_error!(InternalError, "garbage record: {e}"))?;
                for t in &g.tails {
                    for n in 0..t.count {
                        match self.data().remove(&t.object(n)).await {
                            Ok(()) => {}
                            Err(e) if e.is_not_found() => {}
                            Err(e) => return Err(internal(e)),
                        }
                        done.objects += 1;
                    }
                }
                match self.index().omap_rm(shard, vec![k.clone()]).await {
                    Ok(()) | Err(ClientError::Op(loligo_types::ops::OpError::NotFound)) => {}
                    Err(e) => return Err(internal(e)),
                }
                done.records += 1;
                start = k;
                start.push(0);
            }
            if !full {
                return Ok(done);
            }
        }
    }

    /// One pass over every bucket's shards with the configured waits.
    pub async fn collect(&self) -> Result<Collected, S3Error> {
        let now = now_ms();
        let cfg = self.config();
        let garbage_cutoff = now.saturating_sub(cfg.gc_min_wait.as_millis() as u64);
        let pending_cutoff = now.saturating_sub(cfg.pending_max_age.as_millis() as u64);
        let mut done = Collected::default();
        for b in crate::bucket::list(self.index()).await? {
            for s in b.shard_objects() {
                done += self
                    .collect_shard(&s, garbage_cutoff, pending_cutoff)
                    .await?;
            }
        }
        Ok(done)
    }

    /// Collect every `gc_interval` until the task is dropped.
    pub async fn run_collector(self) {
        loop {
            tokio::time::sleep(self.config().gc_interval).await;
            match self.collect().await {
                Ok(c) if c != Collected::default() => tracing::info!(
                    "gc: {} records, {} objects deleted, {} abandoned uploads",
                    c.records,
                    c.objects,
                    c.abandoned
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("gc: {e}"),
            }
        }
    }
}
