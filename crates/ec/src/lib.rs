//! Loligo's erasure codes: GF(2^8) region kernels, Reed-Solomon, Zigzag
//! (Liram, "Evaluating Zigzag Code in a Distributed Storage System" (MSc thesis, Technion, 2017): duplication, virtual nodes, optimal constructions, aligned
//! elements, coalesced reads) and basic Pyramid LRC, all behind one trait,
//! with recovery read plans and their costs.
//!
//! No I/O: callers hand in buffers and get buffers and plans back.
//!
//! It must never do I/O or panic on caller input.

// Matrix and element arithmetic reads best with explicit indices.
#![allow(clippy::needless_range_loop)]

pub mod analysis;
pub mod check;
pub mod code;
pub mod error;
pub mod gf;
pub mod kernel;
pub mod layout;
pub mod linear;
pub mod plan;
pub mod speed;
pub mod stripe;
mod xorshift;
pub mod zigzag;
