//! Cluster-level tests live in `tests/` beside this file: monitors, OSDs
//! and the client library started together in one process. They sit in
//! their own crate so that the client library's own dependencies stay
//! those of a program that embeds it (no OSD, no monitor, no store).
