//! `OverheadPlan` from the command line's options.

use crate::args::OverheadArgs;
use linerate_session::commands::overhead::parse_auth;
use linerate_session::error::Result;
use linerate_session::plan::OverheadPlan;
use linerate_session::{bail, err};
use linerate_wire::overhead::{Auth, Cipher, Encapsulation, Mode, WireguardPadding};
use linerate_wire::FrameSize;

impl OverheadArgs {
    /// Every value of `args` checked.
    pub fn plan(&self) -> Result<OverheadPlan> {
        let args = self;
        super::unused::refuse(&[super::unused::Rule::new(
            "--mode",
            args.mode.is_some(),
            args.esp.is_some() || args.ah.is_some(),
            "is the mode of IPsec (--esp or --ah), and none is given: add --esp or --ah, or leave --mode out",
        )])?;
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

fn encapsulation(args: &OverheadArgs) -> Result<Encapsulation> {
    let esp = match &args.esp {
        Some(c) if Cipher::parse(c).is_none() && linerate_ike::EspSuite::parse(c).is_ok() => {
            // A proposal as --ipsec negotiates it: cipher and integrity.
            if let Some(a) = &args.auth {
                bail!(
                    BadInput,
                    "--esp {c} names its integrity already: leave out --auth {a}"
                );
            }
            let suite =
                linerate_ike::EspSuite::parse(c).map_err(|e| err!(BadInput, "--esp: {e}"))?;
            Some(suite_parts(suite))
        }
        Some(c) => {
            let cipher = Cipher::parse(c).ok_or_else(|| {
                err!(BadInput, "--esp '{c}' is not a cipher linerate knows: use null, des, 3des, aes or aes-gcm, or a proposal such as aes256gcm16 or aes128-sha256")
            })?;
            let auth = match (&args.auth, cipher) {
                (Some(a), _) => parse_auth(a, "--auth")?,
                (None, Cipher::AesGcm) => Auth::None,
                (None, _) => bail!(
                    BadInput,
                    "--esp {c} needs --auth (md5, sha1, sha256, sha384, sha512, or none)"
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
    let nat_t = nat_t(args)?;
    if nat_t && esp.is_none() {
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
        mode: if args.mode.as_deref() == Some("transport") {
            Mode::Transport
        } else {
            Mode::Tunnel
        },
        nat_t,
        wireguard,
        gre: args.gre,
        vxlan: args.vxlan,
        l2tp: args.l2tp,
        pppoe: args.pppoe,
        vlan: args.vlan,
    })
}

/// ESP in UDP: `--nat-t`, or `--esp-encap udp` (`raw`: not; `auto` has
/// no meaning without a gateway's NAT detection).
fn nat_t(args: &OverheadArgs) -> Result<bool> {
    let udp = match args.esp_encap.as_deref() {
        None => return Ok(args.nat_t),
        Some("udp") => true,
        Some("raw") => false,
        Some(other) => bail!(
            BadInput,
            "--esp-encap {other} is not an encapsulation here: use udp (ESP in UDP 4500) or raw (IP protocol 50)"
        ),
    };
    if args.esp.is_none() {
        bail!(BadInput, "--esp-encap says how ESP travels: give --esp too");
    }
    if args.nat_t && !udp {
        bail!(
            BadInput,
            "--nat-t is ESP in UDP and --esp-encap raw is not: give one of them"
        );
    }
    Ok(udp)
}

/// The cipher and integrity of an ESP proposal; the key length changes
/// no size.
/// `--mode`, tunnel unless given.
fn mode_text(args: &OverheadArgs) -> &str {
    args.mode.as_deref().unwrap_or("tunnel")
}

fn suite_parts(suite: linerate_ike::EspSuite) -> (Cipher, Auth) {
    use linerate_ike::{EspCipher, EspIntegrity};
    let cipher = match suite.cipher {
        EspCipher::AesGcm16 { .. } => Cipher::AesGcm,
        EspCipher::AesCbc { .. } => Cipher::AesCbc,
        EspCipher::TripleDesCbc => Cipher::TripleDes,
        EspCipher::DesCbc => Cipher::Des,
        EspCipher::Null => Cipher::Null,
    };
    let auth = match suite.integrity {
        EspIntegrity::Aead => Auth::None,
        EspIntegrity::Md5 => Auth::Md5,
        EspIntegrity::Sha1 => Auth::Sha1,
        EspIntegrity::Sha256 => Auth::Sha256,
        EspIntegrity::Sha384 => Auth::Sha384,
        EspIntegrity::Sha512 => Auth::Sha512,
    };
    (cipher, auth)
}

fn describe(args: &OverheadArgs) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &args.esp {
        if Cipher::parse(c).is_none() {
            // A proposal: it names its integrity.
            parts.push(format!("ESP {c} ({})", mode_text(args)));
        } else {
            let auth = args.auth.as_deref().unwrap_or("none");
            parts.push(format!("ESP {c}/{auth} ({})", mode_text(args)));
        }
    }
    if let Some(a) = &args.ah {
        parts.push(format!("AH {a} ({})", mode_text(args)));
    }
    match args.wireguard.as_deref() {
        Some("unpadded") => parts.push("WireGuard (unpadded)".to_string()),
        Some(_) => parts.push("WireGuard".to_string()),
        None => {}
    }
    let udp = args.nat_t || args.esp_encap.as_deref() == Some("udp");
    for (on, name) in [
        (udp, "NAT-T"),
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
    use crate::args::Command;

    fn plan(args: &str) -> Result<OverheadPlan> {
        let argv = format!("linerate overhead {args}");
        let Command::Overhead(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    /// `--esp` takes the proposals `--ipsec` negotiates, and its sizes are
    /// those the ESP data path really sends (linerate_esp's own count).
    #[test]
    fn esp_proposals_give_the_sizes_the_data_path_sends() {
        for suite in linerate_ike::EspSuite::ALL {
            let p = plan(&format!("--frame-size 64 --esp {} --nat-t", suite.name())).unwrap();
            for l3 in [40, 46, 100, 494, 1400, 1500] {
                assert_eq!(
                    p.encapsulation.outer_l3(l3),
                    l3 + suite.overhead(l3) + 20 + 8,
                    "{suite} at {l3} bytes"
                );
            }
        }
        let p = plan("--frame-size 64 --esp aes256gcm16").unwrap();
        assert_eq!(p.encapsulation.esp, Some((Cipher::AesGcm, Auth::None)));
        // --esp-encap as --ipsec takes it: raw is 8 bytes shorter (no UDP).
        for suite in linerate_ike::EspSuite::ALL {
            let at = |encap: &str| {
                let p = plan(&format!(
                    "--frame-size 64 --esp {} --esp-encap {encap}",
                    suite.name()
                ))
                .unwrap();
                p.encapsulation.outer_l3(46)
            };
            assert_eq!(at("raw"), 46 + suite.overhead(46) + 20, "{suite}");
            assert_eq!(at("udp"), at("raw") + 8, "{suite}");
        }
        let e = plan("--frame-size 64 --esp aes128-sha256 --auth sha1").unwrap_err();
        assert!(e.to_string().contains("leave out --auth"), "{e}");
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
            (
                "--frame-size 64 --esp aes256gcm16 --esp-encap bogus",
                "--esp-encap bogus",
            ),
            (
                "--frame-size 64 --esp aes256gcm16 --esp-encap raw --nat-t",
                "--nat-t",
            ),
            ("--frame-size 64 --esp-encap raw", "--esp"),
            ("--frame-size 64 --wireguard sideways", "--wireguard"),
            ("--frame-size 64 --fps 0", "--fps"),
            ("--frame-size 20", "20"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(
                linerate_session::exit::one_line(&e).contains(says),
                "{args}: {e}"
            );
        }
    }
}
