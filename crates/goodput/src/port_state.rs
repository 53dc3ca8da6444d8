//! A port's state in linerate's namespace, read before a run moves the
//! port away and put back after it returns: up or down, MTU, its bridge or
//! bond, addresses, routes, sysctls (what the kernel drops when a port
//! changes namespace). [`crate::hosts`] moves ports and
//! [`crate::moved_ports`] writes this state down for a killed run; both
//! take it from here.

use crate::netns::{ip_in, read_sysctl, write_sysctl};
use crate::GoodputError;

/// What a port had in linerate's namespace before a run moved it away:
/// what the kernel drops when a port changes namespace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PortState {
    pub ifname: String,
    /// Administratively up (`ip link set up`).
    pub up: bool,
    pub mtu: u64,
    /// The bridge, bond or VRF it was a port of (a move takes it out).
    pub master: Option<String>,
    /// `ip addr add` arguments (without `dev IF`) of its addresses, in
    /// order; addresses the kernel or a daemon makes (dynamic ones) are
    /// left to them.
    pub addresses: Vec<Vec<String>>,
    /// `ip route add` arguments (family first, without `dev IF`) of the
    /// routes through it that are not the kernel's own.
    pub routes: Vec<Vec<String>>,
    /// Its sysctls (net/ipv4/conf/IF and net/ipv6/conf/IF): file, value.
    pub sysctls: Vec<(String, String)>,
}

impl PortState {
    /// Reads the state of `ifname` in linerate's own namespace.
    pub fn read(ifname: &str) -> Result<PortState, GoodputError> {
        let json = |args: &[&str]| -> Result<serde_json::Value, GoodputError> {
            let out = ip_in(None, args)?;
            serde_json::from_str(out.trim()).map_err(|e| {
                GoodputError::Setup(format!("unexpected output of 'ip {}': {e}", args.join(" ")))
            })
        };
        let link = json(&["-j", "addr", "show", "dev", ifname])?;
        let link = &link[0];
        let flags: Vec<&str> = link["flags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .collect();
        let addresses = link["addr_info"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| address_args(a, ifname))
            .collect();
        let mut routes = Vec::new();
        for family in ["-4", "-6"] {
            let list = json(&[family, "-j", "route", "show", "table", "all", "dev", ifname])?;
            routes.extend(
                list.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| route_args(r, family)),
            );
        }
        Ok(PortState {
            ifname: ifname.to_string(),
            up: flags.contains(&"UP"),
            mtu: link["mtu"].as_u64().unwrap_or(0),
            master: link["master"].as_str().map(str::to_string),
            addresses,
            routes,
            sysctls: port_sysctls(ifname),
        })
    }

    /// Puts the state back on the port (moved back into linerate's
    /// namespace). Every step is tried; the first failure is returned.
    pub(crate) fn restore(&self) -> Result<(), GoodputError> {
        let dev = self.ifname.as_str();
        let mut first = None;
        let mut note = |r: Result<(), GoodputError>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        // Sysctls first: disable_ipv6 and addr_gen_mode decide what the
        // kernel adds when the port comes up.
        for (path, value) in &self.sysctls {
            if read_sysctl(None, path).is_ok_and(|now| now != *value) {
                note(write_sysctl(None, path, value));
            }
        }
        let mtu = self.mtu.to_string();
        note(ip_in(None, &["link", "set", "dev", dev, "mtu", &mtu]).map(|_| ()));
        if let Some(master) = &self.master {
            note(ip_in(None, &["link", "set", "dev", dev, "master", master]).map(|_| ()));
        }
        let state = if self.up { "up" } else { "down" };
        note(ip_in(None, &["link", "set", "dev", dev, state]).map(|_| ()));
        for (cmd, list) in [("addr", &self.addresses), ("route", &self.routes)] {
            for args in list {
                let mut full: Vec<&str> = Vec::new();
                // `ip -6 route add ...`: the family goes before the object.
                let rest = match args.first().map(String::as_str) {
                    Some(f @ ("-4" | "-6")) => {
                        full.push(f);
                        &args[1..]
                    }
                    _ => &args[..],
                };
                full.extend([cmd, "add"]);
                full.extend(rest.iter().map(String::as_str));
                full.extend(["dev", dev]);
                match ip_in(None, &full) {
                    // Made again by the kernel as the port came up.
                    Err(e)
                        if ["File exists", "address already assigned"]
                            .iter()
                            .any(|m| e.to_string().contains(m)) => {}
                    other => note(other.map(|_| ())),
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// `ip addr add` arguments for one entry of `ip -j addr`'s `addr_info`,
/// or None for a dynamic address (SLAAC, DHCP), which its daemon or the
/// kernel makes again.
fn address_args(a: &serde_json::Value, ifname: &str) -> Option<Vec<String>> {
    let flag = |k: &str| a[k].as_bool() == Some(true);
    if flag("dynamic") {
        return None;
    }
    let local = a["local"].as_str()?;
    let scope = a["scope"].as_str().unwrap_or("global");
    // (An IPv6 link-local address the kernel generates when the port comes
    // up is there again by then: adding it once more is a no-op.)
    let mut v = vec![format!("{local}/{}", a["prefixlen"].as_u64()?)];
    if let Some(peer) = a["address"].as_str() {
        v.extend(["peer".into(), peer.into()]);
    }
    if let Some(b) = a["broadcast"].as_str() {
        v.extend(["broadcast".into(), b.into()]);
    }
    if scope != "global" {
        v.extend(["scope".into(), scope.into()]);
    }
    if let Some(label) = a["label"].as_str().filter(|l| *l != ifname) {
        v.extend(["label".into(), label.into()]);
    }
    for f in ["noprefixroute", "nodad", "home", "mngtmpaddr"] {
        if flag(f) {
            v.push(f.into());
        }
    }
    Some(v)
}

/// `ip route add` arguments (`family` first) for one entry of `ip -j
/// route show table all dev IF`, or None for a route the kernel makes
/// itself (for an address, local, broadcast, multicast) or one a router
/// advertisement gave.
fn route_args(r: &serde_json::Value, family: &str) -> Option<Vec<String>> {
    let proto = r["protocol"].as_str().unwrap_or("boot");
    if proto == "kernel" || proto == "ra" {
        return None;
    }
    let kind = r["type"].as_str().unwrap_or("unicast");
    let mut v = vec![family.to_string()];
    if kind != "unicast" {
        v.push(kind.into());
    }
    v.push(r["dst"].as_str()?.into());
    if let Some(gw) = r["gateway"].as_str() {
        v.extend(["via".into(), gw.into()]);
    }
    if let Some(table) = r["table"].as_str().filter(|t| *t != "main") {
        v.extend(["table".into(), table.into()]);
    }
    if proto != "boot" {
        v.extend(["proto".into(), proto.into()]);
    }
    if let Some(scope) = r["scope"].as_str() {
        v.extend(["scope".into(), scope.into()]);
    }
    if let Some(src) = r["prefsrc"].as_str() {
        v.extend(["src".into(), src.into()]);
    }
    if let Some(metric) = r["metric"].as_u64() {
        v.extend(["metric".into(), metric.to_string()]);
    }
    if r["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "onlink"))
    {
        v.push("onlink".into());
    }
    Some(v)
}

/// The writable sysctls of `ifname` (net/ipv4/conf/IF, net/ipv6/conf/IF)
/// in linerate's namespace, with their values; unreadable ones (IPv6's
/// stable_secret when unset) are left out.
fn port_sysctls(ifname: &str) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    for family in ["ipv4", "ipv6"] {
        let dir = format!("/proc/sys/net/{family}/conf/{ifname}");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .flatten()
            .filter(|e| {
                e.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o200 != 0)
            })
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            let path = f.to_string_lossy().into_owned();
            if let Ok(value) = read_sysctl(None, &path) {
                out.push((path, value));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_s_addresses_and_routes_become_the_commands_that_make_them() {
        let addrs: serde_json::Value = serde_json::from_str(
            r#"[{"family":"inet","local":"10.99.0.1","prefixlen":24,"broadcast":"10.99.0.255","scope":"global","label":"ta"},
                {"family":"inet","local":"10.99.1.1","prefixlen":24,"scope":"global","label":"ta:one","noprefixroute":true},
                {"family":"inet6","local":"2001:db8::5","prefixlen":64,"scope":"global","dynamic":true,"mngtmpaddr":true},
                {"family":"inet6","local":"fe80::1","prefixlen":64,"scope":"link"}]"#,
        )
        .unwrap();
        let got: Vec<Vec<String>> = addrs
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| address_args(a, "ta"))
            .collect();
        let want: Vec<Vec<&str>> = vec![
            vec!["10.99.0.1/24", "broadcast", "10.99.0.255"],
            vec!["10.99.1.1/24", "label", "ta:one", "noprefixroute"],
            vec!["fe80::1/64", "scope", "link"],
        ];
        assert_eq!(got, want);
        let routes: serde_json::Value = serde_json::from_str(
            r#"[{"dst":"10.98.0.0/16","gateway":"10.99.0.254","flags":["linkdown"]},
                {"dst":"10.99.0.0/24","protocol":"kernel","scope":"link","prefsrc":"10.99.0.1","flags":[]},
                {"type":"local","dst":"10.99.0.1","table":"local","protocol":"kernel","scope":"host","flags":[]},
                {"dst":"default","gateway":"10.99.0.1","protocol":"static","metric":100,"table":"7","flags":["onlink"]},
                {"dst":"2001:db8::/64","protocol":"ra","metric":1024,"flags":[]}]"#,
        )
        .unwrap();
        let got: Vec<Vec<String>> = routes
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| route_args(r, "-4"))
            .collect();
        let want: Vec<Vec<&str>> = vec![
            vec!["-4", "10.98.0.0/16", "via", "10.99.0.254"],
            vec![
                "-4",
                "default",
                "via",
                "10.99.0.1",
                "table",
                "7",
                "proto",
                "static",
                "metric",
                "100",
                "onlink",
            ],
        ];
        assert_eq!(got, want);
    }
}
