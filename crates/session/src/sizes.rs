//! The loop every method command runs over its frame sizes (or mixes, or
//! rows): each trial is saved as it ends (the report so far, with the
//! unfinished size's trials), the report is saved after each size, and a
//! run stopped by a signal or an engine error keeps everything it measured.
//! Written once here, so that no command can forget a step of it.

use crate::recorder::Recorder;
use linerate_engine::EngineError;
use linerate_results::{KeepsUnfinished, TrialResult, UnfinishedTrials};
use linerate_wire::FrameSize;

/// The trials of the size being measured, saved with the report as each
/// ends; the method's progress callback shows them through `recorder`.
pub(crate) struct SizeTrials<'a, Rep> {
    pub recorder: &'a mut Recorder,
    report: &'a Rep,
    unfinished: UnfinishedTrials,
}

impl<Rep: KeepsUnfinished + Clone + serde::Serialize> SizeTrials<'_, Rep> {
    /// A trial ended: kept, and the report saved with it (a failure to
    /// write, a full disk, must not stop the measurement: the final save
    /// reports it).
    pub fn done(&mut self, trial: &TrialResult) {
        self.unfinished.trials.push(trial.clone());
        let mut partial = self.report.clone();
        *partial.unfinished_mut() = Some(self.unfinished.clone());
        self.recorder.save_partial(&partial);
    }

    /// How many trials this size has run.
    pub fn count(&self) -> usize {
        self.unfinished.trials.len()
    }

    /// A second phase starts (MLRsearch after the zero-loss search) whose
    /// result is not yet in the report: from now on an interruption keeps
    /// its trials as the unfinished ones.
    pub fn restart(&mut self) {
        self.unfinished.trials.clear();
    }
}

/// Why a size's measurement stopped, and what of it was finished before
/// (kept in the report: the zero-loss result of an unfinished MLRsearch).
pub(crate) struct Stopped<Out> {
    pub error: EngineError,
    /// Boxed: results are large, and this is the rare path.
    pub finished: Option<Box<Out>>,
}

impl<Out> From<EngineError> for Stopped<Out> {
    fn from(error: EngineError) -> Self {
        Stopped {
            error,
            finished: None,
        }
    }
}

/// Measures each of `sizes` in order with `measure` (its index, the size,
/// the size's trials) and adds each result to `report` with `keep`, saving
/// the report after each. Stops at the first error (an interruption is
/// one), after saving the report with the unfinished size's trials.
pub(crate) fn each_size<Rep, S, Out>(
    sizes: Vec<S>,
    report: &mut Rep,
    recorder: &mut Recorder,
    frame_of: impl Fn(&S) -> FrameSize,
    mut measure: impl FnMut(usize, S, &mut SizeTrials<'_, Rep>) -> Result<Out, Stopped<Out>>,
    mut keep: impl FnMut(&mut Rep, Out),
) -> Result<(), EngineError>
where
    Rep: KeepsUnfinished + Clone + serde::Serialize,
{
    for (index, size) in sizes.into_iter().enumerate() {
        let frame = frame_of(&size);
        let mut trials = SizeTrials {
            recorder: &mut *recorder,
            report: &*report,
            unfinished: UnfinishedTrials {
                frame_size: frame.frame(),
                l3_length: frame.l3(),
                trials: Vec::new(),
            },
        };
        let outcome = measure(index, size, &mut trials);
        let unfinished = trials.unfinished;
        match outcome {
            Ok(out) => keep(report, out),
            Err(Stopped { error, finished }) => {
                if let Some(out) = finished {
                    keep(report, *out);
                }
                *report.unfinished_mut() = Some(unfinished);
                recorder.save_partial(report);
                return Err(error);
            }
        }
        recorder.save_partial(report);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::RecordPlan;

    #[derive(Clone, serde::Serialize, Default)]
    struct Rep {
        results: Vec<u32>,
        interrupted: Option<UnfinishedTrials>,
    }
    impl KeepsUnfinished for Rep {
        fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials> {
            &mut self.interrupted
        }
    }

    fn trial() -> TrialResult {
        serde_json::from_str(r#"{"frame_size":64,"l3_length":46,"duration_s":1.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":0,"tx_frames":0,"rx_frames":0,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#).unwrap()
    }

    fn recorder() -> Recorder {
        let plan = RecordPlan {
            no_db: true,
            ..RecordPlan::default()
        };
        Recorder::open(&plan).unwrap()
    }

    #[test]
    fn a_stop_keeps_the_finished_sizes_and_the_unfinished_trials() {
        let sizes = vec![64u16, 128, 256];
        let mut rep = Rep::default();
        let mut rec = recorder();
        let stopped = each_size(
            sizes,
            &mut rep,
            &mut rec,
            |&s| FrameSize::from_frame(u64::from(s)).unwrap(),
            |i, s, trials| {
                trials.done(&trial());
                trials.done(&trial());
                if i == 1 {
                    return Err(EngineError::Interrupted.into());
                }
                Ok(u32::from(s))
            },
            |rep, out| rep.results.push(out),
        );
        assert!(matches!(stopped, Err(EngineError::Interrupted)));
        assert_eq!(rep.results, vec![64]);
        let u = rep.interrupted.expect("the unfinished size is kept");
        assert_eq!((u.frame_size, u.trials.len()), (128, 2));
    }

    #[test]
    fn a_second_phase_keeps_the_first_result_and_only_its_own_trials() {
        let mut rep = Rep::default();
        let mut rec = recorder();
        let stopped = each_size(
            vec![64u16],
            &mut rep,
            &mut rec,
            |&s| FrameSize::from_frame(u64::from(s)).unwrap(),
            |_, s, trials| {
                trials.done(&trial());
                trials.restart();
                trials.done(&trial());
                assert_eq!(trials.count(), 1);
                Err(Stopped {
                    error: EngineError::Interrupted,
                    finished: Some(Box::new(u32::from(s))),
                })
            },
            |rep, out| rep.results.push(out),
        );
        assert!(stopped.is_err());
        assert_eq!(rep.results, vec![64]);
        assert_eq!(rep.interrupted.expect("kept").trials.len(), 1);
    }

    #[test]
    fn every_size_measured_leaves_nothing_unfinished() {
        let mut rep = Rep::default();
        let mut rec = recorder();
        each_size(
            vec![64u16, 1518],
            &mut rep,
            &mut rec,
            |&s| FrameSize::from_frame(u64::from(s)).unwrap(),
            |_, s, _| Ok(u32::from(s)),
            |rep, out| rep.results.push(out),
        )
        .unwrap();
        assert_eq!(rep.results, vec![64, 1518]);
        assert!(rep.interrupted.is_none());
    }
}
