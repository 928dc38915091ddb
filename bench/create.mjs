// Benchmark: bringing up a new workspace container until its server answers.
//
// po-sandbox: `containers.start({ id, path })` for a workspace that has no container (the image
// is already built): lock, spec, token file, create, start, broker grant, health wait.
// Baselines, each until the server's health path answers through a loopback port:
// - by hand: the same containment done over the Engine API (HTTP on the engine's socket, one
//   kept connection pool): the namespace holder created, then started while the rules helper is
//   created; the helper started, waited for and removed; then the workspace container created
//   in the holder's namespace and started. Same bodies as the provider's (read from a warm-up
//   container's inspect data), the holder's published port polled;
// - `docker run -d`: what a user would otherwise type for one plain container (same image,
//   command, environment, mounts, a loopback port), no holder and no rules: the engine's floor.
//
// Rounds are interleaved so both see the same machine state; each container is removed after
// its round and is not part of the timing.
//
// Usage: node bench/create.mjs [rounds=9]
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
const ROUNDS = Number(process.argv[2] ?? 9)

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const p = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))]
  return { p50: p(0.5), p90: p(0.9), min: s[0], max: s[s.length - 1] }
}

const agent = new http.Agent({ keepAlive: true })
const SOCKET = process.env.DOCKER_HOST?.startsWith('unix://') ? process.env.DOCKER_HOST.slice(7) : '/var/run/docker.sock'

/** One Engine API call over the engine's socket: the parsed JSON answer (or null). */
function api(method, route, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body)
    const headers = data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}
    const req = http.request({ socketPath: SOCKET, agent, method, path: route, headers }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        if (res.statusCode >= 300) reject(new Error(`${method} ${route}: ${res.statusCode} ${text}`))
        else resolve(text ? JSON.parse(text) : null)
      })
    })
    req.on('error', reject)
    req.end(data)
  })
}

/** A create body from a container's inspect data: its config with our label, its host config. */
function bodyOf(info, hostConfig) {
  const { Hostname, Labels, ...config } = info.Config
  return { ...config, Labels: { 'po.bench': '1' }, HostConfig: { ...info.HostConfig, ...hostConfig } }
}

/** The containment by hand over the Engine API; resolves when the server answers. */
async function byHand(holderInfo, wsInfo, containerPort, name, made) {
  const holder = (await api('POST', `/containers/create?name=${name}-h`, bodyOf(holderInfo, {}))).Id
  made.push(holder)
  const rules = holderInfo.Config.Env.find((kv) => kv.startsWith('PO_NET_RULES='))
  const helperBody = {
    Image: holderInfo.Config.Image,
    Entrypoint: ['/bin/sh', '-c'],
    Cmd: ['printf \'%s\\n\' "$PO_NET_RULES" | nft -f /dev/stdin'],
    Env: [rules],
    User: '0:0',
    Labels: { 'po.bench': '1' },
    HostConfig: {
      NetworkMode: `container:${holder}`, CapDrop: ['ALL'], CapAdd: ['NET_ADMIN'], SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true, PidsLimit: 16, Memory: 64 << 20,
    },
  }
  const [, made2] = await Promise.all([api('POST', `/containers/${holder}/start`), api('POST', '/containers/create', helperBody)])
  const helper = made2.Id
  made.push(helper)
  await api('POST', `/containers/${helper}/start`)
  const { StatusCode } = await api('POST', `/containers/${helper}/wait`)
  if (StatusCode !== 0) throw new Error(`the by-hand rules helper exited with ${StatusCode}`)
  await api('DELETE', `/containers/${helper}?force=true`)
  const ws = (await api('POST', `/containers/create?name=${name}`, bodyOf(wsInfo, { NetworkMode: `container:${holder}` }))).Id
  made.push(ws)
  await api('POST', `/containers/${ws}/start`)
  const ports = (await api('GET', `/containers/${holder}/json`)).NetworkSettings.Ports
  const port = ports[`${containerPort}/tcp`][0].HostPort
  while (!(await answers(`http://127.0.0.1:${port}/`))) await new Promise((res) => setTimeout(res, 25))
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
const scratch = mkdtempSync(path.join(os.tmpdir(), 'po-bench-create-'))
const poHome = path.join(scratch, 'po-home')
mkdirSync(poHome)
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
    const dir = path.join(scratch, 'ws', id)
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
  // 'warm' keeps running: the per-hub network stays (it goes with its last workspace), as it
  // does on a hub with workspaces up; neither side makes it in the timed rounds.

  const ours = []
  const hand = []
  const cli = []
  const handMade = []
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

    t0 = performance.now()
    await byHand(holder, info, containerPort, `po-bench-hand-${owner.slice(1)}-${r}`, handMade)
    hand.push(performance.now() - t0)
    for (const made of handMade.splice(0)) await api('DELETE', `/containers/${made}?force=true`).catch(() => {})
  }
  const a = summary(ours)
  const h = summary(hand)
  const b = summary(cli)
  const fmt = (x) => `${x.toFixed(0)} ms`
  const line = (label, x) => console.log(`  ${label.padEnd(34)}p50 ${fmt(x.p50)}  p90 ${fmt(x.p90)}  min ${fmt(x.min)}  max ${fmt(x.max)}`)
  console.log(`a new workspace container until its server answers, ${ROUNDS} interleaved rounds`)
  line('po-sandbox start():', a)
  line('by hand over the Engine API:', h)
  line('docker run -d + health polling:', b)
  console.log(`  ratio po-sandbox / by hand: p50 ${(a.p50 / h.p50).toFixed(2)}x, p90 ${(a.p90 / h.p90).toFixed(2)}x (the same containment; the provider also locks, writes the token file, grants the broker and checks posture)`)
  await layer.containers.stop('warm')
  console.log(`  ratio po-sandbox / docker run: p50 ${(a.p50 / b.p50).toFixed(2)}x, p90 ${(a.p90 / b.p90).toFixed(2)}x (one plain container: no holder, no rules)`)
} finally {
  for (const name of baselineNames) await run('docker', ['rm', '-f', name]).catch(() => {})
  for (const name of await run('docker', ['ps', '-aq', '--filter', 'label=po.bench=1']).then((r) => r.stdout.split('\n').filter(Boolean), () => [])) {
    await run('docker', ['rm', '-f', name]).catch(() => {})
  }
  await removeOwner(owner)
  rmSync(scratch, { recursive: true, force: true })
}
