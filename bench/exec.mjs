// Benchmark: `po-sandbox exec` and `up` on a running sandbox against the docker CLI, as a person
// (or a script) runs them: a new process each time, so process start is included.
//
// In interleaved rounds, on one sandbox this script brings up and removes:
// - `node bin/po-sandbox.js exec DIR -- echo x` against `docker exec <container> echo x`;
// - `node bin/po-sandbox.js up DIR` (the sandbox runs: it is adopted) against
//   `docker start <container>` followed by `docker inspect <container>` (two CLI invocations,
//   timed together).
//
// The rounds start once the container is healthy: before, an exec waits at the network rules'
// gate (see docs/security.md).
//
// Usage: node bench/exec.mjs [rounds=20]
// Needs a running Docker engine and the local test base image (scripts/build-test-base-image.sh).
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { removeOwner } from '../__test__/provider-fixtures.mjs'

const ROUNDS = Number(process.argv[2] ?? 20)
const BASE = 'po-sandbox-test-base:node24-nft'
const cli = path.join(import.meta.dirname, '../bin/po-sandbox.js')

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  return { p50: percentile(s, 50), p90: percentile(s, 90), min: s[0], max: s[s.length - 1] }
}

/** Runs one command line to its end (output captured); its time in ms. Throws when it fails. */
function timed(argv, expect) {
  const t0 = performance.now()
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env })
  const ms = performance.now() - t0
  if (r.status !== 0 || (expect && !r.stdout.includes(expect))) throw new Error(`${argv.join(' ')}: exit ${r.status}\n${r.stdout}\n${r.stderr}`)
  return ms
}

/** Several command lines one after the other, timed together. */
function timedAll(lines) {
  return lines.reduce((sum, argv) => sum + timed(argv), 0)
}

execFileSync('bash', [path.join(import.meta.dirname, '../scripts/build-test-base-image.sh')], { stdio: 'ignore' })
const scratch = mkdtempSync(path.join(os.tmpdir(), 'po-bench-exec-'))
const folder = path.join(scratch, 'ws')
mkdirSync(folder)
const home = ['--po-home', path.join(scratch, 'po-home')]
const image = ['--base-image', BASE, '--image-variant', 'minimal']
const env = { ...process.env }
delete env.PO_SANDBOX_LOG

let owner
try {
  execFileSync(process.execPath, [cli, 'up', folder, ...home, ...image], { stdio: 'ignore', env })
  const listed = JSON.parse(execFileSync(process.execPath, [cli, 'ls', '--json', ...home], { encoding: 'utf8', env }))
  const id = listed[0].containerId
  owner = listed[0].owner
  // Healthy first (its first health check runs one interval after the start): an exec into a
  // container not yet healthy waits at the network rules' gate (one start of Node inside).
  const deadline = Date.now() + 60000
  while (execFileSync('docker', ['inspect', '-f', '{{.State.Health.Status}}', id], { encoding: 'utf8' }).trim() !== 'healthy') {
    if (Date.now() > deadline) throw new Error(`container ${id} not healthy within 60 s`)
    await new Promise((r) => setTimeout(r, 250))
  }
  const runs = {
    'po-sandbox exec -- echo x': () => timed([process.execPath, cli, 'exec', folder, ...home, '--', 'echo', 'x'], 'x'),
    'docker exec <id> echo x': () => timed(['docker', 'exec', id, 'echo', 'x'], 'x'),
    'po-sandbox up (running)': () => timed([process.execPath, cli, 'up', folder, ...home, ...image], 'adopted'),
    'docker start <id> + docker inspect <id>': () => timedAll([['docker', 'start', id], ['docker', 'inspect', id]]),
  }
  // The first exec into the container takes the engine's exec and starts the spawner (see
  // docs/security.md): timed on its own. Then one warm-up of each, then interleaved rounds.
  const firstExec = runs['po-sandbox exec -- echo x']()
  for (const run of Object.values(runs)) run()
  const times = Object.fromEntries(Object.keys(runs).map((k) => [k, []]))
  for (let r = 0; r < ROUNDS; r++) for (const [k, run] of Object.entries(runs)) times[k].push(run())
  const s = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, summary(v)]))
  const fmt = (x) => `${x.toFixed(1)} ms`
  console.log(`${ROUNDS} interleaved rounds, one sandbox (${BASE}, minimal), Node ${process.version}`)
  for (const [k, v] of Object.entries(s)) console.log(`  ${k.padEnd(42)} p50 ${fmt(v.p50)}  p90 ${fmt(v.p90)}  min ${fmt(v.min)}  max ${fmt(v.max)}`)
  console.log(`  the first exec (the engine's exec, starting the spawner): ${fmt(firstExec)}`)
  const ratio = (a, b) => `p50 ${(s[a].p50 / s[b].p50).toFixed(2)}x, p90 ${(s[a].p90 / s[b].p90).toFixed(2)}x`
  console.log(`  exec / docker exec: ${ratio('po-sandbox exec -- echo x', 'docker exec <id> echo x')}`)
  console.log(`  up (running) / docker start + inspect: ${ratio('po-sandbox up (running)', 'docker start <id> + docker inspect <id>')}`)
} finally {
  // The container, its holder, volumes, network and broker folder: everything of this owner.
  if (owner) await removeOwner(owner)
  rmSync(scratch, { recursive: true, force: true })
}
