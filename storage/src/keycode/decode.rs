//! Decoding of encoded index keys back to BSON values, for covered queries and diagnostics.
//! Every malformed input is a `KeycodeError`, never a panic: keys come from checkpoints on disk.

use super::number::{self, Canonical, Magnitude};
use super::*;
use bson::raw::CString;
use bson::spec::BinarySubtype;
use bson::{Binary, Document, JavaScriptCodeWithScope, Regex, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeycodeError {
    #[error("encoded key ends early at byte {0}")]
    Truncated(usize),
    #[error("unknown type byte {byte:#04x} at byte {at}")]
    UnknownType { byte: u8, at: usize },
    #[error("malformed encoded key at byte {0}")]
    Malformed(usize),
}

/// Reads bytes, undoing the inversion of a descending field when `inverted` is set.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    inverted: bool,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, KeycodeError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(KeycodeError::Truncated(self.at))?;
        self.at += 1;
        Ok(if self.inverted { !b } else { b })
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, KeycodeError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(KeycodeError::Truncated(self.at))?;
        let raw = self
            .bytes
            .get(self.at..end)
            .ok_or(KeycodeError::Truncated(self.at))?;
        self.at = end;
        Ok(raw
            .iter()
            .map(|&b| if self.inverted { !b } else { b })
            .collect())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], KeycodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.take(N)?);
        Ok(out)
    }

    /// An escaped string ending in 0x00 (see `ESCAPE`).
    fn string_bytes(&mut self) -> Result<Vec<u8>, KeycodeError> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                END => return Ok(out),
                ESCAPE => match self.byte()? {
                    escaped @ 1..=2 => out.push(escaped - 1),
                    _ => return Err(KeycodeError::Malformed(self.at - 1)),
                },
                b => out.push(b),
            }
        }
    }

    fn string(&mut self) -> Result<String, KeycodeError> {
        let at = self.at;
        String::from_utf8(self.string_bytes()?).map_err(|_| KeycodeError::Malformed(at))
    }

    fn peek(&self) -> Result<u8, KeycodeError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(KeycodeError::Truncated(self.at))?;
        Ok(if self.inverted { !b } else { b })
    }
}

/// Decodes a compound key (without RecordId) written by `encode_key` with the same directions.
pub fn decode_key(key: &[u8], descending: &[bool]) -> Result<Vec<Bson>, KeycodeError> {
    let mut reader = Reader {
        bytes: key,
        at: 0,
        inverted: false,
    };
    let mut values = Vec::with_capacity(descending.len());
    let mut field = 0;
    while reader.at < key.len() {
        reader.inverted = descending.get(field).copied().unwrap_or(false);
        values.push(read_value(&mut reader, 0)?);
        field += 1;
    }
    Ok(values)
}

/// Decodes one ascending value at the start of `bytes`; returns it and the bytes consumed.
pub fn decode_value(bytes: &[u8]) -> Result<(Bson, usize), KeycodeError> {
    let mut reader = Reader {
        bytes,
        at: 0,
        inverted: false,
    };
    let value = read_value(&mut reader, 0)?;
    Ok((value, reader.at))
}

/// Bounds recursion on hostile input; BSON documents nest at most ~100 deep in practice.
const DECODE_DEPTH_MAX: usize = 200;

fn read_value(r: &mut Reader<'_>, depth: usize) -> Result<Bson, KeycodeError> {
    if depth > DECODE_DEPTH_MAX {
        return Err(KeycodeError::Malformed(r.at));
    }
    let at = r.at;
    let type_byte = r.byte()?;
    Ok(match type_byte {
        TYPE_MIN_KEY => Bson::MinKey,
        TYPE_UNDEFINED => Bson::Undefined,
        TYPE_NULL => Bson::Null,
        TYPE_NUMBER_NAN..=TYPE_NUMBER_POS_INF => read_number(r, type_byte)?,
        TYPE_STRING => Bson::String(r.string()?),
        TYPE_OBJECT => Bson::Document(read_object(r, depth)?),
        TYPE_ARRAY => {
            let mut items = Vec::new();
            while r.peek()? != END {
                items.push(read_value(r, depth + 1)?);
            }
            r.byte()?;
            Bson::Array(items)
        }
        TYPE_BINARY => {
            let len = u32::from_be_bytes(r.array()?) as usize;
            let subtype = BinarySubtype::from(r.byte()?);
            Bson::Binary(Binary {
                subtype,
                bytes: r.take(len)?,
            })
        }
        TYPE_OBJECT_ID => Bson::ObjectId(bson::oid::ObjectId::from_bytes(r.array()?)),
        TYPE_FALSE => Bson::Boolean(false),
        TYPE_TRUE => Bson::Boolean(true),
        TYPE_DATE => {
            let millis = (u64::from_be_bytes(r.array()?) ^ (1 << 63)) as i64;
            Bson::DateTime(bson::DateTime::from_millis(millis))
        }
        TYPE_TIMESTAMP => {
            let combined = u64::from_be_bytes(r.array()?);
            Bson::Timestamp(Timestamp {
                time: (combined >> 32) as u32,
                increment: combined as u32,
            })
        }
        TYPE_REGEX => {
            let pattern =
                CString::try_from(r.string()?).map_err(|_| KeycodeError::Malformed(at))?;
            let options =
                CString::try_from(r.string()?).map_err(|_| KeycodeError::Malformed(at))?;
            Bson::RegularExpression(Regex { pattern, options })
        }
        TYPE_DB_POINTER => read_db_pointer(r, at)?,
        TYPE_CODE => Bson::JavaScriptCode(r.string()?),
        TYPE_CODE_WITH_SCOPE => {
            let code = r.string()?;
            let scope = read_object(r, depth)?;
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code, scope })
        }
        TYPE_MAX_KEY => Bson::MaxKey,
        byte => return Err(KeycodeError::UnknownType { byte, at }),
    })
}

fn read_number(r: &mut Reader<'_>, type_byte: u8) -> Result<Bson, KeycodeError> {
    let at = r.at;
    let canonical = match type_byte {
        TYPE_NUMBER_NAN => Canonical::NaN,
        TYPE_NUMBER_NEG_INF => Canonical::NegInf,
        TYPE_NUMBER_ZERO => Canonical::Zero,
        TYPE_NUMBER_POS_INF => Canonical::PosInf,
        _ => {
            let negative = type_byte == TYPE_NUMBER_NEG;
            let saved = r.inverted;
            r.inverted ^= negative;
            let magnitude = read_magnitude(r);
            r.inverted = saved;
            let magnitude = magnitude?;
            if negative {
                Canonical::Neg(magnitude)
            } else {
                Canonical::Pos(magnitude)
            }
        }
    };
    number::to_bson(&canonical).ok_or(KeycodeError::Malformed(at))
}

fn read_magnitude(r: &mut Reader<'_>) -> Result<Magnitude, KeycodeError> {
    let at = r.at;
    let exp10 = i32::from(u16::from_be_bytes(r.array()?)) - EXPONENT_BIAS;
    let mut digits = Vec::new();
    loop {
        let b = r.byte()?;
        if b == END {
            break;
        }
        if b > 100 {
            return Err(KeycodeError::Malformed(r.at - 1));
        }
        digits.push((b - 1) / 10);
        digits.push((b - 1) % 10);
    }
    if digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.first().is_none_or(|&d| d == 0) || digits.last().is_none_or(|&d| d == 0) {
        return Err(KeycodeError::Malformed(at));
    }
    Ok(Magnitude { exp10, digits })
}

fn read_object(r: &mut Reader<'_>, depth: usize) -> Result<Document, KeycodeError> {
    let mut doc = Document::new();
    loop {
        if r.byte()? == END {
            return Ok(doc);
        }
        let name = r.string()?;
        let value = read_value(r, depth + 1)?;
        doc.insert(name, value);
    }
}

/// DBPointer has no public constructor in the bson crate: build its BSON bytes and parse them.
fn read_db_pointer(r: &mut Reader<'_>, at: usize) -> Result<Bson, KeycodeError> {
    let len = u32::from_be_bytes(r.array()?) as usize;
    let namespace = r.take(len)?;
    let oid: [u8; OBJECT_ID_SIZE] = r.array()?;
    let mut element = vec![0x0C, b'x', 0];
    element.extend_from_slice(&((len + 1) as u32).to_le_bytes());
    element.extend_from_slice(&namespace);
    element.push(0);
    element.extend_from_slice(&oid);
    let mut doc = ((element.len() + 5) as u32).to_le_bytes().to_vec();
    doc.extend_from_slice(&element);
    doc.push(0);
    let raw = RawDocument::from_bytes(&doc).map_err(|_| KeycodeError::Malformed(at))?;
    let value = raw
        .get("x")
        .ok()
        .flatten()
        .ok_or(KeycodeError::Malformed(at))?;
    Bson::try_from(value).map_err(|_| KeycodeError::Malformed(at))
}
