//! A real nginx as the HTTP server (`linerate http --server nginx`).
//!
//! linerate writes a minimal configuration and the objects (files named by
//! their size, so the clients' `GET /<bytes>` URLs work unchanged) into a
//! temporary directory, runs nginx in the foreground inside the server's
//! namespace, and on drop stops it and removes the directory.

use crate::netns::find_tool;
use crate::GoodputError;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nginx {
    child: Option<Child>,
    dir: PathBuf,
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
        let dir = std::env::temp_dir().join(format!("linerate-nginx-{}", std::process::id()));
        let mut server = Nginx {
            child: None,
            dir: dir.clone(),
        };
        let io = |what: &str, e| GoodputError::io(format!("{what} in {}", dir.display()), e);
        std::fs::create_dir_all(dir.join("www"))
            .map_err(|e| io("making the nginx directory", e))?;
        for &size in sizes {
            let data: Vec<u8> = (0..size as usize).map(|i| (i % 251) as u8).collect();
            std::fs::write(dir.join("www").join(size.to_string()), data)
                .map_err(|e| io("writing an object", e))?;
        }
        let dir_text = dir.to_string_lossy().into_owned();
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config(&dir_text, listen))
            .map_err(|e| io("writing nginx.conf", e))?;
        let log = dir.join("error.log");
        let nginx_args = [
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
                let ip = find_tool("ip").ok_or_else(|| {
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
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
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
                    let log =
                        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
                    let why = err
                        .lines()
                        .chain(log.lines())
                        .find(|l| l.contains("emerg") || l.contains("error"))
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
                    self.dir.join("error.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM: nginx's fast shutdown; the master stops its workers.
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
