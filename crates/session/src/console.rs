//! Where a run's words go: its notes and progress (stderr) and its tables
//! (stdout). The terminal by default. A caller that wants none of it
//! (Python's `quiet=True`, which returns the results as values) runs the
//! command inside [`scoped`] with [`Console::Silent`]. The choice is per
//! thread, not per process: two runs in two threads each keep their own.
//!
//! Every print of this crate goes through the macros below (`errln!`,
//! `errp!`, `outln!`, `outp!`; `#[macro_use]`, so every module has them),
//! never `eprintln!`/`print!` directly.

use std::cell::Cell;
use std::fmt::Arguments;
use std::io::Write;

/// Where the words of the runs on this thread go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Console {
    /// Notes and progress on stderr, tables on stdout.
    Terminal,
    /// Nothing printed; errors are still returned.
    Silent,
}

thread_local! {
    static CONSOLE: Cell<Console> = const { Cell::new(Console::Terminal) };
}

/// Runs `f` with this thread's words going to `console`, and restores the
/// one before however `f` ends.
pub fn scoped<R>(console: Console, f: impl FnOnce() -> R) -> R {
    struct Restore(Console);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONSOLE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CONSOLE.with(|c| c.replace(console)));
    f()
}

/// Whether this thread prints nothing (progress bars are hidden too).
pub fn silent() -> bool {
    CONSOLE.with(|c| c.get()) == Console::Silent
}

/// Writes to stderr unless silent. A write that fails panics with
/// `eprintln!`'s own message, as `eprintln!` does.
pub fn stderr(args: Arguments<'_>) {
    if !silent() {
        if let Err(e) = std::io::stderr().write_fmt(args) {
            panic!("failed printing to stderr: {e}");
        }
    }
}

/// Writes to stdout unless silent. A write that fails panics with
/// `println!`'s own message, as `println!` does: the binary turns that
/// panic on a closed pipe (`linerate ... | head -1`) into SIGPIPE's quiet
/// end (`exit::is_closed_pipe_panic`).
pub fn stdout(args: Arguments<'_>) {
    if !silent() {
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_fmt(args) {
            panic!("failed printing to stdout: {e}");
        }
    }
}

/// `eprintln!` through the console.
macro_rules! errln {
    () => {
        $crate::console::stderr(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::console::stderr(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `eprint!` through the console.
macro_rules! errp {
    ($($t:tt)*) => {
        $crate::console::stderr(format_args!($($t)*))
    };
}

/// `println!` through the console.
macro_rules! outln {
    () => {
        $crate::console::stdout(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::console::stdout(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `print!` through the console.
macro_rules! outp {
    ($($t:tt)*) => {
        $crate::console::stdout(format_args!($($t)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_silence_ends_with_its_scope_even_on_panic() {
        assert!(!silent());
        scoped(Console::Silent, || assert!(silent()));
        assert!(!silent());
        let caught = std::panic::catch_unwind(|| scoped(Console::Silent, || panic!("x")));
        assert!(caught.is_err());
        assert!(!silent());
    }

    #[test]
    fn silence_is_per_thread() {
        scoped(Console::Silent, || {
            let other = std::thread::spawn(silent).join().unwrap();
            assert!(!other, "another thread's run still prints");
            assert!(silent());
        });
    }
}
