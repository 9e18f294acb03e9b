//! A multipart object's checksum from its parts', in S3's two ways:
//! `COMPOSITE` (the checksum of the parts' checksums, with `-N`) and
//! `FULL_OBJECT` (the CRC of the whole object, combined from the parts'
//! CRCs and lengths without reading the data again). Pure: no I/O.
//!
//! It must never answer a checksum it did not compute: an algorithm or
//! way it does not know is an error.

use base64::Engine as _;

/// A checksum algorithm S3 names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

impl Algorithm {
    /// The algorithm S3 names `name` (`CRC32`, ...).
    pub fn parse(name: &str) -> Option<Algorithm> {
        Some(match name.to_ascii_uppercase().as_str() {
            "CRC32" => Algorithm::Crc32,
            "CRC32C" => Algorithm::Crc32c,
            "CRC64NVME" => Algorithm::Crc64Nvme,
            "SHA1" => Algorithm::Sha1,
            "SHA256" => Algorithm::Sha256,
            _ => return None,
        })
    }

    /// The key entries keep its value under (`crc32`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "crc32",
            Algorithm::Crc32c => "crc32c",
            Algorithm::Crc64Nvme => "crc64nvme",
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
        }
    }

    /// The reflected polynomial and width of a CRC (`None`: a hash).
    fn crc(self) -> Option<(u64, u32)> {
        match self {
            Algorithm::Crc32 => Some((0xEDB8_8320, 32)),
            Algorithm::Crc32c => Some((0x82F6_3B78, 32)),
            Algorithm::Crc64Nvme => Some((0x9A6C_9329_AC4B_C9B5, 64)),
            Algorithm::Sha1 | Algorithm::Sha256 => None,
        }
    }

    /// The checksum of `data`, raw.
    fn digest(self, data: &[u8]) -> Vec<u8> {
        fn run<H: s3s::crypto::Checksum + Default>(data: &[u8]) -> Vec<u8> {
            let mut h = H::default();
            h.update(data);
            h.finalize().as_ref().to_vec()
        }
        match self {
            Algorithm::Crc32 => run::<s3s::crypto::Crc32>(data),
            Algorithm::Crc32c => run::<s3s::crypto::Crc32c>(data),
            Algorithm::Crc64Nvme => run::<s3s::crypto::Crc64Nvme>(data),
            Algorithm::Sha1 => run::<s3s::crypto::Sha1>(data),
            Algorithm::Sha256 => run::<s3s::crypto::Sha256>(data),
        }
    }
}

fn decode(b64: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| format!("'{b64}' is not a base64 checksum"))
}

fn encode(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// The `COMPOSITE` checksum of parts whose checksums are `parts`
/// (base64): the checksum of their concatenation, then `-N`.
pub fn composite(alg: Algorithm, parts: &[&str]) -> Result<String, String> {
    let mut raw = Vec::new();
    for p in parts {
        raw.extend(decode(p)?);
    }
    Ok(format!("{}-{}", encode(&alg.digest(&raw)), parts.len()))
}

/// The `FULL_OBJECT` checksum of parts whose CRCs (base64) and lengths
/// are `parts`: the CRC of the whole object.
pub fn full_object(alg: Algorithm, parts: &[(&str, u64)]) -> Result<String, String> {
    let (poly, width) = alg
        .crc()
        .ok_or_else(|| format!("{alg:?} is not a CRC: it has no FULL_OBJECT checksum"))?;
    let bytes = (width / 8) as usize;
    let mut whole: Option<u64> = None;
    for (b64, len) in parts {
        let raw = decode(b64)?;
        if raw.len() != bytes {
            return Err(format!("'{b64}' is not a {width}-bit CRC"));
        }
        let crc = raw.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
        whole = Some(match whole {
            None => crc,
            Some(w) => combine(w, crc, *len, poly, width),
        });
    }
    let w = whole.ok_or("an object of no parts has no checksum")?;
    Ok(encode(&w.to_be_bytes()[8 - bytes..]))
}

/// `mat` (a `width`-bit GF(2) matrix, one column per bit) times `vec`.
fn times(mat: &[u64], mut vec: u64) -> u64 {
    let mut sum = 0;
    let mut i = 0;
    while vec != 0 {
        if vec & 1 != 0 {
            sum ^= mat[i];
        }
        vec >>= 1;
        i += 1;
    }
    sum
}

fn square(out: &mut [u64], mat: &[u64]) {
    for (n, o) in out.iter_mut().enumerate() {
        *o = times(mat, mat[n]);
    }
}

/// The CRC of `A || B` from `crc(A)`, `crc(B)` and `B`'s length, for a
/// reflected CRC with all-ones start and final xor (zlib's
/// `crc32_combine`, in any width up to 64).
fn combine(mut crc1: u64, crc2: u64, mut len2: u64, poly: u64, width: u32) -> u64 {
    if len2 == 0 {
        return crc1;
    }
    let w = width as usize;
    let (mut even, mut odd) = (vec![0u64; w], vec![0u64; w]);
    // The operator of one zero bit, then of two and four.
    odd[0] = poly;
    for (n, o) in odd.iter_mut().enumerate().skip(1) {
        *o = 1 << (n - 1);
    }
    square(&mut even, &odd);
    square(&mut odd, &even);
    // Apply len2 zero bytes to crc1, squaring the operator as it goes.
    loop {
        square(&mut even, &odd);
        if len2 & 1 != 0 {
            crc1 = times(&even, crc1);
        }
        len2 >>= 1;
        if len2 == 0 {
            break;
        }
        square(&mut odd, &even);
        if len2 & 1 != 0 {
            crc1 = times(&odd, crc1);
        }
        len2 >>= 1;
        if len2 == 0 {
            break;
        }
    }
    crc1 ^ crc2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_crcs_are_the_crcs_of_the_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for alg in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme] {
            for cuts in [
                vec![1, 2],
                vec![0, 50_000],
                vec![33_333, 66_666, 99_999],
                vec![99_999],
            ] {
                let mut bounds = vec![0];
                bounds.extend(cuts);
                bounds.push(data.len());
                let parts: Vec<(String, u64)> = (bounds.windows(2))
                    .map(|w| (encode(&alg.digest(&data[w[0]..w[1]])), (w[1] - w[0]) as u64))
                    .collect();
                let refs: Vec<(&str, u64)> = parts.iter().map(|(s, n)| (s.as_str(), *n)).collect();
                assert_eq!(
                    full_object(alg, &refs).unwrap(),
                    encode(&alg.digest(&data)),
                    "{alg:?}"
                );
            }
        }
        assert!(full_object(Algorithm::Sha256, &[("AAAA", 3)]).is_err());
    }

    /// The composite of S3's documentation's way, checked against the
    /// values Ceph's suite expects for three 5 MiB parts of 'A', 'B', 'C'.
    #[test]
    fn composites_are_checksums_of_checksums() {
        let part = |c: u8| vec![c; 5 << 20];
        let sums: Vec<String> = [b'A', b'B', b'C']
            .iter()
            .map(|&c| encode(&Algorithm::Sha256.digest(&part(c))))
            .collect();
        assert_eq!(sums[0], "275VF5loJr1YYawit0XSHREhkFXYkkPKGuoK0x9VKxI=");
        let refs: Vec<&str> = sums.iter().map(String::as_str).collect();
        assert_eq!(
            composite(Algorithm::Sha256, &refs).unwrap(),
            "uWBwpe1dxI4Vw8Gf0X9ynOdw/SS6VBzfWm9giiv1sf4=-3"
        );
        let crcs: Vec<String> = [b'A', b'B', b'C']
            .iter()
            .map(|&c| encode(&Algorithm::Crc64Nvme.digest(&part(c))))
            .collect();
        let parts: Vec<(&str, u64)> = crcs.iter().map(|s| (s.as_str(), 5 << 20)).collect();
        assert_eq!(
            full_object(Algorithm::Crc64Nvme, &parts).unwrap(),
            "i+6LR0y3eFo="
        );
    }
}
