//! `tunnel:wireguard`: the kernel's WireGuard where the kernel has it,
//! otherwise boringtun (Cloudflare's user-space WireGuard, crates.io
//! `boringtun-cli`) on a TUN device in each DUT namespace, configured
//! with `wg` (wireguard-tools) either way. The data path says which ran.
//!
//! boringtun's control socket is /var/run/wireguard/<ifname>.sock, in the
//! file system all namespaces share, so each DUT's interface gets a name
//! unique to the lab (`w<lab>1`, `w<lab>2`); the kernel path uses the same.
//! Both names are in `names.rs`, where `lab down` finds them to remove the
//! sockets of a boringtun that was killed.

use super::tools::{pin, private_file, unavailable, Daemons};
use crate::names::{boringtun_socket, wireguard_ifnames};
use crate::{netns, LabError};
use linerate_helper::DieWithParent;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PORT: &str = "51820";

/// Where boringtun is: $LINERATE_BORINGTUN, else `boringtun-cli` on the
/// PATH or in ~/.cargo/bin.
fn boringtun() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LINERATE_BORINGTUN") {
        return Some(PathBuf::from(p));
    }
    netns::find_tool("boringtun-cli").or_else(|| {
        let home = std::env::var_os("HOME")?;
        let p = PathBuf::from(home).join(".cargo/bin/boringtun-cli");
        p.exists().then_some(p)
    })
}

/// `wg genkey` and `wg pubkey`: a key pair.
fn key_pair(wg: &std::path::Path) -> Result<(String, String), LabError> {
    let private = netns::run(wg, &["genkey"])?.trim().to_string();
    let mut child = Command::new(wg)
        .arg("pubkey")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .die_with_parent()
        .spawn()
        .map_err(|e| LabError::Spawn {
            command: "wg pubkey".into(),
            error: e.to_string(),
        })?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(private.as_bytes())
        .map_err(|e| LabError::Spawn {
            command: "wg pubkey".into(),
            error: e.to_string(),
        })?;
    let out = child.wait_with_output().map_err(|e| LabError::Spawn {
        command: "wg pubkey".into(),
        error: e.to_string(),
    })?;
    Ok((
        private,
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// Creates the WireGuard interface `ifname` in `ns`: kernel if it can,
/// else boringtun. Returns whether it is the kernel's.
fn interface(
    ns: &str,
    ifname: &str,
    cpus: &[usize],
    daemons: &mut Daemons,
) -> Result<bool, LabError> {
    match netns::ip(&["-n", ns, "link", "add", ifname, "type", "wireguard"]) {
        Ok(_) => return Ok(true),
        Err(LabError::Command { stderr, .. }) if stderr.contains("Unknown device type") => {}
        Err(e) => return Err(e),
    }
    let Some(bin) = boringtun() else {
        return Err(unavailable(
            "WireGuard cannot be built here: the kernel has no wireguard module and boringtun-cli (the user-space fallback) is not installed; install it with 'cargo install boringtun-cli' (see scripts/setup.sh)",
        ));
    };
    let socket = boringtun_socket(ifname);
    let bin_text = bin.to_string_lossy().into_owned();
    let child = Command::new(netns::ip_path()?)
        .args([
            "netns",
            "exec",
            ns,
            &bin_text,
            ifname,
            "--foreground",
            "--disable-drop-privileges",
            "--threads",
            "1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .die_with_parent()
        .spawn()
        .map_err(|e| LabError::Spawn {
            command: format!("{bin_text} {ifname}"),
            error: e.to_string(),
        })?;
    // `ip netns exec` execs boringtun in the same process: pinning it now
    // keeps boringtun (and the threads it starts) on the DUT's CPUs.
    pin(child.id(), cpus);
    daemons.push(child, socket.clone());
    let start = Instant::now();
    while !socket.exists() {
        if start.elapsed() > Duration::from_secs(5) {
            return Err(unavailable(&format!(
                "boringtun did not start in namespace {ns} (no {} after 5 s)",
                socket.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(false)
}

/// Builds WireGuard between the two DUTs over the WAN link. Returns the
/// data path, the check and the daemons to keep running.
pub(crate) fn build(
    lab_name: &str,
    dut1: &str,
    dut2: &str,
    wan: [&str; 2],
    inner: [&str; 2],
    cpus: &[usize],
) -> Result<(String, String, [String; 2], Daemons), LabError> {
    let wg = netns::find_tool("wg").ok_or_else(|| {
        unavailable(
            "WireGuard needs the 'wg' tool: install it with 'apt-get install wireguard-tools'",
        )
    })?;
    let names = wireguard_ifnames(lab_name);
    let mut daemons = Daemons::default();
    let mut kernel = true;
    for (ns, name) in [(dut1, &names[0]), (dut2, &names[1])] {
        kernel &= interface(ns, name, cpus, &mut daemons)?;
    }
    let keys = [key_pair(&wg)?, key_pair(&wg)?];
    let wg_text = wg.to_string_lossy().into_owned();
    for (i, ns) in [dut1, dut2].into_iter().enumerate() {
        let other = 1 - i;
        // The private key: in a private directory, 0600, gone once read.
        let (key_dir, key_file) = private_file(&format!("wg{i}.key"), &keys[i].0)?;
        let key_text = key_file.to_string_lossy().into_owned();
        let endpoint = format!("{}:{PORT}", wan[other]);
        let result = netns::exec_in(
            ns,
            &[
                &wg_text,
                "set",
                &names[i],
                "listen-port",
                PORT,
                "private-key",
                &key_text,
                "peer",
                &keys[other].1,
                "endpoint",
                &endpoint,
                "allowed-ips",
                "0.0.0.0/0",
            ],
        );
        drop(key_dir);
        result?;
        netns::ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/30", inner[i]),
            "dev",
            &names[i],
        ])?;
        netns::ip(&["-n", ns, "link", "set", &names[i], "mtu", "8920", "up"])?;
    }
    let shown = netns::exec_in(dut1, &[&wg_text, "show", &names[0], "peers"])?;
    if shown.trim() != keys[1].1 {
        return Err(LabError::NotInEffect {
            scenario: String::new(),
            detail: format!("wg show {} lists peers '{}'", names[0], shown.trim()),
        });
    }
    let data_path = if kernel {
        "kernel WireGuard over a veth WAN link".to_string()
    } else {
        "user-space WireGuard: boringtun on a TUN device in each DUT (this kernel has no wireguard module)".to_string()
    };
    Ok((
        data_path,
        format!(
            "WireGuard {} <-> {} port {PORT}, peer keys read back with wg show",
            wan[0], wan[1]
        ),
        names,
        daemons,
    ))
}
