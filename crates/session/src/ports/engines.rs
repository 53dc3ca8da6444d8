//! Which engine drives the ports, opened on them: the choice
//! (`--engine`, `--receiver`, threads), the AF_PACKET, AF_XDP and in-kernel
//! XDP backends opened on ports A and B, the fallbacks `auto` takes and
//! the note that says why, and the refusals that name the fix.

use crate::error::{bail, err, Result};
use linerate_bpf::generator::MAX_FRAME_LEN as XDP_MAX_FRAME_LEN;
use linerate_engine::backend::{NotDelivered, QueueRx, QueueTx};
use linerate_engine::xdp::{XdpReceiver, XdpTransmitter};
use linerate_engine::TesterPort;
use linerate_port::af_packet::{AfPacketOptions, AfPacketPort};
use linerate_port::af_xdp::{AfXdpOptions, AfXdpPort};
use linerate_port::Port;
use std::net::Ipv4Addr;

/// An interface and the namespace it lives in (None: linerate's own).
pub type PortName = (String, Option<String>);
/// Ports A and B as an engine drives them, and the engine's name.
pub type Ports = (TesterPort, TesterPort, &'static str);

/// `--engine`: which packet I/O engine sends and receives the test frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// The fastest that works on the ports, said with why.
    Auto,
    /// Frames made and counted in the kernel (XDP).
    Xdp,
    /// AF_XDP sockets.
    AfXdp,
    /// Packet sockets.
    AfPacket,
}

impl EngineChoice {
    /// The engine's name as reports and options write it.
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Xdp => "xdp",
            EngineChoice::AfXdp => "af_xdp",
            EngineChoice::AfPacket => "af_packet",
        }
    }
}

/// `--receiver`: how port B counts the test frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiverChoice {
    /// The in-kernel counter where it attaches, else the engine's socket.
    Auto,
    /// linerate's XDP counter at port B's XDP hook.
    Kernel,
    /// The engine's own socket: every frame up to linerate's receiver.
    Socket,
}

impl ReceiverChoice {
    /// `--pcap` needs the frames in user space: `auto` then means socket.
    pub fn for_capture(self, capture: bool) -> ReceiverChoice {
        match self {
            ReceiverChoice::Auto if capture => ReceiverChoice::Socket,
            other => other,
        }
    }
}

/// Opens both tester ports with the engine asked for; `auto` takes the
/// fastest that works on them and says which it took, and why not faster.
/// Port B counts as `receiver` says. Returns the ports, the engine's name
/// and notes on the choices (why `auto` took the engine, how an af_xdp
/// socket is bound, why the counter did not attach).
/// `threads`: generator threads on each port (above 1 on port A, `auto`
/// means xdp, unless port B is an IPsec peer). `ike_on_b`:
/// port B is an IPsec peer, whose IKE the kernel must still receive
/// while the engine takes the ESP.
pub fn open_engine(
    choice: EngineChoice,
    a: &PortName,
    b: &PortName,
    opts: &AfPacketOptions,
    threads: Threads,
    receiver: ReceiverChoice,
    ike_on_b: bool,
) -> Result<(Ports, Option<String>)> {
    let tx_threads = threads.a;
    let socket = receiver == ReceiverChoice::Socket;
    let threads_mean_xdp = tx_threads > 1 && choice == EngineChoice::Auto && !ike_on_b;
    if socket && (choice == EngineChoice::Xdp || threads_mean_xdp) {
        bail!(BadInput, "the xdp engine counts test frames in the kernel and hands none up: for --receiver socket (or --pcap) use --engine af_xdp or af_packet");
    }
    if threads_mean_xdp {
        return match open_xdp(a, b, opts, receiver) {
            Ok((ports, note)) => {
                let why = Some("--tx-threads above 1 needs xdp".to_string());
                Ok((ports, join_notes(why, note)))
            }
            Err(e) => {
                Err(e
                    .context("--tx-threads above 1 needs the xdp engine, which does not work here"))
            }
        };
    }
    let auto = choice == EngineChoice::Auto;
    let (port_a, name, why) = match choice {
        EngineChoice::AfPacket => (
            open_af_packet_threads(a, opts, tx_threads, threads.rx_a, Ipv4Addr::UNSPECIFIED)?,
            "af_packet",
            None,
        ),
        EngineChoice::Xdp => return open_xdp(a, b, opts, receiver),
        EngineChoice::AfXdp => {
            let (port, note) = open_af_xdp(a, opts, false, tx_threads)?;
            (port, "af_xdp", Some(note))
        }
        EngineChoice::Auto => {
            let mut passed_over = Vec::new();
            if socket {
                passed_over.push(
                    "xdp counts in the kernel, and the frames are wanted in user space".into(),
                );
            } else if opts.max_frame_len > XDP_MAX_FRAME_LEN {
                passed_over.push(format!(
                    "xdp sends frames up to {} bytes",
                    XDP_MAX_FRAME_LEN + 4
                ));
            } else {
                match open_xdp(a, b, opts, receiver) {
                    Ok((ports, note)) => {
                        let why = "the fastest engine that delivers here: the kernel took its probe frames";
                        return Ok((ports, join_notes(Some(why.into()), note)));
                    }
                    Err(e) => passed_over.push(format!("xdp: {}", crate::exit::one_line(&e))),
                }
            }
            let (port, name, why) = auto_socket(a, opts, passed_over)?;
            (port, name, Some(why))
        }
    };
    let (ports, note) = with_receiver(port_a, name, b, opts, receiver, auto, ike_on_b, threads)?;
    Ok((ports, join_notes(why, note)))
}

/// Generator threads on each port: port A's test frames, and port B's
/// when it sends (the reverse direction, or an IPsec peer's ESP); and
/// receiving threads on each (`--rx-threads`, af_packet: a fanout group
/// of packet sockets, one per thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads {
    pub a: u16,
    pub b: u16,
    pub rx_a: u16,
    pub rx_b: u16,
    /// Port B's receiving threads take the ESP of linerate's emulated
    /// IPsec peers by its destination: the peer at this address and up,
    /// tunnel i to thread i mod `rx_b` (UNSPECIFIED: no peers).
    pub esp_from: Ipv4Addr,
}

impl Threads {
    /// `n` generator threads on port A; one thread for everything else.
    pub fn on_a(n: u16) -> Threads {
        Threads {
            a: n,
            b: 1,
            rx_a: 1,
            rx_b: 1,
            esp_from: Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// "first; second", either, or none.
fn join_notes(first: Option<String>, second: Option<String>) -> Option<String> {
    match (first, second) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// Opens port B for engine `engine` (port A is open): counted by the
/// in-kernel counter, or by the engine's own socket. With `auto` (the
/// engine was `auto`'s choice), a port B that takes no AF_XDP socket
/// (another XDP program on it) receives through a packet socket instead,
/// and the note says why. `threads.b`: port B's generator threads (an
/// IPsec peer's encrypting ones); `threads.rx_b` its receiving ones.
#[allow(clippy::too_many_arguments)]
fn with_receiver(
    port_a: TesterPort,
    engine: &'static str,
    b: &PortName,
    opts: &AfPacketOptions,
    receiver: ReceiverChoice,
    auto: bool,
    ike_on_b: bool,
    threads: Threads,
) -> Result<(Ports, Option<String>)> {
    let (tx_threads, rx_threads) = (threads.b, threads.rx_b);
    let mut note = None;
    if receiver != ReceiverChoice::Socket {
        // A port that does not open (a wrong name) is that error, whatever
        // counts on it.
        match kernel_counted(b, opts)? {
            Ok(port_b) => return Ok(((port_a, port_b, engine), None)),
            Err(e) if receiver == ReceiverChoice::Auto && engine != "xdp" => {
                note = Some(format!(
                    "the in-kernel counter does not attach to {} ({}): counting through the {engine} socket",
                    b.0,
                    crate::exit::one_line(&e)
                ));
            }
            Err(e) => return Err(counter_refused(b, engine, e)),
        }
    }
    // (The xdp engine never gets here: see open_engine.)
    let port_b = match engine {
        "af_xdp" => match open_af_xdp(b, opts, ike_on_b, tx_threads) {
            Ok((port, mode)) => {
                note = join_notes(Some(mode), note);
                port
            }
            Err(e) if auto => {
                let port =
                    open_af_packet_threads(b, opts, tx_threads, rx_threads, threads.esp_from)?;
                note = join_notes(
                    note,
                    Some(format!(
                        "port B ({}) takes no AF_XDP socket ({}): it receives through a packet socket",
                        b.0,
                        crate::exit::one_line(&e)
                    )),
                );
                port
            }
            Err(e) => return Err(e),
        },
        _ => open_af_packet_threads(b, opts, tx_threads, rx_threads, threads.esp_from)?,
    };
    Ok(((port_a, port_b, engine), note))
}

/// `--engine auto` after xdp: af_xdp, else af_packet, on port A. An engine
/// that fails to open gives way to the next; if the last fails too, its
/// error (a wrong interface name, say) is the one the user sees.
/// `passed_over` says why the faster engines were not taken.
fn auto_socket(
    a: &PortName,
    opts: &AfPacketOptions,
    mut passed_over: Vec<String>,
) -> Result<(TesterPort, &'static str, String)> {
    match open_af_xdp(a, opts, false, 1) {
        Ok((port, note)) => {
            passed_over.push(note);
            return Ok((port, "af_xdp", passed_over.join("; ")));
        }
        Err(e) => passed_over.push(format!("af_xdp: {}", crate::exit::one_line(&e))),
    }
    Ok((
        open_af_packet(a, opts)?,
        "af_packet",
        passed_over.join("; "),
    ))
}

/// AF_XDP sockets on a port, one per receive queue (copy mode on veth,
/// zero-copy where the driver offers it), `tx_threads` of them sending (a
/// generator thread each), and a note on how they are bound.
/// `pass_ike`: IKE goes on to the kernel (an IPsec peer's port B).
fn open_af_xdp(
    p: &PortName,
    opts: &AfPacketOptions,
    pass_ike: bool,
    tx_threads: u16,
) -> Result<(TesterPort, String)> {
    let xdp_opts = AfXdpOptions {
        max_frame_len: opts.max_frame_len,
        generic_xdp: opts.generic_xdp,
        pass_ike,
        tx_queues: tx_threads.max(1) as u32,
        ..AfXdpOptions::default()
    };
    let port = AfXdpPort::open(&p.0, p.1.as_deref(), &xdp_opts)?;
    let queues = match port.rx_queues() {
        1 => String::new(),
        n => format!(", {n} queues"),
    };
    let note = format!(
        "{} {} mode, XDP {}{queues}",
        port.info().ifname,
        port.mode().as_str(),
        port.attach_mode().as_str()
    );
    let (tx, rx, info) = port.split_queues();
    Ok((TesterPort::from_queues(tx, vec![rx], info), note))
}

/// Streams the in-kernel counter keeps per trial.
const XDP_MAX_STREAMS: u16 = 16;

fn open_af_packet(p: &PortName, opts: &AfPacketOptions) -> Result<TesterPort> {
    Ok(TesterPort::from_port(AfPacketPort::open(
        &p.0,
        p.1.as_deref(),
        opts,
    )?))
}

/// The af_packet engine on a port with `threads` generator threads, each
/// with a transmit ring (socket) of its own, and `rx_threads` receiving
/// threads, each with a receive ring in the port's fanout group (ESP
/// steered from `esp_from`, see [`Threads::esp_from`]).
fn open_af_packet_threads(
    p: &PortName,
    opts: &AfPacketOptions,
    threads: u16,
    rx_threads: u16,
    esp_from: Ipv4Addr,
) -> Result<TesterPort> {
    if threads <= 1 && rx_threads <= 1 {
        return open_af_packet(p, opts);
    }
    let port = AfPacketPort::open(&p.0, p.1.as_deref(), opts)?;
    let (tx, rx, info) = port.split_receivers(rx_threads.max(1) as usize, esp_from, opts)?;
    let mut queues = vec![tx];
    queues.extend(AfPacketPort::open_tx_rings(
        &p.0,
        p.1.as_deref(),
        opts,
        threads.max(1) as usize - 1,
    )?);
    Ok(TesterPort::from_queues(queues, rx, info))
}

/// The xdp engine on both ports: port A's in-kernel generator with a
/// packet socket that receives (the reverse direction, ARP), port B counted
/// in the kernel. Before it is used, a few frames must be confirmed as
/// taken by the kernel: a generator that loads is not one that delivers.
/// Port B is opened first, because its counter is what lets a veth peer
/// of port A (a back-to-back pair) take XDP frames. Returns a note when
/// linerate attached a program to port A to make it deliver.
fn open_xdp(
    a: &PortName,
    b: &PortName,
    opts: &AfPacketOptions,
    receiver: ReceiverChoice,
) -> Result<(Ports, Option<String>)> {
    if opts.max_frame_len > XDP_MAX_FRAME_LEN {
        bail!(BadInput,
            "--engine xdp sends frames up to {} bytes (one page per frame in live-frames mode): use --engine af_packet for {}-byte frames",
            XDP_MAX_FRAME_LEN + 4,
            opts.max_frame_len + 4
        );
    }
    let (_, rx_a, info_a) = AfPacketPort::open(&a.0, a.1.as_deref(), opts)?.split();
    let tx = XdpTransmitter::new(&info_a, XDP_MAX_STREAMS)?;
    let port_a = TesterPort {
        tx: Box::new(tx),
        rx: Box::new(QueueRx::new(rx_a, info_a.max_frame_len)),
        info: info_a,
    };
    let (mut ports, note) = with_receiver(
        port_a,
        "xdp",
        b,
        opts,
        receiver,
        false,
        false,
        Threads::on_a(1),
    )?;
    let attached = ports
        .0
        .tx
        .ensure_delivery(&ports.0.info)
        .map_err(|why| match why {
            NotDelivered::Refused(why) => err!(
                Environment,
                "the xdp engine cannot send on {}: {why}; {}",
                ports.0.info.ifname,
                xdp_delivery_fix(&ports.0.info)
            ),
            failed => err!(
                Environment,
                "the xdp engine cannot send on {}: {failed}; use --engine af_xdp or af_packet",
                ports.0.info.ifname
            ),
        })?;
    Ok((ports, join_notes(attached, note)))
}

/// What to do when the xdp engine's frames are refused on `port`.
fn xdp_delivery_fix(port: &linerate_port::PortInfo) -> String {
    let veth = linerate_engine::accounting::link_kind(port.netns.as_deref(), &port.ifname)
        .is_some_and(|k| k.is_veth());
    if veth {
        format!("turn GRO on at the peer of veth {} (ethtool -K PEER gro on) or attach an XDP program there, or use --engine af_xdp or af_packet", port.ifname)
    } else {
        "use --engine af_xdp or af_packet (docs/REAL-DEVICE.md lists what each NIC driver needs)"
            .to_string()
    }
}

/// A receiving port counted by the in-kernel counter, with a packet socket
/// beside it for ARP and for sending (the reverse direction of a
/// bidirectional trial). The counter takes the port's XDP hook, so an
/// AF_XDP socket (whose receive needs the hook too) cannot share the port.
/// Err: the port does not open; Ok(Err): it opens, the counter does not
/// attach.
fn kernel_counted(b: &PortName, opts: &AfPacketOptions) -> Result<Result<TesterPort>> {
    let (tx_b, rx_b, info_b) = AfPacketPort::open(&b.0, b.1.as_deref(), opts)?.split();
    let rx = match XdpReceiver::new(&info_b, rx_b, XDP_MAX_STREAMS, opts.generic_xdp) {
        Ok(rx) => rx,
        Err(e) => return Ok(Err(e.into())),
    };
    Ok(Ok(TesterPort {
        tx: Box::new(QueueTx::new(tx_b, info_b.max_frame_len)),
        rx: Box::new(rx),
        info: info_b,
    }))
}

/// Why port B cannot be counted in the kernel, and what to do: another XDP
/// program on the port is named (and linerate's own, of another run, said
/// to be so); otherwise the cause. The fix is the engine's: the xdp engine
/// counts in the kernel only, so af_packet; the socket engines count
/// through their socket.
fn counter_refused(b: &PortName, engine: &str, e: crate::error::Error) -> crate::error::Error {
    let fix = if engine == "xdp" {
        "use --engine af_packet, which counts through a socket"
    } else {
        "use --receiver socket"
    };
    let port = &b.0;
    match attached_xdp(b) {
        Some(prog) => {
            let whose = if prog.starts_with("'lr_") {
                ", linerate's own: another linerate run may be using this port"
            } else {
                ""
            };
            err!(Environment,
                "port B ({port}) already has an XDP program attached ({prog}{whose}), and linerate's in-kernel counter needs the port's XDP hook: detach it ('ip link set dev {port} xdp off') if nothing needs it, or {fix}"
            )
        }
        None => err!(
            Environment,
            "the in-kernel counter does not attach to port B ({port}): {}: {fix}",
            e.root_cause()
        ),
    }
}

/// The XDP program attached to port `p`, as `'NAME' (id N)`, from
/// `ip -d -j link show`; None when there is none or `ip` cannot tell.
fn attached_xdp(p: &PortName) -> Option<String> {
    let out =
        linerate_helper::ip(p.1.as_deref(), &["-d", "-j", "link", "show", "dev", &p.0]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    xdp_program_of(&v)
}

/// The XDP program in `ip -d -j link show`'s output: `xdp.prog`, or the
/// first of `xdp.attached` when programs are attached in several modes.
fn xdp_program_of(v: &serde_json::Value) -> Option<String> {
    let xdp = v.get(0)?.get("xdp")?;
    let prog = match xdp.get("prog") {
        Some(p) => p,
        None => xdp.get("attached")?.get(0)?.get("prog")?,
    };
    let name = prog.get("name").and_then(|n| n.as_str()).unwrap_or("");
    Some(match prog.get("id").and_then(|i| i.as_u64()) {
        Some(id) => format!("'{name}' (id {id})"),
        None => format!("'{name}'"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xdp_program_on_a_port_is_read_from_ip() {
        let one: serde_json::Value = serde_json::from_str(
            r#"[{"ifname":"p1","xdp":{"mode":1,"prog":{"id":42,"name":"lr_count","tag":"ab","jited":1}}}]"#,
        )
        .unwrap();
        assert_eq!(xdp_program_of(&one).unwrap(), "'lr_count' (id 42)");
        let several: serde_json::Value = serde_json::from_str(
            r#"[{"ifname":"p1","xdp":{"mode":4,"attached":[{"mode":1,"prog":{"id":7,"name":"fw"}},{"mode":2,"prog":{"id":8,"name":"x"}}]}}]"#,
        )
        .unwrap();
        assert_eq!(xdp_program_of(&several).unwrap(), "'fw' (id 7)");
        let none: serde_json::Value =
            serde_json::from_str(r#"[{"ifname":"p1","mtu":1500}]"#).unwrap();
        assert_eq!(xdp_program_of(&none), None);
    }
}
