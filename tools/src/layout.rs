//! mongodump's directory layout, written and read here so that a dump by either tool restores
//! with the other:
//!
//! ```text
//! <out>/<db>/<coll>.bson            the documents, each a whole BSON document, back to back
//! <out>/<db>/<coll>.metadata.json   {"options":{..},"indexes":[..],"uuid":"<32 hex>",
//!                                    "collectionName":"<coll>","type":"collection"|"view"}
//! ```
//!
//! in canonical Extended JSON; with `--gzip` both files are gzip streams named `.bson.gz` and
//! `.metadata.json.gz`. A view has a metadata file and no `.bson`. Reading checks every length
//! prefix against what is left of the file, so a truncated or corrupt file is reported with its
//! byte offset instead of being half-read.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use bson::{Bson, Document, RawDocumentBuf, doc};
use serde::Deserialize;

use crate::extjson::{self, Json};

/// The largest document a `.bson` file may hold (mongod's 16 MiB plus its internal slack).
pub const DOCUMENT_SIZE_MAX: usize = 16 * 1024 * 1024 + 16 * 1024;

/// What `<coll>.metadata.json` says about a collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    pub options: Document,
    pub indexes: Vec<Document>,
    /// 32 lowercase hex digits, when the server reported one.
    pub uuid: Option<String>,
    pub collection_name: String,
    /// "collection", "view" or "timeseries".
    pub kind: String,
}

impl Metadata {
    pub fn to_json(&self) -> String {
        let mut d = doc! { "options": self.options.clone(), "indexes": self.indexes.clone() };
        if let Some(u) = &self.uuid {
            d.insert("uuid", u.clone());
        }
        d.insert("collectionName", self.collection_name.clone());
        d.insert("type", self.kind.clone());
        let mut s = String::new();
        extjson::write_document(&mut s, &d, extjson::Mode::Canonical, false);
        s
    }

    /// Parse a metadata file. Unknown top-level fields are not an error (newer tools add some)
    /// but come back as warnings naming the field and its line and column.
    pub fn parse(text: &str) -> Result<(Metadata, Vec<String>), String> {
        let lenient: MetaFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut warnings = Vec::new();
        if let Err(e) = serde_json::from_str::<MetaFileStrict>(text) {
            warnings.push(format!("{e} (the field is ignored)"));
        }
        let options = match lenient.options {
            Some(j) => extjson::to_document(j).map_err(|e| format!("options: {e}"))?,
            None => Document::new(),
        };
        let indexes = match lenient.indexes {
            Some(Json::Arr(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, j)| extjson::to_document(j).map_err(|e| format!("indexes[{i}]: {e}")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("indexes must be an array".into()),
            None => Vec::new(),
        };
        let meta = Metadata {
            options,
            indexes,
            uuid: lenient.uuid,
            collection_name: lenient.collection_name.unwrap_or_default(),
            kind: lenient.kind.unwrap_or_else(|| "collection".into()),
        };
        Ok((meta, warnings))
    }
}

#[derive(Deserialize)]
struct MetaFile {
    options: Option<Json>,
    indexes: Option<Json>,
    uuid: Option<String>,
    #[serde(rename = "collectionName")]
    collection_name: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// The same shape, refusing unknown fields: only used to find and locate them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct MetaFileStrict {
    options: Option<Json>,
    indexes: Option<Json>,
    uuid: Option<String>,
    #[serde(rename = "collectionName")]
    collection_name: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// A collection UUID (binary subtype 4) as mongodump writes it: 32 hex digits.
pub fn uuid_hex(b: &Bson) -> Option<String> {
    match b {
        Bson::Binary(bin) if bin.bytes.len() == 16 => {
            Some(bin.bytes.iter().map(|b| format!("{b:02x}")).collect())
        }
        _ => None,
    }
}

/// Open a file, through gunzip when its name ends in `.gz`.
pub fn open(path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
    let f = BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(BufReader::new(flate2::read::GzDecoder::new(f))))
    } else {
        Ok(Box::new(f))
    }
}

/// Reads the documents of a `.bson` stream one by one, tracking the byte offset.
pub struct BsonReader<R> {
    input: R,
    /// Offset of the next document in the (uncompressed) stream.
    pub offset: u64,
}

impl<R: Read> BsonReader<R> {
    pub fn new(input: R) -> Self {
        BsonReader { input, offset: 0 }
    }

    /// The next document, None at a clean end, Err naming the offset of a bad one.
    pub fn next_doc(&mut self) -> Result<Option<RawDocumentBuf>, String> {
        let mut len = [0u8; 4];
        let got = read_full(&mut self.input, &mut len)
            .map_err(|e| format!("at byte {}: {e}", self.offset))?;
        if got == 0 {
            return Ok(None);
        }
        let at = self.offset;
        if got < 4 {
            return Err(format!(
                "truncated document at byte {at}: {got} of 4 length bytes"
            ));
        }
        let n = i32::from_le_bytes(len);
        let size = usize::try_from(n)
            .ok()
            .filter(|&s| (5..=DOCUMENT_SIZE_MAX).contains(&s));
        let Some(size) = size else {
            return Err(format!("bad document length {n} at byte {at}"));
        };
        let mut buf = vec![0u8; size];
        buf[..4].copy_from_slice(&len);
        let rest =
            read_full(&mut self.input, &mut buf[4..]).map_err(|e| format!("at byte {at}: {e}"))?;
        if rest < size - 4 {
            return Err(format!(
                "truncated document at byte {at}: length {size}, only {} bytes left",
                rest + 4
            ));
        }
        let doc = RawDocumentBuf::from_bytes(buf)
            .map_err(|e| format!("bad document at byte {at}: {e}"))?;
        // from_bytes checks the frame; walking every element checks the contents.
        if let Some(Err(e)) = doc.iter().find(Result::is_err) {
            return Err(format!("bad document at byte {at}: {e}"));
        }
        self.offset += size as u64;
        Ok(Some(doc))
    }
}

/// Read until `buf` is full or the input ends; the number of bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// One collection found in a dump directory.
#[derive(Debug, Clone)]
pub struct DumpEntry {
    pub db: String,
    pub collection: String,
    pub bson: Option<PathBuf>,
    pub metadata: Option<PathBuf>,
}

/// The collections of `<dir>/<db>/`, sorted by name.
pub fn scan_db_dir(dir: &Path, db: &str) -> std::io::Result<Vec<DumpEntry>> {
    let mut map: std::collections::BTreeMap<String, DumpEntry> = Default::default();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let (coll, is_bson) =
            if let Some(c) = name.strip_suffix(".bson").or(name.strip_suffix(".bson.gz")) {
                (c.to_owned(), true)
            } else if let Some(c) = name
                .strip_suffix(".metadata.json")
                .or(name.strip_suffix(".metadata.json.gz"))
            {
                (c.to_owned(), false)
            } else {
                continue;
            };
        let entry = map.entry(coll.clone()).or_insert_with(|| DumpEntry {
            db: db.to_owned(),
            collection: coll,
            bson: None,
            metadata: None,
        });
        if is_bson {
            entry.bson = Some(path);
        } else {
            entry.metadata = Some(path);
        }
    }
    Ok(map.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trip_and_unknown_fields() {
        let m = Metadata {
            options: doc! { "capped": true, "size": 4096i64 },
            indexes: vec![doc! { "v": 2, "key": { "b": 1, "a": -1 }, "name": "b_1_a_-1" }],
            uuid: Some("00112233445566778899aabbccddeeff".into()),
            collection_name: "c".into(),
            kind: "collection".into(),
        };
        let text = m.to_json();
        let (back, warnings) = Metadata::parse(&text).expect("parse");
        assert_eq!(back, m);
        assert!(warnings.is_empty());
        let odd = text.replacen('{', "{\n\"shardKey\":{\"a\":1},", 1);
        let (_, warnings) = Metadata::parse(&odd).expect("parse");
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("shardKey") && warnings[0].contains("line 2"),
            "{warnings:?}"
        );
    }

    #[test]
    fn bson_reader_reports_truncation_with_offset() {
        let a = RawDocumentBuf::try_from(&doc! { "a": 1 })
            .expect("raw")
            .into_bytes();
        let mut bytes = a.clone();
        bytes.extend_from_slice(&a[..a.len() - 3]);
        let mut r = BsonReader::new(bytes.as_slice());
        assert!(r.next_doc().expect("first").is_some());
        let e = r.next_doc().unwrap_err();
        assert!(e.contains(&format!("at byte {}", a.len())), "{e}");
        let mut r = BsonReader::new(&a[..2]);
        assert!(r.next_doc().unwrap_err().contains("at byte 0"));
        let mut r = BsonReader::new(&[] as &[u8]);
        assert!(r.next_doc().expect("empty").is_none());
    }
}
