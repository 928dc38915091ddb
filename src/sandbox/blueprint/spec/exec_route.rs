//! The environment and command of an exec run by a later hub in a TCP-route container: each
//! hub's TCP ports are its own, and the container's environment holds those of the hub that
//! created it, so the exec gives the command this hub's routes.

use std::collections::BTreeMap;

use super::build::{broker_address, broker_direct, egress_env};

/// What a command run by a later hub in a TCP-route container needs of that hub's grant
/// environment `grant` (each hub's TCP ports are its own; the container's environment holds
/// those of the hub that created it): the grant's variables with the egress proxy's derived
/// from them, and, with registry routes, an npm user config of this hub's own
/// (`/tmp/po-sandbox-npmrc-<broker port>`), which [`exec_route_command`] writes first.
pub fn exec_route_env(grant: BTreeMap<String, String>) -> Vec<String> {
    use crate::broker::registry::{NPMRC_PATH, NPMRC_VAR};
    let mut env = grant;
    egress_env(&mut env);
    broker_direct(&mut env);
    if env.contains_key(NPMRC_VAR) {
        let port = broker_address(&env).map_or("", |(_, port)| port);
        let file = format!("{NPMRC_PATH}-{port}");
        env.insert("npm_config_userconfig".into(), file);
    }
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Writes npm's user config from `PO_SANDBOX_NPMRC` to `npm_config_userconfig` (whole: a
/// file of its own made aside, then renamed), then runs the command in the shell's place
/// (POSIX sh). A config it cannot write stops the command (exit 126, said on stderr): npm
/// without it would ask the default registry for the brokered scopes' packages.
pub const EXEC_NPMRC: &str = r#"f=$npm_config_userconfig; t=$(mktemp "$f.XXXXXX" 2>/dev/null) && printf '%s' "$PO_SANDBOX_NPMRC" > "$t" && chmod 644 "$t" && mv -f "$t" "$f" || { [ -z "$t" ] || rm -f "$t"; echo "po-sandbox: cannot write npm's user config $f (the broker's registry routes); the command did not run" >&2; exit 126; }; exec "$@""#;

/// A later hub's exec command on the TCP route with `env` ([`exec_route_env`]): behind
/// [`EXEC_NPMRC`] when it has registry routes (npm reads its config from a file; variables
/// cannot carry a scope's registry or a credential through a shell, whose names they are not).
pub fn exec_route_command(env: &[String], command: Vec<String>) -> Vec<String> {
    let prefix = format!("{}=", crate::broker::registry::NPMRC_VAR);
    if !env.iter().any(|e| e.starts_with(&prefix)) {
        return command;
    }
    let mut cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        EXEC_NPMRC.into(),
        "po-sandbox".into(),
    ];
    cmd.extend(command);
    cmd
}
