//! `linerate tunnels`: N emulated IPsec peers on port B bring their
//! tunnels up to one gateway (setup rate), hold them, and delete them.

use crate::args::ipsec::IpsecArgs;
use crate::args::record::RecordArgs;
use clap::Args;
use std::path::PathBuf;

/// `--ipsec-id`'s help. clap turns a literal `{n}` in help into a line
/// break, so the placeholder's `n` is styled as a literal: the style's
/// codes keep clap from seeing `{n}`, and a plain help (no terminal)
/// prints `{n}` as written.
fn ipsec_id_help() -> clap::builder::StyledStr {
    use clap::builder::styling::{Effects, Style};
    use std::fmt::Write;
    let literal = Style::new().effects(Effects::BOLD);
    let n = format!("{{{}n{}}}", literal.render(), literal.render_reset());
    let mut help = clap::builder::StyledStr::new();
    let _ = write!(
        help,
        "The peers' IKE identity (an address, @fqdn or user@domain) when the gateway wants another than each peer's own address; {n} (the tunnel's number, from 1) and {{addr}} (its outer address) give each peer its own, e.g. @peer{n}.vpn.example or user{n}@example"
    );
    help
}

/// The `--ipsec` options that fit many peers; `--ipsec` itself (implied),
/// `--direction`, `--esp-keys` and `--pcap` (no packet command's test
/// frames here) are hidden and refused when given.
#[derive(Args, Debug)]
#[command(
    mut_arg("ipsec", |a| a.hide(true)),
    mut_arg("direction", |a| a.hide(true)),
    mut_arg("esp_keys", |a| a.hide(true)),
    mut_arg("rekey_ike", |a| a.hide(true)),
    mut_arg("rekey", |a| a.help("During the hold: rekey each tunnel's CHILD_SA every DURATION (e.g. 2s; spread evenly over the tunnels; --hold at least DURATION). The report gives the rekeys attempted, completed and failed, rekeys per second, and with --traffic the frames lost around each rekey and the time it blocked its tunnel")),
    mut_arg("pcap", |a| a.hide(true)),
    mut_arg("pcap_frames", |a| a.hide(true)),
    mut_arg("remote_net", |a| a.help("The network behind linerate, split into one equal slice per tunnel (each tunnel's own traffic selector): 200 tunnels in a /17 get a /25 each. In the lab: 198.19.128.0/17")),
    mut_arg("local_net", |a| a.help("The gateway's protected LAN, every tunnel's remote traffic selector (default: --ip-a's subnet; in the lab 198.18.0.0/24)")),
    mut_arg("psk_file", |a| a.help("The pre-shared key every peer uses, in a file only its owner can read (chmod 600); never on the command line. In the lab: the scenario's")),
    mut_arg("ipsec_id", |a| a.help(ipsec_id_help()))
)]
pub struct TunnelsArgs {
    /// In the lab: the DUT is the vpn-gateway scenario's gateway (needs --scenario vpn-gateway[:SUITE]); a lab is built for the run.
    #[arg(long, conflicts_with_all = ["port_b", "ip_b", "gw_b", "ip_a", "port_a", "gw_a"])]
    pub lab: bool,
    /// The lab's DUT configuration: vpn-gateway or vpn-gateway:SUITE (implies --lab).
    #[arg(long, value_name = "vpn-gateway[:SUITE]", conflicts_with_all = ["port_b", "ip_b", "gw_b", "ip_a", "port_a", "gw_a"])]
    pub scenario: Option<String>,
    /// Ring depth of the lab this run builds (see 'lab up --ring').
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(256..=1_048_576))]
    pub lab_ring: Option<u32>,
    /// Tester port B, the gateway's WAN side, where the peers are emulated, e.g. enp1s0f1.
    #[arg(long, requires_all = ["ip_b", "gw_b"])]
    pub port_b: Option<String>,
    /// Port B's address and subnet, e.g. 203.0.113.2/24: the first peer's address unless --peer-addrs says others.
    #[arg(long, value_name = "ADDR/LEN")]
    pub ip_b: Option<String>,
    /// The gateway's address on port B's subnet (its IKE address unless --ipsec-gateway).
    #[arg(long, value_name = "ADDR")]
    pub gw_b: Option<String>,
    /// Port A's address and subnet: the gateway's LAN, every tunnel's remote traffic selector, unless --local-net says another; with --traffic, where the test frames go.
    #[arg(long, value_name = "ADDR/LEN")]
    pub ip_a: Option<String>,
    /// With --traffic: tester port A on the gateway's LAN, where the decrypted test frames arrive, e.g. enp1s0f0 (linerate answers ARP for --ip-a there).
    #[arg(long)]
    pub port_a: Option<String>,
    /// With --traffic: the gateway's address on port A's subnet.
    #[arg(long, value_name = "ADDR")]
    pub gw_a: Option<String>,
    /// Time to first packet: every tunnel sends test frames through the gateway from the moment its CHILD_SA is installed until the hold ends, and port A times each tunnel's first frame (from its IKE_SA_INIT sent) and counts its frames. Needs port A (in the lab: the lab's); --hold defaults to 2s.
    #[arg(long)]
    pub traffic: bool,
    /// With --traffic: test frames per second each tunnel sends (1 to 1000), e.g. 100/s. Default: 1/s, light enough that 1,000 tunnels' frames do not load the gateway's setups (the lab's charon fell behind at 10/s); each tunnel's first frame leaves as soon as it is up, whatever the rate.
    #[arg(long, value_name = "R/s", allow_hyphen_values = true)]
    pub traffic_rate: Option<String>,
    #[command(flatten)]
    pub ipsec: IpsecArgs,
    /// How many tunnels (peers): 1..10000. With --capacity the ceiling (default 10000).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Capacity: bring the tunnels up --step at a time, holding every earlier one, until a step's setups fail, the gateway deletes tunnels, or (with --traffic) a held tunnel delivers nothing or the step's loss is above --max-loss; reports the largest count held. Exit 1 when it stopped so, 0 when --count was reached.
    #[arg(long)]
    pub capacity: bool,
    /// With --capacity: tunnels added per step (default 100, or --count if fewer).
    #[arg(long, value_name = "N")]
    pub step: Option<u64>,
    /// With --capacity --traffic: the largest loss of a step's traffic window (all held tunnels' frames) that still holds, in %, e.g. 1 (default 1).
    #[arg(long, value_name = "PCT", allow_hyphen_values = true)]
    pub max_loss: Option<String>,
    /// New handshakes (IKE_SA_INIT sent) per second, e.g. 50/s. Default: as fast as the gateway answers, --window in flight.
    #[arg(long, value_name = "R/s", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// Handshakes in flight at most.
    #[arg(long, value_name = "W", default_value_t = 64)]
    pub window: u64,
    /// How long the tunnels stay up (answering the gateway) after the last setup before linerate deletes them all, e.g. 10s. Default: 0s, or 2s with --traffic. With --capacity: each step's hold (and traffic window), default 2s.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub hold: Option<String>,
    /// The peers' outer addresses: FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab routes to port B). They must be on port B's subnet, or in the lab's peer range.
    #[arg(long, value_name = "FIRST[-LAST]|CIDR")]
    pub peer_addrs: Option<String>,
    /// Write the report, with every tunnel's setup time or error, as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub record: RecordArgs,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `--ipsec-id`'s placeholders are printed as written (clap would
    /// print a bare `{n}` as a line break).
    #[test]
    fn the_ipsec_id_help_shows_its_placeholders() {
        let mut cli = crate::args::Cli::command();
        let tunnels = cli.find_subcommand_mut("tunnels").expect("tunnels");
        let help = tunnels.render_long_help().to_string();
        let line: String = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for shown in [
            "{n} (the tunnel's number",
            "@peer{n}.vpn.example",
            "user{n}@example",
            "{addr}",
        ] {
            assert!(line.contains(shown), "'{shown}' not in:\n{help}");
        }
    }
}
