//! `linerate tunnels --capacity`: the tunnels are brought up `--step` at
//! a time, every earlier one held (the gateway's requests answered, and
//! with `--traffic` its frames still sent), until a step fails or
//! degrades, or `--count` (the ceiling) is reached.
//!
//! Each step: its setups (the fleet's next `step` peers), then the hold
//! (`--hold`), during which the fleet answers the gateway and notes every
//! tunnel it deletes; with `--traffic` the hold is the step's traffic
//! window: every tunnel up through it has sent frames from its start to
//! its end (their sequence numbers marked at both ends), and after a grace
//! for frames in flight, port A's count of exactly those frames gives each
//! tunnel's loss in the window. The verdict (crates/results): a failed
//! setup, a tunnel deleted by the gateway, or a held tunnel that delivered
//! none of its window's frames or the window's loss above `--max-loss`
//! ends the run.

use super::traffic::Traffic;
use linerate_ike::{Event, Fleet, Setup};
use linerate_results::report::thousands;
use linerate_results::tunnels::{StepMeasured, StepTraffic, StepVerdict, WindowCount};
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `--capacity`'s values.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityPlan {
    /// Tunnels added per step.
    pub step: usize,
    /// With `--traffic`: the largest loss (%) of a step's window that
    /// still holds.
    pub max_loss_pct: f64,
}

/// How long frames sent at a window's end are waited for at port A before
/// the window's frames are counted (the gateway's queue and port A's ring:
/// tens of ms here; the lab's charon under load has shown no more).
const GRACE: Duration = Duration::from_millis(500);

/// What the steps did: every setup (in the order the steps ran them) and
/// what was measured in each step.
pub struct Steps {
    pub setups: Vec<Setup>,
    pub measured: Vec<StepMeasured>,
}

/// Everything the steps use besides the fleet.
pub struct StepsEnv<'a> {
    pub plan: &'a CapacityPlan,
    pub peers: &'a [Ipv4Addr],
    pub hold: Duration,
    pub traffic: Option<&'a Traffic>,
    /// The gateway's own count of installed CHILD_SAs, where linerate can
    /// ask (the lab's charon).
    pub gateway_children: &'a dyn Fn() -> Option<u64>,
    pub interrupt: &'a AtomicBool,
    pub verbose: bool,
}

/// Answers the gateway for `wait` (at least one look at what it sent),
/// noting the tunnels it deleted.
fn hold(fleet: &mut Fleet, wait: Duration, env: &StepsEnv, deleted: &mut HashSet<usize>) {
    let start = Instant::now();
    loop {
        let left = wait.saturating_sub(start.elapsed());
        for e in fleet.poll(left.min(Duration::from_millis(100))) {
            if matches!(e.event, Event::ChildDeleted | Event::IkeDeleted) {
                deleted.insert(e.peer);
            }
        }
        if start.elapsed() >= wait || env.interrupt.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// Runs the steps until one does not hold, the ceiling (every peer) is
/// reached, or a signal.
pub fn run_steps(fleet: &mut Fleet, env: &StepsEnv, on_setup: &mut dyn FnMut(&Setup)) -> Steps {
    let count = env.peers.len();
    let mut out = Steps {
        setups: Vec::new(),
        measured: Vec::new(),
    };
    let mut first = 0;
    while first < count {
        let n = env.plan.step.min(count - first);
        let setups = fleet.bring_up_next_until(n, env.interrupt, on_setup);
        let failed = setups.iter().filter(|s| s.outcome.is_err()).count() as u64;
        let up_after_setups = fleet.established() as u64;
        let gateway_children = (env.gateway_children)();
        out.setups.extend(setups);
        let mut deleted = HashSet::new();
        let mut interrupted = env.interrupt.load(Ordering::Relaxed);
        let start = env.traffic.map(Traffic::mark);
        let begun = Instant::now();
        if !interrupted {
            hold(fleet, env.hold, env, &mut deleted);
        }
        let hold_s = begun.elapsed().as_secs_f64();
        let traffic = match (env.traffic, start) {
            (Some(t), Some(start)) if !env.interrupt.load(Ordering::Relaxed) => {
                let end = t.mark();
                hold(fleet, GRACE, env, &mut deleted);
                // The tunnels up through the whole window.
                let through: Vec<usize> = (0..first + n)
                    .filter(|&i| fleet.child(i).is_some() && !deleted.contains(&i))
                    .collect();
                let (counts, refused) = t.window(&start, &end, &through);
                let counts: Vec<WindowCount> = through
                    .iter()
                    .zip(counts)
                    .map(|(&i, (sent, received))| WindowCount {
                        peer: env.peers[i],
                        sent,
                        received,
                    })
                    .collect();
                Some(StepTraffic::of(hold_s, &counts, refused))
            }
            _ => None,
        };
        interrupted |= env.interrupt.load(Ordering::Relaxed);
        let measured = StepMeasured {
            first,
            attempted: n,
            up_after_setups,
            up_after_hold: fleet.established() as u64,
            deleted_by_gateway: deleted.len() as u64,
            gateway_children,
            hold_s,
            traffic,
            interrupted,
        };
        let verdict = measured.verdict(failed, env.plan.max_loss_pct);
        if env.verbose {
            let loss = measured.traffic.as_ref().map_or(String::new(), |t| {
                format!(
                    ", window loss {} of {} frames",
                    thousands(t.lost),
                    thousands(t.sent)
                )
            });
            errln!(
                "linerate: capacity step {}: {} up ({} failed in the step, {} deleted by the gateway{loss}): {}",
                out.measured.len() + 1,
                thousands(measured.up_after_hold),
                thousands(failed),
                thousands(measured.deleted_by_gateway),
                verdict.name()
            );
        }
        out.measured.push(measured);
        first += n;
        if verdict != StepVerdict::Held {
            break;
        }
    }
    out
}
