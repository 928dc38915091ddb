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
  const d: DoctorReport = await doctor('v24.0.0')
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
  type SandboxHost,
  type ProviderStatus,
  type WorkspaceContainer,
  type SandboxEvent,
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
  const layer = registerSandboxLayer(host, { poHome: '/home/u/.po', workspaces: [{ id: 'w', path: '/src/w', sandbox: 'container' }], imageVariant: 'minimal' })
  if (layer === null) return
  layer.provider.onEvent((e: SandboxEvent) => { const t: 'engine' | 'runtime' | 'image' | 'workspace' | 'provider' = e.type; void t })
  const status: ProviderStatus = await layer.provider.ready()
  const state: 'starting' | 'ready' | 'unavailable' | 'stopped' = status.state
  const c: WorkspaceContainer = await layer.containers.start({ id: 'w', path: '/src/w' })
  const adopted: WorkspaceContainer | null = await layer.containers.adopt('w')
  const stopped: boolean = await layer.containers.stop('w')
  const all: string[] = await layer.containers.stopAll()
  const rows: SandboxContainerRow[] = await listSandboxContainers({ allOwners: true })
  const ids: string[] = await stopSandboxContainers({ all: true })
  const image = await ensureSandboxImage({ imageVariant: 'full' }, (e) => void e.phase)
  void [provider, service, state, c.url, c.hostPort, adopted, stopped, all, rows, ids, image.tag, layer.provider.kind]
}
void providerUsage

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
