//! Wire frames: any byte string is either one message or a protocol error, never a panic; a
//! decoded message's documents are valid BSON; splitting a stream into frames agrees with the
//! header's length.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = wire::decode(data) {
        let _ = message.body.op_code();
    }
    let mut buf = bytes::BytesMut::from(data);
    while let Ok(Some(frame)) = wire::next_frame(&mut buf) {
        let _ = wire::decode(&frame);
    }
});
