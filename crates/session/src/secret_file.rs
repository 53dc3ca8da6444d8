//! Files that receive secrets (`--esp-keys`): opened without following
//! a link, owned by the caller, mode 0600, before a byte is written.

/// Writes `text` (keys) to `path`, readable by its owner only, whatever
/// the file was before (see [`open_private`]).
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = open_private(path, false)?;
    file.write_all(text.as_bytes())
}

/// Opens `path` to write secrets to: emptied, or kept for `append`; made
/// or narrowed to mode 0600. Refused when `path` is a symbolic link (never
/// followed: a link to another file would have that file filled with keys),
/// not a regular file, a file with other names (hard links), or someone
/// else's; nothing is truncated before those checks.
pub(crate) fn open_private(path: &std::path::Path, append: bool) -> std::io::Result<std::fs::File> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .append(append)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: a FIFO without a reader fails at once instead of
        // blocking the run (it is then refused as not a regular file).
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => Error::new(
                ErrorKind::InvalidInput,
                "is a symbolic link, which linerate does not follow to write keys: give the path of the file itself",
            ),
            _ => e,
        })?;
    let meta = file.metadata()?;
    let refuse = |why: &str| Err(Error::new(ErrorKind::InvalidInput, why.to_string()));
    if !meta.file_type().is_file() {
        return refuse("is not a regular file: give the path of a file for the keys");
    }
    if meta.nlink() > 1 {
        return refuse(
            "has other names (hard links), which would show the keys: give a file of its own",
        );
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return refuse("belongs to another user: give a file of your own");
    }
    // An existing file keeps its mode on open: narrow it before writing.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    if !append {
        file.set_len(0)?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys go to the named file only: a symbolic link or a hard link to
    /// another file is refused with that file untouched (it was truncated,
    /// filled with keys and made 0600); a file of one's own is emptied
    /// and narrowed to 0600, or appended to.
    #[test]
    fn keys_are_written_to_no_file_but_the_named_one() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("lr-keys-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.join("keys.link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let hard = dir.join("keys.hard");
        std::fs::hard_link(&victim, &hard).unwrap();
        for (path, why) in [(&link, "symbolic link"), (&hard, "hard links")] {
            for append in [false, true] {
                let e = open_private(path, append).unwrap_err().to_string();
                assert!(e.contains(why), "{}: {e}", path.display());
            }
            let e = write_private(path, "keys\n").unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let meta = std::fs::metadata(&victim).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o644, "the victim's mode untouched");
        std::fs::remove_file(&hard).unwrap();
        let own = dir.join("keys");
        std::fs::write(&own, "old and longer\n").unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&own, "sa 1\n").unwrap();
        {
            use std::io::Write;
            let mut f = open_private(&own, true).unwrap();
            f.write_all(b"sa 2\n").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "sa 1\nsa 2\n");
        assert_eq!(std::fs::metadata(&own).unwrap().mode() & 0o777, 0o600);
        let e = write_private(&dir, "keys\n").unwrap_err();
        assert!(!e.to_string().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
