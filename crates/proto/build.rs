//! Compile proto/loligo.proto with protox (pure Rust, no system protoc).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("loligo.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
