//! A pipeline run that can stop after any result and go on later, blocking stages included
//! (an aggregate's cursor keeps one between `getMore`s). The stages after the first `skip` are
//! cut at every stage that does not stream ([`STREAMING`], [`STATEFUL`]) into segments: a
//! segment is a run of streaming stages fed by the pipeline's input (the first), by the
//! blocking stage before it, or by a `$unionWith`. Pulling a result pulls the last segment,
//! which moves one document one stage on at a time (`Pipeline::step`): a queue waits in front
//! of each stage, the deepest non-empty one goes first, and an `$unwind` queues its outputs as
//! a lazy expansion, so a segment holds one expansion per `$unwind`, not their product. The
//! first time a segment needs a document from its blocking
//! stage, that stage consumes the whole previous segment (which pulls further back the same
//! way) and becomes a [`Drain`]: its sorted buffer, spilled runs or group table, handed out one
//! document at a time. A `$unionWith` hands out the previous segment's results as they are
//! pulled, then its other side: a suspended run of its sub-pipeline over a [`ForeignScan`] of
//! its collection. So between two pulls the run holds only the drains, the stateful stages'
//! slots (`$lookup`'s and `$graphLookup`'s hash tables, bounded and charged to the budget),
//! the open foreign scans, each segment's queues, and its counters;
//! dropping it drops all of that, which gives the memory charges back and closes spill files.
//!
//! Stages that read other collections do so through the `env` of the pull that needs them, so
//! a cursor reads them as of each `getMore` (its transaction's or snapshot's view when one is
//! installed). `$out`/`$merge` pass their documents through (checking `$merge`'s `on` fields);
//! the command writes what comes out.

use super::run_context::RunCx;
use super::stages::{Drain, UnionSide};
use super::{ForeignScan, Pipeline, PipelineEnv, StreamState};
use crate::error::CommandResult;
use bson::RawDocumentBuf;
use std::collections::VecDeque;

/// Stages that take one document at a time and keep no state but a count: they run inside a
/// segment. `$_internalUnpackBucket` turns one bucket into its measurements, nothing more.
pub(super) const STREAMING: &[&str] = &[
    "$match",
    "$project",
    "$addFields",
    "$set",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
    "$unwind",
    "$redact",
    "$limit",
    "$skip",
    crate::query::timeseries::UNPACK_STAGE,
    "$out",
    "$merge",
];

/// Stages that take one document at a time and give one, keeping state between documents in
/// a slot (`Stage::open_slot`): they run inside a segment too.
pub(super) const STATEFUL: &[&str] = &["$lookup", "$graphLookup"];

/// True when stage `name` runs inside a segment.
fn streams(name: &str) -> bool {
    STREAMING.contains(&name) || STATEFUL.contains(&name)
}

/// Where the input of a suspended run comes from, one document per call (`None`: no more).
pub type Input<'i> = dyn FnMut() -> CommandResult<Option<RawDocumentBuf>> + 'i;

/// A suspended run of a pipeline (see the module note). It does not hold the pipeline: every
/// call takes it again, so the caller keeps one `Arc<Pipeline>` beside this.
pub struct Suspended {
    segments: Vec<Segment>,
}

/// One run of streaming stages and what feeds it.
struct Segment {
    /// The blocking stage in front of this segment; `None` for the first, fed by the input.
    feeder: Option<usize>,
    feed: Feed,
    state: StreamState,
    /// What waits in front of each of the segment's stages (`staged[k]` for stage
    /// `state.skip + k`), handed on one document at a time, deepest stage first.
    staged: Vec<VecDeque<Waiting>>,
    /// The segment's results not pulled yet.
    pending: VecDeque<Waiting>,
    done: bool,
}

/// What waits in a segment's queue: a document, or a stage's lazy expansion of one (an
/// `$unwind`'s outputs, made as they are pulled).
pub(super) enum Waiting {
    Doc(RawDocumentBuf),
    Many(Drain),
}

/// The next document of a queue: its first document, or the next output of its first
/// expansion (`None` when that expansion just ran out; it is dropped).
fn next_waiting(q: &mut VecDeque<Waiting>) -> CommandResult<Option<RawDocumentBuf>> {
    match q.front_mut() {
        Some(Waiting::Many(many)) => {
            let next = many.next();
            // A spent expansion goes at once, so `done` need not pull once more to see it.
            if next.is_none() || many.size_hint().1 == Some(0) {
                q.pop_front();
            }
            next.transpose()
        }
        Some(Waiting::Doc(_)) => match q.pop_front() {
            Some(Waiting::Doc(doc)) => Ok(Some(doc)),
            _ => Ok(None),
        },
        None => Ok(None),
    }
}

/// A blocking stage's side of a segment.
enum Feed {
    /// The stage has not consumed its input yet.
    Waiting,
    Open(Drain),
    /// A `$unionWith`: handing out its input (`None`), then its other side.
    Union(Option<Box<OtherSide>>),
    /// Used up, or no longer needed: what it held is dropped.
    Closed,
}

/// A `$unionWith`'s other side, suspended: the foreign scan (none for a sub-pipeline that
/// starts with `$documents`) and the run of its sub-pipeline (none without one).
struct OtherSide {
    scan: Option<Box<dyn ForeignScan>>,
    run: Option<Suspended>,
}

impl Suspended {
    /// True once every result has been pulled.
    pub fn done(&self) -> bool {
        self.segments.last().is_none_or(|s| {
            s.done && s.pending.is_empty() && s.staged.iter().all(VecDeque::is_empty)
        })
    }

    /// Documents made but not pulled yet: the last segment's results and those waiting
    /// between its stages (documents inside a blocking stage are its input, not results).
    pub fn prepared_count(&self) -> usize {
        self.segments
            .last()
            .map_or(0, |s| waiting_count(&s.pending) + s.staged_count())
    }

    /// Drops segment `j` and every one before it, with what their stages hold.
    fn close_through(&mut self, j: usize) {
        for seg in self.segments.iter_mut().take(j + 1) {
            seg.feed = Feed::Closed;
            seg.pending.clear();
            seg.staged.iter_mut().for_each(VecDeque::clear);
            seg.done = true;
        }
    }
}

impl Segment {
    /// Documents waiting between the stages (an expansion counts what it says it has left).
    fn staged_count(&self) -> usize {
        self.staged.iter().map(waiting_count).sum()
    }
}

fn waiting_count(q: &VecDeque<Waiting>) -> usize {
    q.iter()
        .map(|w| match w {
            Waiting::Doc(_) => 1,
            Waiting::Many(many) => many.size_hint().0,
        })
        .sum()
}

impl Pipeline {
    /// A suspended run of all but the first `skip` stages; nothing runs until the first pull.
    pub fn suspend(&self, skip: usize) -> Suspended {
        let mut segments = Vec::new();
        let (mut start, mut feeder) = (skip, None);
        for i in skip..=self.stages.len() {
            let ends = self.stages.get(i).is_none_or(|s| !streams(&s.name));
            if ends {
                let mut state = self.stream_state(start);
                state.end = i;
                self.open_slots(&mut state);
                segments.push(Segment {
                    feeder,
                    feed: Feed::Waiting,
                    staged: (start..i).map(|_| VecDeque::new()).collect(),
                    state,
                    pending: VecDeque::new(),
                    done: false,
                });
                (start, feeder) = (i + 1, Some(i));
            }
        }
        Suspended { segments }
    }

    /// The next result of a suspended run (`None`: the run is over). `input` gives the input
    /// documents; `env` is asked to interrupt as the stages work.
    pub fn pull(
        &self,
        run: &mut Suspended,
        input: &mut Input<'_>,
        env: &dyn PipelineEnv,
    ) -> CommandResult<Option<RawDocumentBuf>> {
        let cx = self.run_cx(env);
        match run.segments.len() {
            0 => Ok(None),
            n => self.pull_from(run, n - 1, input, cx),
        }
    }

    /// The next result of segment `j`.
    fn pull_from(
        &self,
        run: &mut Suspended,
        j: usize,
        input: &mut Input<'_>,
        cx: RunCx<'_>,
    ) -> CommandResult<Option<RawDocumentBuf>> {
        loop {
            let seg = &mut run.segments[j];
            if !seg.pending.is_empty() {
                match next_waiting(&mut seg.pending)? {
                    Some(doc) => return Ok(Some(doc)),
                    None => continue,
                }
            }
            // The deepest stage with documents waiting goes first, so results come in the
            // order of one document at a time passing every stage.
            if let Some(k) = seg.staged.iter().rposition(|q| !q.is_empty()) {
                // A yield point per document made: each input is checked as it is pulled
                // below, each output of an expansion here (a clock read per stage would
                // multiply the checks by the pipeline's length).
                if matches!(seg.staged[k].front(), Some(Waiting::Many(_))) {
                    cx.env.check_interrupt()?;
                }
                let was_finished = seg.state.finished;
                let (upto, after) = seg.staged.split_at_mut(k + 1);
                if let Some(doc) = next_waiting(&mut upto[k])? {
                    let out = after.first_mut().unwrap_or(&mut seg.pending);
                    self.step(seg.state.skip + k, &mut seg.state, doc, cx, out)?;
                }
                if seg.state.finished && !was_finished {
                    // Stage k is a `$limit` just used up: what waits before it is not needed.
                    upto.iter_mut().for_each(VecDeque::clear);
                }
                continue;
            }
            if seg.done || seg.state.finished {
                // A used-up `$limit` ends the run early: what feeds it is not needed any more.
                run.close_through(j);
                return Ok(None);
            }
            // Every document pulled looks at the interrupt token and the deadline (a thread-
            // local and a clock read): a stretch a `$match` drops, or a drain whose later
            // stages are slow per document, must stop within one document of killOp or
            // maxTimeMS, and the deadline of a getMore is known only to `env`.
            cx.env.check_interrupt()?;
            let next = match seg.feeder {
                None => input()?,
                Some(stage) => self.feed(run, j, stage, input, cx)?,
            };
            let seg = &mut run.segments[j];
            match next {
                Some(doc) => seg
                    .staged
                    .first_mut()
                    .unwrap_or(&mut seg.pending)
                    .push_back(Waiting::Doc(doc)),
                None => seg.done = true,
            }
        }
    }

    /// The next output document of blocking stage `stage`, which feeds segment `j`: on the
    /// first call the stage consumes all of segment `j - 1`.
    fn feed(
        &self,
        run: &mut Suspended,
        j: usize,
        stage: usize,
        input: &mut Input<'_>,
        cx: RunCx<'_>,
    ) -> CommandResult<Option<RawDocumentBuf>> {
        if let Some(side) = self.stages[stage].stage.union_side() {
            return self.feed_union(run, j, side, input, cx);
        }
        if matches!(run.segments[j].feed, Feed::Waiting) {
            let drain = {
                let upstream =
                    std::iter::from_fn(|| self.pull_from(run, j - 1, &mut *input, cx).transpose());
                self.stages[stage].stage.drain(Box::new(upstream), cx)?
            };
            run.segments[j].feed = Feed::Open(drain);
        }
        let Feed::Open(drain) = &mut run.segments[j].feed else {
            return Ok(None);
        };
        match drain.next().transpose()? {
            Some(doc) => Ok(Some(doc)),
            None => {
                run.segments[j].feed = Feed::Closed;
                Ok(None)
            }
        }
    }

    /// The next output document of a `$unionWith` that feeds segment `j`: segment `j - 1`'s
    /// results as they are pulled, then its other side, opened when the input runs out.
    fn feed_union(
        &self,
        run: &mut Suspended,
        j: usize,
        side: UnionSide<'_>,
        input: &mut Input<'_>,
        cx: RunCx<'_>,
    ) -> CommandResult<Option<RawDocumentBuf>> {
        if matches!(run.segments[j].feed, Feed::Waiting) {
            run.segments[j].feed = Feed::Union(None);
        }
        if matches!(run.segments[j].feed, Feed::Union(None)) {
            if let Some(doc) = self.pull_from(run, j - 1, input, cx)? {
                return Ok(Some(doc));
            }
            let scan = match side.coll {
                Some((db, coll)) => Some(cx.env.open_scan(db, coll)?),
                None => None,
            };
            let other = OtherSide {
                scan,
                run: side.pipeline.map(|p| p.suspend(0)),
            };
            run.segments[j].feed = Feed::Union(Some(Box::new(other)));
        }
        let Feed::Union(Some(other)) = &mut run.segments[j].feed else {
            return Ok(None);
        };
        let OtherSide { scan, run: sub } = &mut **other;
        let mut next_input = || match scan {
            Some(s) => s.next(cx.env),
            None => Ok(None),
        };
        let next = match (sub, side.pipeline) {
            (Some(sub), Some(p)) => p.pull(sub, &mut next_input, cx.env)?,
            _ => next_input()?,
        };
        if next.is_none() {
            run.segments[j].feed = Feed::Closed;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    //! Proves a suspended run cuts the pipeline at its blocking stages and frees what they hold
    //! once a `$limit` after them is used up, keeps a `$lookup`'s table for the whole run, and
    //! reads a `$unionWith`'s side only after its input.
    //! How: small in-memory inputs pulled one result at a time, the budget read before and after.
    use super::*;
    use crate::query::pipeline::tests::{MapEnv, ctx, stages_of};
    use bson::{bson, doc};

    fn raw_docs(n: i32) -> VecDeque<RawDocumentBuf> {
        (0..n)
            .map(|i| RawDocumentBuf::try_from(&doc! {"_id": i, "k": i % 7}).expect("encodes"))
            .collect()
    }

    fn pull_all(p: &Pipeline, run: &mut Suspended, docs: &mut VecDeque<RawDocumentBuf>) -> usize {
        let mut input = || Ok(docs.pop_front());
        let mut n = 0;
        while p
            .pull(run, &mut input, &MapEnv::default())
            .expect("pulls")
            .is_some()
        {
            n += 1;
        }
        n
    }

    #[test]
    fn segments_end_at_blocking_stages() {
        let stages = stages_of(bson!([
            {"$match": {"k": {"$gt": 0}}},
            {"$group": {"_id": "$k", "n": {"$sum": 1}}},
            {"$sort": {"_id": -1}},
            {"$project": {"n": 1}},
        ]));
        let p = Pipeline::parse(&stages, &ctx()).expect("parses");
        let run = p.suspend(0);
        let bounds: Vec<(Option<usize>, usize, usize)> = run
            .segments
            .iter()
            .map(|s| (s.feeder, s.state.skip, s.state.end))
            .collect();
        assert_eq!(bounds, vec![(None, 0, 1), (Some(1), 2, 2), (Some(2), 3, 4)]);
    }

    /// Two `$unwind`s of one document: a pull holds what is left of each expansion (their
    /// sum), never their product, and the results come in the order of a whole run.
    #[test]
    fn nested_unwinds_hold_one_expansion_each() {
        let stages =
            stages_of(bson!([{"$unwind": "$a"}, {"$unwind": "$b"}, {"$project": {"_id": 0}}]));
        let p = Pipeline::parse(&stages, &ctx()).expect("parses");
        let items: Vec<i32> = (0..100).collect();
        let input = doc! {"_id": 1, "a": items.clone(), "b": items};
        let whole = p
            .run_vec(vec![input.clone()], &MapEnv::default())
            .expect("runs");
        let mut docs = VecDeque::from([RawDocumentBuf::try_from(&input).expect("encodes")]);
        let mut next_input = || Ok(docs.pop_front());
        let mut run = p.suspend(0);
        let mut got = Vec::new();
        while let Some(raw) = p
            .pull(&mut run, &mut next_input, &MapEnv::default())
            .expect("pulls")
        {
            assert!(
                run.prepared_count() <= 200,
                "{} prepared",
                run.prepared_count()
            );
            got.push(bson::Document::try_from(raw.as_ref()).expect("decodes"));
        }
        assert_eq!(got.len(), 10_000);
        assert_eq!(got, whole);
        assert!(run.done());
    }

    /// Counts the foreign reads of a [`MapEnv`].
    struct CountingEnv(MapEnv, std::cell::Cell<usize>);

    impl PipelineEnv for CountingEnv {
        fn collection_docs(&self, db: &str, coll: &str) -> CommandResult<Vec<bson::Document>> {
            self.1.set(self.1.get() + 1);
            self.0.collection_docs(db, coll)
        }
    }

    #[test]
    fn a_lookup_builds_its_table_once_and_a_union_reads_its_side_last() {
        let foreign: Vec<bson::Document> = (0..10).map(|j| doc! {"_id": j, "k": j}).collect();
        let env = CountingEnv(
            MapEnv([("f".to_string(), foreign)].into_iter().collect()),
            std::cell::Cell::new(0),
        );
        let stages = stages_of(bson!([
            {"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "j"}},
            {"$unionWith": "f"},
            {"$limit": 55},
        ]));
        let p = Pipeline::parse(&stages, &ctx()).expect("parses");
        let mut run = p.suspend(0);
        let mut docs = raw_docs(50);
        let mut input = || Ok(docs.pop_front());
        let mut joined = 0;
        for n in 0..55 {
            let doc = p.pull(&mut run, &mut input, &env).expect("pulls");
            let doc = bson::Document::try_from(doc.expect("a result").as_ref()).expect("doc");
            joined += usize::from(doc.get_array("j").is_ok_and(|j| j.len() == 1));
            // The table is read with the first document; `f` again only once the input is out.
            assert_eq!(env.1.get(), if n < 50 { 1 } else { 2 }, "after {n} pulls");
        }
        assert_eq!(joined, 50, "every k in 0..7 has one foreign match");
        assert!(p.pull(&mut run, &mut input, &env).expect("pulls").is_none());
        assert!(run.done());
    }

    #[test]
    fn a_used_up_limit_closes_the_blocking_stages() {
        let stages = stages_of(bson!([{"$sort": {"k": 1}}, {"$skip": 0}, {"$limit": 3}]));
        let mut c = ctx();
        c.memory_max_bytes = usize::MAX;
        let p = Pipeline::parse(&stages, &c).expect("parses");
        let mut run = p.suspend(0);
        let mut docs = raw_docs(50);
        assert_eq!(pull_all(&p, &mut run, &mut docs), 3);
        assert!(run.done());
        assert!(
            run.segments
                .iter()
                .all(|s| matches!(s.feed, Feed::Closed | Feed::Waiting))
        );
    }
}
