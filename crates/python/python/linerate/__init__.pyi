# The type stub of the package linerate, generated from the CLI's options
# by `python -m linerate._stub`; do not edit (a test compares it).
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

Progress = Callable[[str, Dict[str, Any]], None]
Value = Union[str, int, float]

class Error(Exception): ...
class BadInput(Error): ...

class ThresholdFailed(Exception):
    result: Optional[Dict[str, Any]]
    def __init__(self, message: str, result: Optional[Dict[str, Any]]) -> None: ...

def command_line(command: str, **options: Any) -> List[str]: ...
def lab_status() -> List[Dict[str, Any]]: ...

def trial(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    rate: Optional[Value] = None,
    duration: Optional[Value] = None,
    frames: Optional[Value] = None,
    loss: Optional[Value] = None,
    json: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate trial``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        rate: Rate: 50% (of line rate, L1), 100000fps, 1.5Mpps, 300Mbps (L2), 300Mbps@L1
        duration: How long to send
        frames: Send exactly N frames at the rate (per direction), instead of a duration: the trial lasts N / rate (pktgen's count)
        loss: Loss allowed before the trial counts as failed (exit 1): 0.1% or 0.001 (N% is percent, a bare number a ratio)
        json: Write the trial as JSON to FILE
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
    """

def rfc2544(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    all_layers: bool = False,
    mlrsearch: bool = False,
    repeat: Optional[Value] = None,
    trial_duration: Optional[Value] = None,
    resolution: Optional[Value] = None,
    loss: Optional[Value] = None,
    max_rate: Optional[Value] = None,
    rfc2544_strict: bool = False,
    json: Optional[Value] = None,
    calibration: Optional[Value] = None,
    scenario: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate rfc2544``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        all_layers: Show the throughput at every layer: Mbps at L1, L2, L3 and L4 (UDP payload) and the link usage as LanTraffic computes it
        mlrsearch: After each frame size's search, MLRsearch (RFC 9971) too: the NDR (loss 0 %) and PDR (loss 0.5 %) conditional throughputs, exceed ratio 50 % over two trials of --trial-duration, printed beneath the zero-loss throughput; the zero-loss search's trials count too, so it adds a few trials per size. They repeat better than it on a DUT that stalls now and then
        repeat: Search every frame size N times, round-robin (every size once per round), and report each figure (zero-loss throughput, NDR, PDR) as its median over the rounds with its spread (highest over lowest round): figures that repeat on a machine whose speed moves, such as a shared VM. Takes N times as long
        trial_duration: How long each trial sends (default 2s)
        resolution: Stop the search when the bracket is this narrow, relative to its top: 1% or 0.01 (N% is percent, a bare number a ratio)
        loss: Loss a trial may have and still pass (RFC 2544: 0): 0.1% or 0.001 (N% is percent, a bare number a ratio)
        max_rate: Highest rate tried (default: line rate), e.g. 50%, 2Mpps, 5Gbps
        rfc2544_strict: RFC 2544 to the letter: 60 s trials (instead of --trial-duration)
        json: Write every trial and the results as JSON to FILE (rewritten after each trial)
        calibration: Calibration file ('linerate calibrate'): results within 5 % of the stored tester ceiling are marked tester-limited. Default: ~/.local/share/linerate/calibration.json
        scenario: Lab DUT configuration, e.g. lan-lan, wan-lan, acl:12, firewall:50, routes:900000, tunnel:vxlan, xdp-router; parts joined with '+' (wan-lan+acl:12); several separated by ',' are compared side by side. Builds a fresh lab for each
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
    """

def mlrsearch(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    trial_duration: Optional[Value] = None,
    initial_trial_duration: Optional[Value] = None,
    duration_sum: Optional[Value] = None,
    exceed_ratio: Optional[Value] = None,
    width: Optional[Value] = None,
    pdr_loss: Optional[Value] = None,
    max_rate: Optional[Value] = None,
    json: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate mlrsearch``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        trial_duration: Goal Final Trial Duration: how long the trials that decide the result send
        initial_trial_duration: Goal Initial Trial Duration: the shortest trials of the coarse search (default: the final trial duration, no short trials)
        duration_sum: Goal Duration Sum: trial-seconds at one load that decide it (default: the final trial duration)
        exceed_ratio: Goal Exceed Ratio: share of those trial-seconds that may lose more than the goal's loss ratio (RFC 2544 compliant: 0; TST009-like: 50% or 0.5; N% is percent, a bare number a ratio)
        width: Goal Width: stop when (upper bound - lower bound) / upper bound is at most this: 1% or 0.01 (N% is percent, a bare number a ratio)
        pdr_loss: Loss ratio of the PDR goal (the NDR goal's is 0): 0.5% or 0.005 (N% is percent, a bare number a ratio)
        max_rate: Max Load (default: line rate), e.g. 50%, 2Mpps, 5Gbps
        json: Write every trial and the results as JSON to FILE (rewritten after each trial)
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
    """

def loss(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    loads: Optional[Sequence[Value]] = None,
    rates: Optional[Sequence[Value]] = None,
    rfc2544: bool = False,
    step: Optional[Value] = None,
    max_rate: Optional[Value] = None,
    trial_duration: Optional[Value] = None,
    label: Optional[Value] = None,
    json: Optional[Value] = None,
    rows_from: Optional[Sequence[Value]] = None,
    stop_at_loss: Optional[Value] = None,
    scenario: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate loss``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        loads: Offered loads, one trial each, in the order given: 0.45Mpps,1Mpps or 100000fps or 10%,50% (of line rate) or 1Gbps
        rates: Offered loads, one trial each, in the order given: 0.45Mpps,1Mpps or 100000fps or 10%,50% (of line rate) or 1Gbps
        rfc2544: RFC 2544 section 26.3: from 100 % of the maximum rate down in steps of --step until two successive trials lose nothing
        step: Step of the --rfc2544 mode, a share of the maximum rate (at most 10 %): 10% or 0.1 (N% is percent, a bare number a ratio; default 10%)
        max_rate: The rate 100 % means in the --rfc2544 mode (default: line rate), e.g. 2Mpps, 50%
        trial_duration: How long each trial sends
        label: Name of the table's row: the DUT or its configuration (e.g. "Linux, 50 rules"); the frame size is added when several are measured. With --scenario the rows are named after the scenarios
        json: Write every trial and the table's data as JSON to FILE (rewritten after each trial)
        rows_from: Print the rows of earlier 'loss --json' files above this run's (other DUTs or configurations, as the 100GE report compares routers)
        stop_at_loss: In a sweep, a row stops after a load that lost more than this (50% or 0.5; N% is percent, a bare number a ratio), as the 100GE report leaves higher loads untested (default: every load runs)
        scenario: Lab DUT configuration, e.g. lan-lan, wan-lan, acl:12, firewall:50, routes:900000, tunnel:vxlan, xdp-router; parts joined with '+' (wan-lan+acl:12); several separated by ',' are compared side by side. Builds a fresh lab for each
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
    """

def latency(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    loads: Optional[Value] = None,
    rate: Optional[Value] = None,
    trial_duration: Optional[Value] = None,
    repeat: Optional[Value] = None,
    search_duration: Optional[Value] = None,
    resolution: Optional[Value] = None,
    max_rate: Optional[Value] = None,
    json: Optional[Value] = None,
    calibration: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate latency``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        loads: Loads as shares of the throughput (or of --rate), e.g. 10%,50%,90%,100%
        rate: Measure at shares of this rate instead of searching the throughput first (e.g. 100kfps, 50%, 1Gbps)
        trial_duration: How long each latency trial sends (RFC 2544 asks for at least 120 s)
        repeat: Trials per load (RFC 2544: 20), combined as the RFC averages them
        search_duration: Trial duration of the throughput search run first (default 2s; no search with --rate)
        resolution: Resolution of the throughput search: 1% or 0.01 (N% is percent, a bare number a ratio; default 1%; no search with --rate)
        max_rate: Highest rate the throughput search tries (default: line rate; no search with --rate)
        json: Write the results with every trial as JSON to FILE
        calibration: Calibration file with the tester's own latency (default: ~/.local/share/linerate/calibration.json)
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
    """

def back_to_back(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    max_rate: Optional[Value] = None,
    max_burst: Optional[Value] = None,
    repeat: Optional[Value] = None,
    resolution: Optional[Value] = None,
    throughput: Optional[Value] = None,
    trial_duration: Optional[Value] = None,
    json: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate back-to-back``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        max_rate: Rate of the bursts (default: line rate, the minimum inter-frame gap), e.g. 300000fps, 50%
        max_burst: Longest burst tried: frames (100000) or a time at the burst rate (2s, 500ms)
        repeat: Repetitions of the search for the longest burst (RFC 2544: at least 50)
        resolution: Stop each repetition when the bracket is this narrow, relative to the failing burst (at least 1 frame): 1% or 0.01 (N% is percent, a bare number a ratio)
        throughput: The device's throughput for the corrected buffer time (RFC 9004), e.g. 100000fps; default: an RFC 2544 throughput search is run first
        trial_duration: Trial duration of that throughput search (default 2s; no search with --throughput)
        json: Write every trial and the results as JSON to FILE (rewritten after each trial)
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
    """

def cpu_target(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    gw_mac_a: Optional[Value] = None,
    gw_mac_b: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    engine: Optional[Value] = None,
    receiver: Optional[Value] = None,
    straggler_wait: Optional[Value] = None,
    recovery_limit: Optional[Value] = None,
    tx_threads: Optional[Value] = None,
    rx_threads: Optional[Value] = None,
    latency_every: Optional[Value] = None,
    frame_check: Optional[Value] = None,
    range: Optional[Sequence[Value]] = None,
    bidirectional: bool = False,
    drop_from: Optional[Value] = None,
    ipv6: bool = False,
    vlan: Optional[Value] = None,
    ipsec: bool = False,
    psk_file: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_keys: Optional[Value] = None,
    direction: Optional[Value] = None,
    rekey: Optional[Value] = None,
    rekey_ike: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    tunnels: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    target: Optional[Value] = None,
    tolerance: Optional[Value] = None,
    l3_length: Optional[Sequence[Value]] = None,
    udp_payload: Optional[Sequence[Value]] = None,
    imix: Optional[Sequence[Value]] = None,
    trial_duration: Optional[Value] = None,
    max_rate: Optional[Value] = None,
    max_trials: Optional[Value] = None,
    json: Optional[Value] = None,
    scenario: Optional[Value] = None,
    dut_cpu_cmd: Optional[Value] = None,
    dut_snmp: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
    sizes: Optional[Sequence[Value]] = None,
    frame_size: Optional[Sequence[Value]] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate cpu-target``; returns what its --json writes.

    Options:
        lab: Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        lab_ring: Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own
        port_a: Tester port A (sends), e.g. enp1s0f0
        port_b: Tester port B (receives)
        ip_a: Address port A's emulated host uses, e.g. 198.18.0.2/24
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        gw_mac_a: Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01
        gw_mac_b:
        line_speed: Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G
        engine: Packet I/O engine: xdp (frames made and counted in the kernel), af_xdp, af_packet, or auto (the fastest that works on these ports)
        receiver: How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket)
        straggler_wait: After sending, wait this long for frames still in flight (RFC 2544: 2 s)
        recovery_limit: Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic)
        tx_threads: Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own
        rx_threads: Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads)
        latency_every: Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way
        frame_check: How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received
        range: A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random
        bidirectional: Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction
        drop_from: A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab
        ipv6: Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b
        vlan: Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q)
        ipsec: Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway
        psk_file: The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it
        remote_net: The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24)
        local_net: The gateway's protected LAN (default: port A's subnet)
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_id: linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain
        ipsec_remote_id: The identity the gateway must show
        esp_keys: Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file)
        direction: Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate)
        rekey: Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way
        rekey_ike: Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        tunnels: With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side
        peer_addrs: With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B)
        target: The DUT CPU load (total) to hold: 75% or 0.75 (N% is percent, a bare number a ratio)
        tolerance: How close to the target counts as reached, in percentage points
        l3_length: IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts)
        udp_payload: UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU)
        imix: Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix
        trial_duration: How long each trial sends (the CPU load is averaged over it)
        max_rate: Highest rate tried (default: line rate), e.g. 50%, 2Mpps
        max_trials: Most trials per frame size
        json: Write the result and every trial as JSON to FILE
        scenario: Lab DUT configuration, e.g. lan-lan, wan-lan, acl:12, firewall:50, routes:900000, tunnel:vxlan, xdp-router; parts joined with '+' (wan-lan+acl:12); several separated by ',' are compared side by side. Builds a fresh lab for each
        dut_cpu_cmd: External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial
        dut_snmp: External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
        sizes: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
        frame_size: Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518
    """

def tcp(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    ipv6: bool = False,
    connect_to: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    label: Optional[Value] = None,
    connect_timeout: Optional[Value] = None,
    streams: Optional[Value] = None,
    direction: Optional[Value] = None,
    window: Optional[Value] = None,
    duration: Optional[Value] = None,
    port: Optional[Value] = None,
    json: Optional[Value] = None,
    table_from: Optional[Sequence[Value]] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate tcp``; returns what its --json writes.

    Options:
        lab: Test through the lab's DUT: the lab 'default' if it is up, else one built for this run and removed after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        port_a: Tester port A (clients, LAN side), e.g. enp1s0f0; it is moved into a namespace for the run and back after it, with its state (up/down, MTU, addresses, routes, sysctls) restored
        port_b: Tester port B (server, WAN side)
        ip_a: Kernel address of port A, e.g. 198.18.0.2/24 or 2001:2::2/64
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        ipv6: In the lab: IPv6 (RFC 5180 addresses 2001:2::/64 on A, 2001:2:0:1::/64 on B; IPv6 is switched on along the path for the run)
        connect_to: The address the clients connect to, when it is not the server's (a NAT DUT's public address)
        line_speed: Line speed for the link usage, e.g. 1G, 10G. Default: the speed the link reports, else 10G
        label: The row label in the table (default: the lab or the ports)
        connect_timeout: A connection not established within this time counts as blocked by the DUT
        streams: Parallel TCP streams (the techpapers use 5, as iperf3 -P 5)
        direction: download (B to A), upload (A to B) or both (download, then upload)
        window: Socket buffer (SO_SNDBUF and SO_RCVBUF) on every socket, e.g. 256k as the LANCOM tests (k, M: binary). Default: kernel autotuning
        duration: How long each direction measures
        port: TCP port the server listens on
        json: Write the record as JSON to FILE
        table_from: Measure nothing: lay out earlier runs' --json files (one per scenario, labelled with --label when each was measured) as LANCOM Table 14; no other option but --quiet applies
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
    """

def http(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    lab_name: Optional[Value] = None,
    port_a: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    ipv6: bool = False,
    connect_to: Optional[Value] = None,
    line_speed: Optional[Value] = None,
    label: Optional[Value] = None,
    connect_timeout: Optional[Value] = None,
    clients: Optional[Value] = None,
    object_size: Optional[Sequence[Value]] = None,
    direction: Optional[Value] = None,
    duration: Optional[Value] = None,
    port: Optional[Value] = None,
    server: Optional[Value] = None,
    json: Optional[Value] = None,
    table_from: Optional[Sequence[Value]] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    pcap: Optional[Value] = None,
    pcap_frames: Optional[Value] = None,
    quiet: bool = False,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate http``; returns what its --json writes.

    Options:
        lab: Test through the lab's DUT: the lab 'default' if it is up, else one built for this run and removed after
        lab_name: Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist
        port_a: Tester port A (clients, LAN side), e.g. enp1s0f0; it is moved into a namespace for the run and back after it, with its state (up/down, MTU, addresses, routes, sysctls) restored
        port_b: Tester port B (server, WAN side)
        ip_a: Kernel address of port A, e.g. 198.18.0.2/24 or 2001:2::2/64
        gw_a: The DUT's address on port A's subnet
        ip_b:
        gw_b:
        ipv6: In the lab: IPv6 (RFC 5180 addresses 2001:2::/64 on A, 2001:2:0:1::/64 on B; IPv6 is switched on along the path for the run)
        connect_to: The address the clients connect to, when it is not the server's (a NAT DUT's public address)
        line_speed: Line speed for the link usage, e.g. 1G, 10G. Default: the speed the link reports, else 10G
        label: The row label in the table (default: the lab or the ports)
        connect_timeout: A connection not established within this time counts as blocked by the DUT
        clients: Parallel HTTP clients, each on a keep-alive connection of its own
        object_size: Object sizes, requested in turn, e.g. 1M,10M (k, M: binary)
        direction: download (GET, B to A), upload (POST, A to B; built-in server only) or both
        duration: How long each direction measures
        port: TCP port the server listens on
        server: The server: linerate's own (hyper), or nginx (must be installed) run in side B's namespace
        json: Write the record as JSON to FILE
        table_from: Measure nothing: lay out earlier runs' --json files (one per scenario) as LANCOM Table 15; no other option but --quiet applies
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        pcap: Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
        pcap_frames: With --pcap: frames sampled per trial
        quiet: No progress on stderr (set-up notes and errors are still printed)
    """

def tunnels(
    *,
    progress: Optional[Progress] = None,
    lab: bool = False,
    scenario: Optional[Value] = None,
    lab_ring: Optional[Value] = None,
    port_b: Optional[Value] = None,
    ip_b: Optional[Value] = None,
    gw_b: Optional[Value] = None,
    ip_a: Optional[Value] = None,
    port_a: Optional[Value] = None,
    gw_a: Optional[Value] = None,
    traffic: bool = False,
    traffic_rate: Optional[Value] = None,
    ipsec_gateway: Optional[Value] = None,
    ike: Optional[Value] = None,
    esp: Optional[Value] = None,
    ipsec_remote_id: Optional[Value] = None,
    esp_encap: Optional[Value] = None,
    ipsec_timeout: Optional[Value] = None,
    count: Optional[Value] = None,
    capacity: bool = False,
    step: Optional[Value] = None,
    max_loss: Optional[Value] = None,
    rate: Optional[Value] = None,
    window: Optional[Value] = None,
    hold: Optional[Value] = None,
    peer_addrs: Optional[Value] = None,
    json: Optional[Value] = None,
    db: Optional[Value] = None,
    no_db: bool = False,
    dut_name: Optional[Value] = None,
    dut_firmware: Optional[Value] = None,
    events: Optional[Value] = None,
    quiet: bool = False,
    rekey: Optional[Value] = None,
    remote_net: Optional[Value] = None,
    local_net: Optional[Value] = None,
    psk_file: Optional[Value] = None,
    ipsec_id: Optional[Value] = None,
) -> Optional[Dict[str, Any]]:
    """
    ``linerate tunnels``; returns what its --json writes.

    Options:
        lab: In the lab: the DUT is the vpn-gateway scenario's gateway (needs --scenario vpn-gateway[:SUITE]); a lab is built for the run
        scenario: The lab's DUT configuration: vpn-gateway or vpn-gateway:SUITE (implies --lab)
        lab_ring: Ring depth of the lab this run builds (see 'lab up --ring')
        port_b: Tester port B, the gateway's WAN side, where the peers are emulated, e.g. enp1s0f1
        ip_b: Port B's address and subnet, e.g. 203.0.113.2/24: the first peer's address unless --peer-addrs says others
        gw_b: The gateway's address on port B's subnet (its IKE address unless --ipsec-gateway)
        ip_a: Port A's address and subnet: the gateway's LAN, every tunnel's remote traffic selector, unless --local-net says another; with --traffic, where the test frames go
        port_a: With --traffic: tester port A on the gateway's LAN, where the decrypted test frames arrive, e.g. enp1s0f0 (linerate answers ARP for --ip-a there)
        gw_a: With --traffic: the gateway's address on port A's subnet
        traffic: Time to first packet: every tunnel sends test frames through the gateway from the moment its CHILD_SA is installed until the hold ends, and port A times each tunnel's first frame (from its IKE_SA_INIT sent) and counts its frames. Needs port A (in the lab: the lab's); --hold defaults to 2s
        traffic_rate: With --traffic: test frames per second each tunnel sends (1 to 1000), e.g. 100/s. Default: 1/s, light enough that 1,000 tunnels' frames do not load the gateway's setups (the lab's charon fell behind at 10/s); each tunnel's first frame leaves as soon as it is up, whatever the rate
        ipsec_gateway: The gateway's IKE address when it is not --gw-b
        ike: IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions
        esp: The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's)
        ipsec_remote_id: The identity the gateway must show
        esp_encap: How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds)
        ipsec_timeout: How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling)
        count: How many tunnels (peers): 1..10000. With --capacity the ceiling (default 10000)
        capacity: Capacity: bring the tunnels up --step at a time, holding every earlier one, until a step's setups fail, the gateway deletes tunnels, or (with --traffic) a held tunnel delivers nothing or the step's loss is above --max-loss; reports the largest count held. Exit 1 when it stopped so, 0 when --count was reached
        step: With --capacity: tunnels added per step (default 100, or --count if fewer)
        max_loss: With --capacity --traffic: the largest loss of a step's traffic window (all held tunnels' frames) that still holds, in %, e.g. 1 (default 1)
        rate: New handshakes (IKE_SA_INIT sent) per second, e.g. 50/s. Default: as fast as the gateway answers, --window in flight
        window: Handshakes in flight at most
        hold: How long the tunnels stay up (answering the gateway) after the last setup before linerate deletes them all, e.g. 10s. Default: 0s, or 2s with --traffic. With --capacity: each step's hold (and traffic window), default 2s
        peer_addrs: The peers' outer addresses: FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab routes to port B). They must be on port B's subnet, or in the lab's peer range
        json: Write the report, with every tunnel's setup time or error, as JSON to FILE
        db: Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite
        no_db: Do not store this run in the results database
        dut_name: The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters)
        dut_firmware: The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters)
        events: Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr)
        quiet: No progress on stderr (set-up notes and errors are still printed)
        rekey: During the hold: rekey each tunnel's CHILD_SA every DURATION (e.g. 2s; spread evenly over the tunnels; --hold at least DURATION). The report gives the rekeys attempted, completed and failed, rekeys per second, and with --traffic the frames lost around each rekey and the time it blocked its tunnel
        remote_net: The network behind linerate, split into one equal slice per tunnel (each tunnel's own traffic selector): 200 tunnels in a /17 get a /25 each. In the lab: 198.19.128.0/17
        local_net: The gateway's protected LAN, every tunnel's remote traffic selector (default: --ip-a's subnet; in the lab 198.18.0.0/24)
        psk_file: The pre-shared key every peer uses, in a file only its owner can read (chmod 600); never on the command line. In the lab: the scenario's
        ipsec_id: The peers' IKE identity (an address, @fqdn or user@domain) when the gateway wants another than each peer's own address; {n} (the tunnel's number, from 1) and {addr} (its outer address) give each peer its own, e.g. @peer{n}.vpn.example or user{n}@example
    """

def lab_up(
    *,
    lab_name: Optional[Value] = None,
    ring: Optional[Value] = None,
) -> None:
    """
    ``linerate lab up``; returns what its --json writes.

    Options:
        lab_name: Default: 'default', the lab `--lab` uses
        ring: Frames each crossing between the tester's CPU and the router's holds (the queue that plays the NICs' receive rings; 4096 is a common NIC ring size). 256 keeps veth's own 256-frame rings, whose overflow during a stall of either CPU then counts as loss
    """

def lab_down(
    *,
    lab_name: Optional[Value] = None,
    all: bool = False,
) -> None:
    """
    ``linerate lab down``; returns what its --json writes.

    Options:
        lab_name: The lab to remove, as given to 'lab up --lab-name' ('default' for the lab --lab uses)
        all: Remove every lab and namespace named lr-* on this machine, whoever made it (other users' runs too), after putting back the tester ports a killed tcp/http run left in its namespaces; a running tcp/http run's namespaces stay
    """
