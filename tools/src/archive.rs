//! mongodump's `--archive` format: one stream holding every collection.
//!
//! ```text
//! archive  = magic (0x8199e26d as little-endian int32: 6d e2 99 81)
//!            header document {concurrent_collections: int32, version: "0.1",
//!                             server_version, tool_version}
//!            *metadata document {db, collection, metadata: <metadata.json text>, size: int32}
//!            terminator (ff ff ff ff)
//!            *( segment | eof )
//! segment  = {db, collection, EOF: false, CRC: int64 0}  +document  terminator
//! eof      = {db, collection, EOF: true, CRC: int64 <CRC-64/XZ of all the namespace's
//!             document bytes>}  terminator
//! ```
//!
//! Segments of different namespaces may interleave; this writer emits one segment per
//! collection. The reader checks the magic, every length, and each namespace's CRC.

use std::collections::HashMap;
use std::io::{Read, Write};

use bson::{Document, RawDocumentBuf, doc};

use crate::layout::DOCUMENT_SIZE_MAX;

pub const MAGIC: [u8; 4] = 0x8199_e26d_u32.to_le_bytes();
pub const TERMINATOR: [u8; 4] = [0xff; 4];
pub const FORMAT_VERSION: &str = "0.1";

/// CRC-64 with the ECMA-182 polynomial, reflected, all-ones start and final xor (CRC-64/XZ),
/// which is what mongodump's "CRC-64-ECMA" computes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Crc64(u64);

const CRC64_POLY_REFLECTED: u64 = 0xc96c_5795_d787_0f42;

const fn crc64_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ CRC64_POLY_REFLECTED
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC64_TABLE: [u64; 256] = crc64_table();

impl Crc64 {
    pub fn update(&mut self, bytes: &[u8]) {
        let mut c = !self.0;
        for &b in bytes {
            c = CRC64_TABLE[((c as u8) ^ b) as usize] ^ (c >> 8);
        }
        self.0 = !c;
    }
    pub fn value(self) -> u64 {
        self.0
    }
}

/// Writes an archive: `prelude` once, then `segment`s, then `eof` for every namespace.
pub struct ArchiveWriter<W: Write> {
    out: W,
    crcs: HashMap<(String, String), Crc64>,
}

impl<W: Write> ArchiveWriter<W> {
    /// Magic, header and one metadata document per (db, collection, metadata.json text).
    pub fn new(
        mut out: W,
        server_version: &str,
        metas: &[(String, String, String)],
    ) -> std::io::Result<Self> {
        out.write_all(&MAGIC)?;
        let header = doc! {
            "concurrent_collections": 1,
            "version": FORMAT_VERSION,
            "server_version": server_version,
            "tool_version": format!("cairn-tools {}", env!("CARGO_PKG_VERSION")),
        };
        write_doc(&mut out, &header)?;
        for (db, coll, meta) in metas {
            write_doc(
                &mut out,
                &doc! { "db": db, "collection": coll, "metadata": meta, "size": 0 },
            )?;
        }
        out.write_all(&TERMINATOR)?;
        Ok(ArchiveWriter {
            out,
            crcs: HashMap::new(),
        })
    }

    /// One segment of documents (none written when `docs` is empty).
    pub fn segment(
        &mut self,
        db: &str,
        coll: &str,
        docs: &[RawDocumentBuf],
    ) -> std::io::Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        write_doc(
            &mut self.out,
            &doc! { "db": db, "collection": coll, "EOF": false, "CRC": 0i64 },
        )?;
        let crc = self
            .crcs
            .entry((db.to_owned(), coll.to_owned()))
            .or_default();
        for d in docs {
            self.out.write_all(d.as_bytes())?;
            crc.update(d.as_bytes());
        }
        self.out.write_all(&TERMINATOR)
    }

    pub fn eof(&mut self, db: &str, coll: &str) -> std::io::Result<()> {
        let crc = self
            .crcs
            .remove(&(db.to_owned(), coll.to_owned()))
            .unwrap_or_default();
        write_doc(
            &mut self.out,
            &doc! { "db": db, "collection": coll, "EOF": true, "CRC": crc.value() as i64 },
        )?;
        self.out.write_all(&TERMINATOR)
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

fn write_doc(out: &mut impl Write, d: &Document) -> std::io::Result<()> {
    let raw = RawDocumentBuf::try_from(d).map_err(std::io::Error::other)?;
    out.write_all(raw.as_bytes())
}

/// What the reader found next.
#[derive(Debug)]
pub enum Item {
    /// A document of namespace (db, collection), at this byte offset of the archive.
    Doc(String, String, RawDocumentBuf, u64),
    /// The namespace is complete and its CRC matched.
    Eof(String, String),
}

/// Reads an archive; `prelude` first, then `next_item` until None.
pub struct ArchiveReader<R: Read> {
    input: R,
    pub offset: u64,
    current: Option<(String, String)>,
    crcs: HashMap<(String, String), Crc64>,
}

/// The prelude: the header and, per namespace, (db, collection, metadata.json text).
pub type Prelude = (Document, Vec<(String, String, String)>);

impl<R: Read> ArchiveReader<R> {
    pub fn new(input: R) -> Self {
        ArchiveReader {
            input,
            offset: 0,
            current: None,
            crcs: HashMap::new(),
        }
    }

    pub fn prelude(&mut self) -> Result<Prelude, String> {
        let mut magic = [0u8; 4];
        self.input
            .read_exact(&mut magic)
            .map_err(|_| "not an archive: shorter than its magic number".to_string())?;
        if magic != MAGIC {
            return Err(format!(
                "not a mongodump archive: magic number {magic:02x?} at byte 0"
            ));
        }
        self.offset = 4;
        let header = match self.frame()? {
            Some(h) => Document::try_from(h.as_ref()).map_err(|e| e.to_string())?,
            None => return Err("archive ends inside its header (byte 4)".into()),
        };
        let mut metas = Vec::new();
        while let Some(raw) = self.frame()? {
            let at = self.offset - raw.as_bytes().len() as u64;
            let d = Document::try_from(raw.as_ref()).map_err(|e| e.to_string())?;
            let get = |k: &str| {
                d.get_str(k)
                    .map(str::to_owned)
                    .map_err(|_| format!("metadata document at byte {at} lacks {k:?}"))
            };
            metas.push((get("db")?, get("collection")?, get("metadata")?));
        }
        Ok((header, metas))
    }

    /// A document, or None at a terminator; Err at damage, naming the offset.
    fn frame(&mut self) -> Result<Option<RawDocumentBuf>, String> {
        self.frame_from(None)
    }

    /// `frame`, when the first byte of the length was already read (`first`).
    fn frame_from(&mut self, first: Option<u8>) -> Result<Option<RawDocumentBuf>, String> {
        let at = self.offset;
        let mut len = [0u8; 4];
        let skip = match first {
            Some(b) => {
                len[0] = b;
                1
            }
            None => 0,
        };
        self.input
            .read_exact(&mut len[skip..])
            .map_err(|_| format!("archive truncated at byte {at}"))?;
        if len == TERMINATOR {
            self.offset += 4;
            return Ok(None);
        }
        let n = i32::from_le_bytes(len);
        let size = usize::try_from(n)
            .ok()
            .filter(|&s| (5..=DOCUMENT_SIZE_MAX).contains(&s));
        let Some(size) = size else {
            return Err(format!(
                "bad document length {n} at byte {at} of the archive"
            ));
        };
        let mut buf = vec![0u8; size];
        buf[..4].copy_from_slice(&len);
        self.input.read_exact(&mut buf[4..]).map_err(|_| {
            format!("archive truncated inside the document at byte {at} (length {size})")
        })?;
        self.offset += size as u64;
        let doc = RawDocumentBuf::from_bytes(buf)
            .map_err(|e| format!("bad document at byte {at} of the archive: {e}"))?;
        if let Some(Err(e)) = doc.iter().find(Result::is_err) {
            return Err(format!("bad document at byte {at} of the archive: {e}"));
        }
        Ok(Some(doc))
    }

    /// The next document or namespace end; None at a clean end of the stream.
    pub fn next_item(&mut self) -> Result<Option<Item>, String> {
        loop {
            if let Some((db, coll)) = self.current.clone() {
                let at = self.offset;
                match self.frame()? {
                    Some(d) => {
                        self.crcs
                            .entry((db.clone(), coll.clone()))
                            .or_default()
                            .update(d.as_bytes());
                        return Ok(Some(Item::Doc(db, coll, d, at)));
                    }
                    None => {
                        self.current = None;
                        continue;
                    }
                }
            }
            // Between segments: a clean end of the stream is allowed only here.
            let mut probe = [0u8; 1];
            match self.input.read(&mut probe) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(e) => return Err(format!("at byte {}: {e}", self.offset)),
            }
            let at = self.offset;
            let header = self
                .frame_from(Some(probe[0]))?
                .ok_or_else(|| format!("unexpected terminator at byte {at}"))?;
            let d = Document::try_from(header.as_ref()).map_err(|e| e.to_string())?;
            let (Ok(db), Ok(coll)) = (d.get_str("db"), d.get_str("collection")) else {
                return Err(format!(
                    "namespace header at byte {at} lacks db or collection"
                ));
            };
            let (db, coll) = (db.to_owned(), coll.to_owned());
            if d.get_bool("EOF").unwrap_or(false) {
                let mut t = [0u8; 4];
                self.input
                    .read_exact(&mut t)
                    .map_err(|_| format!("archive truncated at byte {}", self.offset))?;
                if t != TERMINATOR {
                    return Err(format!("no terminator after the EOF header at byte {at}"));
                }
                self.offset += 4;
                let want = d.get_i64("CRC").unwrap_or(0) as u64;
                let got = self
                    .crcs
                    .remove(&(db.clone(), coll.clone()))
                    .unwrap_or_default()
                    .value();
                if want != got {
                    return Err(format!(
                        "{db}.{coll}: CRC mismatch at byte {at} (archive says {want:#x}, data gives {got:#x})"
                    ));
                }
                return Ok(Some(Item::Eof(db, coll)));
            }
            self.current = Some((db, coll));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_the_xz_check_value() {
        let mut c = Crc64::default();
        c.update(b"123456789");
        assert_eq!(c.value(), 0x995d_c9bb_df19_39fa);
    }

    #[test]
    fn archive_round_trip_and_damage() {
        let docs: Vec<RawDocumentBuf> = (0..3)
            .map(|i| RawDocumentBuf::try_from(&doc! { "_id": i }).expect("raw"))
            .collect();
        let metas = vec![("d".to_owned(), "c".to_owned(), "{}".to_owned())];
        let mut w = ArchiveWriter::new(Vec::new(), "7.0.0", &metas).expect("new");
        w.segment("d", "c", &docs[..2]).expect("seg");
        w.segment("d", "c", &docs[2..]).expect("seg");
        w.eof("d", "c").expect("eof");
        let bytes = w.into_inner();
        assert_eq!(bytes[..4], [0x6d, 0xe2, 0x99, 0x81]);
        let mut r = ArchiveReader::new(bytes.as_slice());
        let (header, m) = r.prelude().expect("prelude");
        assert_eq!(header.get_str("version").expect("v"), "0.1");
        assert_eq!(m, metas);
        let mut n = 0;
        while let Some(item) = r.next_item().expect("next") {
            match item {
                Item::Doc(..) => n += 1,
                Item::Eof(db, c) => assert_eq!((db.as_str(), c.as_str()), ("d", "c")),
            }
        }
        assert_eq!(n, 3);
        // A flipped byte inside a document's value breaks the CRC.
        let mut bad = bytes.clone();
        let at = bad.len() - 60;
        bad[at] ^= 1;
        let mut r = ArchiveReader::new(bad.as_slice());
        r.prelude().expect("prelude");
        let err = std::iter::from_fn(|| r.next_item().transpose()).find_map(Result::err);
        assert!(err.is_some(), "damage detected");
        // Truncation names the offset.
        let mut r = ArchiveReader::new(&bytes[..bytes.len() - 30]);
        r.prelude().expect("prelude");
        let err = std::iter::from_fn(|| r.next_item().transpose())
            .find_map(Result::err)
            .expect("error");
        assert!(err.contains("byte"), "{err}");
    }
}
