// Benchmark: what the credential broker adds to a model call's time to first byte, and how
// fast the loopback bridge moves bulk bytes.
//
// 1. TTFB: sequential keep-alive requests to a local fake upstream, side by side in one run:
//    straight to the upstream (the baseline: a client holding the real key), through the
//    broker's socket, and through bridge → broker (as inside a container).
// 2. Bulk: 256 MiB through the bridge to a Unix-socket sink, against `socat` doing the same
//    relay (when socat is installed; otherwise only the bridge's number is printed).
//
// Usage: node bench/broker.mjs [requests=2000]
import { execFileSync, spawn } from 'node:child_process'
import http from 'node:http'
import net from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'

const { startCredentialBroker, startBrokerBridge } = createRequire(import.meta.url)('../index.js')
const REQUESTS = Number(process.argv[2] ?? 2000)
const dir = mkdtempSync(path.join(os.tmpdir(), 'pbb-'))

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const p = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))]
  return { p50: p(0.5), p90: p(0.9), p99: p(0.99) }
}

async function ttfb(label, options) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const times = []
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now()
    await new Promise((resolve, reject) => {
      const req = http.request({ ...options, agent, method: 'POST' }, (res) => {
        res.once('data', () => times.push(performance.now() - t0))
        res.on('end', resolve)
        res.resume()
      })
      req.on('error', reject)
      req.end('{"model":"m","stream":true}')
    })
  }
  agent.destroy()
  return [label, stats(times.slice(Math.floor(REQUESTS / 10)))]
}

const upstream = http.createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.end('data: {"type":"message_start"}\n\n')
  })
})
await new Promise((r) => upstream.listen(0, '127.0.0.1', r))
const port = upstream.address().port
const REAL = 'sk-ant-api03-REAL-bench-key'
const broker = await startCredentialBroker({ env: { ANTHROPIC_API_KEY: REAL, ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}` }, socketDir: dir })
const grant = broker.grant({ workspace: 'bench', providers: ['anthropic'] })
const token = grant.env.ANTHROPIC_API_KEY
const bridge = await startBrokerBridge(grant.route.hostSocket)

try {
  const rows = [
    await ttfb('direct to upstream (real key)', { host: '127.0.0.1', port, path: '/v1/messages', headers: { 'x-api-key': REAL } }),
    await ttfb('broker socket', { socketPath: grant.route.hostSocket, path: '/anthropic/v1/messages', headers: { 'x-api-key': token } }),
    await ttfb('bridge -> broker', { host: '127.0.0.1', port: bridge.port, path: '/anthropic/v1/messages', headers: { 'x-api-key': token } }),
  ]
  const base = rows[0][1]
  console.log(`time to first byte, ${REQUESTS} sequential keep-alive requests (first 10% dropped as warm-up)`)
  for (const [label, s] of rows) {
    const added = label === rows[0][0] ? '' : `  added p50 ${(s.p50 - base.p50).toFixed(3)} ms`
    console.log(`  ${label.padEnd(32)} p50 ${s.p50.toFixed(3)} ms  p90 ${s.p90.toFixed(3)} ms  p99 ${s.p99.toFixed(3)} ms${added}`)
  }

  // Bulk: bytes through the bridge into a Unix socket sink.
  const MIB = 256
  const sinkPath = path.join(dir, 'sink.sock')
  const sink = net.createServer((s) => s.resume())
  await new Promise((r) => sink.listen(sinkPath, r))
  const chunk = Buffer.alloc(1 << 20, 7)
  async function pushThrough(p) {
    const t0 = performance.now()
    await new Promise((resolve, reject) => {
      const c = net.connect(p, '127.0.0.1', async () => {
        for (let i = 0; i < MIB; i++) if (!c.write(chunk)) await new Promise((r) => c.once('drain', r))
        c.end()
      })
      c.on('error', reject)
      c.on('close', resolve)
      c.resume()
    })
    return (MIB / ((performance.now() - t0) / 1000)).toFixed(0)
  }
  let socat = true
  try {
    execFileSync('socat', ['-V'], { stdio: 'ignore' })
  } catch {
    socat = false
  }
  const sinkBridge = await startBrokerBridge(sinkPath)
  let child = null
  let socatPort = null
  if (socat) {
    socatPort = 40000 + Math.floor(Math.random() * 20000)
    child = spawn('socat', [`TCP-LISTEN:${socatPort},bind=127.0.0.1,reuseaddr,fork`, `UNIX-CONNECT:${sinkPath}`], { stdio: 'ignore' })
    await new Promise((r) => setTimeout(r, 300))
  }
  // Rounds interleaved, so both relays see the same machine state.
  const ROUNDS = 7
  const ours = []
  const theirs = []
  for (let r = 0; r < ROUNDS; r++) {
    ours.push(Number(await pushThrough(sinkBridge.port)))
    if (socat) theirs.push(Number(await pushThrough(socatPort)))
  }
  const mid = (xs) => {
    const s = [...xs].sort((a, b) => a - b)
    return { p50: s[Math.floor(s.length / 2)], min: s[0], max: s[s.length - 1] }
  }
  const a = mid(ours)
  console.log(`bulk, ${MIB} MiB into a Unix socket, ${ROUNDS} interleaved rounds (MiB/s, higher is better)`)
  console.log(`  po-sandbox bridge: p50 ${a.p50}  min ${a.min}  max ${a.max}`)
  if (socat) {
    const b = mid(theirs)
    console.log(`  socat:             p50 ${b.p50}  min ${b.min}  max ${b.max}`)
    console.log(`  ratio (bridge / socat, p50): ${(a.p50 / b.p50).toFixed(2)}x`)
    child.kill()
  } else {
    console.log('  socat: not installed (apt-get install socat) - no baseline this run')
  }
  await sinkBridge.close()
  sink.close()
} finally {
  await bridge.close()
  await broker.close()
  upstream.close()
  rmSync(dir, { recursive: true, force: true })
}
