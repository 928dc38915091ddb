//! A command in a workspace's running container, wired to this process's own standard streams
//! (`po-sandbox exec`): in the workspace folder, as the container's user, with the container's
//! environment (the broker grant's variables included). With a TTY the terminal is put in raw
//! mode (so Ctrl-C and the like reach the command) and resized with this one; without, stdin,
//! stdout and stderr stay apart and stdin's end is passed on. Resolves with the exit code.

use std::time::Duration;

use crate::engine::EngineError;
use crate::engine::model::ExecConfig;
use crate::engine::model::LogOutput;
use crate::engine::model::{ExecStarted, StartExecOptions};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::engine::api::EngineApi;
use crate::error::{Error, Result};

pub mod spawner;
pub(crate) mod wire;

pub use crate::names::paths::MAX_COMMAND_BYTES;

/// What to run and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Allocate a TTY (stdin is a terminal).
    pub tty: bool,
    /// The folder to run in, inside the container.
    pub working_dir: String,
    /// `NAME=value` over the container's environment (the broker's current TCP address).
    pub env: Vec<String>,
}

/// Checks a command before any I/O: at least the program, no empty program, no NUL byte, at
/// most [`MAX_COMMAND_BYTES`].
pub fn check_command(command: &[String]) -> Result<()> {
    let invalid = |reason: &str| {
        Err(Error::OptionsInvalid {
            option: "command".into(),
            reason: reason.into(),
        })
    };
    match command.first() {
        None => invalid(
            "it is empty; give the program to run and its arguments (po-sandbox exec [dir] -- <command…>)",
        ),
        Some(p) if p.is_empty() => invalid("the program name is empty; give the program to run"),
        _ if command.iter().any(|a| a.contains('\0')) => {
            invalid("an argument contains a NUL byte, which no command line can carry")
        }
        _ if command.iter().map(|a| a.len() + 1).sum::<usize>() > MAX_COMMAND_BYTES => {
            invalid(&format!(
                "it is longer than {MAX_COMMAND_BYTES} bytes; pass long input on stdin instead"
            ))
        }
        _ => Ok(()),
    }
}

/// Runs the request in `container_id` attached to this process's stdin, stdout and stderr, and
/// returns the command's exit code.
pub async fn run(
    engine: &impl EngineApi,
    container_id: &str,
    workspace: &str,
    req: ExecRequest,
) -> Result<i64> {
    let failed = |doing: &str| {
        let doing = format!(
            "{doing} in container {}",
            &container_id[..container_id.len().min(12)]
        );
        move |e: EngineError| Error::container_caused(workspace, doing, e)
    };
    let config = ExecConfig {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(req.tty),
        cmd: Some(req.command.clone()),
        working_dir: Some(req.working_dir.clone()),
        env: (!req.env.is_empty()).then(|| req.env.clone()),
        ..Default::default()
    };
    let exec_id = engine
        .create_exec(container_id, config)
        .await
        .map_err(failed("create the exec"))?;
    let started = engine
        .start_exec(
            &exec_id,
            StartExecOptions {
                detach: false,
                tty: req.tty,
                output_capacity: None,
            },
        )
        .await
        .map_err(failed("start the exec"))?;
    let ExecStarted::Attached { output, input } = started else {
        return Err(Error::container(workspace, "the exec started detached"));
    };
    let _raw = req.tty.then(terminal::RawMode::enter).flatten();
    if req.tty {
        // Before any input is passed on, so what the command reads comes after its size is set.
        terminal::resize(engine, &exec_id).await;
    }
    let resizer = req
        .tty
        .then(|| tokio::spawn(terminal::follow_size(engine.clone(), exec_id.clone())));
    let feeder = tokio::spawn(feed_stdin(tokio::io::stdin(), input));
    let copied = copy_output(output).await;
    feeder.abort();
    if let Some(r) = resizer {
        r.abort();
    }
    copied.map_err(|e| Error::container_caused(workspace, "copy the command's output", e))?;
    exit_code(engine, &exec_id)
        .await
        .map_err(failed("inspect the exec"))
}

/// Runs the request as [`run`] does, behind the network rules' gate unless the container's
/// `health` says it passed it (`spec::exec_gated`, with the bundle's `interpreter`): through
/// the container's spawner when `spawner` says where it is and it checks out (see
/// [`spawner`]: one that runs has passed the gate); otherwise by the engine's exec, starting a
/// spawner alongside for the next command (a failure to is only logged).
pub async fn run_or_spawn(
    engine: &impl EngineApi,
    (container_id, workspace): (&str, &str),
    mut req: ExecRequest,
    (health, interpreter): (Option<&str>, &str),
    spawner: Option<&spawner::Place>,
) -> Result<i64> {
    let gate = |command| crate::sandbox::blueprint::spec::exec_gated(health, interpreter, command);
    let Some(place) = spawner.filter(|_| !req.tty) else {
        req.command = gate(req.command);
        return run(engine, container_id, workspace, req).await;
    };
    let found = spawner::connect(place, container_id).await;
    #[cfg(target_os = "linux")]
    if let spawner::Found::Connected(stream) = found {
        return (spawner::run(stream, &req).await).map_err(|e| {
            Error::container_caused(
                workspace,
                "run the command through the sandbox's spawner",
                e,
            )
        });
    }
    req.command = gate(req.command);
    if let spawner::Found::Unusable(why) = &found {
        tracing::debug!(workspace, %why, "the engine's exec: no spawner can run here");
    }
    if !matches!(found, spawner::Found::Absent) {
        return run(engine, container_id, workspace, req).await;
    }
    let probe =
        (health != Some("healthy")).then(|| crate::sandbox::blueprint::firewall::mark_probe(true));
    let launch = spawner::launch(engine, container_id, place, interpreter, probe);
    let (ran, launched) = tokio::join!(run(engine, container_id, workspace, req), launch);
    if let Err(why) = launched {
        tracing::debug!(workspace, %why, "no spawner started: later execs take the engine's exec");
    }
    ran
}

/// A command's exit code and what it wrote, kept apart.
#[derive(Debug, Default)]
pub struct Captured {
    pub code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The most a captured command may write (a bundle of the agent's work included).
pub const MAX_CAPTURED: usize = 1 << 30;

/// Runs `command` in `container_id` in `working_dir`, as the container's user, with no stdin,
/// and keeps its output (at most [`MAX_CAPTURED`] bytes), all of it before `deadline` (the
/// caller's one deadline for every command of its work: [`Error::ChangesTimeout`] past it).
pub async fn capture(
    engine: &impl EngineApi,
    (container_id, workspace): (&str, &str),
    command: Vec<String>,
    working_dir: String,
    deadline: Deadline,
) -> Result<Captured> {
    match tokio::time::timeout_at(
        deadline.at,
        capture_now(engine, (container_id, workspace), command, working_dir),
    )
    .await
    {
        Ok(done) => done,
        Err(_) => Err(Error::ChangesTimeout {
            workspace: workspace.into(),
            bound_ms: deadline.bound.as_millis() as u64,
        }),
    }
}

/// One deadline for every command of a piece of work, and the bound it was set from.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub at: tokio::time::Instant,
    pub bound: std::time::Duration,
}

impl Deadline {
    /// `bound` from now.
    pub fn after(bound: std::time::Duration) -> Deadline {
        Deadline {
            at: tokio::time::Instant::now() + bound,
            bound,
        }
    }
}

async fn capture_now(
    engine: &impl EngineApi,
    (container_id, workspace): (&str, &str),
    command: Vec<String>,
    working_dir: String,
) -> Result<Captured> {
    let failed =
        |doing: &'static str| move |e: EngineError| Error::container_caused(workspace, doing, e);
    let config = ExecConfig {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(command),
        working_dir: Some(working_dir),
        ..Default::default()
    };
    let exec_id = engine
        .create_exec(container_id, config)
        .await
        .map_err(failed("cannot create an exec"))?;
    let options = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: None,
    };
    let started = engine
        .start_exec(&exec_id, options)
        .await
        .map_err(failed("cannot start an exec"))?;
    let ExecStarted::Attached { mut output, .. } = started else {
        return Err(Error::container(workspace, "the exec started detached"));
    };
    let mut got = Captured::default();
    while let Some(chunk) = output.next().await {
        match chunk.map_err(failed("cannot read an exec's output"))? {
            LogOutput::StdErr { message } => got.stderr.extend_from_slice(&message),
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                got.stdout.extend_from_slice(&message)
            }
            LogOutput::StdIn { .. } => {}
        }
        if got.stdout.len() + got.stderr.len() > MAX_CAPTURED {
            return Err(Error::container(
                workspace,
                format!("a command wrote more than {MAX_CAPTURED} bytes"),
            ));
        }
    }
    got.code = exit_code(engine, &exec_id)
        .await
        .map_err(failed("cannot inspect an exec"))?;
    Ok(got)
}

/// Copies `stdin` into the exec until it ends, then half-closes the exec's input so the
/// command sees the end too.
async fn feed_stdin(
    mut stdin: impl AsyncRead + Unpin,
    mut input: std::pin::Pin<Box<dyn AsyncWrite + Send>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match tokio::io::AsyncReadExt::read(&mut stdin, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if input.write_all(&buf[..n]).await.is_err() || input.flush().await.is_err() {
            return;
        }
    }
    let _ = input.shutdown().await;
}

/// Writes the exec's output to this process's stdout and stderr as it arrives.
async fn copy_output(
    mut output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = std::result::Result<LogOutput, EngineError>> + Send>,
    >,
) -> std::result::Result<(), EngineError> {
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    while let Some(chunk) = output.next().await {
        let written = match chunk? {
            LogOutput::StdErr { message } => write_now(&mut stderr, &message).await,
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                write_now(&mut stdout, &message).await
            }
            LogOutput::StdIn { .. } => Ok(()),
        };
        // Our own stdout closed (a pipe's reader left): nothing more can be shown.
        if written.is_err() {
            break;
        }
    }
    Ok(())
}

async fn write_now(to: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    to.write_all(bytes).await?;
    to.flush().await
}

/// The exit code once the engine has recorded it (the output can end a moment before).
async fn exit_code(
    engine: &impl EngineApi,
    exec_id: &str,
) -> std::result::Result<i64, EngineError> {
    let mut pause = Duration::from_millis(5);
    for _ in 0..40 {
        let info = engine.inspect_exec(exec_id).await?;
        if info.running != Some(true)
            && let Some(code) = info.exit_code
        {
            return Ok(code);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
    // Still running after its output closed (it closed its streams and went on): report that.
    Ok(-1)
}

/// The local terminal: raw mode while attached, and its size.
mod terminal {
    use crate::engine::api::EngineApi;

    /// The terminal's settings before raw mode; restored when dropped.
    #[cfg(unix)]
    pub struct RawMode(libc::termios);

    #[cfg(unix)]
    impl RawMode {
        /// Puts stdin's terminal in raw mode; `None` when stdin is not a terminal.
        pub fn enter() -> Option<RawMode> {
            // SAFETY: termios is plain data; tcgetattr fills it or fails.
            let mut saved: libc::termios = unsafe { std::mem::zeroed() };
            if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } != 0 {
                return None;
            }
            let mut raw = saved;
            // SAFETY: raw is a valid termios from tcgetattr.
            unsafe { libc::cfmakeraw(&mut raw) };
            if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) } != 0 {
                return None;
            }
            Some(RawMode(saved))
        }
    }

    #[cfg(unix)]
    impl Drop for RawMode {
        fn drop(&mut self) {
            // SAFETY: restores the settings read in `enter`.
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.0) };
        }
    }

    /// (rows, columns) of the terminal on stdout, else stdin.
    #[cfg(unix)]
    pub fn size() -> Option<(u16, u16)> {
        [libc::STDOUT_FILENO, libc::STDIN_FILENO]
            .into_iter()
            .find_map(|fd| {
                // SAFETY: winsize is plain data; TIOCGWINSZ fills it or fails.
                let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
                let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
                (ok && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
            })
    }

    /// No raw mode without a Unix terminal (Windows): the exec still runs, line by line.
    #[cfg(not(unix))]
    pub struct RawMode;

    #[cfg(not(unix))]
    impl RawMode {
        /// Without a Unix terminal there is no raw mode to enter.
        pub fn enter() -> Option<RawMode> {
            None
        }
    }

    /// No terminal size without a Unix terminal.
    #[cfg(not(unix))]
    pub fn size() -> Option<(u16, u16)> {
        None
    }

    /// Gives the exec this terminal's size (best effort: a failed resize leaves the old size).
    pub async fn resize(engine: &impl EngineApi, exec_id: &str) {
        if let Some((height, width)) = size() {
            let _ = engine.resize_exec(exec_id, height, width).await;
        }
    }

    /// Gives the exec this terminal's size after every SIGWINCH (Unix only).
    #[cfg(not(unix))]
    pub async fn follow_size(engine: impl EngineApi, exec_id: String) {
        // No SIGWINCH on Windows: the size set at the start stays.
        let _ = (engine, exec_id);
    }

    /// Gives the exec this terminal's size after every SIGWINCH.
    #[cfg(unix)]
    pub async fn follow_size(engine: impl EngineApi, exec_id: String) {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut changes) = signal(SignalKind::window_change()) else {
            return;
        };
        while changes.recv().await.is_some() {
            resize(&engine, &exec_id).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_checked_before_any_io() {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let long = "x".repeat(MAX_COMMAND_BYTES);
        let cases: Vec<(Vec<String>, Option<&str>)> = vec![
            (s(&["ls", "-la"]), None),
            (s(&["sh"]), None),
            (s(&["echo", ""]), None),
            (s(&[]), Some("empty")),
            (s(&["", "x"]), Some("program name is empty")),
            (s(&["echo", "a\0b"]), Some("NUL")),
            (vec!["echo".into(), long], Some("longer than")),
        ];
        for (command, refused) in cases {
            match (check_command(&command), refused) {
                (Ok(()), None) => {}
                (Err(e), Some(what)) => {
                    assert_eq!(e.code(), "OPTIONS_INVALID");
                    assert!(e.to_string().contains(what), "{e}");
                    assert!(e.to_string().contains("command"), "{e}");
                }
                (got, want) => panic!("{command:?}: {got:?}, wanted refusal {want:?}"),
            }
        }
    }

    #[tokio::test]
    async fn stdin_is_copied_then_half_closed() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let input: std::pin::Pin<Box<dyn AsyncWrite + Send>> = Box::pin(ours);
        feed_stdin(&b"hello\nworld"[..], input).await;
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut theirs, &mut got)
            .await
            .unwrap();
        assert_eq!(got, b"hello\nworld");
    }
}
