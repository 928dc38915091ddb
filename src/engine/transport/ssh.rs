//! SSH to the engine's machine through the system's OpenSSH client, the docker CLI's way:
//! `ssh [-l user] [-p port] -- host docker [-H unix://socket] system dial-stdio`, one process
//! per connection, its standard input and output the stream. The person's keys, agent,
//! `~/.ssh/config` and known hosts apply; `BatchMode` and `StrictHostKeyChecking=yes` make ssh
//! fail instead of asking or adding, so a host key is never accepted silently. On Unix the connections of one machine share one SSH
//! connection (`ControlMaster`, kept 60 s after its last use), so a hub logs in once, not per
//! call or per exec.
//!
//! `PO_SANDBOX_SSH_COMMAND` replaces `ssh` (words split at spaces), as `GIT_SSH_COMMAND` does
//! for git: `ssh -F /path/to/config`.

use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::{Dial, Failure, Stream};
use crate::engine::endpoint::SshTarget;

/// The variable that replaces the `ssh` command.
pub(crate) const COMMAND_VAR: &str = "PO_SANDBOX_SSH_COMMAND";
/// The code of a host key ssh refused (unknown, or not the one known).
pub(crate) const HOST_KEY: &str = "ENGINE_SSH_HOST_KEY";
/// The code of a login the machine refused.
pub(crate) const LOGIN: &str = "ENGINE_SSH_LOGIN";
/// The code of any other failure of ssh or of the engine behind it.
pub(crate) const FAILED: &str = "ENGINE_SSH_FAILED";
/// How long a shared connection stays after its last use.
const PERSIST_SECS: u32 = 60;
/// How long, once ssh's output ended, what it said on its error output may take to come in.
const STDERR_WAIT: Duration = Duration::from_secs(5);
/// The most of ssh's error output kept.
const STDERR_MAX: usize = 4096;

/// How long a connection's failure explains the requests that fail after it.
const FAILURE_HOLDS: Duration = Duration::from_secs(30);

/// The last failure of a dialer's connections, and when it came.
type LastFailure = Arc<Mutex<Option<(std::time::Instant, Failure)>>>;

/// Runs ssh for each connection.
#[derive(Debug, Clone)]
pub(crate) struct SshDial {
    target: SshTarget,
    command: Vec<String>,
    last: LastFailure,
}

impl SshDial {
    /// The target's command is the ssh command's words (`PO_SANDBOX_SSH_COMMAND`, default
    /// `ssh`).
    pub(crate) fn new(target: SshTarget) -> SshDial {
        let command: Vec<String> = target
            .command
            .as_deref()
            .unwrap_or("ssh")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        SshDial {
            target,
            command: if command.is_empty() {
                vec!["ssh".into()]
            } else {
                command
            },
            last: LastFailure::default(),
        }
    }

    /// The shared connection's socket in `dir`: one per target and ssh command (another
    /// known-hosts file is another connection).
    fn control_socket(&self, dir: &std::path::Path) -> PathBuf {
        use sha2::{Digest, Sha256};
        let key = format!("{:?} {}", self.command, shown(&self.target));
        dir.join(hex::encode(&Sha256::digest(key.as_bytes())[..10]))
    }

    /// The ssh command line: the person's words, then the layer's options (`control`: the
    /// shared connection's socket), the target and the remote command.
    pub(crate) fn argv(&self, control: Option<&std::path::Path>) -> Vec<String> {
        let mut argv = self.command.clone();
        let o = |argv: &mut Vec<String>, opt: String| argv.extend(["-o".into(), opt]);
        o(&mut argv, "BatchMode=yes".into());
        o(&mut argv, "StrictHostKeyChecking=yes".into());
        o(&mut argv, "ConnectTimeout=30".into());
        o(&mut argv, "ServerAliveInterval=15".into());
        if let Some(socket) = control {
            o(&mut argv, "ControlMaster=auto".into());
            o(&mut argv, format!("ControlPath={}", socket.display()));
            o(&mut argv, format!("ControlPersist={PERSIST_SECS}"));
        }
        argv.push("-T".into());
        if let Some(user) = &self.target.user {
            argv.extend(["-l".into(), user.clone()]);
        }
        if let Some(port) = self.target.port {
            argv.extend(["-p".into(), port.to_string()]);
        }
        argv.extend(["--".into(), self.target.host.clone(), "docker".into()]);
        if let Some(socket) = &self.target.socket {
            argv.extend(["-H".into(), format!("unix://{socket}")]);
        }
        argv.extend(["system".into(), "dial-stdio".into()]);
        argv
    }
}

/// The folder of the shared connections' sockets: `<tmp>/po-ssh-<uid>`, this user's alone
/// (made 0700; one that is not this user's or that others may enter is not used, and every
/// connection logs in on its own).
#[cfg(unix)]
fn control_dir() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("po-ssh-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    let ours = meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0;
    if !ours {
        tracing::warn!(dir = %dir.display(), "not this user's alone: ssh connections to the engine are not shared");
    }
    // A socket path is at most 104 bytes on macOS; the socket's name is 20.
    (ours && dir.as_os_str().len() < 80).then_some(dir)
}

#[cfg(not(unix))]
fn control_dir() -> Option<PathBuf> {
    None
}

/// Held while a shared connection is being made, so that connections dialled at once wait
/// for it instead of each logging in on its own.
static MAKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long the other dials wait for a first connection to log in and share itself; past
/// it they log in on their own.
const LOGIN_WAIT: Duration = Duration::from_secs(10);

impl Dial for SshDial {
    /// The failure of the last connection that failed, while it holds.
    fn last_failure(&self) -> Option<Failure> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < FAILURE_HOLDS)
            .map(|(_, f)| f.clone())
    }

    fn dial(&self) -> Pin<Box<dyn std::future::Future<Output = std::io::Result<Stream>> + Send>> {
        // A command that says how to share connections itself (`-S`, `-o ControlPath=…`) is
        // left to it: the layer's options would come after its own, and ssh keeps the first.
        let own_control = self
            .command
            .iter()
            .any(|w| w == "-S" || w.to_ascii_lowercase().contains("control"));
        let control = control_dir()
            .filter(|_| !own_control)
            .map(|d| self.control_socket(&d));
        let argv = self.argv(control.as_deref());
        let target = self.target.clone();
        let last = Arc::clone(&self.last);
        Box::pin(async move {
            // No shared connection yet: one dial at a time makes it, the others then use it.
            let making = match &control {
                Some(socket) if !socket.exists() => Some(MAKING.lock().await),
                _ => None,
            };
            let mut child = tokio::process::Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| {
                    Failure::new(
                        FAILED,
                        format!(
                            "cannot run {} for the engine at {} ({e}). Install the OpenSSH client, or set {COMMAND_VAR} to the ssh command to use",
                            argv[0],
                            shown(&target)
                        ),
                    )
                    .io()
                })?;
            if let (Some(_), Some(socket)) = (&making, &control) {
                let deadline = tokio::time::Instant::now() + LOGIN_WAIT;
                while !socket.exists()
                    && matches!(child.try_wait(), Ok(None))
                    && tokio::time::Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            drop(making);
            let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
            let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
                return Err(std::io::Error::other("ssh started without its pipes"));
            };
            let stderr = Arc::new(Mutex::new(String::new()));
            let said = child.stderr.take().map(|mut err| {
                let stderr = Arc::clone(&stderr);
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = err.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let mut kept = stderr.lock().unwrap_or_else(|p| p.into_inner());
                        if kept.len() < STDERR_MAX {
                            kept.push_str(&String::from_utf8_lossy(&buf[..n]));
                        }
                    }
                })
            });
            Ok(Stream::new(SshStream {
                stdin: Some(stdin),
                stdout,
                child,
                stderr,
                said,
                waiting: None,
                target,
                last,
            }))
        })
    }
}

/// The target as a person wrote it.
fn shown(target: &SshTarget) -> String {
    crate::engine::Endpoint::Ssh(target.clone()).to_string()
}

type Waiting = Pin<Box<tokio::time::Timeout<tokio::task::JoinHandle<()>>>>;

/// One ssh process: its output is the engine's answers, its input the requests. When its
/// output ends with an error on its error output, reading fails with that error in words.
struct SshStream {
    /// ssh's input; `None` once shut down (closed: ssh sends the end on to the engine, as an
    /// exec's input ending must reach the command).
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// The task reading ssh's error output, until ssh's output ends.
    said: Option<tokio::task::JoinHandle<()>>,
    /// Then that task, bounded from the end of the output on.
    waiting: Option<Waiting>,
    target: SshTarget,
    last: LastFailure,
}

impl AsyncRead for SshStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stdout).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {}
            other => return other,
        }
        // The end of ssh's output: what it said on its error output is why.
        match self.as_mut().why_ended(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(failure)) => Poll::Ready(Err(failure.io())),
            Poll::Ready(None) => Poll::Ready(Ok(())),
        }
    }
}

impl SshStream {
    /// Once ssh is gone: waits (briefly) for all it said on its error output, and says what
    /// went wrong, if it said anything.
    fn why_ended(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Failure>> {
        if let Some(said) = self.said.take() {
            self.waiting = Some(Box::pin(tokio::time::timeout(STDERR_WAIT, said)));
        }
        if let Some(waiting) = self.waiting.as_mut() {
            if waiting.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.waiting = None;
        }
        // ssh (or the command it ran) ended well: what it said is not a failure (a banner).
        let clean = matches!(self.child.try_wait(), Ok(Some(status)) if status.success());
        let text = self
            .stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let failure = if clean {
            None
        } else {
            classify(&self.target, &text)
        };
        let now = std::time::Instant::now();
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) =
            failure.as_ref().map(|f| (now, f.clone()));
        Poll::Ready(failure)
    }
}

impl AsyncWrite for SshStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        match Pin::new(stdin).poll_write(cx, buf) {
            // ssh is gone before the request went: why, when it said.
            Poll::Ready(Err(e)) => match self.as_mut().why_ended(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(failure)) => Poll::Ready(Err(failure.io())),
                Poll::Ready(None) => Poll::Ready(Err(e)),
            },
            other => other,
        }
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.stdin.as_mut() {
            Some(stdin) => Pin::new(stdin).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // A child's input is not closed by its shutdown (a no-op): dropped, it is.
        if let Some(mut stdin) = self.stdin.take() {
            let flushed = Pin::new(&mut stdin).poll_flush(cx);
            if flushed.is_pending() {
                self.stdin = Some(stdin);
                return Poll::Pending;
            }
        }
        Poll::Ready(Ok(()))
    }
}

use std::future::Future;

/// What ssh's error output says went wrong, in words that name the fix; `None` when it said
/// nothing (the engine closed the connection).
pub(crate) fn classify(target: &SshTarget, stderr: &str) -> Option<Failure> {
    let said: String = stderr
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("@@@") && !l.starts_with("Warning: Permanently added")
        })
        .collect::<Vec<_>>()
        .join(" ");
    if said.is_empty() {
        return None;
    }
    let at = shown(target);
    let host = &target.host;
    let lower = stderr.to_ascii_lowercase();
    let failure = if lower.contains("host key verification failed")
        || lower.contains("remote host identification has changed")
        || lower.contains("no matching host key")
    {
        let changed = lower.contains("has changed");
        Failure::new(
            HOST_KEY,
            format!(
                "ssh refused the host key of {host} for the engine at {at}: {}. po-sandbox never accepts a host key by itself. Check the machine's key, then log in once with 'ssh {host}' to record it in your known hosts{}. (ssh said: {said})",
                if changed {
                    "it is not the key your known hosts hold for it (the machine was reinstalled, or someone is in the middle)"
                } else {
                    "it is not in your known hosts"
                },
                if changed {
                    format!(" (after 'ssh-keygen -R {host}' if the new key is right)")
                } else {
                    String::new()
                }
            ),
        )
    } else if lower.contains("permission denied while trying to connect")
        || lower.contains("got permission denied")
    {
        Failure::new(
            FAILED,
            format!(
                "the login on {host} may not use the engine's socket there (add it to the docker group on {host}, or name a socket it may use: ssh://user@{host}/path/to/docker.sock). (ssh said: {said})"
            ),
        )
    } else if lower.contains("permission denied (")
        || lower.contains("too many authentication failures")
    {
        Failure::new(
            LOGIN,
            format!(
                "{host} refused the login for the engine at {at}. Make sure 'ssh {}{host}' logs in without a password prompt (a key in your agent or ~/.ssh/config). (ssh said: {said})",
                target
                    .user
                    .as_deref()
                    .map(|u| format!("{u}@"))
                    .unwrap_or_default()
            ),
        )
    } else if lower.contains("command not found") || lower.contains("docker: not found") {
        Failure::new(
            FAILED,
            format!(
                "{host} has no docker CLI on its PATH, which the engine's SSH transport runs there ('docker system dial-stdio'). Install the docker CLI on {host}. (ssh said: {said})"
            ),
        )
    } else {
        Failure::new(
            FAILED,
            format!("the ssh connection to the engine at {at} failed: {said}"),
        )
    };
    Some(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(user: Option<&str>, port: Option<u16>, socket: Option<&str>) -> SshTarget {
        SshTarget {
            user: user.map(str::to_string),
            host: "build-box".into(),
            port,
            socket: socket.map(str::to_string),
            command: None,
        }
    }

    #[test]
    fn the_command_line_is_the_docker_clis_with_batch_mode_and_a_shared_connection() {
        let dial = SshDial::new(target(Some("me"), Some(2222), Some("/run/d.sock")));
        let socket = dial.control_socket(std::path::Path::new("/tmp/po-ssh-0"));
        let argv = dial.argv(Some(&socket));
        let line = argv.join(" ");
        assert!(
            line.starts_with("ssh -o BatchMode=yes -o StrictHostKeyChecking=yes "),
            "{line}"
        );
        assert!(
            line.contains(&format!(
                "-o ControlMaster=auto -o ControlPath={} -o ControlPersist=60",
                socket.display()
            )),
            "{line}"
        );
        assert_eq!(socket.file_name().unwrap().len(), 20);
        assert!(
            line.ends_with(
                "-T -l me -p 2222 -- build-box docker -H unix:///run/d.sock system dial-stdio"
            ),
            "{line}"
        );
        let mut t = target(None, None, None);
        t.command = Some("ssh -F /etc/po/ssh_config".into());
        let plain = SshDial::new(t);
        // Another ssh command (another known-hosts file) is another shared connection.
        assert_ne!(
            plain.control_socket(std::path::Path::new("/d")),
            SshDial::new(target(None, None, None)).control_socket(std::path::Path::new("/d"))
        );
        let line = plain.argv(None).join(" ");
        assert!(
            line.starts_with("ssh -F /etc/po/ssh_config -o BatchMode=yes"),
            "{line}"
        );
        assert!(!line.contains("Control"), "{line}");
        assert!(
            line.ends_with("-T -- build-box docker system dial-stdio"),
            "{line}"
        );
        let mut blank = target(None, None, None);
        blank.command = Some("  ".into());
        assert_eq!(SshDial::new(blank).argv(None)[0], "ssh");
    }

    #[test]
    fn ssh_errors_name_the_fix() {
        let t = target(Some("me"), Some(2222), None);
        let changed = "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@\nIT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\nHost key verification failed.\n";
        let f = classify(&t, changed).unwrap();
        assert_eq!(f.code, HOST_KEY);
        assert!(f.text.contains("ssh-keygen -R build-box"), "{}", f.text);
        assert!(f.text.contains("never accepts a host key"), "{}", f.text);
        let unknown = classify(&t, "Host key verification failed.\n").unwrap();
        assert_eq!(unknown.code, HOST_KEY);
        assert!(
            unknown.text.contains("not in your known hosts"),
            "{}",
            unknown.text
        );
        let login = classify(&t, "me@build-box: Permission denied (publickey).\n").unwrap();
        assert_eq!(login.code, LOGIN);
        assert!(login.text.contains("ssh me@build-box"), "{}", login.text);
        let socket = classify(
            &t,
            "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock\n",
        )
        .unwrap();
        assert_eq!(socket.code, FAILED);
        assert!(socket.text.contains("docker group"), "{}", socket.text);
        let cli = classify(&t, "bash: line 1: docker: command not found\n").unwrap();
        assert_eq!(cli.code, FAILED);
        assert!(cli.text.contains("Install the docker CLI"), "{}", cli.text);
        let refused = classify(
            &t,
            "ssh: connect to host build-box port 2222: Connection refused\n",
        )
        .unwrap();
        assert_eq!(refused.code, FAILED);
        assert!(
            refused.text.contains("Connection refused"),
            "{}",
            refused.text
        );
        assert_eq!(classify(&t, "\n"), None);
        assert_eq!(
            classify(
                &t,
                "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\n"
            ),
            None
        );
    }
}
