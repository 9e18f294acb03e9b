//! Compile proto/loligo.proto with protox (pure Rust, no system protoc).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("loligo.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    // Bodies as `Bytes`: a decoded message shares the receive buffer
    // instead of copying a payload of up to megabytes into a new Vec.
    tonic_prost_build::configure().bytes(".").compile_fds(fds)?;
    Ok(())
}
