// Run by nonroot.test.mjs as its unprivileged user (never directly): one scenario, its facts
// printed as one JSON line on stdout. Argument: a JSON object { scenario, ... }.
import { lstatSync, mkdtempSync, readdirSync, realpathSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { addon } from './helpers.mjs'
import { baseOptions, hostEnv, inspect, newOwner, openLayer, writeBundle } from './provider-fixtures.mjs'

const args = JSON.parse(process.argv[2])
const out = (facts) => process.stdout.write(JSON.stringify(facts) + '\n')

/** A layer of a fresh owner on the shared engine, with the default broker folder unless given. */
function layerFor(workspace, extra = {}) {
  const poHome = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-home-')))
  writeBundle(poHome)
  const owner = newOwner()
  // A key the broker carries, so the container gets a broker socket (no call goes out).
  const env = hostEnv({ OPENAI_API_KEY: `sk-REAL-${'n'.repeat(40)}`, OPENAI_BASE_URL: 'http://127.0.0.1:9' })
  const options = baseOptions(poHome, owner, { workspaces: [{ id: 'nr', path: workspace }], env, ...extra })
  if (!('brokerSocketDir' in extra)) delete options.brokerSocketDir
  return { owner, poHome, ...openLayer(options) }
}

if (args.scenario === 'docker') {
  const { owner, poHome, layer } = layerFor(args.workspace)
  const status = await layer.provider.ready()
  const w = status.workspaces[0]
  const facts = { owner, poHome, uid: process.getuid(), gid: process.getgid(), state: w.state, error: w.error ?? null, containerId: w.container?.containerId ?? null }
  if (w.state === 'running') {
    // Written by the container in the workspace and in its own folders.
    const script = 'set -e; id -u > in-workspace.txt; mkdir -p made/sub; echo x > made/sub/f; for d in /po-home /po-runtime /po-git; do touch $d/probe && echo "$d ok" >&2; done; test -S /run/po-broker/broker.sock && test -w /run/po-broker/broker.sock'
    facts.execCode = await layer.containers.exec('nr', ['sh', '-c', script]).catch((e) => String(e))
    // The broker folder the container has mounted, read while this hub serves it.
    const mount = inspect(w.container.containerId).Mounts.find((m) => m.Destination === '/run/po-broker')
    if (mount) {
      const at = (p) => { const st = lstatSync(p); return { uid: st.uid, mode: st.mode & 0o777, socket: st.isSocket() } }
      facts.broker = { dir: mount.Source, ...at(mount.Source), entries: Object.fromEntries(readdirSync(mount.Source).map((n) => [n, at(path.join(mount.Source, n))])) }
    }
  }
  out(facts)
  // The caller removes the container after its checks (it reads the engine's view first).
} else if (args.scenario === 'denied') {
  const r = await addon.checkEngine({ engine: 'docker', timeoutMs: 5000, env: { ...process.env, DOCKER_HOST: `unix://${args.socket}` } })
  out({ available: r.available, reasonCode: r.reasonCode ?? null, reason: r.reason ?? null })
} else if (args.scenario === 'squatted') {
  const { owner, poHome, layer } = layerFor(args.workspace, { brokerSocketDir: args.socketDir })
  const status = await layer.provider.ready()
  const w = status.workspaces[0]
  out({ owner, poHome, state: w.state, errorCode: w.errorCode ?? null, error: w.error ?? null })
} else {
  throw new Error(`unknown scenario ${args.scenario}`)
}
process.exit(0)
