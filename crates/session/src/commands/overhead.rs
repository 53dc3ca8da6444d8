//! `linerate overhead`: the frame size on the wire after encapsulation and
//! what a frame rate costs in Mbps on each side of the tunnel. Arithmetic
//! only (crates/wire/src/overhead.rs); nothing is sent.

use crate::args::OverheadArgs;
use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use linerate_results::report;
use linerate_wire::overhead::{Auth, Cipher, Encapsulation, Mode, WireguardPadding};
use linerate_wire::FrameSize;
use serde::Serialize;

#[derive(Serialize)]
struct Row {
    inner_frame_size: u64,
    inner_l3_length: u64,
    outer_frame_size: u64,
    outer_l3_length: u64,
    added_bytes: u64,
    fps: f64,
    inner_mbps_l2: f64,
    outer_mbps_l2: f64,
    inner_mbps_l1: f64,
    outer_mbps_l1: f64,
}

/// An overhead calculation, checked: the encapsulation and the sizes
/// `linerate overhead` was given, as values.
#[derive(Debug, Clone)]
pub struct OverheadPlan {
    pub encapsulation: Encapsulation,
    /// The encapsulation as the table's heading says it.
    pub description: String,
    /// Frames per second, for the Mbps columns.
    pub fps: f64,
    /// The inner frames, one row each.
    pub sizes: Vec<FrameSize>,
    /// Print JSON instead of the table.
    pub json: bool,
}

impl OverheadPlan {
    /// Every value of `args` checked.
    pub fn from_args(args: &OverheadArgs) -> Result<OverheadPlan> {
        let encapsulation = encapsulation(args)?;
        if !(args.fps.is_finite() && args.fps > 0.0) {
            bail!(
                BadInput,
                "--fps {} is not a positive frame rate, e.g. 100000",
                args.fps
            );
        }
        let sizes: Vec<FrameSize> = match (&args.frame_size, &args.l3_length) {
            (_, Some(l3)) => l3
                .iter()
                .map(|&n| FrameSize::from_l3(n))
                .collect::<Result<_, _>>()?,
            (Some(f), None) => f
                .iter()
                .map(|&n| FrameSize::from_frame(n))
                .collect::<Result<_, _>>()?,
            (None, None) => bail!(BadInput, "give --frame-size N or --l3-length N"),
        };
        Ok(OverheadPlan {
            encapsulation,
            description: describe(args),
            fps: args.fps,
            sizes,
            json: args.json,
        })
    }
}

pub fn run(plan: OverheadPlan) -> Result<Outcome> {
    let OverheadPlan {
        encapsulation: enc,
        description,
        fps,
        sizes,
        json,
    } = plan;
    let mbps = |fps: f64, bytes: u64| fps * bytes as f64 * 8.0 / 1e6;
    let rows: Vec<Row> = sizes
        .iter()
        .map(|f| {
            let l3 = f.l3() as usize;
            let (inner, outer) = (f.frame() as u64, enc.outer_frame(l3) as u64);
            Row {
                inner_frame_size: inner,
                inner_l3_length: l3 as u64,
                outer_frame_size: outer,
                outer_l3_length: enc.outer_l3(l3) as u64,
                added_bytes: outer - inner,
                fps,
                inner_mbps_l2: mbps(fps, inner),
                outer_mbps_l2: mbps(fps, outer),
                inner_mbps_l1: mbps(fps, inner + 20),
                outer_mbps_l1: mbps(fps, outer + 20),
            }
        })
        .collect();
    if json {
        match rows.as_slice() {
            [one] => println!("{}", report::to_json(one)),
            many => println!("{}", report::to_json(&many)),
        }
        return Ok(Outcome::Passed);
    }
    println!("Encapsulation: {description}");
    println!(
        "inner frame  inner IP  outer frame  outer IP  added   Mbps (L2) inner -> outer at {} frames/s",
        report::thousands(fps.round() as u64)
    );
    for r in &rows {
        println!(
            "{:>11} {:>9} {:>12} {:>9} {:>6}   {:>10.1} -> {:.1}",
            r.inner_frame_size,
            r.inner_l3_length,
            r.outer_frame_size,
            r.outer_l3_length,
            r.added_bytes,
            r.inner_mbps_l2,
            r.outer_mbps_l2
        );
    }
    println!("Frame sizes include the 4-byte FCS; outer headers are IPv4.");
    Ok(Outcome::Passed)
}

fn encapsulation(args: &OverheadArgs) -> Result<Encapsulation> {
    let esp = match &args.esp {
        Some(c) => {
            let cipher = Cipher::parse(c).ok_or_else(|| {
                err!(BadInput, "--esp '{c}' is not a cipher linerate knows: use null, des, 3des, aes or aes-gcm")
            })?;
            let auth = match (&args.auth, cipher) {
                (Some(a), _) => parse_auth(a, "--auth")?,
                (None, Cipher::AesGcm) => Auth::None,
                (None, _) => bail!(
                    BadInput,
                    "--esp {c} needs --auth (md5, sha1, sha256, sha512, or none)"
                ),
            };
            if cipher.is_aead() && auth != Auth::None {
                bail!(BadInput,
                    "--esp {c} is an AEAD cipher that carries its own 16-byte ICV (RFC 4106), so it takes no --auth: leave out --auth {}",
                    args.auth.as_deref().unwrap_or_default()
                );
            }
            if cipher == Cipher::Null && auth == Auth::None {
                bail!(BadInput, "ESP with neither encryption nor integrity protects nothing: give --auth or another --esp");
            }
            Some((cipher, auth))
        }
        None => None,
    };
    let ah = args
        .ah
        .as_deref()
        .map(|a| parse_auth(a, "--ah"))
        .transpose()?;
    if ah == Some(Auth::None) {
        bail!(
            BadInput,
            "--ah none is not AH: give md5, sha1, sha256 or sha512"
        );
    }
    if args.nat_t && esp.is_none() {
        bail!(BadInput, "--nat-t encapsulates ESP in UDP: give --esp too");
    }
    let wireguard = match args.wireguard.as_deref() {
        None => None,
        Some("padded") => Some(WireguardPadding::To16),
        Some("unpadded") => Some(WireguardPadding::Unpadded),
        Some(other) => bail!(BadInput,
            "--wireguard '{other}' is not a padding linerate knows: use padded (to 16 bytes, the kernel's; the default) or unpadded (boringtun)"
        ),
    };
    Ok(Encapsulation {
        esp,
        ah,
        mode: if args.mode == "transport" {
            Mode::Transport
        } else {
            Mode::Tunnel
        },
        nat_t: args.nat_t,
        wireguard,
        gre: args.gre,
        vxlan: args.vxlan,
        l2tp: args.l2tp,
        pppoe: args.pppoe,
        vlan: args.vlan,
    })
}

fn parse_auth(text: &str, option: &str) -> Result<Auth> {
    Auth::parse(text).ok_or_else(|| {
        err!(BadInput, "{option} '{text}' is not an integrity algorithm linerate knows: use md5, sha1, sha256, sha512 or none")
    })
}

fn describe(args: &OverheadArgs) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &args.esp {
        let auth = args.auth.as_deref().unwrap_or("none");
        parts.push(format!("ESP {c}/{auth} ({})", args.mode));
    }
    if let Some(a) = &args.ah {
        parts.push(format!("AH {a} ({})", args.mode));
    }
    match args.wireguard.as_deref() {
        Some("unpadded") => parts.push("WireGuard (unpadded)".to_string()),
        Some(_) => parts.push("WireGuard".to_string()),
        None => {}
    }
    for (on, name) in [
        (args.nat_t, "NAT-T"),
        (args.gre, "GRE"),
        (args.vxlan, "VXLAN"),
        (args.l2tp, "L2TP"),
        (args.pppoe, "PPPoE"),
        (args.vlan, "802.1Q"),
    ] {
        if on {
            parts.push(name.to_string());
        }
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(" + ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn plan(args: &str) -> Result<OverheadPlan> {
        let argv = format!("linerate overhead {args}");
        let Command::Overhead(a) = Cli::try_parse_from(argv.split_whitespace())?.command else {
            unreachable!()
        };
        OverheadPlan::from_args(&a)
    }

    #[test]
    fn an_overhead_plan_holds_every_value_checked() {
        let p =
            plan("--frame-size 64,1518 --esp aes --auth sha1 --nat-t --fps 1000 --json").unwrap();
        assert_eq!(
            p.sizes.iter().map(|f| f.frame()).collect::<Vec<_>>(),
            [64, 1518]
        );
        assert_eq!(p.encapsulation.esp, Some((Cipher::AesCbc, Auth::Sha1)));
        assert!(p.encapsulation.nat_t);
        assert_eq!(p.fps, 1000.0);
        assert!(p.json);
        assert_eq!(p.description, "ESP aes/sha1 (tunnel) + NAT-T");
        let p = plan("--l3-length 40 --vxlan").unwrap();
        assert_eq!(p.sizes[0].frame(), 64);
        assert!(p.encapsulation.vxlan);
        for (args, says) in [
            ("--frame-size 64 --esp rot13", "--esp"),
            ("--frame-size 64 --esp aes", "--auth"),
            ("--frame-size 64 --ah none", "--ah"),
            ("--frame-size 64 --nat-t", "--nat-t"),
            ("--frame-size 64 --wireguard sideways", "--wireguard"),
            ("--frame-size 64 --fps 0", "--fps"),
            ("--frame-size 20", "20"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::BadInput, "{args}: {e:?}");
            assert!(crate::exit::one_line(&e).contains(says), "{args}: {e}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::test_support::{config, text};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(config())]

        /// Any text: no panic; what is accepted is a name of an algorithm,
        /// in any case, and each algorithm's name parses back to it.
        #[test]
        fn auth_names(t in prop_oneof![text(), "(?i)(none|md5|sha1|sha256|sha512)"]) {
            match parse_auth(&t, "--auth") {
                Ok(a) => prop_assert!(
                    ["none", "md5", "sha1", "sha256", "sha512"].contains(&t.to_ascii_lowercase().as_str()),
                    "{t:?} -> {a:?}"
                ),
                Err(e) => prop_assert!(e.to_string().starts_with("--auth '"), "{e}"),
            }
        }
    }
}
