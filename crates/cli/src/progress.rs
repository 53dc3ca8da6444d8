//! Progress lines on stderr while trials run: which size, which rate, how
//! many trials so far, and each outcome. stdout is kept for the table.

use linerate_method::Progress;
use linerate_results::report::thousands;

pub fn show(p: &Progress, line_rate_fps: f64) {
    match p {
        Progress::TrialStarting {
            frame,
            trial_no,
            intended_fps,
            lo,
            hi,
        } => {
            eprint!(
                "[{:>5} B] trial {:>2}: {:>11} fps ({:5.1} % of line)  [pass {} .. fail {}] ... ",
                frame.frame(),
                trial_no,
                thousands(intended_fps.round() as u64),
                100.0 * intended_fps / line_rate_fps,
                thousands(lo.round() as u64),
                thousands(hi.round() as u64),
            );
        }
        Progress::TrialDone { result, passed, .. } => {
            let verdict = if *passed { "pass" } else { "FAIL" };
            let short = if result.generator_short {
                "  (tester could not offer this rate)"
            } else {
                ""
            };
            eprintln!(
                "{verdict}: tx {} rx {} loss {:.4} %{short}",
                thousands(result.tx_frames),
                thousands(result.rx_frames),
                100.0 * result.loss_ratio,
            );
        }
    }
}
