//! The RFC 2544 throughput search's records: what it found for one frame
//! size ([`ThroughputResult`]), the whole run ([`Rfc2544Report`]), and with
//! `--repeat N` each size's result as its median over the rounds
//! ([`medians`]; why, in [`crate::rounds`]).

use crate::ipsec::WanRate;
use crate::mlrsearch::{GoalResultRecord, MlrSearchResult};
use crate::model::{DutCpu, KeepsUnfinished, MixInfo, TrialResult, UnfinishedTrials};
use crate::rounds::{RoundFigure, RoundGoal, Rounds};
use crate::run::RunInfo;
use serde::{Deserialize, Serialize};

/// The RFC 2544 throughput found for one frame size (or one mix).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// Frame size with FCS (with a `mix`: its largest size).
    pub frame_size: u16,
    /// The frame-size mix searched, for IMIX throughput; Mbps figures then
    /// count the mix's mean frame at each layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixInfo>,
    pub l3_length: u16,
    /// Highest rate that passed (0 when none did), frames/s.
    pub throughput_fps: f64,
    /// The same rate in Mbit/s counting the whole frame with FCS.
    pub throughput_mbps_l2: f64,
    /// The same rate in Mbit/s counting preamble and inter-frame gap too.
    pub throughput_mbps_l1: f64,
    /// The same rate in Mbit/s counting IP packets.
    pub throughput_mbps_l3: f64,
    /// The same rate in Mbit/s counting UDP payload.
    pub throughput_mbps_l4: f64,
    /// Theoretical maximum frames/s at the line speed.
    pub line_rate_fps: f64,
    /// Theoretical maximum Mbit/s (L2) at the line speed.
    pub line_rate_mbps_l2: f64,
    /// The search ended at the tester's own limit, not the device's:
    /// the rate above the throughput could not be offered.
    pub tester_limited: bool,
    /// The tester's calibrated ceiling for this engine and frame size
    /// (`linerate calibrate`), when one is stored; a throughput within 5 %
    /// of it is marked `tester_limited` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated_ceiling_fps: Option<f64>,
    /// Every trial of the search, in the order run.
    pub trials: Vec<TrialResult>,
    /// The DUT's CPU load in the trial at the throughput rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_cpu: Option<DutCpu>,
    /// `--ipsec`: the throughput on the gateway's WAN side, in encrypted
    /// frames (from the trial at the throughput rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan: Option<WanRate>,
    /// MLRsearch (RFC 9971) for the same frame size, run after the
    /// search when asked (`rfc2544 --mlrsearch`): its NDR and PDR
    /// conditional throughputs beside the zero-loss throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlrsearch: Option<MlrSearchResult>,
    /// `rfc2544 --repeat N`: the round (1 = the first) this search was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// `rfc2544 --repeat N`, in the report's `results`: this size's
    /// figures over every round, of which this result is the round with
    /// the median zero-loss throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_rounds: Option<Box<Rounds>>,
}

impl ThroughputResult {
    /// The trial the throughput was shown by: the last one run at that
    /// rate, or the lossless trial whose paused generator showed it (the
    /// search credits such a trial at the rate the device really saw, its
    /// `offered_fps`). None when the throughput is 0.
    pub fn throughput_trial(&self) -> Option<&TrialResult> {
        let fps = self.throughput_fps;
        self.trials
            .iter()
            .rev()
            .find(|t| fps > 0.0 && (t.intended_fps == fps || t.offered_fps == fps))
    }
}

/// A whole RFC 2544 throughput run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc2544Report {
    /// Where and how the run was made; its description (e.g. "LAN-LAN
    /// routing, lab Linux router") is the table's title when not empty.
    #[serde(flatten)]
    pub run: RunInfo,
    pub trial_duration_s: f64,
    pub resolution: f64,
    pub allowed_loss_ratio: f64,
    /// Both ports sent at once: rates are totals over both directions,
    /// and each trial keeps its directions apart.
    #[serde(default)]
    pub bidirectional: bool,
    pub results: Vec<ThroughputResult>,
    /// The lab scenario the DUT was configured with (`--scenario`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario::ScenarioRecord>,
    /// How the DUT's CPU load was measured, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_cpu_source: Option<String>,
    /// The search that was running when the run was interrupted, with the
    /// trials it had finished: no measured trial is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<UnfinishedTrials>,
    /// `--repeat N`: how many rounds were asked for (1: one search per
    /// size, `round_results` empty).
    #[serde(default = "one_round", skip_serializing_if = "is_one_round")]
    pub repeat: usize,
    /// `--repeat N`: every round's result, in the order run; `results`
    /// holds each size's median round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_results: Vec<ThroughputResult>,
}

fn one_round() -> usize {
    1
}

fn is_one_round(n: &usize) -> bool {
    *n <= 1
}

impl Rfc2544Report {
    /// A size's search finished: with one round, its result is the size's;
    /// with several, it joins the rounds and every size's figure is its
    /// median so far (so a run stopped early reports the rounds it made).
    pub fn keep(&mut self, result: ThroughputResult) {
        if self.repeat > 1 {
            self.round_results.push(result);
            self.results = medians(&self.round_results);
        } else {
            self.results.push(result);
        }
    }
}

impl KeepsUnfinished for Rfc2544Report {
    fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials> {
        &mut self.interrupted
    }
}

/// The figures of `rounds` (every round's result, in the order run), one
/// per frame size or mix in the order first measured: each is the result
/// of the round whose zero-loss throughput is the median, with its
/// [`Rounds`] in `over_rounds`.
pub fn medians(rounds: &[ThroughputResult]) -> Vec<ThroughputResult> {
    let mut sizes: Vec<Vec<&ThroughputResult>> = Vec::new();
    for r in rounds {
        match sizes.iter_mut().find(|s| same_frames(s[0], r)) {
            Some(size) => size.push(r),
            None => sizes.push(vec![r]),
        }
    }
    sizes
        .into_iter()
        .filter_map(|size| median_of(&size))
        .collect()
}

/// The same frame size, or the same mix.
fn same_frames(a: &ThroughputResult, b: &ThroughputResult) -> bool {
    a.frame_size == b.frame_size
        && a.l3_length == b.l3_length
        && a.mix.as_ref().map(|m| &m.name) == b.mix.as_ref().map(|m| &m.name)
}

/// One size's rounds as its median result.
fn median_of(size: &[&ThroughputResult]) -> Option<ThroughputResult> {
    let zero_loss = RoundFigure::of(size.iter().map(|r| r.throughput_fps).collect())?;
    let goal_names: Vec<&String> = size
        .iter()
        .find_map(|r| r.mlrsearch.as_ref())
        .map(|m| m.goals.iter().map(|g| &g.goal.name).collect())
        .unwrap_or_default();
    let goals = goal_names
        .into_iter()
        .filter_map(|name| {
            let of_round: Vec<Option<&GoalResultRecord>> = size
                .iter()
                .map(|r| {
                    r.mlrsearch
                        .as_ref()
                        .and_then(|m| m.goals.iter().find(|g| &g.goal.name == name))
                })
                .collect();
            let fps = of_round
                .iter()
                .map(|g| g.and_then(|g| g.conditional_throughput_fps).unwrap_or(0.0))
                .collect();
            let figure = RoundFigure::of(fps)?;
            let median = of_round[figure.median_round - 1]?.clone();
            Some(RoundGoal {
                name: name.clone(),
                figure,
                median,
            })
        })
        .collect();
    let stolen: Option<Vec<f64>> = size
        .iter()
        .map(|r| {
            let mlr = r.mlrsearch.iter().flat_map(|m| &m.trials);
            DutCpu::mean(r.trials.iter().chain(mlr)).and_then(|c| c.stolen_pct)
        })
        .collect();
    let mut shown = size[zero_loss.median_round - 1].clone();
    shown.over_rounds = Some(Box::new(Rounds {
        count: size.len(),
        zero_loss,
        goals,
        stolen_pct: stolen.unwrap_or_default(),
    }));
    Some(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(frame: u16, fps: f64, round: usize) -> ThroughputResult {
        let mut r: ThroughputResult = serde_json::from_str(&format!(
            r#"{{"frame_size":{frame},"l3_length":{},"throughput_fps":{fps},"throughput_mbps_l2":0.0,"throughput_mbps_l1":0.0,"throughput_mbps_l3":0.0,"throughput_mbps_l4":0.0,"line_rate_fps":1e6,"line_rate_mbps_l2":0.0,"tester_limited":false,"trials":[]}}"#,
            frame - 18
        ))
        .unwrap();
        r.round = Some(round);
        r
    }

    #[test]
    fn each_size_is_its_median_round_s_result_in_the_order_first_measured() {
        // Two sizes, round-robin, three rounds; the last round interrupted
        // after its first size.
        let rounds = vec![
            result(64, 500.0, 1),
            result(1518, 80.0, 1),
            result(64, 700.0, 2),
            result(1518, 81.0, 2),
            result(64, 600.0, 3),
        ];
        let m = medians(&rounds);
        assert_eq!(
            m.iter().map(|r| r.frame_size).collect::<Vec<_>>(),
            [64, 1518]
        );
        assert_eq!((m[0].throughput_fps, m[0].round), (600.0, Some(3)));
        let o = m[0].over_rounds.as_ref().unwrap();
        assert_eq!(
            (o.count, o.zero_loss.per_round_fps.clone()),
            (3, vec![500.0, 700.0, 600.0])
        );
        // An even count: the lower middle.
        assert_eq!((m[1].throughput_fps, m[1].round), (80.0, Some(1)));
        assert_eq!(m[1].over_rounds.as_ref().unwrap().count, 2);
        assert!(medians(&[]).is_empty());
    }

    #[test]
    fn stolen_time_is_each_round_s_mean_and_left_out_when_a_round_lacks_it() {
        let trial = |stolen: Option<f64>| -> crate::TrialResult {
            let mut t: crate::TrialResult = serde_json::from_str(r#"{"frame_size":64,"l3_length":46,"duration_s":1.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":0,"tx_frames":0,"rx_frames":0,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#).unwrap();
            t.dut_cpu = Some(DutCpu {
                total_pct: 50.0,
                traffic_pct: 40.0,
                stolen_pct: stolen,
            });
            t
        };
        let mut a = result(64, 500.0, 1);
        a.trials = vec![trial(Some(1.0)), trial(Some(3.0))];
        let mut b = result(64, 600.0, 2);
        b.trials = vec![trial(Some(0.5))];
        let m = medians(&[a.clone(), b]);
        assert_eq!(
            m[0].over_rounds.as_ref().unwrap().stolen_pct,
            vec![2.0, 0.5]
        );
        let mut c = result(64, 600.0, 2);
        c.trials = vec![trial(None)];
        let m = medians(&[a, c]);
        assert!(m[0].over_rounds.as_ref().unwrap().stolen_pct.is_empty());
    }
}
