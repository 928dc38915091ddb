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
