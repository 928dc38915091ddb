//! A hub watching its policy file: each saved change is read, and the host-side values
//! (the allow lists, the name overrides) go to the broker's egress proxy at once, which closes
//! the connections the new policy no longer allows. A file that does not parse or validate
//! changes nothing: the last good policy stays, and an event says where the file is wrong. A
//! changed network mode applies when the hub starts again (an event says so).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::effective::NetworkPolicy;
use crate::broker::server::{Broker, WeakBroker};
use crate::events::{Event, EventBus, PolicyState};

/// How often the file's identity (size, time, inode) is looked at: a change is in force well
/// within a second.
pub const POLL: Duration = Duration::from_millis(250);

/// What is looked at to see a change: length, modification time and (on Unix) the inode, so
/// a file replaced by a rename (as editors and [`super::edit::write`] save) is seen.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(u64, Option<SystemTime>, u64)>);

fn stamp(path: &std::path::Path) -> Stamp {
    Stamp(std::fs::metadata(path).ok().map(|m| {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let inode = 0;
        (m.len(), m.modified().ok(), inode)
    }))
}

/// Watches `po_home`'s policy file while `broker` (the hub's) runs; `policy` is what the hub
/// started with.
pub fn spawn(po_home: PathBuf, policy: NetworkPolicy, broker: WeakBroker, events: EventBus) {
    tokio::spawn(async move {
        let path = super::path_in(&po_home);
        // Nothing seen yet: the first look reads the file, so a change saved between the
        // hub's start-up read and this watcher's start is not missed.
        let mut seen = Stamp(Some((u64::MAX, None, u64::MAX)));
        let mut good = policy;
        loop {
            tokio::time::sleep(POLL).await;
            let Some(live) = broker.upgrade() else {
                return;
            };
            let now = stamp(&path);
            if now == seen {
                continue;
            }
            seen = now;
            let file = match super::load(&po_home) {
                Ok(file) => file.map(|(f, _)| f).unwrap_or_default(),
                Err(problem) => {
                    events.emit(Event::Policy {
                        state: PolicyState::Invalid,
                        message: format!(
                            "{} is not a good policy ({problem}): nothing changed, the last good policy stays in force. `po-sandbox policy check` says the same.",
                            path.display()
                        ),
                    });
                    continue;
                }
            };
            let next = good.with_file(&file);
            let host_side = next.allow != good.allow
                || next.resolve != good.resolve
                || next.workspaces != good.workspaces;
            if host_side {
                let message = match apply(&live, &next) {
                    true => (PolicyState::Applied, applied(&next)),
                    false => (
                        PolicyState::Pending,
                        format!(
                            "the allow list or the name overrides changed; this hub runs the {} network mode, without the egress proxy: they apply once the mode is allowlist and the hub starts again",
                            good.mode.0.as_str()
                        ),
                    ),
                };
                events.emit(Event::Policy {
                    state: message.0,
                    message: message.1,
                });
            }
            if next.mode.0 != good.mode.0 {
                events.emit(Event::Policy {
                    state: PolicyState::Pending,
                    message: format!(
                        "the network mode is now {} ({}); the running containers keep {} until the hub starts again, which replaces them",
                        next.mode.0.as_str(),
                        next.mode.1,
                        good.mode.0.as_str()
                    ),
                });
            }
            // Said once: a mode changed back says so again.
            good = next;
        }
    });
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
fn applied(p: &NetworkPolicy) -> String {
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
