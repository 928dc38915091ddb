// Benchmark: a forwarded port (containers.forwardPort: a host listener, the relay started by one
// engine exec, the bytes dialled by the hub inside the container's namespace where it may enter
// it, else over the forward's socket in the broker folder, else over the exec), and the same
// narrowed to the socket carrier (PO_SANDBOX_FORWARD_CARRIER=socket), against a directly published port (`docker run -p 127.0.0.1::PORT`) of a
// comparable container running the same server, side by side in one run, interleaved:
// - new-connection latency: connect, one byte each way, close (p50 and p90);
// - bulk throughput: one connection downloading 64 MiB (median of the rounds).
// Also the exec stream's own ceiling (the fallback carrier): 64 MiB out of a plain `docker exec`.
// Acceptance (issue 26): new-connection p50 within 5 ms of direct, throughput at least half.
//
// Usage: node bench/port.mjs [connections=300] [bulkRounds=5]
// Needs a running Docker engine and the local test base image (scripts/build-test-base-image.sh).
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'

const addon = createRequire(import.meta.url)('../index.js')
const CONNECTIONS = Number(process.argv[2] ?? 300)
const BULK_ROUNDS = Number(process.argv[3] ?? 5)
const BULK = 64 << 20
const BASE = 'po-sandbox-test-base:node24-nft'
const cli = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'bin', 'po-sandbox.js')
const docker = (args) => execFileSync('docker', args, { encoding: 'utf8' }).trim()

// The server, on <address>:5173: 'B' gets BULK bytes, anything else one byte back; then it ends.
const SERVER = (address) => `
const chunk = Buffer.alloc(1 << 20, 120)
require('node:net').createServer((c) => c.once('data', (d) => {
  if (d[0] !== 66) return c.end('k')
  let left = ${BULK}
  const more = () => { while (left > 0) { left -= chunk.length; if (!c.write(chunk)) return c.once('drain', more) } c.end() }
  more()
})).listen(5173, '${address}')`

function once(port, first) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint()
    let got = 0
    const sock = net.connect(port, '127.0.0.1', () => sock.write(first))
    sock.on('data', (d) => { got += d.length })
    sock.on('end', () => resolve({ ms: Number(process.hrtime.bigint() - t0) / 1e6, got }))
    sock.on('error', reject)
  })
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]

async function ready(port) {
  for (let i = 0; i < 200; i++) {
    try { if ((await once(port, 'x')).got === 1) return } catch {}
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`nothing answers on 127.0.0.1:${port}`)
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'po-bench-port-'))
const folder = path.join(scratch, 'project')
mkdirSync(folder)
const poHome = path.join(scratch, 'po-home')
const ws = addon.workspaceForFolder(folder)
const direct = `po-bench-port-direct-${process.pid}`
let fwd, sock
try {
  execFileSync(process.execPath, [cli, 'up', folder, '--po-home', poHome, '--base-image', BASE, '--image-variant', 'minimal', '--json'], { stdio: ['ignore', 'ignore', 'inherit'] })
  const [row] = (await addon.listSandboxContainers({ poHome })).filter((r) => r.workspaceId === ws.id)
  docker(['exec', '-d', row.containerId, 'node', '-e', SERVER('127.0.0.1')])
  docker(['run', '-d', '--name', direct, '--cap-drop=ALL', '--security-opt', 'no-new-privileges', '-p', '127.0.0.1::5173', BASE, 'node', '-e', SERVER('0.0.0.0')])
  const directPort = Number(docker(['port', direct, '5173/tcp']).split(':').pop())
  const host = { scope: 'global', identity: { contained: false }, registerSandboxProvider() {}, publishService() {} }
  const layer = addon.registerSandboxLayer(host, { poHome, baseImage: BASE, imageVariant: 'minimal', demoRuntime: true })
  fwd = await layer.containers.forwardPort(ws.id, 5173)
  // The socket carrier too, narrowed to it by its variable (what a rootless engine gets).
  process.env.PO_SANDBOX_FORWARD_CARRIER = 'socket'
  sock = await layer.containers.forwardPort(ws.id, 5173).finally(() => { delete process.env.PO_SANDBOX_FORWARD_CARRIER })
  const ports = { forward: fwd.hostPort, socket: sock.hostPort, direct: directPort }
  for (const port of Object.values(ports)) await ready(port)
  const names = Object.keys(ports)
  const lat = Object.fromEntries(names.map((n) => [n, []]))
  for (let i = 0; i < CONNECTIONS; i++) {
    // Interleaved, the order turning each round, so drift hits all alike.
    for (let k = 0; k < names.length; k++) {
      const name = names[(i + k) % names.length]
      lat[name].push((await once(ports[name], 'x')).ms)
    }
  }
  const bulk = Object.fromEntries(names.map((n) => [n, []]))
  for (let i = 0; i < BULK_ROUNDS; i++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(i + k) % names.length]
      const r = await once(ports[name], 'B')
      if (r.got !== BULK) throw new Error(`${name}: ${r.got} bytes, not ${BULK}`)
      bulk[name].push(BULK / 2 ** 20 / (r.ms / 1000))
    }
  }
  // The exec carrier's own ceiling: 64 MiB out of a plain `docker exec` (its start included).
  const carrier = []
  for (let i = 0; i < BULK_ROUNDS; i++) {
    const t0 = process.hrtime.bigint()
    execFileSync('docker', ['exec', row.containerId, 'node', '-e', 'const b = Buffer.alloc(1 << 20); for (let n = 0; n < 64; n++) process.stdout.write(b)'], { stdio: ['ignore', 'ignore', 'inherit'] })
    carrier.push(64 / (Number(process.hrtime.bigint() - t0) / 1e9))
  }
  const row2 = (name) => `${name.padEnd(8)} new connection p50 ${pct(lat[name], 0.5).toFixed(2)} ms, p90 ${pct(lat[name], 0.9).toFixed(2)} ms; bulk ${pct(bulk[name], 0.5).toFixed(0)} MiB/s`
  console.log(`${CONNECTIONS} connections, ${BULK_ROUNDS} x 64 MiB, interleaved; carriers: forward ${fwd.carrier}, socket ${sock.carrier}`)
  for (const name of names) console.log(row2(name))
  console.log(`docker exec stdout alone (the exec carrier's ceiling, its start included): ${pct(carrier, 0.5).toFixed(0)} MiB/s`)
  for (const name of ['forward', 'socket']) {
    const added = pct(lat[name], 0.5) - pct(lat.direct, 0.5)
    const ratio = pct(bulk[name], 0.5) / pct(bulk.direct, 0.5)
    console.log(`${name} vs direct: new connection p50 +${added.toFixed(2)} ms (${(pct(lat[name], 0.5) / pct(lat.direct, 0.5)).toFixed(2)}x), p90 ${(pct(lat[name], 0.9) / pct(lat.direct, 0.9)).toFixed(2)}x; throughput ${ratio.toFixed(2)}x`)
    console.log(`  acceptance: p50 within 5 ms ${added <= 5 ? 'yes' : 'NO'}; throughput at least half ${ratio >= 0.5 ? 'yes' : 'NO'}`)
  }
} finally {
  await fwd?.close()
  await sock?.close()
  try { docker(['rm', '-f', direct]) } catch {}
  await addon.stopSandboxContainers({ poHome, workspace: ws.id, removeVolumes: true })
  rmSync(scratch, { recursive: true, force: true })
}
