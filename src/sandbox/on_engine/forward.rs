//! A forwarded port: a listener on the host's 127.0.0.1 whose connections reach
//! `127.0.0.1:<port>` inside a workspace's running container through one engine exec running
//! the relay's agent (its stdin and stdout carry every connection, see [`crate::relay`]).
//! Where the container has the broker's socket folder mounted, each connection's bytes go
//! over a Unix socket of the forward's own there instead, and the exec carries only the
//! control messages ([`crate::relay::carrier`]); where, besides, the hub may enter the
//! container's network namespace (root with a rootful engine on this host), it dials each
//! connection there itself ([`crate::relay::netns`]). `PO_SANDBOX_FORWARD_CARRIER` narrows the
//! choice. Nothing is published and no rule is loosened; the forward ends, with why, when the
//! exec ends (the container stopped or restarted) or when it is closed.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::engine::EngineError;
use crate::engine::model::ExecConfig;
use crate::engine::model::LogOutput;
use crate::engine::model::{ExecStarted, StartExecOptions};
use bytes::{Buf, Bytes};
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::engine::api::EngineApi;
use crate::error::{Error, Result};
use crate::lock::Locked;
use crate::relay::{self, carrier::SocketCarrier, mux::Relay, netns::Namespace};

/// What [`PortForward::close`] ends a forward with.
pub const CLOSED: &str = "the forward was closed";
/// The most of the agent's stderr kept for a failure's message.
const STDERR_TAIL: usize = 2048;

/// One live forward, as listed.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardInfo {
    pub workspace_id: String,
    /// The port inside the sandbox (its 127.0.0.1).
    pub port: u16,
    /// The port on the host's 127.0.0.1.
    pub host_port: u16,
    /// `http://127.0.0.1:<hostPort>`.
    pub url: String,
    pub container_id: String,
    /// What carries the connections' bytes: `namespace` (the hub dials each connection inside
    /// the container's network namespace: root with a rootful engine on this host), `socket`
    /// (a Unix socket in the sandbox's broker folder, at kernel speed) or `exec` (the engine's
    /// exec stream: VM engines, no broker).
    #[napi(ts_type = "'namespace' | 'socket' | 'exec'")]
    pub carrier: String,
}

/// How a forward ended.
#[napi_derive::napi(object, object_from_js = false)]
pub struct ForwardEnd {
    /// Why: closed, or the sandbox container stopped or restarted (and what to do).
    pub reason: String,
}

/// A forward's handle: its description, how to close it and how it ended. Cheap to clone.
#[derive(Clone)]
pub struct PortForward {
    pub info: ForwardInfo,
    relay: Relay,
    end: watch::Receiver<Option<String>>,
}

impl PortForward {
    /// Ends the forward (the listener closes, every connection drops, the agent exits) and
    /// resolves once it has.
    pub async fn close(&self) -> Result<()> {
        self.relay.close(CLOSED);
        self.wait().await;
        Ok(())
    }

    /// Ends the forward now, not waiting for it to be over (see [`close`](Self::close)).
    pub fn end(&self) {
        self.relay.close(CLOSED);
    }

    /// How it ended, once it has.
    pub async fn ended(&self) -> Result<ForwardEnd> {
        let reason = self.wait().await;
        Ok(ForwardEnd { reason })
    }

    /// Why the forward ended, once it has (and its listener is closed).
    pub async fn wait(&self) -> String {
        let mut end = self.end.clone();
        let reason = end.wait_for(Option::is_some).await;
        reason.map_or_else(|_| CLOSED.into(), |r| r.clone().unwrap_or_default())
    }

    /// Whether it still runs.
    pub fn live(&self) -> bool {
        self.end.borrow().is_none()
    }
}

/// The live forwards of one hub.
#[derive(Default, Clone)]
pub struct Forwards(Arc<Mutex<Vec<PortForward>>>);

impl Forwards {
    /// Keeps `forward` listed while it is live.
    pub fn add(&self, forward: &PortForward) {
        let mut all = self.0.locked();
        all.retain(PortForward::live);
        all.push(forward.clone());
    }

    /// The forwards live now.
    pub fn list(&self) -> Vec<ForwardInfo> {
        let mut all = self.0.locked();
        all.retain(PortForward::live);
        all.iter().map(|f| f.info.clone()).collect()
    }

    /// The live forwards into container `container_id`, as the posture shows them:
    /// `127.0.0.1:<host port> -> <port>`, by port.
    pub fn posture_lines(&self, container_id: &str) -> Vec<String> {
        let mut lines: Vec<(u16, u16)> = (self.list().into_iter())
            .filter(|f| f.container_id == container_id)
            .map(|f| (f.port, f.host_port))
            .collect();
        lines.sort();
        (lines.into_iter())
            .map(|(port, host_port)| format!("127.0.0.1:{host_port} -> {port}"))
            .collect()
    }
}

/// The ports a caller gave, checked before any I/O: `port` 1-65535, `host_port` 0-65535 (0 or
/// none: any free port).
pub fn check_ports(port: u32, host_port: Option<u32>) -> Result<(u16, u16)> {
    let invalid = |option: &str, reason: String| Error::OptionsInvalid {
        option: option.into(),
        reason,
    };
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| invalid("port", format!("{port} is not a port from 1 to 65535")))?;
    let host_port = match host_port.unwrap_or(0) {
        p @ 0..=65535 => p as u16,
        p => {
            let reason = format!("{p} is not a port from 1 to 65535 (or 0: any free port)");
            return Err(invalid("hostPort", reason));
        }
    };
    Ok((port, host_port))
}

/// What a forward needs of its container.
pub struct Target<'a> {
    pub workspace: &'a str,
    pub container_id: &'a str,
    /// The bundle's interpreter (Node) that runs the agent.
    pub interpreter: &'a str,
    /// A folder of the host's the container has mounted, for the forward's socket.
    pub socket: Option<SocketRoute>,
    /// The container whose network namespace the workspace container joined (its holder).
    pub holder: Option<&'a str>,
}

/// The carriers a forward may use, from `PO_SANDBOX_FORWARD_CARRIER`: each allows the ones
/// after it, tried in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarrierChoice {
    /// The namespace, else the socket, else the exec stream (the default).
    Namespace,
    /// The socket, else the exec stream.
    Socket,
    /// The exec stream only.
    Exec,
}

/// The [`CarrierChoice`] of the variable's `value`: unset or `namespace`, `socket`, `exec`.
pub fn carrier_choice(value: Option<&str>) -> Result<CarrierChoice> {
    match value.map(str::trim) {
        None | Some("" | "namespace") => Ok(CarrierChoice::Namespace),
        Some("socket") => Ok(CarrierChoice::Socket),
        Some("exec") => Ok(CarrierChoice::Exec),
        Some(other) => Err(Error::OptionsInvalid {
            option: crate::names::vars::FORWARD_CARRIER_VAR.into(),
            reason: format!(
                "'{other}' is not a carrier: use namespace (the default), socket or exec"
            ),
        }),
    }
}

/// Where a forward's socket goes: the host folder, the same folder inside, and the socket's
/// owner (the container's user).
pub struct SocketRoute {
    pub host_dir: std::path::PathBuf,
    pub container_dir: String,
    pub owner: Option<(u32, u32)>,
}

/// Opens a forward of `port` in the target's container on the host's `127.0.0.1:<host_port>`
/// (0: a free port). Nothing is left on failure: no listener, no exec (its input closes).
pub async fn open<E: EngineApi>(
    engine: &E,
    target: Target<'_>,
    port: u16,
    host_port: u16,
) -> Result<PortForward> {
    let choice = carrier_choice(
        std::env::var(crate::names::vars::FORWARD_CARRIER_VAR)
            .ok()
            .as_deref(),
    )?;
    let listener = listen(host_port).await?;
    // When it started: a different start later means it restarted.
    let started = match engine.inspect_container(target.container_id).await {
        Ok(c) => c.state.and_then(|s| s.started_at).unwrap_or_default(),
        Err(e) => {
            return Err(Error::container_caused(
                target.workspace,
                "inspect its container",
                e,
            ));
        }
    };
    let host_port = listener.local_addr().map_or(host_port, |a| a.port());
    let cmd = relay::agent_command(target.interpreter, port, host_port);
    let (output, input) = start_agent(engine, &target, cmd).await?;
    let stderr = output.stderr.clone();
    let relay = Relay::start(output, input).await.map_err(|why| {
        let said = stderr.locked().trim().to_string();
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(" (it said: {said})")
        };
        Error::container(
            target.workspace,
            format!("the port relay did not start: {why}{said}"),
        )
    })?;
    let carrier = choose_carrier(engine, &relay, &target, port, choice).await;
    let info = ForwardInfo {
        workspace_id: target.workspace.to_string(),
        port,
        host_port,
        url: format!("http://127.0.0.1:{host_port}"),
        container_id: target.container_id.to_string(),
        carrier: carrier.to_string(),
    };
    let (end_tx, end) = watch::channel(None);
    let container = (target.container_id.to_string(), started);
    tokio::spawn(serve(
        engine.clone(),
        listener,
        relay.clone(),
        container,
        end_tx,
    ));
    Ok(PortForward { info, relay, end })
}

/// Runs the relay the other way in the target's container (see [`Relay::start_with`]): its
/// agent listens on `<dir>/<name>` inside for each name of `targets`, and each connection made
/// there reaches the host's socket of that name. It ends with the exec (the container stopped
/// or restarted) or when it is closed.
pub async fn open_reverse<E: EngineApi>(
    engine: &E,
    target: &Target<'_>,
    dir: &str,
    targets: std::collections::HashMap<String, std::path::PathBuf>,
) -> Result<Relay> {
    let names: Vec<&str> = targets.keys().map(String::as_str).collect();
    let cmd = relay::carrier_command(target.interpreter, dir, &names);
    let (output, input) = start_agent(engine, target, cmd).await?;
    let stderr = output.stderr.clone();
    let relay = Relay::start_with(output, input, targets)
        .await
        .map_err(|why| {
            let said = stderr.locked().trim().to_string();
            Error::container(
                target.workspace,
                format!("the broker's carrier did not start: {why} {said}"),
            )
        })?;
    Ok(relay)
}

/// Puts the first carrier `choice` allows that works on `relay`, and names it: the namespace
/// when the hub can enter it, else the socket when the agent reaches it, else the exec stream.
async fn choose_carrier<E: EngineApi>(
    engine: &E,
    relay: &Relay,
    target: &Target<'_>,
    port: u16,
    choice: CarrierChoice,
) -> &'static str {
    if choice == CarrierChoice::Namespace
        && let Some(ns) = namespace(engine, target, port).await
    {
        relay.use_namespace(ns);
        return "namespace";
    }
    match &target.socket {
        Some(route) if choice != CarrierChoice::Exec => use_socket(relay, route).await,
        _ => "exec",
    }
}

/// The holder's network namespace, when the engine shares this host's files (it has the
/// socket route: its `SandboxKey` is a path here), that file is the namespace of the holder's
/// process as this host sees it, and the hub may enter it.
async fn namespace<E: EngineApi>(engine: &E, target: &Target<'_>, port: u16) -> Option<Namespace> {
    target.socket.as_ref()?;
    let holder = target.holder?;
    let inspected = engine.inspect_container(holder).await.ok()?;
    let pid = (inspected.state?.pid).and_then(|p| u32::try_from(p).ok())?;
    let key = inspected
        .network_settings?
        .sandbox_key
        .filter(|k| !k.is_empty())?;
    match Namespace::enter(std::path::Path::new(&key), pid, port).await {
        Ok(ns) => Some(ns),
        Err(why) => {
            tracing::debug!(%key, %why, "a forward does not enter the namespace: another carrier takes it");
            None
        }
    }
}

/// Offers the relay a socket in the route's folder: `socket` once the agent reached it, else
/// (it could not be bound or reached) `exec`, the stream pair carrying everything.
async fn use_socket(relay: &Relay, route: &SocketRoute) -> &'static str {
    let carrier = SocketCarrier::bind(&route.host_dir, &route.container_dir, route.owner);
    let outcome = match carrier {
        Ok(carrier) => relay.use_socket(carrier).await,
        Err(e) => Err(format!("cannot bind it: {e}")),
    };
    match outcome {
        Ok(()) => "socket",
        Err(why) => {
            let dir = route.host_dir.display();
            tracing::info!(%dir, %why, "a forward's socket is not used: its exec carries it");
            "exec"
        }
    }
}

/// A listener on the host's loopback only; `PORT_IN_USE` when the port is taken.
async fn listen(host_port: u16) -> Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", host_port))
        .await
        .map_err(|e| Error::PortInUse {
            port: host_port,
            reason: e.to_string(),
        })
}

/// Runs the agent in the container, attached to its stdin and stdout.
async fn start_agent<E: EngineApi>(
    engine: &E,
    target: &Target<'_>,
    cmd: Vec<String>,
) -> Result<(ExecOutput, Pin<Box<dyn tokio::io::AsyncWrite + Send>>)> {
    let failed = |doing: &'static str| {
        move |e: EngineError| Error::container_caused(target.workspace, doing, e)
    };
    let config = ExecConfig {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        cmd: Some(cmd),
        env: Some(relay::agent_env()),
        ..Default::default()
    };
    let exec = engine
        .create_exec(target.container_id, config)
        .await
        .map_err(failed("create the port relay's exec"))?;
    let options = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: None,
    };
    let started = engine
        .start_exec(&exec, options)
        .await
        .map_err(failed("start the port relay's exec"))?;
    let ExecStarted::Attached { output, input } = started else {
        return Err(Error::container(
            target.workspace,
            "the port relay started detached",
        ));
    };
    Ok((ExecOutput::new(output), input))
}

/// Carries every accepted connection until the relay ends, then says why the forward ended.
async fn serve<E: EngineApi>(
    engine: E,
    listener: TcpListener,
    relay: Relay,
    (container, started): (String, String),
    end: watch::Sender<Option<String>>,
) {
    let ended = relay.ended();
    tokio::pin!(ended);
    let why = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((conn, _)) => relay.carry(conn),
                Err(e) => {
                    relay.close(&format!("the host listener failed: {e}"));
                }
            },
            why = &mut ended => break why,
        }
    };
    drop(listener);
    let reason = match why.as_str() {
        CLOSED => why,
        _ => end_reason(&engine, &container, &started, &why).await,
    };
    tracing::debug!(container = %container, %reason, "port forward ended");
    let _ = end.send(Some(reason));
}

/// Why a relay ended on its own, in the words of the container's state: the relay ends as the
/// container's processes get the stop signal, a moment before the engine reports it stopped.
async fn end_reason<E: EngineApi>(engine: &E, container: &str, started: &str, why: &str) -> String {
    let again = "run `po-sandbox port …` again when it is back";
    let settle = crate::engine::STOP_GRACE + std::time::Duration::from_secs(2);
    let deadline = tokio::time::Instant::now() + settle;
    while tokio::time::Instant::now() < deadline {
        let Ok(c) = engine.inspect_container(container).await else {
            return format!("the sandbox container is gone; {again}");
        };
        let state = c.state.unwrap_or_default();
        if state.running != Some(true) {
            return format!("the sandbox container stopped; {again}");
        }
        if state.started_at.as_deref().unwrap_or_default() != started {
            return format!("the sandbox container restarted; {again}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    format!(
        "the port relay in the sandbox ended ({why}) while the container runs on: run `po-sandbox port …` again"
    )
}

type OutputStream = Pin<Box<dyn Stream<Item = std::result::Result<LogOutput, EngineError>> + Send>>;

/// The exec's stdout as bytes to read; its stderr kept (the tail) for a failure's message.
struct ExecOutput {
    stream: OutputStream,
    pending: Bytes,
    stderr: Arc<Mutex<String>>,
}

impl ExecOutput {
    fn new(stream: OutputStream) -> Self {
        ExecOutput {
            stream,
            pending: Bytes::new(),
            stderr: Arc::default(),
        }
    }
}

impl AsyncRead for ExecOutput {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                buf.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            match std::task::ready!(self.stream.poll_next_unpin(cx)) {
                None => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(std::io::Error::other(e))),
                Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message })) => {
                    self.pending = message;
                }
                Some(Ok(LogOutput::StdErr { message })) => {
                    let mut tail = self.stderr.locked();
                    tail.push_str(&String::from_utf8_lossy(&message));
                    let cut = tail.len().saturating_sub(STDERR_TAIL);
                    let cut = (cut..tail.len())
                        .find(|i| tail.is_char_boundary(*i))
                        .unwrap_or(0);
                    tail.drain(..cut);
                }
                Some(Ok(LogOutput::StdIn { .. })) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carrier_variable_narrows_the_choice_or_is_refused() {
        let ok = [
            (None, CarrierChoice::Namespace),
            (Some(""), CarrierChoice::Namespace),
            (Some("namespace"), CarrierChoice::Namespace),
            (Some(" socket "), CarrierChoice::Socket),
            (Some("exec"), CarrierChoice::Exec),
        ];
        for (value, choice) in ok {
            assert_eq!(carrier_choice(value).unwrap(), choice, "{value:?}");
        }
        for bad in ["Socket", "tcp", "namespace,socket", "exec\0"] {
            let e = carrier_choice(Some(bad)).unwrap_err();
            assert_eq!(e.code(), "OPTIONS_INVALID", "{bad:?}");
            let text = e.to_string();
            assert!(
                text.contains("PO_SANDBOX_FORWARD_CARRIER")
                    && text.contains("namespace (the default), socket or exec"),
                "{text}"
            );
        }
    }

    #[test]
    fn ports_are_checked_before_any_io() {
        type Case = (
            u32,
            Option<u32>,
            std::result::Result<(u16, u16), &'static str>,
        );
        let cases: Vec<Case> = vec![
            (5173, None, Ok((5173, 0))),
            (1, Some(0), Ok((1, 0))),
            (65535, Some(65535), Ok((65535, 65535))),
            (8000, Some(18000), Ok((8000, 18000))),
            (0, None, Err("port")),
            (65536, None, Err("port")),
            (80, Some(65536), Err("hostPort")),
        ];
        for (port, host, want) in cases {
            match (check_ports(port, host), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want),
                (Err(e), Err(option)) => {
                    assert_eq!(e.code(), "OPTIONS_INVALID");
                    assert!(e.to_string().contains(&format!("option {option}:")), "{e}");
                }
                (got, want) => panic!("{port} {host:?}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_taken_host_port_is_port_in_use() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = listen(port).await.unwrap_err();
        assert_eq!(e.code(), "PORT_IN_USE");
        assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    }
}
