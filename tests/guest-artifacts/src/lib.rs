//! Paths of the guest components built by this crate's build script (release profile
//! `wasm-release`, target `wasm32-wasip2`, under `target/guests`). Tests load components from
//! these paths at run time, exactly as the runner does from its configuration.

include!(concat!(env!("OUT_DIR"), "/paths.rs"));

#[cfg(test)]
mod tests {
    #[test]
    fn every_artifact_is_a_component() {
        for path in [super::GUEST_SOURCE, super::GUEST_SINK, super::ROGUE_GUEST, super::ROGUE_SINK] {
            let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // A component's preamble: magic, then version 0x0d with layer 1.
            assert_eq!(&bytes[..8], b"\0asm\x0d\x00\x01\x00", "{path} is not a component");
        }
    }
}
