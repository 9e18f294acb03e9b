//! What kind of disk a store's data lives on: spinning (`hdd`) or solid
//! state (`ssd`), as the kernel reports it in
//! `/sys/dev/block/MAJOR:MINOR/queue/rotational` for the device holding
//! a path. The names are Ceph's CRUSH device classes; like Ceph's OSDs,
//! an OSD picks its block store's small-write defaults from the class
//! ([`crate::BlockConfig::deferred_max_for`],
//! [`crate::BlockConfig::small_writes_for`]), and an operator may name the
//! class when the kernel's answer is wrong (virtual disks often say
//! "rotational" whatever backs them).
//!
//! Must never: fail a mount because the class cannot be found (unknown is
//! an answer: the caller picks a default).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A device class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceClass {
    /// A spinning disk: seeks cost milliseconds.
    Hdd,
    /// Solid state.
    Ssd,
}

impl DeviceClass {
    /// Ceph's name for the class.
    pub fn name(self) -> &'static str {
        match self {
            DeviceClass::Hdd => "hdd",
            DeviceClass::Ssd => "ssd",
        }
    }

    /// The class of the device that holds `path` (a block device itself,
    /// or a file on a file system), as the kernel reports it; `None`
    /// where it does not (a file system with no block device under it,
    /// such as tmpfs or overlayfs, or no sysfs).
    pub fn of(path: &Path) -> Option<DeviceClass> {
        Self::of_in(Path::new("/sys/dev/block"), path)
    }

    /// [`DeviceClass::of`] with sysfs's block-device directory at `sys`.
    fn of_in(sys: &Path, path: &Path) -> Option<DeviceClass> {
        let md = std::fs::metadata(path).ok()?;
        let dev = if md.file_type().is_block_device() {
            md.rdev()
        } else {
            md.dev()
        };
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        if major == 0 {
            // Anonymous devices: no disk under them.
            return None;
        }
        let node = sys.join(format!("{major}:{minor}"));
        // A partition's directory has no queue of its own: its disk's
        // is one level up.
        let flag = [
            node.join("queue/rotational"),
            up(&node)?.join("queue/rotational"),
        ]
        .into_iter()
        .find_map(|p| std::fs::read_to_string(p).ok())?;
        match flag.trim() {
            "1" => Some(DeviceClass::Hdd),
            "0" => Some(DeviceClass::Ssd),
            _ => None,
        }
    }
}

/// `node`'s parent directory, with its symbolic link resolved (sysfs's
/// `MAJOR:MINOR` entries are links into the device tree).
fn up(node: &Path) -> Option<PathBuf> {
    Some(std::fs::canonicalize(node).ok()?.parent()?.to_path_buf())
}

impl std::str::FromStr for DeviceClass {
    type Err = String;

    fn from_str(s: &str) -> Result<DeviceClass, String> {
        match s {
            "hdd" => Ok(DeviceClass::Hdd),
            "ssd" | "nvme" => Ok(DeviceClass::Ssd),
            _ => Err(format!("unknown device class '{s}' (hdd or ssd)")),
        }
    }
}

impl std::fmt::Display for DeviceClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_testkit::TempDir;

    /// A fake sysfs: `MAJOR:MINOR` of the device holding `file`, a link to
    /// a partition directory inside a disk directory whose queue says
    /// `rotational`.
    fn fake_sys(file: &Path, rotational: &str) -> TempDir {
        let sys = TempDir::new("devclass-sys").expect("tempdir");
        let dev = std::fs::metadata(file).expect("metadata").dev();
        let disk = sys.path().join("devices/disk");
        std::fs::create_dir_all(disk.join("queue")).expect("mkdir");
        std::fs::create_dir_all(disk.join("part1")).expect("mkdir");
        std::fs::write(disk.join("queue/rotational"), rotational).expect("write");
        std::os::unix::fs::symlink(
            disk.join("part1"),
            sys.path()
                .join(format!("{}:{}", libc::major(dev), libc::minor(dev))),
        )
        .expect("symlink");
        sys
    }

    #[test]
    fn a_partition_takes_its_disks_class() {
        let d = TempDir::new("devclass").expect("tempdir");
        let f = d.path().join("block");
        std::fs::write(&f, b"x").expect("write");
        if libc::major(std::fs::metadata(&f).expect("metadata").dev()) == 0 {
            // A file system with no block device (tmpfs): nothing to fake.
            assert_eq!(DeviceClass::of(&f), None);
            return;
        }
        let sys = fake_sys(&f, "1\n");
        assert_eq!(DeviceClass::of_in(sys.path(), &f), Some(DeviceClass::Hdd));
        let sys = fake_sys(&f, "0\n");
        assert_eq!(DeviceClass::of_in(sys.path(), &f), Some(DeviceClass::Ssd));
        let sys = fake_sys(&f, "what\n");
        assert_eq!(DeviceClass::of_in(sys.path(), &f), None);
    }

    #[test]
    fn no_sysfs_entry_is_unknown_not_an_error() {
        let d = TempDir::new("devclass").expect("tempdir");
        let f = d.path().join("block");
        std::fs::write(&f, b"x").expect("write");
        let empty = TempDir::new("devclass").expect("tempdir");
        assert_eq!(DeviceClass::of_in(empty.path(), &f), None);
        assert_eq!(DeviceClass::of(&d.path().join("missing")), None);
    }

    #[test]
    fn names_round_trip() {
        for c in [DeviceClass::Hdd, DeviceClass::Ssd] {
            assert_eq!(c.name().parse::<DeviceClass>(), Ok(c));
        }
        assert_eq!("nvme".parse::<DeviceClass>(), Ok(DeviceClass::Ssd));
        assert!("tape".parse::<DeviceClass>().is_err());
    }
}
