//! Compiles every `bpf/*.bpf.c` into a BPF object with clang; the crate
//! embeds the objects (`include_bytes!`), so the binary carries its programs
//! and needs no files at run time.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel UAPI headers (asm/types.h) live under the multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let target_arch = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => other,
    };
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-env-changed=CLANG");
    let mut sources: Vec<PathBuf> = std::fs::read_dir("bpf")
        .expect("the bpf/ directory of linerate-bpf")
        .map(|e| e.expect("reading bpf/").path())
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();
    for src in sources {
        let stem = src
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".bpf.c"))
            .expect("a .bpf.c file name");
        let obj = out.join(format!("{stem}.bpf.o"));
        compile(&clang, &src, &obj, &multiarch, target_arch);
    }
}

fn compile(clang: &str, src: &Path, obj: &Path, multiarch: &str, target_arch: &str) {
    let status = Command::new(clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg(format!("-I{multiarch}"))
        .arg("-Ibpf")
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("clang failed ({s}) on {}", src.display()),
        Err(e) => panic!(
            "cannot run {clang} ({e}): the XDP programs are built with clang; \
             install it with scripts/setup.sh (apt-get install clang libbpf-dev)"
        ),
    }
}
