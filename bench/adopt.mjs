// Benchmark: a hub restart that adopts N running workspace containers.
//
// po-sandbox: a fresh provider's start-up until every workspace is adopted (engine check,
// runtime bundle, image check, one label-filtered list call, then per workspace an inspect of
// it and its holder and a health answer), measured in-process: as a hub restart finds the
// engine's facts (kept by the hub before it, see docs/files.md), and as the first start after
// the engine's own start finds none (its version and info asked).
// Baselines, measured in the same rounds:
// - the Engine-API floor: the least any layer must do for the same adoption, straight over the
//   engine's socket from Node: one label-filtered list, then for every workspace at once an
//   inspect and a health answer from its published port (no checks). A hub start is a new
//   process with no open connections, so the floor opens its own each round (keep-alive within
//   the round); the same floor on connections kept from the round before is shown too;
// - what a CLI-driven layer does: per workspace `docker ps --filter label=po.owner=… --filter
//   label=po.workspace=… -q` and `docker inspect`.
//
// Usage: node bench/adopt.mjs [workspaces=20] [rounds=7]
// Needs a running Docker engine and the local test base image (scripts/build-test-base-image.sh).
import { execFileSync, execFile } from 'node:child_process'
import http from 'node:http'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { createRequire } from 'node:module'

import { baseOptions, fakeHost, newOwner, removeOwner, writeBundle } from '../__test__/provider-fixtures.mjs'

const run = promisify(execFile)
const { registerSandboxLayer } = createRequire(import.meta.url)('../index.js')
const N = Number(process.argv[2] ?? 20)
const ROUNDS = Number(process.argv[3] ?? 7)

/** Keep-alive agents for the engine's socket and the health answers. */
function agents() {
  return { engine: new http.Agent({ keepAlive: true, maxSockets: 64 }), health: new http.Agent({ keepAlive: true, maxSockets: 64 }) }
}
const warm = agents()

/** GET over the engine's socket (DOCKER_HOST unix://… or /var/run/docker.sock), as JSON. */
function engineGet(p, engineAgent) {
  const socketPath = (process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock').replace(/^unix:\/\//, '')
  return new Promise((resolve, reject) => {
    http.get({ socketPath, path: p, agent: engineAgent }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`${p}: ${res.statusCode}`))))
    }).on('error', reject)
  })
}

function healthOf(port, p, healthAgent) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p, agent: healthAgent }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`health ${res.statusCode}`))))
    }).on('error', reject)
  })
}

/** The floor: one list, then every inspect and health answer concurrently, on `a`'s agents. */
async function floor(owner, n, a) {
  const filters = encodeURIComponent(JSON.stringify({ label: [`po.owner=${owner}`, 'po.workspace'] }))
  const list = await engineGet(`/containers/json?filters=${filters}`, a.engine)
  if (list.length !== n) throw new Error(`the floor listed ${list.length} containers, not ${n}`)
  await Promise.all(list.map(async (c) => {
    const info = await engineGet(`/containers/${c.Id}/json`, a.engine)
    // The port is published by the workspace's network namespace holder: its inspect is part
    // of the same work.
    const holder = await engineGet(`/containers/${info.HostConfig.NetworkMode.replace(/^container:/, '')}/json`, a.engine)
    const port = Number(Object.values(holder.NetworkSettings.Ports).flat().filter(Boolean)[0].HostPort)
    await healthOf(port, '/api/health', a.health)
  }))
}

/** What a measured step left running in the background (a provider's TLS roots, its network
 * prune) ends before the next step is measured: no step pays for another's. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 250))

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  return { p50: percentile(s, 50), p90: percentile(s, 90), min: s[0], max: s[s.length - 1] }
}

execFileSync('bash', [path.join(import.meta.dirname, '../scripts/build-test-base-image.sh')], { stdio: 'ignore' })
const poHome = mkdtempSync(path.join(os.tmpdir(), 'po-bench-home-'))
// Beside the Po home, never inside it (a workspace may not overlap it).
const wsRoot = mkdtempSync(path.join(os.tmpdir(), 'po-bench-ws-'))
const owner = newOwner()
writeBundle(poHome)
const workspaces = Array.from({ length: N }, (_, i) => {
  const dir = path.join(wsRoot, `w${i}`)
  mkdirSync(dir, { recursive: true })
  return { id: `w${i}`, path: dir }
})
const options = { ...baseOptions(poHome, owner), env: { ...process.env }, workspaces, concurrency: Number(process.env.BENCH_CONCURRENCY ?? 8) }
delete options.env.PO_SANDBOX_LOG

try {
  // Bring them up once.
  const first = registerSandboxLayer(fakeHost(), options)
  const up = await first.provider.ready()
  const failed = up.workspaces.filter((w) => w.state !== 'running')
  if (failed.length) throw new Error(`set-up failed: ${JSON.stringify(failed[0])}`)

  const ours = []
  const cold = []
  const api = []
  const apiWarm = []
  const cli = []
  await floor(owner, N, warm)
  for (let r = 0; r < ROUNDS; r++) {
    let t0 = performance.now()
    const layer = registerSandboxLayer(fakeHost(), options)
    const s = await layer.provider.ready()
    ours.push(performance.now() - t0)
    await settle()
    if (s.workspaces.some((w) => !w.container?.adopted)) throw new Error('not every workspace was adopted')

    // The first start after the engine's own start: no facts kept.
    rmSync(path.join(poHome, 'engine-facts.json'), { force: true })
    t0 = performance.now()
    const coldLayer = registerSandboxLayer(fakeHost(), options)
    const c = await coldLayer.provider.ready()
    cold.push(performance.now() - t0)
    await settle()
    if (c.workspaces.some((w) => !w.container?.adopted)) throw new Error('not every workspace was adopted')

    const fresh = agents()
    t0 = performance.now()
    await floor(owner, N, fresh)
    api.push(performance.now() - t0)
    await settle()
    fresh.engine.destroy()
    fresh.health.destroy()

    t0 = performance.now()
    await floor(owner, N, warm)
    apiWarm.push(performance.now() - t0)
    await settle()

    t0 = performance.now()
    for (const w of workspaces) {
      const { stdout } = await run('docker', ['ps', '-q', '--filter', `label=po.owner=${owner}`, '--filter', `label=po.workspace=${w.id}`])
      await run('docker', ['inspect', stdout.trim()])
    }
    cli.push(performance.now() - t0)
  }
  const a = summary(ours)
  const k = summary(cold)
  const f = summary(api)
  const w = summary(apiWarm)
  const b = summary(cli)
  const fmt = (x) => `${x.toFixed(1)} ms`
  console.log(`adopting ${N} running workspaces, ${ROUNDS} rounds`)
  console.log(`  po-sandbox (full provider start-up, a hub restart): p50 ${fmt(a.p50)}  p90 ${fmt(a.p90)}  min ${fmt(a.min)}  max ${fmt(a.max)}`)
  console.log(`  po-sandbox, the first start after the engine's start (no facts kept): p50 ${fmt(k.p50)}  p90 ${fmt(k.p90)}  min ${fmt(k.min)}  max ${fmt(k.max)}`)
  console.log(`  Engine-API floor (list, then inspect + health each, concurrent; new connections): p50 ${fmt(f.p50)}  p90 ${fmt(f.p90)}  min ${fmt(f.min)}  max ${fmt(f.max)}`)
  console.log(`  the same floor on connections kept from the round before: p50 ${fmt(w.p50)}  p90 ${fmt(w.p90)}  min ${fmt(w.min)}  max ${fmt(w.max)}`)
  console.log(`  docker CLI (ps + inspect per workspace): p50 ${fmt(b.p50)}  p90 ${fmt(b.p90)}  min ${fmt(b.min)}  max ${fmt(b.max)}`)
  console.log(`  ratio (po-sandbox / floor, p50): ${(a.p50 / f.p50).toFixed(2)}x (${(a.p50 / w.p50).toFixed(2)}x the floor on kept connections); the first start after the engine's: ${(k.p50 / f.p50).toFixed(2)}x`)
  console.log(`  ratio (CLI / po-sandbox, p50): ${(b.p50 / a.p50).toFixed(1)}x`)
} finally {
  warm.engine.destroy()
  warm.health.destroy()
  await removeOwner(owner)
  rmSync(poHome, { recursive: true, force: true })
  rmSync(wsRoot, { recursive: true, force: true })
}
