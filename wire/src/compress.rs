//! The OP_COMPRESSED codecs: noop, snappy (raw block format, not the framing format), zlib
//! (RFC 1950, with header) and zstd. Decompression is bounded twice over: the caller passes a
//! declared size already checked against `MESSAGE_SIZE_MAX`, and the output buffer grows only as
//! real bytes arrive and never past that size (+1 byte to notice overlong output), so a tiny
//! frame that lies about its size costs nothing.

use std::io::Read;

use crate::error::WireError;
use crate::limits::{
    DECOMPRESS_INITIAL_CAPACITY_BYTES, SNAPPY_EXPANSION_MAX, SNAPPY_EXPANSION_SLACK_BYTES,
    ZSTD_WINDOW_LOG_MAX, ZSTD_WINDOW_LOG_SIZED_MAX,
};

/// A compressor as named in `hello`'s `compression` list and identified in OP_COMPRESSED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Compressor {
    Noop = 0,
    Snappy = 1,
    Zlib = 2,
    Zstd = 3,
}

impl Compressor {
    pub const ALL: [Compressor; 4] = [Self::Noop, Self::Snappy, Self::Zlib, Self::Zstd];

    pub fn id(self) -> u8 {
        self as u8
    }

    pub fn from_id(id: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.id() == id)
    }

    /// The name used in the `compression` field of `hello` and in connection strings.
    pub fn name(self) -> &'static str {
        match self {
            Self::Noop => "noop",
            Self::Snappy => "snappy",
            Self::Zlib => "zlib",
            Self::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn compress(self, input: &[u8]) -> Result<Vec<u8>, WireError> {
        let fail = |e: &dyn std::fmt::Display| WireError::Compress {
            compressor: self,
            reason: e.to_string(),
        };
        match self {
            Self::Noop => Ok(input.to_vec()),
            Self::Snappy => snap::raw::Encoder::new()
                .compress_vec(input)
                .map_err(|e| fail(&e)),
            Self::Zlib => {
                use std::io::Write;
                let mut encoder =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(input).map_err(|e| fail(&e))?;
                encoder.finish().map_err(|e| fail(&e))
            }
            // Level 0 asks zstd for its default level.
            Self::Zstd => zstd::bulk::compress(input, 0).map_err(|e| fail(&e)),
        }
    }

    /// Decompress `input`, which must expand to exactly `declared_bytes` (already checked
    /// against the message size limit by the caller).
    pub fn decompress(self, input: &[u8], declared_bytes: usize) -> Result<Vec<u8>, WireError> {
        let corrupt = |e: &dyn std::fmt::Display| WireError::Decompress {
            compressor: self,
            reason: e.to_string(),
        };
        let output = match self {
            Self::Noop => input.to_vec(),
            Self::Snappy => {
                // The raw format states its length up front; compare before allocating.
                let stated = snap::raw::decompress_len(input).map_err(|e| corrupt(&e))?;
                if stated != declared_bytes {
                    return Err(self.mismatch(declared_bytes));
                }
                let possible =
                    input.len().saturating_mul(SNAPPY_EXPANSION_MAX) + SNAPPY_EXPANSION_SLACK_BYTES;
                if stated > possible {
                    return Err(corrupt(&"states more output than its input can encode"));
                }
                let mut out = vec![0; stated];
                let written = snap::raw::Decoder::new()
                    .decompress(input, &mut out)
                    .map_err(|e| corrupt(&e))?;
                out.truncate(written);
                out
            }
            Self::Zlib => read_bounded(flate2::read::ZlibDecoder::new(input), declared_bytes)
                .map_err(|e| corrupt(&e))?,
            Self::Zstd => {
                // A frame header stating its content size must agree before any buffer is made.
                // The decoder's window buffer is at most the stated content size when there is
                // one (then it must equal the declared size), else at most 2^ZSTD_WINDOW_LOG_MAX.
                let window_log_max = match zstd::zstd_safe::get_frame_content_size(input) {
                    Ok(Some(stated)) if stated != declared_bytes as u64 => {
                        return Err(self.mismatch(declared_bytes));
                    }
                    Ok(Some(_)) => ZSTD_WINDOW_LOG_SIZED_MAX,
                    Ok(None) => ZSTD_WINDOW_LOG_MAX,
                    Err(_) => return Err(corrupt(&"not a zstd frame")),
                };
                let mut decoder =
                    zstd::stream::read::Decoder::new(input).map_err(|e| corrupt(&e))?;
                decoder
                    .window_log_max(window_log_max)
                    .map_err(|e| corrupt(&e))?;
                read_bounded(decoder, declared_bytes).map_err(|e| corrupt(&e))?
            }
        };
        if output.len() != declared_bytes {
            return Err(self.mismatch(declared_bytes));
        }
        Ok(output)
    }

    fn mismatch(self, declared_bytes: usize) -> WireError {
        WireError::DecompressedSizeMismatch {
            compressor: self,
            declared_bytes,
        }
    }
}

/// Read at most `declared_bytes + 1` bytes (one more than allowed, so overlong output shows up
/// as a size mismatch), growing the buffer by doubling but never past that bound.
fn read_bounded(reader: impl Read, declared_bytes: usize) -> std::io::Result<Vec<u8>> {
    let limit = declared_bytes.saturating_add(1);
    let mut reader = reader.take(limit as u64);
    let mut out: Vec<u8> = Vec::with_capacity(limit.min(DECOMPRESS_INITIAL_CAPACITY_BYTES));
    loop {
        if out.len() == out.capacity() {
            if out.len() >= limit {
                return Ok(out);
            }
            let target = out.capacity().saturating_mul(2).clamp(1, limit);
            out.reserve_exact(target - out.len());
        }
        let len = out.len();
        out.resize(out.capacity(), 0);
        match reader.read(&mut out[len..]) {
            Ok(0) => {
                out.truncate(len);
                return Ok(out);
            }
            Ok(n) => out.truncate(len + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => out.truncate(len),
            Err(e) => return Err(e),
        }
    }
}
