//! A real nginx as the HTTP server (`linerate http --server nginx`).
//!
//! linerate writes a minimal configuration and the objects (files named by
//! their size, so the clients' `GET /<bytes>` URLs work unchanged) into a
//! private directory (`/run/linerate/nginx.<random>`, 0700, files 0600;
//! see linerate-helper), runs nginx in the foreground inside the server's
//! namespace, and on drop stops it and removes the directory.
//!
//! nginx must not outlive linerate, however linerate ends. Its master gets
//! SIGKILL when linerate ends (`PR_SET_PDEATHSIG`), but the workers it
//! forks would not: so nginx runs as PID 1 of a PID namespace of its own
//! (`unshare --pid --fork --kill-child`), and when the first process of a
//! PID namespace ends, the kernel kills every other process in it.

use crate::GoodputError;
use linerate_helper::{find_tool, ip_path, DieWithParent, PrivateDir};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nginx {
    /// `unshare`, whose only child is nginx's master.
    child: Option<Child>,
    dir: PrivateDir,
}

/// The configuration: objects from `www`, keep-alive without limit (the
/// clients hold their connection for the whole run), no access log (it
/// would cost the server time per request), sendfile as nginx is deployed.
fn config(dir: &str, listen: SocketAddr) -> String {
    format!(
        "daemon off;
master_process on;
worker_processes auto;
user root root;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_body_temp_path {dir}/body;
    server {{
        listen {listen};
        root {dir}/www;
        location / {{ }}
    }}
}}
"
    )
}

impl Nginx {
    /// Starts nginx in namespace `netns` listening on `listen`, serving
    /// objects of `sizes` bytes; returns when it accepts connections.
    pub fn start(
        netns: Option<&str>,
        listen: SocketAddr,
        sizes: &[u64],
    ) -> Result<Nginx, GoodputError> {
        let nginx = find_tool("nginx").ok_or_else(|| {
            GoodputError::Setup(
                "nginx not found: install it with 'apt-get install nginx-light', or use the built-in server (leave out --server nginx)".into(),
            )
        })?;
        let unshare = find_tool("unshare").ok_or_else(|| {
            GoodputError::Setup(
                "unshare not found (it keeps nginx from outliving linerate): install it with 'apt-get install util-linux'".into(),
            )
        })?;
        let private = PrivateDir::new("nginx").map_err(|e| {
            GoodputError::io(
                format!("making a directory in {}", linerate_helper::RUN_DIR),
                e,
            )
        })?;
        let dir = private.path().to_path_buf();
        let io = |what: &str, e| GoodputError::io(format!("{what} in {}", dir.display()), e);
        private
            .subdir("www")
            .map_err(|e| io("making the objects' directory", e))?;
        for &size in sizes {
            let data: Vec<u8> = (0..size as usize).map(|i| (i % 251) as u8).collect();
            private
                .write(&format!("www/{size}"), &data)
                .map_err(|e| io("writing an object", e))?;
        }
        let dir_text = dir.to_string_lossy().into_owned();
        let conf = private
            .write("nginx.conf", config(&dir_text, listen).as_bytes())
            .map_err(|e| io("writing nginx.conf", e))?;
        let mut server = Nginx {
            child: None,
            dir: private,
        };
        let log = dir.join("error.log");
        let nginx_args = [
            unshare.to_string_lossy().into_owned(),
            "--pid".into(),
            "--fork".into(),
            "--kill-child=SIGKILL".into(),
            "--".into(),
            nginx.to_string_lossy().into_owned(),
            "-p".into(),
            dir_text.clone(),
            "-c".into(),
            conf.to_string_lossy().into_owned(),
            "-e".into(),
            log.to_string_lossy().into_owned(),
        ];
        let mut cmd = match netns {
            Some(ns) => {
                let ip = ip_path().ok_or_else(|| {
                    GoodputError::Setup("iproute2 not found: apt-get install iproute2".into())
                })?;
                let mut c = Command::new(ip);
                c.args(["netns", "exec", ns]).args(&nginx_args);
                c
            }
            None => {
                let mut c = Command::new(&nginx_args[0]);
                c.args(&nginx_args[1..]);
                c
            }
        };
        // Started from the thread that runs the command (see DieWithParent).
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .die_with_parent()
            .spawn()
            .map_err(|e| GoodputError::io("starting nginx", e))?;
        server.child = Some(child);
        server.wait_listening(netns, listen)?;
        Ok(server)
    }

    /// Waits until nginx accepts a connection on `listen` (probed from its
    /// own namespace), or reports why it did not start.
    fn wait_listening(
        &mut self,
        netns: Option<&str>,
        listen: SocketAddr,
    ) -> Result<(), GoodputError> {
        let probe = crate::Endpoint {
            netns: netns.map(str::to_string),
            ip: listen.ip(),
        };
        let t0 = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        use std::io::Read;
                        let _ = e.read_to_string(&mut err);
                    }
                    let log = std::fs::read_to_string(self.dir.path().join("error.log"))
                        .unwrap_or_default();
                    // nginx's complaint, else unshare's (or ip's).
                    let why = err
                        .lines()
                        .chain(log.lines())
                        .find(|l| l.contains("emerg") || l.contains("error"))
                        .or_else(|| err.lines().find(|l| !l.trim().is_empty()))
                        .unwrap_or("no message")
                        .to_string();
                    return Err(GoodputError::Setup(format!(
                        "nginx exited ({status}) at start: {why}"
                    )));
                }
            }
            if crate::tcp::connect(&probe, listen, None, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(GoodputError::Setup(format!(
                    "nginx did not accept connections on {listen} within 10 s; see {}",
                    self.dir.path().join("error.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The directory nginx runs in (its prefix).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// nginx's master: `unshare`'s only child (/proc/PID/task/PID/children).
fn master_of(unshare: u32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM to the master: nginx's fast shutdown, the master stops
            // its workers. unshare ends when the master has, and the master,
            // PID 1 of its namespace, only once every worker has.
            if let Some(master) = master_of(child.id()) {
                let pid = nix::unistd::Pid::from_raw(master);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Still there: SIGKILL to unshare, which passes it to the master
            // (--kill-child); the kernel then kills the workers.
            let _ = child.kill();
            let _ = child.wait();
        }
        // The directory goes with `self.dir`.
    }
}
