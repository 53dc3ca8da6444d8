//! `linerate lab up|down|status`.

use crate::error::{bail, Result};
use crate::exit::Outcome;
use linerate_goodput::moved_ports;
use linerate_lab::Lab;
use std::sync::atomic::{AtomicBool, Ordering};

/// `lab up`: builds the lab `lab_name` (default: "default") and keeps it.
/// Interrupted (`stop`: SIGINT, SIGTERM, SIGHUP) while it builds, it
/// removes what it built and says so: a lab is up only when the command
/// says it is.
pub fn up(lab_name: Option<&str>, ring: u32, stop: &AtomicBool) -> Result<Outcome> {
    linerate_lab::check_environment()?;
    let lab_name = lab_name.unwrap_or(crate::ports::DEFAULT_LAB);
    // The build stops at its next step; one that ended before the stop
    // came is removed below.
    let built = Lab::up_until(lab_name, ring, &crate::ports::until(stop));
    if stop.load(Ordering::Relaxed) {
        // Dropping an owned lab removes it; a failed build rolled back.
        drop(built);
        return Ok(Outcome::Interrupted(format!(
            "lab '{lab_name}' was not built (what was made is removed)"
        )));
    }
    let lab = built?;
    let (a, b) = (lab.port_a(), lab.port_b());
    outln!("lab '{}' is up", lab.name());
    outln!(
        "  port A: {} in netns {}  host {}/{}  gateway {}",
        a.ifname,
        a.netns,
        a.ip,
        a.prefix_len,
        a.gateway
    );
    outln!(
        "  port B: {} in netns {}  host {}/{}  gateway {}",
        b.ifname,
        b.netns,
        b.ip,
        b.prefix_len,
        b.gateway
    );
    outln!("  DUT:    netns {} (Linux router)", lab.dut_netns());
    let [(host_a, gw_a), (host_b, gw_b)] = linerate_lab::layout::LAB_IPV6;
    let len = linerate_lab::layout::LAB_IPV6_PREFIX;
    outln!(
                "  with --ipv6: host A {host_a}/{len} gateway {gw_a}, host B {host_b}/{len} gateway {gw_b} (RFC 5180 range; set on the router for the run)"
            );
    outln!("  {}", lab.placement().note);
    outln!(
                "run tests with 'linerate rfc2544 --lab --lab-name {0}'; remove it with 'linerate lab down --lab-name {0}'",
                lab.name()
            );
    lab.keep();
    Ok(Outcome::Passed)
}

/// `lab down`: removes the lab `lab_name`, or with `all` every lab (and
/// puts back ports killed goodput runs left); with neither, lists the labs.
pub fn down(lab_name: Option<&str>, all: bool) -> Result<Outcome> {
    linerate_lab::check_environment()?;
    let (removed, in_use) = match (lab_name, all) {
        // Also removes a half-made lab, which attach would refuse.
        (Some(name), _) => (linerate_lab::down_lab(name)?, Vec::new()),
        (None, true) => down_all()?,
        (None, false) => return list_for_all(),
    };
    if removed.is_empty() {
        outln!("nothing to remove");
    } else {
        outln!("removed: {}", removed.join(", "));
    }
    if !in_use.is_empty() {
        outln!(
            "kept, in use by a run: {} (remove it with 'linerate lab down --lab-name NAME' once the run has ended)",
            in_use.join(", ")
        );
    }
    Ok(Outcome::Passed)
}

/// `lab status`: the labs that are up, as text or (`json`) JSON.
pub fn status(json: bool) -> Result<Outcome> {
    linerate_lab::check_environment()?;
    let labs = linerate_lab::status()?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&labs)?);
    } else if labs.is_empty() {
        outln!("no lab is up");
    } else {
        for lab in labs {
            outln!("{lab}");
        }
    }
    Ok(Outcome::Passed)
}

/// `lab down --all`: first puts back the named ports that killed `tcp` and
/// `http` runs left in their namespaces (deleting those namespaces would
/// lose the ports' state, and a veth with it), then removes every lab but
/// the namespaces still holding a port: those of running `tcp`/`http`
/// runs, and any whose port could not be put back.
fn down_all() -> Result<(Vec<String>, Vec<String>)> {
    let mut removed = Vec::new();
    let mut failed = None;
    for port in moved_ports::stranded() {
        match port.recover() {
            Ok(()) => removed.push(format!(
                "{} (port {} put back)",
                port.moved_to, port.state.ifname
            )),
            Err(e) => {
                errln!("linerate: warning: {e}");
                failed.get_or_insert(e);
            }
        }
    }
    let all = linerate_lab::down_all(&moved_ports::recorded())?;
    removed.extend(all.removed);
    match failed {
        Some(e) => Err(e.into()),
        None => Ok((removed, all.in_use)),
    }
}

/// Bare `lab down`: removing every lab on the machine (other users' and
/// other runs' too) must be asked for by name or with `--all`, so it only
/// says what `--all` would remove.
fn list_for_all() -> Result<Outcome> {
    let mut everything: Vec<String> = moved_ports::stranded()
        .iter()
        .map(|p| p.describe())
        .collect();
    // Without the namespaces of recorded ports: a stranded port's is named
    // on its line above, a running run's is not to be removed.
    everything.extend(linerate_lab::leftovers(&moved_ports::recorded())?);
    if everything.is_empty() {
        outln!("nothing to remove");
        return Ok(Outcome::Passed);
    }
    outln!("'linerate lab down --all' would remove:");
    for item in &everything {
        outln!("  {item}");
    }
    bail!(BadInput,
        "nothing removed: name the lab with 'linerate lab down --lab-name NAME' (see 'linerate lab status'), or remove all {} listed with 'linerate lab down --all'",
        everything.len()
    )
}
