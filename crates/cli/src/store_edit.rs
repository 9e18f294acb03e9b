//! `loligo store set-bytes | set-omap | remove`: edit one object's copy in
//! a stopped OSD's store, through the store so every checksum stays valid
//! (as `ceph-objectstore-tool`'s verbs of the same names). They make the
//! damage a scrub must find without the store noticing: wrong data, a
//! wrong omap value, a copy gone. They are for testing scrub and repair.
//!
//! They must never touch more than the one copy named, nor guess between
//! copies: an object held in several PG collections must be named with
//! `--pg`.

use crate::CliError;
use clap::Args;
use loligo_store::{BlockConfig, BlockStore, CollectionId, ObjectId, ObjectStore, Transaction};
use std::path::{Path, PathBuf};

/// Which copy: the store and the object (and, if several collections
/// hold it, the PG).
#[derive(Args)]
pub struct CopyArgs {
    /// The stopped OSD's store directory.
    dir: PathBuf,
    /// The object's name.
    obj: String,
    /// The PG holding the copy (POOL.SEED), when several collections hold
    /// an object of that name.
    #[arg(long)]
    pg: Option<String>,
}

/// `store set-bytes DIR OBJ OFFSET FILE`.
#[derive(Args)]
pub struct SetBytesArgs {
    #[command(flatten)]
    copy: CopyArgs,
    /// Byte offset in the object's data.
    offset: u64,
    /// File holding the bytes to write.
    file: PathBuf,
}

/// `store set-omap DIR OBJ KEY FILE`.
#[derive(Args)]
pub struct SetOmapArgs {
    #[command(flatten)]
    copy: CopyArgs,
    /// The omap key (set, or replaced).
    key: String,
    /// File holding the value.
    file: PathBuf,
}

/// `store remove DIR OBJ`.
#[derive(Args)]
pub struct RemoveArgs {
    #[command(flatten)]
    copy: CopyArgs,
}

fn read_file(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError(format!("{}: {e}", path.display())))
}

/// The store mounted, and the one collection holding the copy, and the
/// object's id.
fn find_copy(a: &CopyArgs) -> Result<(BlockStore, CollectionId, ObjectId), CliError> {
    let s = BlockStore::mount(&a.dir, &BlockConfig::default())?;
    let o = ObjectId::new(
        loligo_crush::hash::str_hash_rjenkins(a.obj.as_bytes()),
        a.obj.clone(),
    );
    let want: Option<loligo_types::PgId> =
        a.pg.as_deref()
            .map(str::parse)
            .transpose()
            .map_err(CliError)?;
    let mut holders: Vec<CollectionId> = Vec::new();
    for c in s.collections()? {
        let named = want.is_none_or(|p| (c.pool, c.pg) == (p.pool, p.ps));
        if named && s.exists(c, &o)? {
            holders.push(c);
        }
    }
    match holders.as_slice() {
        [c] => Ok((s, *c, o)),
        [] => Err(CliError(format!(
            "no object '{}' in {}",
            a.obj,
            a.dir.display()
        ))),
        many => {
            let names: Vec<String> = many.iter().map(|c| format!("{c:?}")).collect();
            Err(CliError(format!(
                "'{}' is in several collections ({}): name one with --pg",
                a.obj,
                names.join(", ")
            )))
        }
    }
}

/// `store set-bytes`: FILE's bytes written into the copy's data at OFFSET.
pub fn set_bytes(a: SetBytesArgs) -> Result<(), CliError> {
    let data = read_file(&a.file)?;
    let (s, c, o) = find_copy(&a.copy)?;
    let mut t = Transaction::new();
    t.write(c, &o, a.offset, data.clone());
    s.apply(t)?;
    println!(
        "wrote {} bytes at offset {} of '{}' in pg {}.{:x}",
        data.len(),
        a.offset,
        a.copy.obj,
        c.pool,
        c.pg
    );
    Ok(())
}

/// `store set-omap`: the copy's omap KEY set to FILE's bytes.
pub fn set_omap(a: SetOmapArgs) -> Result<(), CliError> {
    let value = read_file(&a.file)?;
    let (s, c, o) = find_copy(&a.copy)?;
    let mut t = Transaction::new();
    let len = value.len();
    t.omap_setkeys(c, &o, vec![(a.key.clone().into_bytes(), value)]);
    s.apply(t)?;
    println!(
        "set omap key '{}' ({len} bytes) of '{}' in pg {}.{:x}",
        a.key, a.copy.obj, c.pool, c.pg
    );
    Ok(())
}

/// `store remove`: the copy removed (data, xattrs and omap).
pub fn remove(a: RemoveArgs) -> Result<(), CliError> {
    let (s, c, o) = find_copy(&a.copy)?;
    let mut t = Transaction::new();
    t.remove(c, &o);
    s.apply(t)?;
    println!("removed '{}' from pg {}.{:x}", a.copy.obj, c.pool, c.pg);
    Ok(())
}
