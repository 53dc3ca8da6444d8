//! `routes:N`: N routes in the DUT's main table, loaded in one `ip -batch`
//! (900,000 in seconds) and counted back.
//!
//! The routes are host routes (/32) for 198.19.0.2, 198.19.0.3, ... upwards
//! (past 198.19.255.255 into 198.20.0.0 and on), each via tester B
//! (198.19.0.2) on dut-b. They are more specific than the connected
//! 198.19.0.0/24, so the route lookup of every test frame ends in one of
//! them: the engine's single flow (to 198.19.0.2) hits the first; traffic
//! spread over destination addresses 198.19.0.2 + k hits route k. The
//! kernel's FIB is a level-compressed trie, so the table's size shows in
//! the lookup's depth and cache footprint, as on a router with a full table.

use super::tools::private_file;
use crate::stop::StopCheck;
use crate::{netns, LabError};
use linerate_helper::DieWithParent;
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// First destination: tester B's address.
const FIRST: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
/// Where every route points: tester B, on the DUT's B side.
const VIA: &str = "198.19.0.2";
const DEV: &str = "dut-b";
/// The routes' protocol tag, so they can be counted apart from the lab's own.
const PROTO: &str = "static";

/// The `ip -batch` text for `n` routes.
pub(crate) fn batch(n: u32) -> String {
    let first = u32::from(FIRST);
    let mut text = String::with_capacity(n as usize * 56);
    for i in 0..n {
        let dst = Ipv4Addr::from(first + i);
        text.push_str(&format!(
            "route add {dst}/32 via {VIA} dev {DEV} proto {PROTO}\n"
        ));
    }
    text
}

/// Loads `n` routes into namespace `ns` and checks the count read back;
/// `stop` ends the load or the count (seconds each for 900,000 routes).
pub(crate) fn load(ns: &str, n: u32, stop: &StopCheck) -> Result<String, LabError> {
    let (dir, path) = private_file("routes.batch", &batch(n))?;
    let path_text = path.to_string_lossy().into_owned();
    let started = std::time::Instant::now();
    let args = ["-n", ns, "-batch", &path_text];
    let result = netns::run_until(netns::ip_path()?, &args, stop.requested);
    drop(dir);
    result?;
    let took = started.elapsed();
    stop.go_on()?;
    let counted = count(ns, stop)?;
    if counted != n as u64 {
        return Err(LabError::NotInEffect {
            scenario: String::new(),
            detail: format!("{counted} routes in the DUT's table after loading {n}"),
        });
    }
    let last = Ipv4Addr::from(u32::from(FIRST) + n - 1);
    Ok(format!(
        "routes: {n} host routes {FIRST}..{last} via {VIA} loaded in {:.1} s (counted back with ip route show proto {PROTO}); the single test flow to {FIRST} hits the first",
        took.as_secs_f64()
    ))
}

/// Routes tagged `proto static` in `ns`'s main table, counted line by line
/// as `ip` prints them (900,000 lines are never held in memory at once);
/// `stop` is asked every 10,000 lines.
pub(crate) fn count(ns: &str, stop: &StopCheck) -> Result<u64, LabError> {
    let ip = netns::ip_path()?;
    let args = ["-n", ns, "route", "show", "table", "main", "proto", PROTO];
    let command = netns::command_line(ip, &args);
    let mut child = Command::new(ip)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .die_with_parent()
        .spawn()
        .map_err(|e| LabError::Spawn {
            command: command.clone(),
            error: e.to_string(),
        })?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = 0u64;
    for _ in BufReader::new(stdout).lines().map_while(Result::ok) {
        lines += 1;
        if lines % 10_000 == 0 {
            if let Err(stopped) = stop.go_on() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(stopped);
            }
        }
    }
    let status = child.wait().map_err(|e| LabError::Spawn {
        command: command.clone(),
        error: e.to_string(),
    })?;
    if !status.success() {
        return Err(LabError::Command {
            command,
            stderr: format!("exited with {status}"),
        });
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_starts_at_tester_b_and_counts_up() {
        let text = batch(3);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "route add 198.19.0.2/32 via 198.19.0.2 dev dut-b proto static",
                "route add 198.19.0.3/32 via 198.19.0.2 dev dut-b proto static",
                "route add 198.19.0.4/32 via 198.19.0.2 dev dut-b proto static",
            ]
        );
        // 900,000 routes reach past 198.19.255.255 without wrapping.
        let big = batch(300);
        assert!(big
            .lines()
            .last()
            .unwrap()
            .starts_with("route add 198.19.1.45/32"));
    }
}
