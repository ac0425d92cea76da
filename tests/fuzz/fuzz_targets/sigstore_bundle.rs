//! The Sigstore bundle reader: any bundle beside a component is refused (or, never here, accepted)
//! without a panic; nothing but a bundle signed by the trusted key verifies.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn place() -> &'static (PathBuf, snow_runtime::artefact::TrustPolicy) {
    static PLACE: OnceLock<(PathBuf, snow_runtime::artefact::TrustPolicy)> = OnceLock::new();
    PLACE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("snow-fuzz-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = snow_runtime::artefact::TrustedKey::from_pem_file(&PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../keys/development-only.pub"
        )))
        .unwrap();
        let policy = snow_runtime::artefact::TrustPolicy::new(vec![key], None, None, false).unwrap();
        (dir.join("component.wasm"), policy)
    })
}

fuzz_target!(|bundle: &[u8]| {
    let (component, policy) = place();
    std::fs::write(snow_runtime::artefact::default_bundle_path(component), bundle).unwrap();
    let verified = snow_runtime::artefact::verify(component, b"\0asm component bytes", policy);
    assert!(verified.is_err(), "nothing the fuzzer makes is signed by the development key");
});
