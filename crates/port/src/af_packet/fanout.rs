//! Several receive rings on one port, one per receiving thread: the
//! sockets join one PACKET_FANOUT group whose classic BPF program picks
//! the socket of each frame, so that everything a thread must see whole
//! lands on that thread:
//!
//! * a test frame goes to socket `stream mod n` (the stream number of its
//!   signature): a stream's sequence numbers, duplicates and reordering are
//!   judged by one thread, which sees all of them;
//! * an ESP packet (raw, or in UDP 4500) goes to socket `(destination
//!   address - esp_base) mod n` (IPv6: the address's last 32 bits): each
//!   of linerate's emulated IPsec peers has an address of its own, the
//!   first at `esp_base`, so tunnel i's ESP goes to socket `i mod n`
//!   whatever SPIs its rekeys bring, and its SAs' replay windows and
//!   counters live on one thread;
//! * anything else (ARP, IKE, other traffic) goes to socket 0.
//!
//! The program runs where the kernel hands a received frame to packet
//! sockets: after the driver has taken off the Ethernet header and the
//! kernel any VLAN tag, so offsets count from the IP header and the frame's
//! EtherType is the socket buffer's protocol (`SKF_AD_PROTOCOL`).

use super::socket::set_opt;
use crate::PortError;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU16, Ordering};

/// Classic BPF opcodes the program uses (linux/bpf_common.h).
mod op {
    pub const LDW_ABS: u16 = 0x20;
    pub const LDH_ABS: u16 = 0x28;
    pub const LDB_ABS: u16 = 0x30;
    pub const LDW_IND: u16 = 0x40;
    pub const LDH_IND: u16 = 0x48;
    pub const LDX_MSH: u16 = 0xb1;
    pub const LDX_IMM: u16 = 0x01;
    pub const JEQ: u16 = 0x15;
    pub const JSET: u16 = 0x45;
    pub const RET_A: u16 = 0x16;
    pub const RET_K: u16 = 0x06;
    pub const ST: u16 = 0x02;
    pub const LD_MEM: u16 = 0x60;
    pub const SUB_K: u16 = 0x14;
}

/// One instruction before its jumps are resolved: a jump names the
/// instruction index of a label.
enum Ins {
    Stmt(u16, u32),
    /// Conditional jump: (opcode, k, where if true, where if false).
    Jump(u16, u32, Label, Label),
    Mark(Label),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Label {
    Next,
    V4,
    V6,
    Udp,
    NatT,
    Esp,
    Other,
}

const ETHERTYPE_IPV4: u32 = 0x0800;
const ETHERTYPE_IPV6: u32 = 0x86dd;
const IPPROTO_UDP: u32 = 17;
const IPPROTO_ESP: u32 = 50;
const UDP_ENCAP_PORT: u32 = 4500;

/// The steering program (see the module's documentation), ESP steered
/// from `esp_base`. The kernel takes its return value modulo the group's
/// sockets.
pub(crate) fn steering_program(esp_base: u32) -> Vec<libc::sock_filter> {
    use Ins::*;
    use Label::*;
    let proto = (libc::SKF_AD_OFF + libc::SKF_AD_PROTOCOL) as u32;
    let magic = linerate_wire::signature::SIGNATURE_MAGIC as u32;
    let udp_len = 8u32;
    let program = [
        Stmt(op::LDH_ABS, proto),
        Jump(op::JEQ, ETHERTYPE_IPV4, V4, Next),
        Jump(op::JEQ, ETHERTYPE_IPV6, V6, Other),
        Mark(V4),
        // The destination address, kept in M[0] for ESP.
        Stmt(op::LDW_ABS, 16),
        Stmt(op::ST, 0),
        // A later fragment carries no transport header.
        Stmt(op::LDH_ABS, 6),
        Jump(op::JSET, 0x1fff, Other, Next),
        Stmt(op::LDX_MSH, 0), // X = the IPv4 header's length
        Stmt(op::LDB_ABS, 9),
        Jump(op::JEQ, IPPROTO_UDP, Udp, Next),
        Jump(op::JEQ, IPPROTO_ESP, Esp, Other),
        Mark(V6),
        Stmt(op::LDW_ABS, 36), // the destination's last 32 bits
        Stmt(op::ST, 0),
        Stmt(op::LDX_IMM, 40),
        Stmt(op::LDB_ABS, 6),
        Jump(op::JEQ, IPPROTO_UDP, Udp, Next),
        Jump(op::JEQ, IPPROTO_ESP, Esp, Other),
        Mark(Udp),
        Stmt(op::LDH_IND, 2), // destination port
        Jump(op::JEQ, UDP_ENCAP_PORT, NatT, Next),
        Stmt(op::LDH_IND, udp_len), // the signature's magic
        Jump(op::JEQ, magic, Next, Other),
        Stmt(op::LDH_IND, udp_len + 2), // the stream
        Stmt(op::RET_A, 0),
        Mark(NatT),
        // ESP in UDP, unless the four zero bytes of an IKE message (RFC
        // 3948's non-ESP marker) stand where an SPI would.
        Stmt(op::LDW_IND, udp_len),
        Jump(op::JEQ, 0, Other, Esp),
        Mark(Esp),
        Stmt(op::LD_MEM, 0),
        Stmt(op::SUB_K, esp_base),
        Stmt(op::RET_A, 0),
        Mark(Other),
        Stmt(op::RET_K, 0),
    ];
    assemble(&program)
}

/// Resolves the labels into the relative jump offsets of classic BPF.
fn assemble(program: &[Ins]) -> Vec<libc::sock_filter> {
    let mut at = std::collections::HashMap::new();
    let mut n = 0usize;
    for ins in program {
        match ins {
            Ins::Mark(l) => {
                at.insert(*l, n);
            }
            _ => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    for ins in program {
        let here = out.len();
        let offset = |l: Label| -> u8 {
            match l {
                Label::Next => 0,
                l => {
                    let to = at[&l];
                    u8::try_from(to - here - 1).expect("a forward jump within 255")
                }
            }
        };
        match *ins {
            Ins::Stmt(code, k) => out.push(libc::sock_filter {
                code,
                jt: 0,
                jf: 0,
                k,
            }),
            Ins::Jump(code, k, t, f) => out.push(libc::sock_filter {
                code,
                jt: offset(t),
                jf: offset(f),
                k,
            }),
            Ins::Mark(_) => {}
        }
    }
    out
}

/// Fanout group ids are per network namespace; a process may run several
/// engines at once, so each group takes the next id of its own.
static NEXT_GROUP: AtomicU16 = AtomicU16::new(0);

/// Puts the bound sockets `fds` into one new fanout group steered by
/// [`steering_program`] (ESP from `esp_base`). Frames the port sends
/// itself are left out (`PACKET_FANOUT_FLAG_IGNORE_OUTGOING`), as each
/// ring's own `PACKET_IGNORE_OUTGOING` does for one socket.
pub(crate) fn join(fds: &[&OwnedFd], esp_base: u32, ifname: &str) -> Result<(), PortError> {
    let mut code = steering_program(esp_base);
    let prog = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_mut_ptr(),
    };
    let kind = libc::PACKET_FANOUT_CBPF | libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
    // Another process may hold an id in this namespace: a group of another
    // kind or device refuses us (EINVAL, EEXIST); try the next ids.
    let base = (std::process::id() as u16).wrapping_mul(97);
    let mut last = None;
    for _ in 0..64 {
        let id = base.wrapping_add(NEXT_GROUP.fetch_add(1, Ordering::Relaxed));
        let arg = (id as u32) | (kind << 16);
        let Some((first, rest)) = fds.split_first() else {
            return Ok(());
        };
        match set_opt(
            first,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &arg,
            "joining a fanout group",
            ifname,
        ) {
            Ok(()) => {}
            Err(e) => {
                last = Some(e);
                continue;
            }
        }
        set_opt(
            first,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT_DATA,
            &prog,
            "steering the fanout group (PACKET_FANOUT_DATA)",
            ifname,
        )?;
        for fd in rest {
            set_opt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &arg,
                "joining a fanout group",
                ifname,
            )?;
        }
        return Ok(());
    }
    Err(last.expect("tried at least once"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program_and_it_ends_in_returns() {
        let p = steering_program(0x0a00_0001);
        for (i, ins) in p.iter().enumerate() {
            if ins.code & 0x07 == 0x05 {
                assert!(i + 1 + (ins.jt as usize) < p.len(), "{i}: {}", ins.jt);
                assert!(i + 1 + (ins.jf as usize) < p.len(), "{i}: {}", ins.jf);
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(op::RET_K));
        // Where the test frames' stream is read: 2 bytes into the signature.
        let stream = p.iter().position(|i| i.code == op::LDH_IND && i.k == 10);
        assert_eq!(p[stream.unwrap() + 1].code, op::RET_A);
        // ESP: the destination address kept for it, less the first peer's.
        let sub = p.iter().position(|i| i.code == op::SUB_K).unwrap();
        assert_eq!(p[sub].k, 0x0a00_0001);
        assert_eq!((p[sub - 1].code, p[sub - 1].k), (op::LD_MEM, 0));
        assert_eq!(p[sub + 1].code, op::RET_A);
        let kept: Vec<u32> = p
            .iter()
            .zip(&p[1..])
            .filter(|(_, st)| st.code == op::ST)
            .map(|(ld, _)| ld.k)
            .collect();
        assert_eq!(kept, vec![16, 36], "IPv4 and IPv6 destinations");
    }
}
