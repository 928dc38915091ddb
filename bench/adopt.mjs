// Benchmark: a hub restart that adopts N running workspace containers.
//
// po-sandbox: a fresh provider's start-up until every workspace is adopted (engine check,
// runtime bundle, image check, one label-filtered list call, then per workspace an inspect and
// a health answer), measured in-process.
// Baseline: what a CLI-driven layer does for the same adoption: per workspace
// `docker ps --filter label=po.owner=… --filter label=po.workspace=… -q` and `docker inspect`.
//
// Usage: node bench/adopt.mjs [workspaces=20] [rounds=7]
// Needs a running Docker engine and the local test base image (scripts/build-test-base-image.sh).
import { execFileSync, execFile } from 'node:child_process'
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

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  return { p50: percentile(s, 50), p90: percentile(s, 90), min: s[0], max: s[s.length - 1] }
}

execFileSync('bash', [path.join(import.meta.dirname, '../scripts/build-test-base-image.sh')], { stdio: 'ignore' })
const poHome = mkdtempSync(path.join(os.tmpdir(), 'po-bench-home-'))
const owner = newOwner()
writeBundle(poHome)
const workspaces = Array.from({ length: N }, (_, i) => {
  const dir = path.join(poHome, 'ws', `w${i}`)
  mkdirSync(dir, { recursive: true })
  return { id: `w${i}`, path: dir }
})
const options = { ...baseOptions(poHome, owner), env: { ...process.env }, workspaces, concurrency: 8 }
delete options.env.PO_SANDBOX_LOG

try {
  // Bring them up once.
  const first = registerSandboxLayer(fakeHost(), options)
  const up = await first.provider.ready()
  const failed = up.workspaces.filter((w) => w.state !== 'running')
  if (failed.length) throw new Error(`set-up failed: ${JSON.stringify(failed[0])}`)

  const ours = []
  const cli = []
  for (let r = 0; r < ROUNDS; r++) {
    let t0 = performance.now()
    const layer = registerSandboxLayer(fakeHost(), options)
    const s = await layer.provider.ready()
    ours.push(performance.now() - t0)
    if (s.workspaces.some((w) => !w.container?.adopted)) throw new Error('not every workspace was adopted')

    t0 = performance.now()
    for (const w of workspaces) {
      const { stdout } = await run('docker', ['ps', '-q', '--filter', `label=po.owner=${owner}`, '--filter', `label=po.workspace=${w.id}`])
      await run('docker', ['inspect', stdout.trim()])
    }
    cli.push(performance.now() - t0)
  }
  const a = summary(ours)
  const b = summary(cli)
  const fmt = (x) => `${x.toFixed(1)} ms`
  console.log(`adopting ${N} running workspaces, ${ROUNDS} rounds`)
  console.log(`  po-sandbox (full provider start-up): p50 ${fmt(a.p50)}  p90 ${fmt(a.p90)}  min ${fmt(a.min)}  max ${fmt(a.max)}`)
  console.log(`  docker CLI (ps + inspect per workspace): p50 ${fmt(b.p50)}  p90 ${fmt(b.p90)}  min ${fmt(b.min)}  max ${fmt(b.max)}`)
  console.log(`  ratio (CLI / po-sandbox, p50): ${(b.p50 / a.p50).toFixed(1)}x`)
} finally {
  await removeOwner(owner)
  rmSync(poHome, { recursive: true, force: true })
}
