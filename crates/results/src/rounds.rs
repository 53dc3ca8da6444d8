//! `rfc2544 --repeat N`: every frame size searched in N rounds, and each
//! figure reported as its median over the rounds. This module holds the
//! records of a size's figures over its rounds (each figure's median and
//! spread); [`crate::throughput::medians`] makes them from the rounds'
//! results.
//!
//! Why: on a shared virtual machine the router's own forwarding rate moves
//! by a fifth or more from one minute to the next (docs/BENCHMARKS.md), so
//! one search's figure does not repeat. A round searches every size once,
//! so a slow minute falls on one round of several sizes rather than on
//! every round of one size, and the median over the rounds is the figure
//! that repeats.

use crate::mlrsearch::GoalResultRecord;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
