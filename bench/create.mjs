// Benchmark: bringing up a new workspace container until its server answers.
//
// po-sandbox: `containers.start({ id, path })` for a workspace that has no container (the image
// is already built): lock, spec, token file, create, start, broker grant, health wait.
// Baseline: what a user would otherwise type for the same container: `docker run -d` with the
// same image, command, environment, mounts and a loopback port, then polling the server's
// health path until it answers, the way the provider does.
//
// Rounds are interleaved so both see the same machine state; each container is removed after
// its round and is not part of the timing.
//
// Usage: node bench/create.mjs [rounds=9]
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
const ROUNDS = Number(process.argv[2] ?? 9)

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const p = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))]
  return { p50: p(0.5), p90: p(0.9), min: s[0], max: s[s.length - 1] }
}

async function answers(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
    await res.arrayBuffer()
    return res.status === 200
  } catch {
    return false
  }
}

execFileSync('bash', [path.join(import.meta.dirname, '../scripts/build-test-base-image.sh')], { stdio: 'ignore' })
const poHome = mkdtempSync(path.join(os.tmpdir(), 'po-bench-create-'))
const owner = newOwner()
writeBundle(poHome)
const options = { ...baseOptions(poHome, owner), env: { ...process.env } }
delete options.env.PO_SANDBOX_LOG
const baselineNames = []

try {
  const layer = registerSandboxLayer(fakeHost(), options)
  const status = await layer.provider.ready()
  if (status.state !== 'ready') throw new Error(`provider not ready: ${JSON.stringify(status)}`)

  // One warm-up container, also the template for the baseline's `docker run`.
  const wsDir = (id) => {
    const dir = path.join(poHome, 'ws', id)
    mkdirSync(dir, { recursive: true })
    return dir
  }
  const warm = await layer.containers.start({ id: 'warm', path: wsDir('warm') })
  const info = JSON.parse((await run('docker', ['inspect', warm.containerId])).stdout)[0]
  // The port is published by the workspace's network namespace holder; the baseline is one
  // plain `docker run` (no holder, no rules): the engine's own floor.
  const joined = info.HostConfig.NetworkMode.replace(/^container:/, '')
  const holder = joined === info.HostConfig.NetworkMode ? info : JSON.parse((await run('docker', ['inspect', joined])).stdout)[0]
  const containerPort = Object.keys(holder.HostConfig.PortBindings)[0].split('/')[0]
  const healthPath = '/'
  // The same mounts as the provider's container (bind mounts and named volumes), read-only
  // where it had them read-only.
  const mountArgs = info.Mounts.flatMap((m) => ['-v', `${m.Type === 'volume' ? m.Name : m.Source}:${m.Destination}${m.RW ? '' : ':ro'}`])
  const entrypoint = info.Config.Entrypoint?.length ? info.Config.Entrypoint : null
  // The bundle's own command: the provider's runs behind a start gate that waits for the
  // holder's network rules, which a plain container has none of.
  const cmd = info.Config.Cmd?.[3] === 'po-net-gate' ? info.Config.Cmd.slice(5) : (info.Config.Cmd ?? [])
  const runArgs = (name) => [
    'run', '-d', '--name', name, '--label', 'po.bench=1',
    '-p', `127.0.0.1::${containerPort}`,
    ...mountArgs,
    ...info.Config.Env.flatMap((kv) => ['-e', kv]),
    ...(info.Config.User ? ['--user', info.Config.User] : []),
    ...(info.Config.WorkingDir ? ['-w', info.Config.WorkingDir] : []),
    ...(entrypoint ? ['--entrypoint', entrypoint[0]] : []),
    info.Config.Image,
    ...(entrypoint ? entrypoint.slice(1) : []),
    ...cmd,
  ]
  await layer.containers.stop('warm')

  const ours = []
  const cli = []
  for (let r = 0; r < ROUNDS; r++) {
    const id = `c${r}`
    const dir = wsDir(id)
    let t0 = performance.now()
    const c = await layer.containers.start({ id, path: dir })
    ours.push(performance.now() - t0)
    if (c.adopted) throw new Error('expected a new container')
    await layer.containers.stop(id)

    const name = `po-bench-${owner.slice(1)}-${r}`
    baselineNames.push(name)
    t0 = performance.now()
    await run('docker', runArgs(name))
    const port = (await run('docker', ['port', name, containerPort])).stdout.trim().split('\n')[0].split(':').pop()
    while (!(await answers(`http://127.0.0.1:${port}${healthPath}`))) await new Promise((res) => setTimeout(res, 25))
    cli.push(performance.now() - t0)
    await run('docker', ['rm', '-f', name])
  }
  const a = summary(ours)
  const b = summary(cli)
  const fmt = (x) => `${x.toFixed(0)} ms`
  console.log(`a new workspace container until its server answers, ${ROUNDS} interleaved rounds`)
  console.log(`  po-sandbox start():              p50 ${fmt(a.p50)}  p90 ${fmt(a.p90)}  min ${fmt(a.min)}  max ${fmt(a.max)}`)
  console.log(`  docker run -d + health polling:  p50 ${fmt(b.p50)}  p90 ${fmt(b.p90)}  min ${fmt(b.min)}  max ${fmt(b.max)}`)
  console.log(`  ratio (po-sandbox / docker run, p50): ${(a.p50 / b.p50).toFixed(2)}x (the provider also locks, writes the token file, grants the broker and checks posture)`)
} finally {
  for (const name of baselineNames) await run('docker', ['rm', '-f', name]).catch(() => {})
  await removeOwner(owner)
  rmSync(poHome, { recursive: true, force: true })
}
