//! What the Kafka Connect plugin writes to a `snow-connect task-executor` (ADR 0037): frames on its
//! stdin and the binary body of a `PUT`. Any bytes are read or refused with a reason, never a
//! panic or an allocation beyond the frame limit; a frame read is written back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_executor::frame;

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    while let Ok(Some(f)) = frame::read(&mut input) {
        let mut again = Vec::new();
        frame::write(&mut again, f.kind, &f.body).unwrap();
        assert_eq!(frame::read(&mut &again[..]).unwrap(), Some(f.clone()));
        if let Err(reason) = snow_executor::read_put_records(&f.body) {
            assert!(!reason.is_empty());
        }
    }
    if let Err(reason) = snow_executor::read_put_records(data) {
        assert!(!reason.is_empty());
    }
});
