// Shared pieces of the credential broker suite: recording fake upstreams, a broker per test,
// plain and raw HTTP clients, and secrets long enough to be unique strings.
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import net from 'node:net'

import { addon, tempDir } from './helpers.mjs'

const { startCredentialBroker } = addon

const hex = (n = 24) => randomBytes(n).toString('hex')

/** Real-looking host keys, fresh per run. */
export const KEYS = {
  anthropic: `sk-ant-api03-REALKEY-${hex()}`,
  openai: `sk-REALKEY-${hex()}`,
}

/** A token in a provider's shape that no grant ever handed out. */
export const forgedToken = (prefix = 'sk-ant-api03-') => `${prefix}${hex(32)}`

/**
 * A fake upstream on 127.0.0.1:0 that records every request (`requests`: method, url, headers,
 * rawHeaders, body) and counts every TCP connection (`connections`) and every request node's
 * parser refuses or that asks to CONNECT (`refused`: a forwarded request with an unknown method
 * or broken framing never reaches `requests`). `handler(req, res, rec)` answers once the body is
 * read; default: 200 `{"ok":true}`. Closed when the test ends.
 */
export async function fakeUpstream(t, handler) {
  const requests = []
  const sockets = new Set()
  let connections = 0
  let refused = 0
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const rec = {
        method: req.method,
        url: req.url,
        headers: { ...req.headers },
        rawHeaders: [...req.rawHeaders],
        body: Buffer.concat(chunks).toString('utf8'),
      }
      requests.push(rec)
      if (handler) return handler(req, res, rec)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ ok: true }))
    })
  })
  server.on('connection', (s) => {
    connections++
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.on('clientError', (err, s) => {
    if (String(err.code).startsWith('HPE_')) refused++
    s.destroy()
  })
  server.on('connect', (req, s) => {
    refused++
    s.destroy()
  })
  await new Promise((resolve, reject) => server.listen(0, '127.0.0.1', resolve).once('error', reject))
  const { port } = server.address()
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(() => resolve()))
  })
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    requests,
    get connections() { return connections },
    get refused() { return refused },
  }
}

/** A broker with a short socket folder and an audit log; closed when the test ends. */
export async function startBroker(t, { env, tcp = false } = {}) {
  const socketDir = tempDir(t, 'pb-')
  const broker = await startCredentialBroker({ env, socketDir, tcp })
  const audit = []
  broker.onEvent((e) => audit.push(e))
  t.after(() => broker.close())
  return { broker, audit, socketDir }
}

/** The env of a broker whose anthropic and openai upstreams are `up`. */
export function brokerEnv(up, extra = {}) {
  return {
    ANTHROPIC_API_KEY: KEYS.anthropic,
    ANTHROPIC_BASE_URL: up.origin,
    OPENAI_API_KEY: KEYS.openai,
    OPENAI_BASE_URL: up.origin,
    ...extra,
  }
}

/** Where a grant is reached: `{ socketPath }` or `{ port }`. */
export function targetOf(grant) {
  if (grant.route.kind === 'socket') return { socketPath: grant.route.hostSocket }
  return { port: Number(grant.route.address.split(':').pop()) }
}

/**
 * One HTTP request to the broker (`socketPath`, or `port` on 127.0.0.1). Resolves with
 * `{ status, headers, rawHeaders, body, reused }`. `agent: false` (default) means a fresh
 * connection per request.
 */
export function send({ socketPath, port, method = 'GET', path, headers = {}, body, agent = false }) {
  return new Promise((resolve, reject) => {
    const options = { method, path, headers, agent }
    if (socketPath) options.socketPath = socketPath
    else Object.assign(options, { host: '127.0.0.1', port })
    const req = http.request(options, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('error', reject)
      res.on('end', () => resolve({
        status: res.statusCode,
        headers: res.headers,
        rawHeaders: res.rawHeaders,
        body: Buffer.concat(chunks).toString('utf8'),
        reused: req.reusedSocket,
      }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

/**
 * Writes `text` as is to the broker (`socketPath` or `port`) and reads until the broker closes
 * (or `timeoutMs`). Resolves with `{ status, text }` (`status` is null without a response).
 */
export function rawRequest({ socketPath, port }, text, timeoutMs = 3000) {
  return new Promise((resolve, reject) => {
    const s = socketPath ? net.connect(socketPath) : net.connect(port, '127.0.0.1')
    let data = ''
    const done = () => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data)
      resolve({ status: m ? Number(m[1]) : null, text: data })
    }
    s.setEncoding('latin1')
    s.on('data', (d) => { data += d })
    s.on('error', (e) => (data ? done() : reject(e)))
    s.on('close', done)
    s.setTimeout(timeoutMs, () => s.destroy())
    s.write(text)
  })
}

/** Fails when any of `secrets` occurs anywhere in `value` (serialised). */
export function assertNoSecrets(assert, value, secrets, what) {
  const text = typeof value === 'string' ? value : JSON.stringify(value)
  for (const s of secrets) {
    assert.ok(!text.includes(s), `${what} contains a secret (${s.slice(0, 16)}…): ${text.slice(0, 2000)}`)
  }
}

/** Connecting fails (resolves with the error code) or succeeds (resolves 'connected'). */
export function tryConnect(target) {
  return new Promise((resolve) => {
    const s = target.socketPath ? net.connect(target.socketPath) : net.connect(target.port, '127.0.0.1')
    s.once('connect', () => { s.destroy(); resolve('connected') })
    s.once('error', (e) => resolve(e.code))
  })
}
