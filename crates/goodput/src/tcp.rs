//! N parallel TCP streams through the DUT, kernel stack on both ends.
//!
//! Sockets are made in the tester namespaces (see the crate docs); one
//! thread then sends on all streams and one receives on all (non-blocking
//! sockets and poll, as iperf3 moves its streams), in linerate's own
//! namespace. The receivers count payload bytes; the measured window starts
//! when every stream is connected and ends `duration` later (slow start
//! included, as iperf3 counts), and goodput is the bytes the receivers read
//! in it. Polling with a short timeout lets each thread notice the end.

use crate::record::{StreamRecord, TcpRun};
use crate::{Direction, Endpoint, GoodputError};
use linerate_helper::maybe_in_netns;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Bytes per write and read: large enough that a system call moves a good
/// share of the window, as iperf3's 128 KiB default.
const IO_BLOCK: usize = 128 * 1024;
/// How often a blocked thread looks at the stop flag.
const IO_TIMEOUT: Duration = Duration::from_millis(200);
/// Reads or writes on one stream per poll at most (iperf3 writes up to 10).
const BURST: usize = 8;
/// How long receivers wait for the rest after the end of the window.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Side A: the clients (LAN side).
    pub client: Endpoint,
    /// Side B: the listening server (WAN side).
    pub server: Endpoint,
    /// The address clients connect to (the server's, or the address a NAT
    /// DUT publishes it under).
    pub connect_to: SocketAddr,
    pub streams: usize,
    /// SO_SNDBUF and SO_RCVBUF on every socket (None: autotuning).
    pub window: Option<usize>,
    pub duration: Duration,
    pub connect_timeout: Duration,
}

/// Creates a TCP socket of `addr`'s family with the window set (before
/// connect or listen, so the window scale is negotiated for it).
fn socket_for(addr: &SocketAddr, window: Option<usize>) -> Result<Socket, GoodputError> {
    let socket = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| GoodputError::io("creating a TCP socket", e))?;
    if let Some(bytes) = window {
        socket
            .set_send_buffer_size(bytes)
            .and_then(|_| socket.set_recv_buffer_size(bytes))
            .map_err(|e| GoodputError::io("setting the socket buffers (--window)", e))?;
    }
    Ok(socket)
}

/// Binds and listens on `addr` inside the server's namespace.
pub fn listen(
    server: &Endpoint,
    port: u16,
    window: Option<usize>,
    backlog: i32,
) -> Result<TcpListener, GoodputError> {
    let addr = SocketAddr::new(server.ip, port);
    maybe_in_netns(server.netns.as_deref(), || {
        let socket = socket_for(&addr, window)?;
        socket.set_reuse_address(true).ok();
        socket.bind(&SockAddr::from(addr)).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                ": another server uses the port; pick another with --port"
            } else {
                ""
            };
            GoodputError::Setup(format!("cannot listen on {addr}: {e}{hint}"))
        })?;
        socket
            .listen(backlog)
            .map_err(|e| GoodputError::io(format!("listening on {addr}"), e))?;
        Ok(socket.into())
    })
}

/// Connects from the client's namespace to `to`, waiting at most `timeout`
/// (a DUT that drops the SYN shows as a timeout, one that rejects it as
/// "connection refused").
pub fn connect(
    client: &Endpoint,
    to: SocketAddr,
    window: Option<usize>,
    timeout: Duration,
) -> Result<TcpStream, GoodputError> {
    maybe_in_netns(client.netns.as_deref(), || {
        let socket = socket_for(&to, window)?;
        socket
            .connect_timeout(&SockAddr::from(to), timeout)
            .map_err(|e| GoodputError::NoConnection {
                addr: to,
                port: to.port(),
                ip: to.ip(),
                why: if e.kind() == std::io::ErrorKind::TimedOut {
                    format!("no answer within {} s", timeout.as_secs_f64())
                } else {
                    e.to_string()
                },
            })?;
        Ok(socket.into())
    })
}

/// What TCP_INFO says about a socket.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpInfo {
    pub total_retrans: u64,
    pub rtt_us: u64,
    pub snd_mss: u64,
}

/// TCP_INFO of a connected socket.
pub fn tcp_info(stream: &TcpStream) -> TcpInfo {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len`
    // bytes into it and tells how many.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return TcpInfo::default();
    }
    TcpInfo {
        total_retrans: info.tcpi_total_retrans as u64,
        rtt_us: info.tcpi_rtt as u64,
        snd_mss: info.tcpi_snd_mss as u64,
    }
}

/// Waits until some of `fds` are ready for `events`, at most IO_TIMEOUT;
/// returns the `revents` of each.
fn poll_all(fds: &[i32], events: i16) -> Vec<i16> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: pfds is a valid array of pollfd of the length given.
    let rc = unsafe {
        libc::poll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            IO_TIMEOUT.as_millis() as i32,
        )
    };
    if rc <= 0 {
        return vec![0; fds.len()];
    }
    pfds.iter().map(|p| p.revents).collect()
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    )
}

/// Sends on every stream until `stop`, one thread for all (as iperf3 does:
/// on a tester with few CPUs, ten blocking threads would cost switches).
/// A stream whose peer went away is left out; the receiver notices too.
fn send_all(streams: Vec<TcpStream>, stop: &AtomicBool) -> Vec<TcpStream> {
    let block: Vec<u8> = (0..IO_BLOCK).map(|i| (i % 251) as u8).collect();
    for s in &streams {
        let _ = s.set_nonblocking(true);
    }
    let mut live: Vec<bool> = vec![true; streams.len()];
    while !stop.load(Ordering::Relaxed) && live.iter().any(|&l| l) {
        let fds: Vec<i32> = streams.iter().map(|s| s.as_raw_fd()).collect();
        let ready = poll_all(&fds, libc::POLLOUT);
        for (i, mut stream) in streams.iter().enumerate() {
            if !live[i] || ready[i] == 0 {
                continue;
            }
            // Fill what the socket takes now (a bounded number of writes,
            // so one stream cannot starve the others), then poll again.
            for _ in 0..BURST {
                match stream.write(&block) {
                    Ok(n) if n == block.len() => continue,
                    Ok(_) => break,
                    Err(e) if would_block(&e) => break,
                    Err(_) => {
                        live[i] = false;
                        break;
                    }
                }
            }
        }
    }
    streams
}

/// Reads and counts on every stream, one thread for all, until each sender
/// has closed, or `DRAIN_LIMIT` after `stop`.
fn receive_all(streams: Vec<TcpStream>, counts: &[Arc<AtomicU64>], stop: &AtomicBool) {
    let mut buf = vec![0u8; IO_BLOCK];
    for s in &streams {
        let _ = s.set_nonblocking(true);
    }
    let mut open: Vec<bool> = vec![true; streams.len()];
    let mut stopped_at: Option<Instant> = None;
    while open.iter().any(|&o| o) {
        let fds: Vec<i32> = streams.iter().map(|s| s.as_raw_fd()).collect();
        let ready = poll_all(&fds, libc::POLLIN);
        for (i, mut stream) in streams.iter().enumerate() {
            if !open[i] || ready[i] == 0 {
                continue;
            }
            for _ in 0..BURST {
                match stream.read(&mut buf) {
                    Ok(0) => {
                        open[i] = false;
                        break;
                    }
                    Ok(n) => {
                        counts[i].fetch_add(n as u64, Ordering::Relaxed);
                        if n < buf.len() {
                            break; // drained for now
                        }
                    }
                    Err(e) if would_block(&e) => break,
                    Err(_) => {
                        open[i] = false;
                        break;
                    }
                }
            }
        }
        if stop.load(Ordering::Relaxed) {
            let since = *stopped_at.get_or_insert_with(Instant::now);
            if since.elapsed() > DRAIN_LIMIT {
                break;
            }
        }
    }
}

/// Runs one direction: connects `streams` pairs, moves data for
/// `duration`, and returns what the receivers counted. `interrupt` ends the
/// window early (the run is then marked interrupted, its figures kept).
pub fn run(
    cfg: &TcpConfig,
    direction: Direction,
    listener: &TcpListener,
    interrupt: &AtomicBool,
) -> Result<TcpRun, GoodputError> {
    // Pair the sockets: connect one, accept one. Accepting in order pairs
    // them even through a NAT, where the server sees another source address.
    let mut pairs = Vec::with_capacity(cfg.streams);
    for _ in 0..cfg.streams {
        let client = connect(&cfg.client, cfg.connect_to, cfg.window, cfg.connect_timeout)?;
        let server = accept_within(listener, cfg.connect_timeout)?;
        pairs.push(match direction {
            Direction::Download => (server, client),
            Direction::Upload => (client, server),
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<Arc<AtomicU64>> = (0..cfg.streams).map(|_| Arc::default()).collect();
    // Both threads wait here, so the window opens when they are running.
    let start = Arc::new(Barrier::new(3));
    let (tx, rx): (Vec<TcpStream>, Vec<TcpStream>) = pairs.into_iter().unzip();
    let sender = {
        let (stop, start) = (stop.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            send_all(tx, &stop)
        })
    };
    let receiver = {
        let (stop, start, counts) = (stop.clone(), start.clone(), counts.clone());
        std::thread::spawn(move || {
            start.wait();
            receive_all(rx, &counts, &stop)
        })
    };
    start.wait();
    let t0 = Instant::now();
    let at_start: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let mut interrupted = false;
    while t0.elapsed() < cfg.duration {
        if interrupt.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        std::thread::sleep((cfg.duration - t0.elapsed()).min(Duration::from_millis(50)));
    }
    let seconds = t0.elapsed().as_secs_f64();
    let at_end: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    stop.store(true, Ordering::Relaxed);

    let senders = sender.join().expect("sender thread");
    let mut streams = Vec::with_capacity(cfg.streams);
    for (i, socket) in senders.iter().enumerate() {
        let info = tcp_info(socket);
        let _ = socket.shutdown(std::net::Shutdown::Write);
        let bytes = at_end[i] - at_start[i];
        streams.push(StreamRecord {
            stream: i + 1,
            bytes,
            goodput_bps: 8.0 * bytes as f64 / seconds,
            retransmits: info.total_retrans,
            rtt_us: info.rtt_us,
            snd_mss: info.snd_mss,
        });
    }
    receiver.join().expect("receiver thread");
    let bytes: u64 = streams.iter().map(|s| s.bytes).sum();
    if bytes == 0 && !interrupted {
        return Err(GoodputError::NoData(format!(
            "the {} TCP connections to {} came up but no payload arrived in {seconds:.1} s: the DUT drops the data packets (a filter or a broken path MTU?)",
            cfg.streams, cfg.connect_to
        )));
    }
    Ok(TcpRun {
        direction,
        seconds,
        bytes,
        goodput_bps: 8.0 * bytes as f64 / seconds,
        retransmits: streams.iter().map(|s| s.retransmits).sum(),
        l2_bps: 0.0,
        link_usage_percent: 0.0,
        streams,
        interrupted,
    })
}

/// Accepts one connection, waiting at most `timeout`.
fn accept_within(listener: &TcpListener, timeout: Duration) -> Result<TcpStream, GoodputError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| GoodputError::io("setting the listener non-blocking", e))?;
    let t0 = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(|e| GoodputError::io("setting a socket blocking", e))?;
                return Ok(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if t0.elapsed() > timeout {
                    return Err(GoodputError::NoData(format!(
                        "a client connected but the server side never saw the connection within {} s: is another host answering for the server's address?",
                        timeout.as_secs_f64()
                    )));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(GoodputError::io("accepting a connection", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams over loopback in linerate's own namespace: the counting and
    /// pairing work, every byte counted by one receiver.
    #[test]
    fn loopback_streams_move_data() {
        let server = Endpoint {
            netns: None,
            ip: "127.0.0.1".parse().unwrap(),
        };
        let listener = listen(&server, 0, Some(256 * 1024), 16).unwrap();
        let port = listener.local_addr().unwrap().port();
        let cfg = TcpConfig {
            client: server.clone(),
            server: server.clone(),
            connect_to: SocketAddr::new(server.ip, port),
            streams: 3,
            window: Some(256 * 1024),
            duration: Duration::from_millis(300),
            connect_timeout: Duration::from_secs(2),
        };
        let run = run(&cfg, Direction::Upload, &listener, &AtomicBool::new(false)).unwrap();
        assert_eq!(run.streams.len(), 3);
        assert!(run.streams.iter().all(|s| s.bytes > 0), "{run:?}");
        assert_eq!(run.bytes, run.streams.iter().map(|s| s.bytes).sum::<u64>());
        assert!(run.seconds >= 0.3);
    }

    #[test]
    fn refused_connection_is_a_dut_failure() {
        let client = Endpoint {
            netns: None,
            ip: "127.0.0.1".parse().unwrap(),
        };
        // Port 1 on loopback: nobody listens, the kernel answers RST.
        let err = connect(
            &client,
            "127.0.0.1:1".parse().unwrap(),
            None,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(err.is_dut_failure());
        assert!(err.to_string().contains("TCP port 1"), "{err}");
    }
}
