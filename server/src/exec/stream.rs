//! A suspended aggregation pipeline: an aggregate whose stages all stream
//! (`Pipeline::streams`) is run one input document at a time, only as far as the batch being
//! filled needs, and the rest waits in the cursor until `getMore` asks for it. The input is the
//! resumable scan (`ScanState`), or documents already in memory (tests).

use super::scan::{ScanState, check_deadline};
use crate::error::CommandResult;
use crate::query::pipeline::{Pipeline, PipelineEnv, StreamState};
use bson::{Document, RawDocumentBuf};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// Where a streamed pipeline's input comes from.
pub enum StreamInput {
    Scan(Box<ScanState>),
    Docs(VecDeque<RawDocumentBuf>),
}

/// A pipeline suspended between two input documents.
pub struct Streamed {
    pipeline: Arc<Pipeline>,
    state: StreamState,
    input: StreamInput,
    /// Results produced but not yet handed out (one input document can give several).
    pub(super) pending: VecDeque<RawDocumentBuf>,
    input_done: bool,
}

/// The streaming stages read no other collection; only the deadline reaches them.
struct Deadline(Option<Instant>);

impl PipelineEnv for Deadline {
    fn collection_docs(&self, _db: &str, _coll: &str) -> CommandResult<Vec<Document>> {
        Ok(Vec::new())
    }

    fn check_interrupt(&self) -> CommandResult<()> {
        check_deadline(self.0)
    }
}

impl Streamed {
    /// `pipeline` must stream after its first `skip` stages (which `input` already did).
    pub fn new(pipeline: Arc<Pipeline>, skip: usize, input: StreamInput) -> Streamed {
        let state = pipeline.stream_state(skip);
        Streamed {
            pipeline,
            state,
            input,
            pending: VecDeque::new(),
            input_done: false,
        }
    }

    /// True when every result has been handed out.
    pub fn done(&self) -> bool {
        self.pending.is_empty() && (self.input_done || self.state.finished())
    }

    /// Runs input documents through the pipeline until at least one result is pending or the
    /// input (or a `$limit`) is used up.
    pub fn fill(&mut self, deadline: Option<Instant>) -> CommandResult<()> {
        let env = Deadline(deadline);
        while self.pending.is_empty() && !self.done() {
            let next = match &mut self.input {
                StreamInput::Scan(scan) => scan.next_match(deadline)?.map(|(_, raw, _)| raw),
                StreamInput::Docs(docs) => docs.pop_front(),
            };
            let Some(doc) = next else {
                self.input_done = true;
                break;
            };
            self.pipeline
                .push_one(&mut self.state, doc, &env, &mut self.pending)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Proves a streamed pipeline, read in batches of 1 to 7 documents, returns exactly what the
    //! pipeline run over the whole input returns, for random chains of the streaming stages.
    //! How: seeded random documents and pipelines (seed printed; CAIRN_SEED replays), both
    //! runs compared document by document.
    use super::*;
    use crate::exec::DocSource;
    use crate::query::pipeline::ParseContext;
    use bson::{Bson, bson, doc};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random_doc(rng: &mut StdRng, i: i32) -> Document {
        let mut d = doc! {"_id": i, "a": rng.random_range(-5..6)};
        if rng.random_bool(0.7) {
            let items: Vec<Bson> = (0..rng.random_range(0..4))
                .map(|j| Bson::Int32(j * rng.random_range(1..3)))
                .collect();
            d.insert("arr", items);
        }
        if rng.random_bool(0.5) {
            d.insert("s", doc! {"x": rng.random_range(0..3), "y": "t"});
        }
        d
    }

    fn random_stage(rng: &mut StdRng) -> Bson {
        match rng.random_range(0..11) {
            0 => bson!({"$match": {"a": {"$gt": rng.random_range(-4..4)}}}),
            1 => bson!({"$project": {"a": 1, "s.x": 1}}),
            2 => bson!({"$project": {"arr": 0}}),
            3 => bson!({"$addFields": {"b": {"$add": ["$a", 1]}, "a": "$s.x"}}),
            4 => bson!({"$unset": "s"}),
            5 => bson!({"$unwind": {"path": "$arr", "includeArrayIndex": "i"}}),
            6 => bson!({"$limit": rng.random_range(1..12)}),
            7 => bson!({"$skip": rng.random_range(0..6)}),
            8 => bson!({"$replaceWith": {"k": "$_id", "v": "$arr"}}),
            9 => bson!({"$set": {"s.z": 1}}),
            _ => bson!({"$unwind": "$arr"}),
        }
    }

    #[test]
    fn streamed_batches_match_the_whole_run() {
        let seed: u64 = std::env::var("CAIRN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| rand::rng().random());
        println!("streaming seed: {seed} (set CAIRN_SEED to replay)");
        let mut rng = StdRng::seed_from_u64(seed);
        let ctx = ParseContext::new("db", Some("c"), bson::DateTime::from_millis(0));
        for round in 0..300 {
            let input: Vec<Document> = (0..rng.random_range(0..40))
                .map(|i| random_doc(&mut rng, i))
                .collect();
            let stages: Vec<Document> = (0..rng.random_range(1..6))
                .map(|_| match random_stage(&mut rng) {
                    Bson::Document(d) => d,
                    _ => Document::new(),
                })
                .collect();
            let pipeline = Arc::new(Pipeline::parse(&stages, &ctx).expect("parses"));
            assert!(pipeline.streams(0), "round {round}: {stages:?}");
            let whole = pipeline
                .run_vec(input.clone(), &Deadline(None))
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            let raw: VecDeque<RawDocumentBuf> = input
                .iter()
                .map(|d| RawDocumentBuf::try_from(d).expect("encodes"))
                .collect();
            let streamed = Streamed::new(pipeline.clone(), 0, StreamInput::Docs(raw));
            let mut source = DocSource::Pipeline(Box::new(streamed));
            let mut got = Vec::new();
            while !source.is_exhausted() {
                let batch = source
                    .next_batch(rng.random_range(1..8), None)
                    .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
                assert!(!batch.is_empty() || source.is_exhausted());
                got.extend(
                    batch
                        .iter()
                        .map(|r| Document::try_from(r.as_ref()).expect("decodes")),
                );
            }
            assert_eq!(got, whole, "seed {seed} round {round} pipeline {stages:?}");
        }
    }
}
