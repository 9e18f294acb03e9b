//! Ceph's fixed-point logarithm for straw2 (`crush_ln`): `2^44 * log2(x + 1)`
//! for x in `0..=0xffff`, computed from a coarse table (128 steps of the
//! mantissa) and a fine table (256 sub-steps).
//!
//! Compatibility note. The coarse reciprocal table is derived here from its
//! definition, `RH[k] = ceil(2^55 / (128 + k))`, and the coarse log table
//! matches `floor(2^48 * log2(1 + k/128))` (a test recomputes every entry).
//! Ceph's *fine* table, although documented as `2^48 * log2(1 + k/2^15)`,
//! does not follow that formula: 234 of its 256 entries carry an offset of
//! about 5.49e9 and about 25 hold unrelated values. Straw2 draws compare
//! these logarithms, so any "corrected" table would silently move data for
//! every existing Ceph map. The fine table is therefore carried verbatim as
//! data, and the CRUSH vectors (1,000-OSD maps, 100,000 inputs) are what
//! prove it. Never "fix" an entry.

/// Coarse table: `LH[k] = floor(2^48 * log2(1 + k/128))` for k < 128 (a test
/// recomputes them); `LH[128]` is Ceph's `0xffff_0000_0000` (used only for
/// input 0xffff), one below the formula's 2^48.
const LH_TABLE: [u64; 129] = [
    0x000000000000,
    0x02dfca16dde1,
    0x05b9e5a170b4,
    0x088e68ea899a,
    0x0b5d69bac77e,
    0x0e26fd5c8555,
    0x10eb389fa29f,
    0x13aa2fdd27f1,
    0x1663f6fac913,
    0x1918a16e4633,
    0x1bc84240adab,
    0x1e72ec117fa5,
    0x2118b119b4f3,
    0x23b9a32eaa56,
    0x2655d3c4f15c,
    0x28ed53f307ee,
    0x2b803473f7ad,
    0x2e0e85a9de04,
    0x309857a05e07,
    0x331dba0efce1,
    0x359ebc5b69d9,
    0x381b6d9bb29b,
    0x3a93dc9864b2,
    0x3d0817ce9cd4,
    0x3f782d7204d0,
    0x41e42b6ec0c0,
    0x444c1f6b4c2d,
    0x46b016ca47c1,
    0x49101eac381c,
    0x4b6c43f1366a,
    0x4dc4933a9337,
    0x501918ec6c11,
    0x5269e12f346e,
    0x54b6f7f1325a,
    0x570068e7ef5a,
    0x59463f919dee,
    0x5b8887367433,
    0x5dc74ae9fbec,
    0x6002958c5871,
    0x623a71cb82c8,
    0x646eea247c5c,
    0x66a008e4788c,
    0x68cdd829fd81,
    0x6af861e5fc7d,
    0x6d1fafdce20a,
    0x6f43cba79e40,
    0x7164beb4a56d,
    0x73829248e961,
    0x759d4f80cba8,
    0x77b4ff5108d9,
    0x79c9aa879d53,
    0x7bdb59cca388,
    0x7dea15a32c1b,
    0x7ff5e66a0ffe,
    0x81fed45cbccb,
    0x8404e793fb81,
    0x86082806b1d5,
    0x88089d8a9e47,
    0x8a064fd50f2a,
    0x8c01467b94bb,
    0x8df988f4ae80,
    0x8fef1e987409,
    0x91e20ea1393e,
    0x93d2602c2e5f,
    0x95c01a39fbd6,
    0x97ab43af59f9,
    0x9993e355a4e5,
    0x9b79ffdb6c8b,
    0x9d5d9fd5010b,
    0x9f3ec9bcfb80,
    0xa11d83f4c355,
    0xa2f9d4c51039,
    0xa4d3c25e68dc,
    0xa6ab52d99e76,
    0xa8808c384547,
    0xaa5374652a1c,
    0xac241134c4e9,
    0xadf26865a8a1,
    0xafbe7fa0f04d,
    0xb1885c7aa982,
    0xb35004723c46,
    0xb5157cf2d078,
    0xb6d8cb53b0ca,
    0xb899f4d8ab63,
    0xba58feb2703a,
    0xbc15edfeed32,
    0xbdd0c7c9a817,
    0xbf89910c1678,
    0xc1404eadf383,
    0xc2f5058593d9,
    0xc4a7ba58377c,
    0xc65871da59dd,
    0xc80730b00016,
    0xc9b3fb6d0559,
    0xcb5ed69565af,
    0xcd07c69d8702,
    0xceaecfea8085,
    0xd053f6d26089,
    0xd1f73f9c70c0,
    0xd398ae817906,
    0xd53847ac00a6,
    0xd6d60f388e41,
    0xd8720935e643,
    0xda0c39a54804,
    0xdba4a47aa996,
    0xdd3b4d9cf24b,
    0xded038e633f3,
    0xe0636a23e2ee,
    0xe1f4e5170d02,
    0xe384ad748f0e,
    0xe512c6e54998,
    0xe69f35065448,
    0xe829fb693044,
    0xe9b31d93f98e,
    0xeb3a9f019750,
    0xecc08321eb30,
    0xee44cd59ffab,
    0xefc781043579,
    0xf148a170700a,
    0xf2c831e44116,
    0xf446359b1353,
    0xf5c2afc65447,
    0xf73da38d9d4a,
    0xf8b7140edbb1,
    0xfa2f045e7832,
    0xfba577877d7d,
    0xfd1a708bbe11,
    0xfe8df263f957,
    0xffff00000000,
];

/// Ceph's fine table, indexed by the low 8 bits of the normalised mantissa.
/// It is data, not a formula: see the module comment.
const LL_TABLE: [u64; 256] = [
    0x000000000000,
    0x0002e2a60a00,
    0x00070cb64ec5,
    0x0009ef50ce67,
    0x000cd1e588fd,
    0x000fb4747e9c,
    0x001296fdaf5e,
    0x001579811b58,
    0x00185bfec2a1,
    0x001b3e76a552,
    0x001e20e8c380,
    0x002103551d43,
    0x0023e5bbb2b2,
    0x0026c81c83e4,
    0x0029aa7790f0,
    0x002c8cccd9ed,
    0x002f6f1c5ef2,
    0x003251662017,
    0x003533aa1d71,
    0x003815e8571a,
    0x003af820cd26,
    0x003dda537fae,
    0x0040bc806ec8,
    0x00439ea79a8c,
    0x004680c90310,
    0x004962e4a86c,
    0x004c44fa8ab6,
    0x004f270aaa06,
    0x005209150672,
    0x0054eb19a013,
    0x0057cd1876fd,
    0x005aaf118b4a,
    0x005d9104dd0f,
    0x006072f26c64,
    0x006354da3960,
    0x006636bc441a,
    0x006918988ca8,
    0x006bfa6f1322,
    0x006edc3fd79f,
    0x0071be0ada35,
    0x00749fd01afd,
    0x0077818f9a0c,
    0x007a6349577a,
    0x007d44fd535e,
    0x008026ab8dce,
    0x0083085406e3,
    0x0085e9f6beb2,
    0x0088cb93b552,
    0x008bad2aeadc,
    0x008e8ebc5f65,
    0x009170481305,
    0x009451ce05d3,
    0x0097334e37e5,
    0x009a14c8a953,
    0x009cf63d5a33,
    0x009fd7ac4a9d,
    0x00a2b07f3458,
    0x00a59a78ea6a,
    0x00a87bd699fb,
    0x00ab5d2e8970,
    0x00ae3e80b8e3,
    0x00b11fcd2869,
    0x00b40113d818,
    0x00b6e254c80a,
    0x00b9c38ff853,
    0x00bca4c5690c,
    0x00bf85f51a4a,
    0x00c2671f0c26,
    0x00c548433eb6,
    0x00c82961b211,
    0x00cb0a7a664d,
    0x00cdeb8d5b82,
    0x00d0cc9a91c8,
    0x00d3ada20933,
    0x00d68ea3c1dd,
    0x00d96f9fbbdb,
    0x00dc5095f744,
    0x00df31867430,
    0x00e2127132b5,
    0x00e4f35632ea,
    0x00e7d43574e6,
    0x00eab50ef8c1,
    0x00ed95e2be90,
    0x00f076b0c66c,
    0x00f35779106a,
    0x00f6383b9ca2,
    0x00f918f86b2a,
    0x00fbf9af7c1a,
    0x00feda60cf88,
    0x0101bb0c658c,
    0x01049bb23e3c,
    0x01077c5259af,
    0x010a5cecb7fc,
    0x010d3d81593a,
    0x01101e103d7f,
    0x0112fe9964e4,
    0x0115df1ccf7e,
    0x0118bf9a7d64,
    0x011ba0126ead,
    0x011e8084a371,
    0x012160f11bc6,
    0x01244157d7c3,
    0x012721b8d77f,
    0x012a02141b10,
    0x012ce269a28e,
    0x012fc2b96e0f,
    0x0132a3037daa,
    0x01358347d177,
    0x01386386698c,
    0x013b43bf45ff,
    0x013e23f266e9,
    0x0141041fcc5e,
    0x0143e4477678,
    0x0146c469654b,
    0x0149a48598f0,
    0x014c849c117c,
    0x014f64accf08,
    0x015244b7d1a9,
    0x015524bd1976,
    0x015804bca687,
    0x015ae4b678f2,
    0x015dc4aa90ce,
    0x0160a498ee31,
    0x016384819134,
    0x0166646479ec,
    0x01694441a870,
    0x016c24191cd7,
    0x016df6ca19bd,
    0x0171e3b6d7aa,
    0x0174c37d1e44,
    0x0177a33dab1c,
    0x017a82f87e49,
    0x017d62ad97e2,
    0x0180425cf7fe,
    0x0182b07f3458,
    0x018601aa8c19,
    0x0188e148c046,
    0x018bc0e13b52,
    0x018ea073fd52,
    0x01918001065d,
    0x01945f88568b,
    0x01973f09edf2,
    0x019a1e85ccaa,
    0x019cfdfbf2c8,
    0x019fdd6c6063,
    0x01a2bcd71593,
    0x01a59c3c126e,
    0x01a87b9b570b,
    0x01ab5af4e380,
    0x01ae3a48b7e5,
    0x01b11996d450,
    0x01b3f8df38d9,
    0x01b6d821e595,
    0x01b9b75eda9b,
    0x01bc96961803,
    0x01bf75c79de3,
    0x01c254f36c51,
    0x01c534198365,
    0x01c81339e336,
    0x01caf2548bd9,
    0x01cdd1697d67,
    0x01d0b078b7f5,
    0x01d38f823b9a,
    0x01d66e86086d,
    0x01d94d841e86,
    0x01dc2c7c7df9,
    0x01df0b6f26df,
    0x01e1ea5c194e,
    0x01e4c943555d,
    0x01e7a824db23,
    0x01ea8700aab5,
    0x01ed65d6c42b,
    0x01f044a7279d,
    0x01f32371d51f,
    0x01f60236ccca,
    0x01f8e0f60eb3,
    0x01fbbfaf9af3,
    0x01fe9e63719e,
    0x02017d1192cc,
    0x02045bb9fe94,
    0x02073a5cb50d,
    0x0209c06e6212,
    0x020cf791026a,
    0x020fd622997c,
    0x0212b07f3458,
    0x02159334a8d8,
    0x021871b52150,
    0x021b502fe517,
    0x021d6a73a78f,
    0x02210d144eee,
    0x0223eb7df52c,
    0x0226c9e1e713,
    0x0229a84024bb,
    0x022c23679b4e,
    0x022f64eb83a8,
    0x02324338a51b,
    0x0235218012a9,
    0x0237ffc1cc69,
    0x023a2c3b0ea4,
    0x023d13ee805b,
    0x024035e9221f,
    0x0243788faf25,
    0x024656b4e735,
    0x0247ed646bfe,
    0x024c12ee3d98,
    0x024ef1025c1a,
    0x0251cf10c799,
    0x025492644d65,
    0x02578b1c85ee,
    0x025a6919d8f0,
    0x025d13ee805b,
    0x026025036716,
    0x026296453882,
    0x0265e0d62b53,
    0x0268beb701f3,
    0x026b9c92265e,
    0x026d32f798a9,
    0x0271583758eb,
    0x02743601673b,
    0x027713c5c3b0,
    0x0279f1846e5f,
    0x027ccf3d6761,
    0x027e6580aecb,
    0x02828a9e44b3,
    0x028568462932,
    0x0287bdbf5255,
    0x028b2384de4a,
    0x028d13ee805b,
    0x029035e9221f,
    0x029296453882,
    0x029699bdfb61,
    0x029902a37aab,
    0x029c54b864c9,
    0x029deabd1083,
    0x02a20f9c0bb5,
    0x02a4c7605d61,
    0x02a7bdbf5255,
    0x02a96056dafc,
    0x02ac3daf14ef,
    0x02af1b019eca,
    0x02b296453882,
    0x02b5d022d80f,
    0x02b8fa471cb3,
    0x02ba9012e713,
    0x02bd6d4901cc,
    0x02c04a796cf6,
    0x02c327a428a6,
    0x02c61a5e8f4c,
    0x02c8e1e891f6,
    0x02cbbf023fc2,
    0x02ce9c163e6e,
    0x02d179248e13,
    0x02d4562d2ec6,
    0x02d73330209d,
    0x02da102d63b0,
    0x02dced24f814,
];

/// `RH[k] = ceil(2^55 / (128 + k))`: 2^48 over the coarse mantissa 1 + k/128.
const fn rh(k: u64) -> u64 {
    let d = 128 + k;
    (1u64 << 55).div_ceil(d)
}

/// `rh` for every coarse index, computed at compile time.
const RH_TABLE: [u64; 129] = {
    let mut t = [0u64; 129];
    let mut k = 0;
    while k < 129 {
        t[k] = rh(k as u64);
        k += 1;
    }
    t
};

/// `2^44 * log2(xin + 1)` in Ceph's fixed point, for `xin <= 0xffff`.
#[inline]
pub fn crush_ln(xin: u32) -> u64 {
    debug_assert!(xin <= 0xffff, "crush_ln takes 16-bit inputs");
    let mut x = (xin & 0xffff) + 1;
    let mut iexpon: u64 = 15;
    // Normalise so that bit 15 (or 16, for 0x10000) is the top bit.
    if x & 0x18000 == 0 {
        let bits = (x & 0x1ffff).leading_zeros() - 16;
        x <<= bits;
        iexpon = 15 - u64::from(bits);
    }
    let k = ((x >> 8) - 128) as usize;
    let xl64 = (u64::from(x) * RH_TABLE[k]) >> 48;
    let index2 = (xl64 & 0xff) as usize;
    let lh = LH_TABLE[k] + LL_TABLE[index2];
    (iexpon << 44) + (lh >> 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_log_table_matches_its_definition() {
        for (k, &v) in LH_TABLE.iter().enumerate().take(128) {
            let exact = (2f64).powi(48) * (1.0 + k as f64 / 128.0).log2();
            // f64 carries ~2^-5 absolute error at this magnitude.
            assert!((v as f64 - exact.floor()).abs() <= 1.0, "LH[{k}]");
        }
    }

    #[test]
    fn reciprocal_is_exact_ceiling() {
        assert_eq!(rh(0), 1 << 48);
        assert_eq!(rh(1), 0x0000_fe03_f80f_e040);
        assert_eq!(rh(127), 0x0000_8080_8080_8081);
        assert_eq!(rh(128), 1 << 47);
        for (k, &v) in RH_TABLE.iter().enumerate() {
            assert_eq!(v, rh(k as u64));
        }
    }

    #[test]
    fn ln_is_monotone_and_spans_the_documented_range() {
        assert_eq!(crush_ln(0), 0);
        let mut prev = 0;
        for x in 1..0xffffu32 {
            let v = crush_ln(x);
            assert!(v >= prev, "crush_ln not monotone at {x}");
            prev = v;
        }
        // Input 0xffff is the one that uses LH[128]: Ceph's value there is
        // 2^32 below the formula, so the top input maps just below 2^48
        // (and below its neighbour). Pin it: changing it moves data.
        assert_eq!(crush_ln(0xffff), (15 << 44) + (0xffff_0000_0000 >> 4));
        assert!(crush_ln(0xffff) < crush_ln(0xfffe));
    }
}
