//! A broker following its Po home's policy file: each saved change is read, and the host-side
//! values (the allow lists, the name overrides) go to the broker's egress proxy at once, which
//! closes the connections the new policy no longer allows. A file that does not parse or
//! validate changes nothing: the last good policy stays, and an event says where the file is
//! wrong. A changed network mode applies when the hub starts again (an event says so).

use std::path::PathBuf;
use std::time::Duration;

use super::PolicyFile;
use super::effective::NetworkPolicy;
use crate::broker::git::GitHost;
use crate::broker::server::{Broker, WeakBroker};
use crate::events::{Event, EventBus, PolicyState};
use crate::names::network::NetworkMode;

/// How often the file is read: a change is in force within two reads (a file being saved is
/// taken once it reads the same twice in a row, so a half-written file is never applied).
pub const POLL: Duration = Duration::from_millis(250);

/// What the file holds now: `None` when it is not there; else a hash of its bytes (at most
/// one more than [`super::MAX_BYTES`]) and the bytes, the ones then checked and applied.
fn snapshot(path: &std::path::Path) -> Option<(u64, Vec<u8>)> {
    use std::hash::{Hash, Hasher};
    use std::io::Read;
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).ok()?;
    file.take(super::MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some((h.finish(), bytes))
}

/// The host-side values as compared: without the lines they are written on.
fn host_side(p: &NetworkPolicy) -> impl PartialEq + use<> {
    let lists: Vec<(String, Vec<crate::broker::egress::rules::AllowEntry>)> = p
        .workspaces
        .iter()
        .map(|(id, at)| (id.clone(), at.value.clone()))
        .collect();
    (p.allow.0.clone(), p.resolve.0.clone(), lists)
}

/// Watches `po_home`'s policy file while `broker` runs; `policy` is what it started with,
/// read from `file` (the start-up's read of it); `git_pinned`: the git hosts when a variable
/// sets them (the file's then do not apply).
pub fn spawn(
    po_home: PathBuf,
    (policy, file): (NetworkPolicy, Option<PolicyFile>),
    git_pinned: Option<Vec<GitHost>>,
    broker: WeakBroker,
    events: EventBus,
) {
    tokio::spawn(async move {
        let mut w = Watcher {
            path: super::path_in(&po_home),
            started: policy.mode.0,
            good: policy,
            last_file: file.unwrap_or_default(),
            was_bad: false,
            events,
            git_pinned,
        };
        // What was taken (or refused) last, and what the last read saw. Nothing taken yet:
        // the first stable read is, so a change saved between the start-up's read and this
        // watcher's start is not missed.
        let (mut taken, mut last): (Option<Option<u64>>, Option<Option<u64>>) = (None, None);
        loop {
            tokio::time::sleep(POLL).await;
            let Some(live) = broker.upgrade() else {
                return;
            };
            let read = snapshot(&w.path);
            let now = read.as_ref().map(|(hash, _)| *hash);
            let stable = last == Some(now);
            last = Some(now);
            if stable && taken != Some(now) {
                taken = Some(now);
                w.take(&live, read.map(|(_, bytes)| bytes));
            }
        }
    });
}

/// A broker's watch on its policy file.
struct Watcher {
    path: PathBuf,
    /// The network mode the broker's containers run in.
    started: NetworkMode,
    /// The policy in force.
    good: NetworkPolicy,
    /// The file last taken.
    last_file: PolicyFile,
    /// The last read was not a good policy.
    was_bad: bool,
    events: EventBus,
    /// The git hosts a variable sets, when one does.
    git_pinned: Option<Vec<GitHost>>,
}

impl Watcher {
    fn say(&self, state: PolicyState, message: String) {
        self.events.emit(Event::Policy { state, message });
    }

    /// Takes the file's bytes (`None`: no file), read the same twice: the ones checked.
    fn take(&mut self, live: &Broker, bytes: Option<Vec<u8>>) {
        let parsed = match bytes {
            None => Ok(PolicyFile::default()),
            Some(bytes) => super::text_of(bytes).and_then(|t| super::parse(&t)),
        };
        let file = match parsed {
            Ok(file) => file,
            Err(problem) => {
                self.was_bad = true;
                let path = self.path.display();
                self.say(PolicyState::Invalid, format!(
                    "{path} is not a good policy ({problem}): nothing changed, the last good policy stays in force. `po-sandbox policy check` says the same."
                ));
                return;
            }
        };
        self.git(live, &file);
        let next = self.good.with_file(&file);
        let host_changed = host_side(&next) != host_side(&self.good);
        if std::mem::take(&mut self.was_bad) && !host_changed {
            let path = self.path.display();
            self.say(
                PolicyState::Applied,
                format!("{path} is good again: {}", applied_text(&next)),
            );
        }
        for message in [
            container_side(&self.last_file, &file),
            pinned(&self.good, &self.last_file, &file),
        ]
        .into_iter()
        .flatten()
        {
            self.say(PolicyState::Pending, message);
        }
        self.last_file = file;
        if host_changed {
            match apply(live, &next) {
                true => self.say(PolicyState::Applied, applied_text(&next)),
                false => self.say(PolicyState::Pending, format!(
                    "the allow list or the name overrides changed; this hub runs the {} network mode, without the egress proxy: they apply once the mode is allowlist and the hub starts again",
                    self.started.as_str()
                )),
            }
        }
        if next.mode.0 != self.good.mode.0 {
            self.say(PolicyState::Pending, mode_text(&next, self.started));
        }
        self.good = next;
    }
}

impl Watcher {
    /// Puts the file's git rules in force on `live`'s git route, when they changed.
    fn git(&self, live: &Broker, file: &PolicyFile) {
        let Some(current) = live.git_policy() else {
            return;
        };
        let (next, _) = super::effective::git_policy_with(self.git_pinned.clone(), Some(file));
        if *current == next {
            return;
        }
        let names: Vec<String> = next.hosts.iter().map(|h| h.entry()).collect();
        let message = format!(
            "the git rules in force: hosts {} and {} push rule{} (a host added reaches only the containers made after it)",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
            next.push.len(),
            if next.push.len() == 1 { "" } else { "s" },
        );
        live.set_git_policy(next);
        self.say(PolicyState::Applied, message);
    }
}

/// What a changed mode means for the containers of a hub that started in `started`.
fn mode_text(next: &NetworkPolicy, started: NetworkMode) -> String {
    match next.mode.0 == started {
        true => format!(
            "the network mode is {} again ({}), as the running containers have it",
            started.as_str(),
            next.mode.1
        ),
        false => format!(
            "the network mode is now {} ({}); the running containers keep {} until the hub starts again, which replaces them",
            next.mode.0.as_str(),
            next.mode.1,
            started.as_str()
        ),
    }
}

/// A change of the file's container-side values (the mode is said apart): what it means.
fn container_side(before: &PolicyFile, file: &PolicyFile) -> Option<String> {
    let value = |f: &PolicyFile| {
        (
            f.workspace_mode.as_ref().map(|a| a.value.clone()),
            f.guarded_paths.as_ref().map(|a| a.value.clone()),
            f.run_flags.as_ref().map(|a| a.value.clone()),
        )
    };
    let (was, now) = (value(before), value(file));
    let changed: Vec<&str> = [
        (was.0 != now.0, "workspaceMode"),
        (was.1 != now.1, "guardedPaths"),
        (was.2 != now.2, "runFlags"),
    ]
    .into_iter()
    .filter_map(|(changed, name)| changed.then_some(name))
    .collect();
    (!changed.is_empty()).then(|| {
        format!(
            "the file's {} changed: the running containers keep theirs until the hub starts again, which replaces them (unless an option or a variable sets it)",
            changed.join(", ")
        )
    })
}

/// A change of the file's own list or overrides that an option or a variable overrules here.
fn pinned(good: &NetworkPolicy, before: &PolicyFile, file: &PolicyFile) -> Option<String> {
    let lists = |f: &PolicyFile| f.allow.as_ref().map(|a| a.value.clone());
    let overrides = |f: &PolicyFile| f.resolve.as_ref().map(|a| a.value.clone());
    let said = |what: &str, source: super::effective::Source| {
        format!(
            "the file's {what} changed, but this hub's comes from {source}, which wins: the change does not apply here"
        )
    };
    if !good.allow.1.follows_file() && lists(before) != lists(file) {
        return Some(said("allow list", good.allow.1));
    }
    if !good.resolve.1.follows_file() && overrides(before) != overrides(file) {
        return Some(said("name overrides", good.resolve.1));
    }
    let mode = |f: &PolicyFile| f.network.as_ref().map(|a| a.value);
    if !good.mode.1.follows_file() && mode(before) != mode(file) {
        return Some(said("network mode", good.mode.1));
    }
    None
}

/// Puts `p`'s host-side values in force on `broker`'s egress proxy; `false` when it has none.
fn apply(broker: &Broker, p: &NetworkPolicy) -> bool {
    let Some(current) = broker.egress_policy() else {
        return false;
    };
    let mut next = (*current).clone();
    next.allow = p.allow_list();
    next.resolve = p.resolve.0.clone();
    next.workspaces = p
        .workspaces
        .iter()
        .map(|(id, at)| (id.clone(), at.value.clone()))
        .collect();
    broker.set_egress_policy(next)
}

/// What an applied policy says.
fn applied_text(p: &NetworkPolicy) -> String {
    let list = p.allow_list();
    let extra: usize = p.workspaces.values().map(|w| w.value.len()).sum();
    format!(
        "in force for the running containers: {} allow entr{} ({}), {} for single workspaces, {} name override{} ({})",
        list.len(),
        if list.len() == 1 { "y" } else { "ies" },
        p.allow.1,
        extra,
        p.resolve.0.len(),
        if p.resolve.0.len() == 1 { "" } else { "s" },
        p.resolve.1,
    )
}
