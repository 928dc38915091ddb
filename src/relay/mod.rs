//! The port relay: many TCP connections multiplexed over one byte stream pair, the stdin and
//! stdout of an engine exec, so a forwarded port needs nothing from the engine but exec.
//!
//! - [`frame`]: the framing, pure and table-tested.
//! - [`mux`]: the host side: carries accepted connections, with per-stream credit and
//!   half-close, and says why the relay ended.
//! - [`carrier`]: where the container has a folder of the host's mounted, each connection's
//!   bytes over a Unix socket there instead; the stream pair stays the control channel.
//! - [`netns`]: where the hub may enter the container's network namespace, each connection
//!   dialled by the hub inside it (no copying process in the container); the stream pair stays
//!   the control channel.
//! - [`AGENT`]: the container side, plain Node, run as `node -e <bootstrap> po-sandbox-forward
//!   <port> <hostPort>` (the argv words let anyone list forwards from the process table).
//!
//! It knows nothing of sandboxes. Run the other way ([`CARRIER_WORD`], [`mux::Relay::start_with`]),
//! the agent listens on Unix sockets inside and each connection made there is carried to the
//! host's socket of the same name: the broker's carrier on a remote engine.

pub(crate) mod carrier;
pub(crate) mod frame;
pub(crate) mod mux;
pub(crate) mod netns;
#[cfg(all(test, unix))]
mod reverse_tests;
#[cfg(all(test, unix))]
mod socket_tests;
#[cfg(all(test, unix))]
mod tests;

/// The agent's source, for the bundle's interpreter.
pub const AGENT: &str = include_str!("agent.js");

/// The agent's `argv[1]`: how a forward shows in the process table.
pub const AGENT_WORD: &str = "po-sandbox-forward";

/// The variable carrying the agent's source: its command line stays short, as engines cut
/// long ones in their process lists (Podman's `top` at about 2 KiB).
pub const AGENT_VAR: &str = "PO_SANDBOX_RELAY";

/// The command running the agent for `port` inside, forwarded from `host_port`; run it with
/// [`agent_env`].
pub fn agent_command(interpreter: &str, port: u16, host_port: u16) -> Vec<String> {
    let bootstrap = format!("eval(process.env.{AGENT_VAR})");
    let words = [interpreter, "-e", &bootstrap, AGENT_WORD];
    let mut cmd: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    cmd.extend([port.to_string(), host_port.to_string()]);
    cmd
}

/// The reverse agent's `argv[1]`: the broker carrier of a container on a remote engine.
pub const CARRIER_WORD: &str = "po-sandbox-carrier";

/// The command running the agent the other way (see [`mux::Relay::start_with`]): it
/// listens on the Unix sockets `<dir>/<name>` inside; run it with [`agent_env`].
pub fn carrier_command(interpreter: &str, dir: &str, names: &[&str]) -> Vec<String> {
    let bootstrap = format!("eval(process.env.{AGENT_VAR})");
    let words = [interpreter, "-e", &bootstrap, CARRIER_WORD, dir];
    let mut cmd: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    cmd.extend(names.iter().map(|n| n.to_string()));
    cmd
}

/// The environment [`agent_command`] needs: `NAME=value` entries.
pub fn agent_env() -> Vec<String> {
    vec![format!("{AGENT_VAR}={AGENT}")]
}

/// `(port, host_port)` of a relay's command line (its argv words, as `/proc/<pid>/cmdline`
/// or the engine's process list gives them); `None` for any other process.
pub fn parse_agent_args<S: AsRef<str>>(argv: &[S]) -> Option<(u16, u16)> {
    // The last one: the agent's source (the word before) may hold anything.
    let at = argv.iter().rposition(|w| w.as_ref() == AGENT_WORD)?;
    let port = argv.get(at + 1)?.as_ref().parse().ok()?;
    let host_port = argv.get(at + 2)?.as_ref().parse().ok()?;
    Some((port, host_port))
}

#[cfg(test)]
mod args_tests {
    use super::*;

    #[test]
    fn a_relay_is_known_by_its_argv_words() {
        let cmd = agent_command("/opt/po/node/bin/node", 5173, 40123);
        assert_eq!(cmd[0], "/opt/po/node/bin/node");
        // Short enough for any engine's process list.
        assert!(cmd.join(" ").len() < 120, "{cmd:?}");
        assert!(agent_env()[0].starts_with("PO_SANDBOX_RELAY='use strict'"));
        assert_eq!(parse_agent_args(&cmd), Some((5173, 40123)));
        // The engine's process list joins argv with spaces: the agent's source is split too.
        let joined = cmd.join(" ");
        let words: Vec<&str> = joined.split_whitespace().collect();
        assert_eq!(parse_agent_args(&words), Some((5173, 40123)));
        for other in [
            vec!["node", "server.js"],
            vec!["x", AGENT_WORD, "80"],
            vec![AGENT_WORD, "a", "1"],
        ] {
            assert_eq!(parse_agent_args(&other), None, "{other:?}");
        }
    }
}
