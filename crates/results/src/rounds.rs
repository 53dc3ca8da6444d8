//! `rfc2544 --repeat N`: every frame size searched in N rounds, and each
//! figure reported as its median over the rounds.
//!
//! Why: on a shared virtual machine the router's own forwarding rate moves
//! by a fifth or more from one minute to the next (docs/BENCHMARKS.md), so
//! one search's figure does not repeat. A round searches every size once,
//! so a slow minute falls on one round of several sizes rather than on
//! every round of one size, and the median over the rounds is the figure
//! that repeats.

use crate::methods::GoalResultRecord;
use crate::model::{DutCpu, ThroughputResult};
use serde::{Deserialize, Serialize};

/// One figure (a throughput, frames/s at L2) over the rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundFigure {
    /// The figure in each round, in the order run.
    pub per_round_fps: Vec<f64>,
    /// The median over the rounds; with an even count, the lower of the
    /// two middle rounds: a rate more than half of the rounds reached.
    pub median_fps: f64,
    pub min_fps: f64,
    pub max_fps: f64,
    /// The round (1 = the first) whose figure is the median; the earliest
    /// one when several are.
    pub median_round: usize,
}

impl RoundFigure {
    /// The figure of `per_round` (one value per round, in order); None
    /// when there is no round.
    pub fn of(per_round: Vec<f64>) -> Option<RoundFigure> {
        let mut order: Vec<usize> = (0..per_round.len()).collect();
        // Stable: of equal figures, the earliest round comes first.
        order.sort_by(|&a, &b| per_round[a].total_cmp(&per_round[b]));
        let middle = *order.get((per_round.len().checked_sub(1)?) / 2)?;
        Some(RoundFigure {
            median_fps: per_round[middle],
            min_fps: per_round[order[0]],
            max_fps: per_round[order[order.len() - 1]],
            median_round: middle + 1,
            per_round_fps: per_round,
        })
    }

    /// Highest over lowest round (infinite when a round found 0): how far
    /// the rounds disagree.
    pub fn spread(&self) -> f64 {
        if self.min_fps > 0.0 {
            self.max_fps / self.min_fps
        } else if self.max_fps > 0.0 {
            f64::INFINITY
        } else {
            1.0
        }
    }
}

/// An MLRsearch goal's conditional throughput over the rounds (`rfc2544
/// --repeat N --mlrsearch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundGoal {
    /// "NDR", "PDR".
    pub name: String,
    /// A round whose goal has no conditional throughput (no load passed)
    /// counts 0.
    pub figure: RoundFigure,
    /// The goal's result in its median round, as the tables show it.
    pub median: GoalResultRecord,
}

/// A frame size's (or mix's) figures over the rounds that measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    /// How many rounds measured this size (fewer than asked when the run
    /// was interrupted).
    pub count: usize,
    /// The RFC 2544 zero-loss throughput. The result these rounds belong
    /// to is its median round's.
    pub zero_loss: RoundFigure,
    /// Each MLRsearch goal, when run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goals: Vec<RoundGoal>,
    /// The share of the DUT's CPU time the hypervisor took for other
    /// guests in each round, percent: the mean over that round's trials of
    /// this size (the lab on a virtual machine). Empty when a round did
    /// not measure it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stolen_pct: Vec<f64>,
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
    fn the_median_is_the_middle_round_and_the_lower_middle_of_an_even_count() {
        let f = RoundFigure::of(vec![700.0, 500.0, 900.0]).unwrap();
        assert_eq!((f.median_fps, f.median_round), (700.0, 1));
        assert_eq!((f.min_fps, f.max_fps), (500.0, 900.0));
        assert!((f.spread() - 1.8).abs() < 1e-12);
        let even = RoundFigure::of(vec![400.0, 800.0, 600.0, 200.0]).unwrap();
        // 200 400 | 600 800: 400 was reached by three of four rounds.
        assert_eq!((even.median_fps, even.median_round), (400.0, 1));
        // Ties: the earliest round.
        let tie = RoundFigure::of(vec![5.0, 3.0, 5.0]).unwrap();
        assert_eq!(tie.median_round, 1);
        assert_eq!(RoundFigure::of(vec![]), None);
        let one = RoundFigure::of(vec![0.0, 10.0]).unwrap();
        assert_eq!(one.spread(), f64::INFINITY);
        assert_eq!(RoundFigure::of(vec![0.0]).unwrap().spread(), 1.0);
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
