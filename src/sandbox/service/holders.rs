//! The namespace holder of each workspace: made on the per-hub network, its rules loaded by a
//! helper, reloaded when it restarts; and the per-hub network itself.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use super::ContainerService;
use crate::broker::server::RouteKind;
use crate::engine::EngineError;
use crate::engine::Operation;
use crate::engine::api::EngineApi;
use crate::error::Result;
use crate::events::WorkspaceChange;
use crate::lock::Locked;
use crate::sandbox::blueprint::firewall::RulesInput;
use crate::sandbox::blueprint::spec::{self, ContainerSpec};
use crate::sandbox::on_engine::container::{self, Created, LiveContainer};
use crate::sandbox::on_engine::holder;
use crate::sandbox::on_engine::network;

/// What this hub knows of its holders and network.
#[derive(Default)]
pub(super) struct HolderState {
    /// The id of the per-hub network, once this hub found or made it (one at a time).
    pub(super) network: tokio::sync::Mutex<Option<String>>,
    /// Holders this hub is making: their create path loads their rules, not the event feed.
    readying: Mutex<HashSet<String>>,
}

impl<E: EngineApi> ContainerService<E> {
    /// Removes a workspace's namespace holder (after its container).
    pub(super) async fn remove_holder(&self, workspace_id: &str) -> Result<()> {
        let owner = &self.inner.config.container.owner;
        holder::remove_of(&self.changes(), owner, Some(workspace_id))
            .await
            .map(|_| ())
    }

    /// This hub's TCP broker route ports (broker, egress proxy, registry routes), which a
    /// holder's rules let through; none on a socket route.
    fn route_ports(&self) -> Vec<u16> {
        let Some(w) = self
            .inner
            .config
            .broker
            .as_ref()
            .filter(|w| w.transport == RouteKind::Tcp)
        else {
            return vec![];
        };
        [w.broker.tcp_address(), w.broker.egress_tcp_address()]
            .into_iter()
            .flatten()
            .map(|a| a.port())
            .chain(w.broker.registry_tcp_ports())
            .collect()
    }

    /// How this hub makes a workspace's rules helper.
    fn helper<'a>(&'a self, workspace_id: &'a str) -> holder::Helper<'a> {
        let c = &self.inner.config;
        holder::Helper {
            image: &c.container.image,
            owner: &c.container.owner,
            workspace: workspace_id,
            keep_id: c.container.mode.keep_id,
            podman: c.podman,
            limits_enforced: c.container.mode.limits_enforced,
        }
    }

    /// Where this Po home records the rules loaded into a workspace's holder.
    fn rules_record(&self, workspace_id: &str) -> PathBuf {
        let c = &self.inner.config.container;
        holder::record_path(&spec::token_file(&c.po_home, &c.owner, workspace_id))
    }

    /// Sees to it that an adopted container's holder has its rules loaded, with this hub's TCP
    /// broker ports let through (the holder carries the ports of the hub that made it): after
    /// an engine restart the holder came back without them, and the container's process waits
    /// at its start gate until they are loaded.
    pub(super) async fn ensure_rules(&self, id: &str, live: &LiveContainer) -> Result<()> {
        let Some(h) = live.posture.holder.as_ref() else {
            return Ok(());
        };
        let ran = holder::ensure_rules(
            &self.changes(),
            self.helper(id),
            h,
            &self.rules_record(id),
            &self.route_ports(),
        )
        .await?;
        if ran {
            tracing::info!(workspace = %id, holder = %h.id, "network rules loaded into the holder");
        }
        Ok(())
    }

    /// A holder of this owner started (its own restart, or the engine's): loads its rules (its
    /// workspace's process waits at its start gate until then), restarts its workspace's
    /// container when that one still runs in the namespace of the holder's previous start, and
    /// starts it when a start that failed while the holder was down left it stopped (an engine
    /// restart starts holders and workspaces at once, and its restart policy does not retry).
    pub async fn holder_started(&self, workspace_id: &str, holder_id: &str) -> Result<()> {
        if self.readying(holder_id) {
            return Ok(());
        }
        let engine = &self.changes();
        let port = self.inner.config.container.bundle.server.port;
        let joined = format!("container:{holder_id}");
        let Some(h) = holder::posture(engine, &joined, port).await? else {
            return Ok(());
        };
        if !h.running {
            return Ok(());
        }
        holder::ensure_rules(
            engine,
            self.helper(workspace_id),
            &h,
            &self.rules_record(workspace_id),
            &self.route_ports(),
        )
        .await?;
        for cid in self.ids_of(workspace_id).await? {
            let Some(c) = container::inspect(engine, &cid, None).await? else {
                continue;
            };
            // Started before the holder's current start: in the namespace of its previous one.
            let in_old = c.network_mode() == Some(joined.as_str())
                && c.running()
                && container::rfc3339(&c.started_at) < container::rfc3339(&h.started_at);
            // Left down by a start that failed while the holder was not running (an engine
            // restart starts holders and workspaces at once; a workspace started first cannot
            // join the namespace, and the restart policy does not try again).
            let left_down = c.network_mode() == Some(joined.as_str())
                && !c.running()
                && !c.start_error.is_empty()
                && !self.stop_requested(&c.id);
            if left_down {
                tracing::info!(workspace = workspace_id, container = %c.id, error = %c.start_error, "starting a workspace container its failed start left down");
                EngineApi::start_container(engine, &c.id)
                    .await
                    .map_err(container::engine_err(
                        engine,
                        Operation::Start(c.id.clone()),
                    ))?;
                // Where it answers now: the holder's port (another one after an engine restart).
                let port = (self.current(&c.id).await.ok().flatten())
                    .and_then(|now| now.host_port)
                    .map_or_else(String::new, |p| format!(", now on 127.0.0.1:{p}"));
                self.inner.events.workspace(
                    workspace_id,
                    WorkspaceChange::Restarted,
                    Some(&c.id),
                    Some(format!(
                        "its start failed while its network namespace holder was down ({}): started again now that the holder runs{port}",
                        c.start_error
                    )),
                );
                continue;
            }
            if in_old {
                EngineApi::restart_container(engine, &c.id).await.map_err(
                    container::engine_err(engine, Operation::Restart(c.id.clone())),
                )?;
                self.inner.events.workspace(
                    workspace_id,
                    WorkspaceChange::Restarted,
                    Some(&c.id),
                    Some(
                        "its network namespace holder restarted: restarted into the new namespace"
                            .into(),
                    ),
                );
            }
        }
        Ok(())
    }

    /// The running holders of this owner, with their workspaces.
    pub async fn running_holders(&self) -> Result<Vec<(String, String)>> {
        let labels = vec![
            format!(
                "{}={}",
                spec::LABEL_OWNER,
                self.inner.config.container.owner
            ),
            spec::LABEL_HOLDER_OF.to_string(),
        ];
        let list = container::list_labelled(&self.inner.engine, labels).await?;
        Ok(list
            .into_iter()
            .filter(|c| c.state.as_ref().map(|s| s.to_string()).as_deref() == Some("running"))
            .filter_map(|c| {
                let ws = c.labels.as_ref()?.get(spec::LABEL_HOLDER_OF)?.clone();
                Some((ws, c.id?))
            })
            .collect())
    }

    /// Marks a holder as being made by this hub, or no longer.
    fn set_readying(&self, holder_id: &str, on: bool) {
        let mut set = self.inner.holders.readying.locked();
        match on {
            true => set.insert(holder_id.to_string()),
            false => set.remove(holder_id),
        };
    }

    /// Whether this hub is making the holder now (its create path loads the rules itself).
    fn readying(&self, holder_id: &str) -> bool {
        self.inner.holders.readying.locked().contains(holder_id)
    }

    /// Makes (does not start) the workspace's namespace holder on the network `network`;
    /// returns its id and the rules it carries.
    async fn create_holder(
        &self,
        spec: &ContainerSpec,
        network: &str,
    ) -> Result<(String, holder::Rules)> {
        let c = &self.inner.config;
        let engine = &self.changes();
        // An engine network mode (slirp4netns) has no network to inspect: its host side is
        // reached only as host.docker.internal, allowed below for the broker alone.
        let own = match spec.per_hub_network {
            true => network::addresses(engine, network).await?,
            false => network::NetworkAddresses::default(),
        };
        let gateway = own.gateway;
        let tcp_broker = c.broker.as_ref().filter(|w| w.transport == RouteKind::Tcp);
        let broker_port = tcp_broker.and_then(|w| w.broker.tcp_address().map(|a| a.port()));
        let egress_port = tcp_broker.and_then(|w| w.broker.egress_tcp_address().map(|a| a.port()));
        let mut dns = c.dns_servers.clone();
        if c.podman {
            // aardvark-dns answers on the gateway.
            dns.extend(gateway);
        }
        let input = RulesInput {
            mode: c.container.network_mode,
            gateway,
            broadcast: own.broadcast,
            network_v6: own.v6,
            dns,
            // On a remote engine: that machine's own, learned from it.
            host_addresses: match self.carried() {
                true => self.machine_addresses(&spec.image).await?,
                false => c.host_addresses.clone(),
            },
            broker_port,
            egress_port,
            server_port: spec.container_port,
        };
        let broker_host = broker_port.map(|_| crate::broker::server::CONTAINER_HOST);
        let rules = holder::Rules::of(&input, broker_host);
        let id = holder::create(engine, spec, &rules, c.podman, network).await?;
        Ok((id, rules))
    }

    /// The per-hub network's id: found or made once, again after `fresh` (it was gone).
    pub(super) async fn network(&self, fresh: bool) -> Result<String> {
        let mut cached = self.inner.holders.network.lock().await;
        if let (Some(id), false) = (cached.as_ref(), fresh) {
            return Ok(id.clone());
        }
        let id = network::ensure(&self.changes(), &self.inner.config.container.owner).await?;
        *cached = Some(id.clone());
        Ok(id)
    }

    /// Removes the per-hub network when no container uses it any more (it is made again on the
    /// next need): the owner's last container gone leaves nothing on the engine but volumes.
    pub(super) async fn remove_network_if_unused(&self) -> Result<()> {
        let mut cached = self.inner.holders.network.lock().await;
        let removed =
            network::remove_unused(&self.changes(), &self.inner.config.container.owner).await?;
        if !removed.is_empty() {
            *cached = None;
            tracing::debug!(networks = ?removed, "per-hub network removed");
        }
        Ok(())
    }

    /// Creates the container on the per-hub network; when another hub of the owner removed
    /// the network meanwhile, makes it again and tries once more.
    pub(super) async fn create_on_network(&self, spec: &ContainerSpec) -> Result<Created> {
        let engine = &self.changes();
        let podman = self.inner.config.podman;
        // Looked up afresh for every create: another hub of the owner may have removed it, and
        // the engine only notices a missing network at start. An engine network mode
        // (slirp4netns for the TCP route on rootless Podman) is the holder's network instead.
        let network = match spec.per_hub_network {
            true => self.network(true).await?,
            false => spec.network.clone(),
        };
        if container::inspect(&self.inner.engine, &spec.name, None)
            .await?
            .is_some()
        {
            return Ok(Created::NameTaken);
        }
        let (holder, rules) = match self.create_holder(spec, &network).await {
            // The network went meanwhile (another hub of the owner removed it): made again.
            Err(e) if matches!(e.engine_fault(), Some(EngineError::NetworkGone(_))) => {
                let network = self.network(true).await?;
                self.create_holder(spec, &network).await?
            }
            other => other?,
        };
        // The container is created while the holder starts and its helper loads the rules; it
        // starts only after both (`create_steps`), and its process waits at its start gate
        // for them besides.
        let joined = format!("container:{holder}");
        let workspace = spec
            .labels
            .get(spec::LABEL_WORKSPACE)
            .cloned()
            .unwrap_or_default();
        let ports = self.route_ports();
        self.set_readying(&holder, true);
        let (ready, created) = tokio::join!(
            holder::ready(engine, self.helper(&workspace), &holder, &rules, &ports),
            container::create(engine, spec, podman, &joined)
        );
        if let Ok(Some(started_at)) = &ready {
            holder::write_record(
                &self.rules_record(&workspace),
                &holder::record_with("", &holder, started_at, &ports),
            );
        }
        self.set_readying(&holder, false);
        match (ready, created) {
            (Ok(_), Ok(Created::New(id))) => Ok(Created::New(id)),
            (ready, created) => {
                if let Ok(Created::New(id)) = &created {
                    let _ = container::stop_and_remove(engine, id).await;
                }
                let _ = holder::remove(engine, &holder).await;
                ready?;
                created
            }
        }
    }
}
