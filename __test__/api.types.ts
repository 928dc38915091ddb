// Compiled by `tsc --noEmit --strict` in npm test: the declarations are usable as documented.
import {
  checkEngine,
  doctor,
  engineCandidates,
  DefaultSandboxExtensionService,
  type EngineReport,
  type EngineCandidate,
  type SandboxState,
  type DoctorReport,
} from '../index.js'

declare const env: Record<string, string | undefined>

async function usage(): Promise<void> {
  const report: EngineReport = await checkEngine({ engine: 'docker', timeoutMs: 500, env, probeAll: true })
  const available: boolean = report.available
  const code: string | undefined = report.reasonCode
  const list: EngineCandidate[] = engineCandidates()
  const d: DoctorReport = await doctor('v24.0.0', { runFlags: ['--runtime=runsc'] })
  const shownFlags: string[] = d.runFlags
  void shownFlags
  const service = new DefaultSandboxExtensionService(env)
  const state: SandboxState = service.state()
  const kind: 'socket' | 'tcp' | undefined = state.route?.kind
  const text: string = service.report()
  void [available, code, list, d.ok, kind, text, service.contained]
}
void usage

import {
  registerSandboxLayer,
  ensureSandboxImage,
  listSandboxContainers,
  stopSandboxContainers,
  pruneSandboxLeftovers,
  type PruneReport,
  type SandboxHost,
  type ProviderStatus,
  type WorkspaceContainer,
  type SandboxEvent,
  type ProviderState,
  type WorkspacePhase,
  type WorkspaceChange,
  type EgressDecision,
  type PolicyState,
  type ImagePhase,
  type RouteKind,
  type SandboxContainerRow,
  type ContainerSandboxProvider,
  type WorkspaceContainers,
} from '../index.js'

async function providerUsage(): Promise<void> {
  let provider: ContainerSandboxProvider | undefined
  let service: WorkspaceContainers | undefined
  const host: SandboxHost = {
    scope: 'global',
    identity: { contained: false },
    registerSandboxProvider: (p) => { provider = p },
    publishService: (_name, s) => { service = s },
  }
  const layer = registerSandboxLayer(host, { poHome: '/home/u/.po', workspaces: [{ id: 'w', path: '/src/w', sandbox: 'container', mode: 'clone' }], workspaceMode: 'bind', imageVariant: 'minimal', runFlags: ['--runtime=runsc', '--memory=2g'], networkAllow: ['registry.npmjs.org:443', '*.crates.io:443'], networkResolve: ['registry.test=127.0.0.1'] })
  if (layer === null) return
  layer.provider.onEvent((e: SandboxEvent) => { const t: 'engine' | 'runtime' | 'image' | 'workspace' | 'egress' | 'policy' | 'provider' = e.type; void t })
  const status: ProviderStatus = await layer.provider.ready()
  const state: 'starting' | 'ready' | 'unavailable' | 'stopped' = status.state
  const c: WorkspaceContainer = await layer.containers.start({ id: 'w', path: '/src/w' })
  const adopted: WorkspaceContainer | null = await layer.containers.adopt('w')
  const stopped: boolean = await layer.containers.stop('w')
  const all: string[] = await layer.containers.stopAll()
  const rows: SandboxContainerRow[] = await listSandboxContainers({ allOwners: true })
  const ids: string[] = await stopSandboxContainers({ all: true })
  const discarded: string[] = await stopSandboxContainers({ workspace: 'w', discard: true })
  const copied: WorkspaceContainer = await layer.containers.start({ id: 'w', path: '/src/w', mode: 'clone' })
  const pruned: PruneReport = await pruneSandboxLeftovers({ removeVolumes: true, dryRun: true })
  const prunedNames: string[] = [...pruned.networks, ...pruned.volumes]
  void prunedNames
  const image = await ensureSandboxImage({ imageVariant: 'full' }, (e) => void e.phase)
  const flags: string[] = [...c.posture.runFlags, ...(rows[0]?.runFlags ?? [])]
  const runtime: string = c.posture.runtime
  void [discarded, copied, provider, service, state, c.url, c.hostPort, adopted, stopped, all, rows, ids, image.tag, layer.provider.kind, flags, runtime]
}
void providerUsage

// Events are a discriminated union on `type`: each branch has exactly its own fields, typed.
function describe(e: SandboxEvent): string {
  switch (e.type) {
    case 'engine': {
      const available: boolean = e.available
      return `${available} ${e.engine ?? ''} ${e.code ?? ''}`
    }
    case 'runtime': {
      const ok: boolean = e.ok
      return `${ok} ${e.version ?? ''}`
    }
    case 'image': {
      const phase: ImagePhase = e.phase
      const tag: string = e.tag
      // @ts-expect-error an image event has no workspaceId
      void e.workspaceId
      return `${phase} ${tag} ${e.message ?? ''}`
    }
    case 'workspace': {
      const id: string = e.workspaceId
      const change: WorkspaceChange = e.state
      // @ts-expect-error a workspace event's state is not a provider state
      const wrong: ProviderState = e.state
      return `${id} ${change} ${wrong} ${e.containerId ?? ''}`
    }
    case 'provider': {
      const state: ProviderState = e.state
      // @ts-expect-error a provider event has no tag
      void e.tag
      return `${state} ${e.reason ?? ''}`
    }
    case 'egress': {
      const decision: EgressDecision = e.decision
      const port: number = e.port
      const bytes: number = e.bytesUp + e.bytesDown
      // @ts-expect-error an egress event has no state
      void e.state
      return `${e.workspaceId} ${e.host}:${port} ${decision} ${bytes} ${e.reason ?? ''}`
    }
    case 'policy': {
      const state: PolicyState = e.state
      const message: string = e.message
      // @ts-expect-error a policy event names no workspace
      void e.workspaceId
      return `${state} ${message}`
    }
    default: {
      const exhaustive: never = e
      return exhaustive
    }
  }
}
void describe

// States are string-literal unions, not `string`.
function states(s: ProviderStatus): void {
  const p: ProviderState = s.state
  const w: WorkspacePhase[] = s.workspaces.map((x) => x.state)
  const route: RouteKind = 'tcp'
  // @ts-expect-error 'stopped' is not a provider state
  const badProvider: ProviderState = 'stopped'
  // @ts-expect-error 'running' is not an image phase
  const badPhase: ImagePhase = 'running'
  // @ts-expect-error route kinds are 'socket' and 'tcp'
  const badRoute: RouteKind = 'pipe'
  void [p, w, route, badProvider, badPhase, badRoute]
}
void states

import {
  startCredentialBroker,
  startBrokerBridge,
  brokeredBaseUrl,
  type CredentialBroker,
  type BrokerGrant,
  type BrokerAuditEvent,
  type BrokerBridge,
} from '../index.js'

async function brokerUsage(): Promise<void> {
  const broker: CredentialBroker = await startCredentialBroker({ env: { OPENAI_API_KEY: 'sk-x' }, socketDir: '/tmp/pb', tcp: true })
  const grant: BrokerGrant = broker.grant({ workspace: 'w', providers: ['openai'], transport: 'socket', user: '1000:1000', containerSocketPath: '/run/po-broker/broker.sock' })
  const kind: 'socket' | 'tcp' | undefined = grant.route?.kind
  const token: string | undefined = grant.env.OPENAI_API_KEY
  broker.onEvent((e: BrokerAuditEvent) => void [e.status, e.path, e.durationMs])
  const bridge: BrokerBridge = await startBrokerBridge(grant.route?.hostSocket ?? '')
  const url: string = brokeredBaseUrl('https://openrouter.ai/api/v1', 'openrouter', bridge.url)
  const revoked: boolean = broker.revoke(grant.id)
  await bridge.close()
  await broker.close()
  void [kind, token, url, revoked, broker.enabled, broker.address, grant.withheld[0]?.reason]
}
void brokerUsage

import {
  reviewSandboxWorkspace,
  type WorkspaceReview,
  type ReviewChange,
  type ReviewClass,
  type ReviewChangeKind,
} from '../index.js'

// `review`'s result: `change` and `class` are string-literal unions.
async function reviewUsage(service: WorkspaceContainers): Promise<void> {
  const r: WorkspaceReview = await service.review('w')
  const again: WorkspaceReview = await reviewSandboxWorkspace('w', { poHome: '/home/u/.po', owner: 'o' })
  const first: ReviewChange | undefined = r.changes[0]
  if (first === undefined) return
  const change: 'added' | 'modified' | 'removed' = first.change
  const kind: ReviewChangeKind = first.change
  const cls: ReviewClass = first.class
  // @ts-expect-error a class is one of the listed names
  const wrong: ReviewClass = 'dockerfile'
  const named: 'package-scripts' | 'makefile' | 'cargo-config' | 'build-script' | 'npmrc' | 'yarn-config' | 'yarn-release' | 'tool-versions' | 'workflow' | 'agent-instructions' | 'nested-git' | 'direnv' | 'task-runner' | 'gitlink' | 'bare-repository' = cls
  const detail: string | undefined = first.detail
  const complete: boolean = again.complete
  void [change, kind, wrong, named, detail, complete, r.since, r.path, r.workspaceId, first.reason, first.path]
}
void reviewUsage

import type { CloneDiff, CloneApplied, CloneFile, CloneOutcome } from '../index.js'

// Clone mode's `diff` and `apply`: typed results, options by name.
async function cloneUsage(service: WorkspaceContainers): Promise<void> {
  const d: CloneDiff = await service.diff('w', { path: '/src/app' })
  const file: CloneFile | undefined = d.uncommitted.files[0]
  const cls: ReviewClass | undefined = file?.class
  const ids: string[] = d.commits.map((c) => c.id)
  const a: CloneApplied = await service.apply('w', { branch: 'po-sandbox/w', patch: '/tmp/w.patch' })
  const changed: boolean = a.changed
  const tip: string | undefined = a.tip
  // @ts-expect-error the branch is a string
  await service.apply('w', { branch: 1 })
  // A folder without git: its files written only with `yes`, each with its outcome.
  const f: CloneApplied = await service.apply('w', { yes: true, includeExecutable: false })
  const kind: 'git' | 'folder' = f.kind
  const outcome: CloneOutcome | undefined = f.files[0]?.outcome
  // @ts-expect-error no such outcome
  const wrong: CloneOutcome = 'skipped'
  void [cls, ids, changed, tip, d.base, d.committed.stat, d.committed.patch, a.message, a.uncommittedCommit, kind, outcome, wrong, d.kind]
}
void cloneUsage

import { sandboxPolicy, type PolicyAnswer, type PolicyValue } from '../index.js'

function policyUsage(): void {
  const a: PolicyAnswer = sandboxPolicy({ command: 'check', target: 'example.com:443', poHome: '/tmp/po' })
  const allowed: boolean = a.ok
  const line: number | undefined = a.line
  const values: PolicyValue[] = sandboxPolicy({ command: 'show' }).values
  // @ts-expect-error a policy command is one of five words
  sandboxPolicy({ command: 'remove' })
  void [allowed, line, values.map((v) => `${v.name} ${v.value} ${v.source}`), a.text]
}
void policyUsage
