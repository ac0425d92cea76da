//! What the Protobuf converter reads from outside: a writer's schema from the registry (`.proto`
//! text or a base64 `FileDescriptorProto`) and a record's bytes after the registry framing (the
//! message indexes, then the message). Input: the schema, a zero byte, then the record bytes. None
//! of it may panic, loop or allocate beyond the input; a value read must write under the Connect
//! schema it read as, read back under our own schema for it, and write the same bytes again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_data::protobuf::{self, Decoder, Options, codec};

fuzz_target!(|data: &[u8]| {
    let (schema, payload) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(file) = protobuf::parse(&String::from_utf8_lossy(schema)) else { return };
    let _ = protobuf::text::write(&file);
    let (path, message) = codec::read_indexes(payload).unwrap_or((vec![0], payload));
    let Ok(decoder) = Decoder::new(&file, &path) else { return };
    let Ok(value) = decoder.decode(message) else { return };
    let options = Options { optional_for_nullables: true };
    let connect = decoder.schema();
    let Ok(ours) = protobuf::from_connect(connect, options) else { return };
    let mut again = Vec::new();
    if protobuf::encode(connect, &value, options, &mut again).is_err() {
        return;
    }
    let ours = protobuf::parse(&ours.text).expect("our own text reads");
    let (path, body) = codec::read_indexes(&again).expect("our own indexes read");
    let reread = Decoder::new(&ours, &path).expect("our own schema compiles").decode(body).expect("what we wrote reads back");
    let mut third = Vec::new();
    protobuf::encode(connect, &reread, options, &mut third).expect("what we read back writes again");
    assert_eq!(third, again, "a round trip changed the value");
});
