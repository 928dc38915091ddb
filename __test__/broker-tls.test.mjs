// The broker's upstream TLS (rustls with the system's roots): an HTTPS fake upstream on
// 127.0.0.1 whose certificate comes from a test CA that the broker process trusts through
// SSL_CERT_FILE (read by the system-roots loader), and only through it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import path from 'node:path'

import { root, run, tempDir } from './helpers.mjs'

function makeCa(dir) {
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  try {
    openssl('version')
  } catch {
    throw new Error('This test needs the openssl command (Debian: apt-get install -y openssl).')
  }
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=po-sandbox test CA', '-keyout', 'ca.key', '-out', 'ca.pem', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign')
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'up.key', '-out', 'up.csr')
  writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n')
  openssl('x509', '-req', '-in', 'up.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-out', 'up.pem', '-extfile', 'ext.cnf')
  return { ca: path.join(dir, 'ca.pem'), key: readFileSync(path.join(dir, 'up.key')), cert: readFileSync(path.join(dir, 'up.pem')) }
}

/** A child process that starts a broker (with `env` as its process environment) and makes one request. */
async function brokeredCall(t, dir, upstreamPort, childEnv) {
  const script = path.join(dir, 'call.cjs')
  writeFileSync(script, `
const http = require('node:http')
const { startCredentialBroker } = require(${JSON.stringify(path.join(root, 'index.js'))})
;(async () => {
  const broker = await startCredentialBroker({ env: { OPENAI_API_KEY: 'sk-REAL-tls-key', OPENAI_BASE_URL: 'https://localhost:${upstreamPort}/v1' }, socketDir: ${JSON.stringify(dir)} })
  const g = broker.grant({ workspace: 'tls', providers: ['openai'] })
  const r = await new Promise((resolve, reject) => {
    const req = http.request({ socketPath: g.route.hostSocket, path: '/openai/models', headers: { authorization: 'Bearer ' + g.env.OPENAI_API_KEY } }, (res) => {
      let b = ''
      res.on('data', (d) => { b += d })
      res.on('end', () => resolve({ status: res.statusCode, body: b }))
    })
    req.on('error', reject)
    req.end()
  })
  console.log(JSON.stringify(r))
  await broker.close()
})().catch((e) => { console.error(e); process.exit(1) })
`)
  const r = await run(process.execPath, [script], { env: { PATH: process.env.PATH, ...childEnv } })
  assert.equal(r.code, 0, r.stderr)
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

test('the broker reaches an HTTPS upstream over TLS, verifying its certificate', async (t) => {
  const dir = tempDir(t, 'pbt-')
  const { ca, key, cert } = makeCa(dir)
  const seen = []
  const upstream = https.createServer({ key, cert }, (req, res) => {
    seen.push({ url: req.url, authorization: req.headers.authorization, host: req.headers.host })
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"data":[]}')
  })
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => upstream.close(resolve)))
  const port = upstream.address().port

  // Trusted through SSL_CERT_FILE: the request goes through with the real key.
  const ok = await brokeredCall(t, dir, port, { SSL_CERT_FILE: ca })
  assert.equal(ok.status, 200, JSON.stringify(ok))
  assert.equal(seen.length, 1)
  assert.equal(seen[0].url, '/v1/models')
  assert.equal(seen[0].authorization, 'Bearer sk-REAL-tls-key')
  assert.equal(seen[0].host, `localhost:${port}`)

  // Not trusted: the handshake fails, the broker answers 502 and nothing reaches the upstream's handler.
  const refused = await brokeredCall(t, dir, port, { SSL_CERT_FILE: path.join(dir, 'up.pem') })
  assert.equal(refused.status, 502, JSON.stringify(refused))
  assert.ok(!refused.body.includes('sk-REAL-tls-key'))
  assert.equal(seen.length, 1)
})
