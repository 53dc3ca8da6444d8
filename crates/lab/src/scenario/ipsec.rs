//! `tunnel:ipsec[:suite]`: IKEv2 between the two DUTs with strongSwan's
//! charon (Debian: strongswan-charon, strongswan-swanctl,
//! libcharon-extra-plugins), pre-shared key, tunnel mode, the test networks
//! as traffic selectors.
//!
//! The data path: this kernel has no ESP (CONFIG_INET_ESP is not set), so
//! charon runs with the kernel-libipsec plugin: ESP in user space, inside
//! charon, for packets the kernel routes into a TUN device (`ipsec0`,
//! routing table 220), sent UDP-encapsulated on port 4500. The report says
//! so. charon is pinned to the DUT CPU, and its time is user time.
//!
//! One charon per DUT namespace, each in a private directory of its own
//! (`/run/linerate/ipsec-<namespace>.<random>`, 0700; see linerate-helper)
//! holding its strongswan.conf, swanctl.conf with the pre-shared key (a
//! random one per build, files 0600: root only) and its vici socket. That
//! directory is charon's /run (a bind mount in the mount namespace `ip
//! netns exec` makes), so its PID file lands there too: two daemons and
//! other labs' never meet, and everything charon writes goes when the
//! directory does: when the scenario is dropped, or at `lab down` after a
//! run that was killed. charon gets SIGKILL when linerate ends.

use super::tools::{pin, unavailable, Daemons};
use crate::{netns, LabError};
use linerate_helper::{DieWithParent, PrivateDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The ESP suites the lab builds (those of the LANCOM and Cisco reports
/// that libipsec has; it has no AH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpsecSuite {
    /// AES-CBC-128 with HMAC-SHA-256-128 (LANCOM "AES-CBC SHA256").
    AesCbcSha256,
    /// AES-GCM-128 with a 16-byte ICV (LANCOM "AES-GCM").
    AesGcm,
    /// ESP-NULL with HMAC-SHA1-96 (Cisco "ESP-NULL"): integrity only.
    NullSha1,
}

impl IpsecSuite {
    pub fn parse(text: &str) -> Option<IpsecSuite> {
        match text {
            "" | "aes-cbc-sha256" | "aes-sha256" => Some(IpsecSuite::AesCbcSha256),
            "aes-gcm" | "gcm" => Some(IpsecSuite::AesGcm),
            "null" | "esp-null" | "null-sha1" => Some(IpsecSuite::NullSha1),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            IpsecSuite::AesCbcSha256 => "ESP AES-CBC-128/HMAC-SHA256",
            IpsecSuite::AesGcm => "ESP AES-GCM-128",
            IpsecSuite::NullSha1 => "ESP-NULL/HMAC-SHA1",
        }
    }

    /// strongSwan's proposal string.
    fn proposal(self) -> &'static str {
        match self {
            IpsecSuite::AesCbcSha256 => "aes128-sha256",
            IpsecSuite::AesGcm => "aes128gcm16",
            IpsecSuite::NullSha1 => "null-sha1",
        }
    }
}

/// Where Debian installs charon.
const CHARON: [&str; 2] = ["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon"];
const LIBIPSEC_PLUGIN: [&str; 2] = [
    "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so",
    "/usr/libexec/ipsec/plugins/libstrongswan-kernel-libipsec.so",
];
/// The plugins charon loads: crypto, IKE, libipsec's data path, vici.
const PLUGINS: &str = "random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey \
kernel-libipsec kernel-netlink socket-default vici";
/// The TUN device kernel-libipsec makes.
pub(crate) const TUN: &str = "ipsec0";
/// The TUN's MTU: the lab's largest test frames travel without fragments.
const TUN_MTU: u32 = 9000;

fn first_existing(paths: &[&'static str]) -> Option<&'static str> {
    paths.iter().copied().find(|p| Path::new(p).exists())
}

/// strongSwan's programs on this machine: charon (with its kernel-libipsec
/// plugin) and swanctl.
pub(crate) struct Strongswan {
    charon: &'static str,
    swanctl: PathBuf,
}

impl Strongswan {
    /// Finds charon, the kernel-libipsec plugin and swanctl, or says how to
    /// install them.
    pub(crate) fn find() -> Result<Strongswan, LabError> {
        let charon = first_existing(&CHARON).ok_or_else(|| {
            unavailable("IPsec needs strongSwan's charon: install it with 'apt-get install strongswan-charon strongswan-swanctl libcharon-extra-plugins'")
        })?;
        if first_existing(&LIBIPSEC_PLUGIN).is_none() {
            return Err(unavailable("IPsec needs strongSwan's kernel-libipsec plugin (this kernel has no ESP): install it with 'apt-get install libcharon-extra-plugins'"));
        }
        let swanctl = netns::find_tool("swanctl").ok_or_else(|| {
            unavailable("IPsec needs swanctl: install it with 'apt-get install strongswan-swanctl'")
        })?;
        Ok(Strongswan { charon, swanctl })
    }

    /// Starts charon in namespace `ns` with `private` as its /run, where
    /// its strongswan.conf must already be: pinned to `cpus`, kept (with
    /// the directory) in `daemons`. Returns its vici socket (as linerate
    /// sees it) once charon has opened it.
    pub(crate) fn start(
        &self,
        ns: &str,
        private: PrivateDir,
        cpus: &[usize],
        daemons: &mut Daemons,
    ) -> Result<PathBuf, LabError> {
        let dir = private.path().to_path_buf();
        // `ip netns exec` gives the command a mount namespace of its own:
        // there the private directory becomes /run, for this charon only.
        // Paths travel as arguments, never spliced into the script.
        let script = r#"mount --bind "$1" /run && STRONGSWAN_CONF=/run/strongswan.conf exec "$2""#;
        let dir_text = path_text(&dir);
        let child = Command::new(netns::ip_path()?)
            .args([
                "netns",
                "exec",
                ns,
                "sh",
                "-c",
                script,
                "sh",
                &dir_text,
                self.charon,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .die_with_parent()
            .spawn()
            .map_err(|e| LabError::Spawn {
                command: format!("{} in {ns}", self.charon),
                error: e.to_string(),
            })?;
        // sh execs charon: the same process, pinned to the DUT CPU.
        pin(child.id(), cpus);
        daemons.push_with_dir(child, private);
        let socket = dir.join("charon.vici");
        wait_for(&socket, ns)?;
        Ok(socket)
    }

    /// Runs swanctl; returns its output.
    pub(crate) fn swanctl(&self, args: &[&str]) -> Result<String, LabError> {
        netns::run(&self.swanctl, args)
    }
}

/// swanctl's `--uri` for vici socket `socket`.
pub(crate) fn uri(socket: &Path) -> String {
    format!("unix://{}", socket.display())
}

/// Builds the IPsec tunnel between `dut1` (WAN address wan[0], LAN
/// 198.18.0.0/24) and `dut2` (wan[1], 198.19.0.0/24). Returns the data
/// path, the check and the daemons.
pub(crate) fn build(
    dut1: &str,
    dut2: &str,
    wan: [&str; 2],
    suite: IpsecSuite,
    cpus: &[usize],
) -> Result<(String, String, Daemons), LabError> {
    let strongswan = Strongswan::find()?;
    let lans = ["198.18.0.0/24", "198.19.0.0/24"];
    let ids = ["dut1", "dut2"];
    // Both ends share it; nobody else may know it.
    let psk = linerate_helper::random_hex(32).map_err(|e| LabError::Spawn {
        command: "getrandom (the pre-shared key)".into(),
        error: e.to_string(),
    })?;
    let mut daemons = Daemons::default();
    let mut sockets = Vec::new();
    for (i, ns) in [dut1, dut2].into_iter().enumerate() {
        let other = 1 - i;
        let private = PrivateDir::new(&format!("ipsec-{ns}")).map_err(|e| LabError::Spawn {
            command: format!("making charon's directory in {}", linerate_helper::RUN_DIR),
            error: e.to_string(),
        })?;
        let dir = private.path().to_path_buf();
        let conf = format!(
            "charon {{\n  load = {PLUGINS}\n  install_virtual_ip = no\n  plugins {{\n    vici {{\n      socket = unix:///run/charon.vici\n    }}\n    kernel-libipsec {{\n      mtu = {TUN_MTU}\n    }}\n  }}\n}}\n"
        );
        let swanctl_conf = format!(
            "connections {{\n  lr {{\n    version = 2\n    local_addrs = {local}\n    remote_addrs = {remote}\n    proposals = aes128-sha256-modp2048\n    local {{\n      auth = psk\n      id = {id}\n    }}\n    remote {{\n      auth = psk\n      id = {peer}\n    }}\n    children {{\n      net {{\n        local_ts = {lan}\n        remote_ts = {rlan}\n        esp_proposals = {esp}\n        mode = tunnel\n      }}\n    }}\n  }}\n}}\nsecrets {{\n  ike-lab {{\n    id-1 = dut1\n    id-2 = dut2\n    secret = \"{psk}\"\n  }}\n}}\n",
            local = wan[i],
            remote = wan[other],
            id = ids[i],
            peer = ids[other],
            lan = lans[i],
            rlan = lans[other],
            esp = suite.proposal(),
        );
        for (name, text) in [("strongswan.conf", conf), ("swanctl.conf", swanctl_conf)] {
            private
                .write(name, text.as_bytes())
                .map_err(|e| io_error(&dir, e))?;
        }
        let socket = strongswan.start(ns, private, cpus, &mut daemons)?;
        let uri = uri(&socket);
        let file = dir.join("swanctl.conf");
        strongswan.swanctl(&["--load-all", "--file", &path_text(&file), "--uri", &uri])?;
        sockets.push(uri);
    }
    strongswan.swanctl(&[
        "--initiate",
        "--child",
        "net",
        "--timeout",
        "15",
        "--uri",
        &sockets[0],
    ])?;
    let sas = strongswan.swanctl(&["--list-sas", "--uri", &sockets[0]])?;
    if !sas.contains("INSTALLED") {
        return Err(LabError::NotInEffect {
            scenario: String::new(),
            detail: format!("no CHILD_SA installed after IKE: {}", sas.trim()),
        });
    }
    let encap = if sas.contains("in-UDP") {
        "UDP-encapsulated (port 4500)"
    } else {
        "raw ESP"
    };
    // kernel-libipsec routes the far test network into its TUN (table 220).
    for (ns, far) in [(dut1, "198.19.0.2"), (dut2, "198.18.0.2")] {
        let route = netns::ip_json(&["-n", ns, "route", "get", far])?;
        if route[0]["dev"].as_str() != Some(TUN) {
            return Err(LabError::NotInEffect {
                scenario: String::new(),
                detail: format!("{ns} routes {far} via {}, not {TUN}", route[0]["dev"]),
            });
        }
    }
    Ok((
        format!(
            "user-space IPsec: strongSwan charon with kernel-libipsec, ESP in user space over the {TUN} TUN device, {encap} (this kernel has no ESP)"
        ),
        format!(
            "IKEv2 SA established, CHILD_SA {} installed (swanctl --list-sas), {TUN} routes the far test network in both DUTs",
            suite.label()
        ),
        daemons,
    ))
}

pub(crate) fn path_text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

pub(crate) fn io_error(dir: &Path, e: std::io::Error) -> LabError {
    LabError::Spawn {
        command: format!("writing {}", dir.display()),
        error: e.to_string(),
    }
}

/// Waits until charon's vici socket exists.
fn wait_for(socket: &Path, ns: &str) -> Result<(), LabError> {
    let start = Instant::now();
    while !socket.exists() {
        if start.elapsed() > Duration::from_secs(10) {
            return Err(unavailable(&format!(
                "strongSwan's charon did not start in namespace {ns} (no {} after 10 s)",
                socket.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_parse_and_name_their_proposals() {
        assert_eq!(IpsecSuite::parse(""), Some(IpsecSuite::AesCbcSha256));
        assert_eq!(IpsecSuite::parse("aes-gcm"), Some(IpsecSuite::AesGcm));
        assert_eq!(IpsecSuite::parse("null"), Some(IpsecSuite::NullSha1));
        assert_eq!(IpsecSuite::parse("ah"), None);
        assert_eq!(IpsecSuite::AesGcm.proposal(), "aes128gcm16");
    }
}
