//! Proves that hostile frames (huge declared lengths, lying uncompressed sizes) are rejected without allocating anywhere near what they claim.
//! How: this test binary installs a counting global allocator (`cap`) and compares the peak heap in use during each decode with the bytes actually received.

use std::alloc::System;

use cap::Cap;
use wire::limits::MESSAGE_SIZE_MAX;
use wire::{Compressor, FrameReader, OpMsg, WireError, decode, encode_msg, frame_length};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Headroom for the decoders' own fixed state (zlib's inflate window, zstd's context).
const FIXED_OVERHEAD_BYTES: usize = 2 * 1024 * 1024;

fn compressed(declared: i32, id: u8, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::new();
    frame.extend((16 + 9 + data.len() as i32).to_le_bytes());
    frame.extend([0; 8]);
    frame.extend(2012i32.to_le_bytes());
    frame.extend(2013i32.to_le_bytes());
    frame.extend(declared.to_le_bytes());
    frame.push(id);
    frame.extend_from_slice(data);
    frame
}

/// Peak bytes allocated above the level at the start of `f`. There is one `#[test]` in this
/// binary so that no other thread moves the counters. `max_allocated` is a global
/// high-water mark, so this is exact only while it exceeds every earlier peak; the test keeps
/// its own allocations small so that any large one shows.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATOR.allocated();
    let out = f();
    (out, ALLOCATOR.max_allocated().saturating_sub(before))
}

#[test]
fn hostile_sizes_are_rejected_before_allocating() {
    // 1. A 100 MB declared length is refused from its first four bytes.
    let (result, peak) = peak_during(|| {
        let mut reader = FrameReader::new();
        reader.extend_from_slice(&100_000_000i32.to_le_bytes());
        reader.next_frame()
    });
    assert!(matches!(result, Err(WireError::MessageTooLarge { .. })));
    assert!(peak < FIXED_OVERHEAD_BYTES, "peak {peak}");
    assert!(frame_length(&i32::MAX.to_le_bytes()).is_err());

    // 2. Tiny frames declaring sizes above the limit: refused before decompressing.
    for compressor in Compressor::ALL {
        for declared in [i32::MAX, MESSAGE_SIZE_MAX as i32] {
            let frame = compressed(declared, compressor.id(), &[1, 2, 3, 4]);
            let (result, peak) = peak_during(|| decode(&frame));
            assert!(
                matches!(result, Err(WireError::UncompressedSizeInvalid { .. })),
                "{compressor:?}"
            );
            assert!(peak < FIXED_OVERHEAD_BYTES, "{compressor:?} peak {peak}");
        }
    }

    // 3. Allowed but lying sizes (just under the limit) on tiny payloads, valid and garbage:
    // the buffers grow with real output, so the peak stays near the input size.
    let declared = (MESSAGE_SIZE_MAX - 16) as i32;
    let inner = &encode_msg(1, 0, &OpMsg::new(bson::rawdoc! { "ping": 1 }), None).unwrap()[16..];
    let mut lying_snappy = snap::raw::Encoder::new().compress_vec(inner).unwrap();
    // Rewrite the snappy length header (a varint) to state the lie as well.
    let mut varint = Vec::new();
    let mut n = declared as u32;
    while n >= 0x80 {
        varint.push((n as u8) | 0x80);
        n >>= 7;
    }
    varint.push(n as u8);
    lying_snappy.splice(..1, varint);
    for compressor in Compressor::ALL {
        let payloads = [
            compressor.compress(inner).unwrap(),
            vec![0xab; 64],
            lying_snappy.clone(),
        ];
        for payload in payloads {
            let frame = compressed(declared, compressor.id(), &payload);
            let (result, peak) = peak_during(|| decode(&frame));
            assert!(result.is_err(), "{compressor:?}");
            assert!(
                peak < FIXED_OVERHEAD_BYTES,
                "{compressor:?} peak {peak} for {} input bytes",
                payload.len()
            );
        }
    }
    zstd_header_cannot_reserve_past_the_limit();
}

/// A zstd frame header saying "single segment, content size N" followed by a reserved
/// (invalid) block type: the decoder may size a buffer by N, but never beyond the limit.
fn hostile_zstd(content_size_bytes: u64) -> Vec<u8> {
    let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
    frame.push(0b1110_0000); // 8-byte content size, single segment
    frame.extend(content_size_bytes.to_le_bytes());
    frame.extend([0b0000_0111, 0, 0]); // last block, type 3 (reserved), size 0
    frame
}

/// Run last: its allowed peak (up to the message limit) raises the high-water mark.
fn zstd_header_cannot_reserve_past_the_limit() {
    let declared = MESSAGE_SIZE_MAX - 16;
    let frame = compressed(
        declared as i32,
        Compressor::Zstd.id(),
        &hostile_zstd(declared as u64),
    );
    let (result, peak) = peak_during(|| decode(&frame));
    assert!(result.is_err());
    assert!(
        peak < MESSAGE_SIZE_MAX + FIXED_OVERHEAD_BYTES,
        "peak {peak}"
    );
    // A header whose content size disagrees with uncompressedSize is refused up front.
    let frame = compressed(1000, Compressor::Zstd.id(), &hostile_zstd(declared as u64));
    let (result, peak) = peak_during(|| decode(&frame));
    assert!(matches!(
        result,
        Err(WireError::DecompressedSizeMismatch { .. })
    ));
    assert!(peak < FIXED_OVERHEAD_BYTES, "peak {peak}");
}
