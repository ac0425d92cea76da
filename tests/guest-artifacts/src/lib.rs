//! Paths of the guest components built by this crate's build script (release profile
//! `wasm-release`, target `wasm32-wasip2`, under `target/guests`). Tests load components from
//! these paths at run time, exactly as the runner does from its configuration.

include!(concat!(env!("OUT_DIR"), "/paths.rs"));

/// `component` as a new build: the same code with a custom section `snow-build` holding `build`
/// appended, so other bytes and another SHA-256 (what a rebuild with a version stamp gives), for
/// the hot-swap tests and benchmark.
pub fn new_build(component: &[u8], build: u32) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let (name, payload) = (b"snow-build".as_slice(), build.to_string().into_bytes());
    let mut section = Vec::new();
    leb128(name.len(), &mut section);
    section.extend_from_slice(name);
    section.extend_from_slice(&payload);
    let mut bytes = component.to_vec();
    bytes.push(0); // section id 0: a custom section
    leb128(section.len(), &mut bytes);
    bytes.extend_from_slice(&section);
    bytes
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_artifact_is_a_component() {
        for path in [super::GUEST_SOURCE, super::GUEST_SINK, super::ROGUE_GUEST, super::ROGUE_SINK, super::HTTP_ADAPTER, super::HOST_SHIM] {
            let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // A component's preamble: magic, then version 0x0d with layer 1.
            assert_eq!(&bytes[..8], b"\0asm\x0d\x00\x01\x00", "{path} is not a component");
        }
    }
}
