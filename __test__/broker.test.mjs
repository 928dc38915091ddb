// The credential broker through the built addon: per-grant tokens in, real keys out, against
// recording fake upstreams on 127.0.0.1. Every refusal also checks that the upstream was never
// contacted; every answer and audit event that a container or a log could see is checked for
// the real keys and the tokens.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'

import { addon, root, run, tempDir, waitFor } from './helpers.mjs'
import {
  KEYS, assertNoSecrets, brokerEnv, fakeUpstream, forgedToken, rawRequest, send, startBroker,
  targetOf, tryConnect,
} from './broker-fixtures.mjs'

const { startCredentialBroker } = addon
const MESSAGES = '/anthropic/v1/messages'

test('brokered requests: the real key goes upstream in the same header, the token never does', async (t) => {
  const up = await fakeUpstream(t, (req, res, rec) => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' })
    res.end(JSON.stringify({ url: rec.url }))
  })
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['anthropic', 'openai'], transport: 'socket' })
  const tokA = g.env.ANTHROPIC_API_KEY
  const tokO = g.env.OPENAI_API_KEY
  assert.deepEqual(Object.keys(g.env).sort(), ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'PO_BROKER_PROVIDERS', 'PO_BROKER_SOCKET'])
  assert.equal(g.env.PO_BROKER_PROVIDERS, 'anthropic,openai')
  assert.deepEqual(g.providers, ['anthropic', 'openai'])
  assert.equal(g.route.kind, 'socket')
  assert.equal(g.env.PO_BROKER_SOCKET, g.route.hostSocket, 'without containerSocketPath the env names the host socket')
  assert.match(tokA, /^sk-ant-api03-[0-9a-f]{64}$/)
  assert.match(tokO, /^sk-[0-9a-f]{64}$/)
  const secrets = [KEYS.anthropic, KEYS.openai, tokA, tokO]
  assertNoSecrets(assert, g.route, [KEYS.anthropic, KEYS.openai], 'the route')
  assert.deepEqual(g.withheld, [])

  const bodyA = JSON.stringify({ model: 'claude', max_tokens: 5, messages: [{ role: 'user', content: 'hello ü 🙂' }] })
  const a = await send({
    ...targetOf(g), method: 'POST', path: `${MESSAGES}?beta=true`, body: bodyA,
    headers: { 'x-api-key': tokA, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
  })
  assert.equal(a.status, 200, a.body)
  assert.equal(a.headers['x-upstream'], 'yes')
  assert.equal(up.requests.length, 1)
  const ra = up.requests[0]
  assert.equal(ra.method, 'POST')
  assert.equal(ra.url, '/v1/messages?beta=true')
  assert.equal(ra.headers['x-api-key'], KEYS.anthropic)
  assert.equal(ra.headers.authorization, undefined)
  assert.equal(ra.headers.host, `127.0.0.1:${up.port}`)
  assert.equal(ra.headers['anthropic-version'], '2023-06-01')
  assert.equal(ra.body, bodyA)
  assertNoSecrets(assert, ra, [tokA, tokO, KEYS.openai], 'what the anthropic upstream saw')

  const bodyO = JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }] })
  const o = await send({
    ...targetOf(g), method: 'POST', path: '/openai/v1/chat/completions?stream=1&x=%2F', body: bodyO,
    headers: { authorization: `Bearer ${tokO}`, 'content-type': 'application/json' },
  })
  assert.equal(o.status, 200, o.body)
  const ro = up.requests[1]
  assert.equal(ro.url, '/v1/chat/completions?stream=1&x=%2F')
  assert.equal(ro.headers.authorization, `Bearer ${KEYS.openai}`)
  assert.equal(ro.headers['x-api-key'], undefined)
  assert.equal(ro.headers.host, `127.0.0.1:${up.port}`)
  assert.equal(ro.body, bodyO)
  assertNoSecrets(assert, ro, [tokA, tokO, KEYS.anthropic], 'what the openai upstream saw')
  assertNoSecrets(assert, [a, o], secrets, 'the client responses')

  await waitFor(() => audit.length >= 2, 'two audit events')
  const ea = audit.find((e) => e.provider === 'anthropic')
  const eo = audit.find((e) => e.provider === 'openai')
  assert.equal(ea.grant, g.id)
  assert.equal(ea.workspace, 'w1')
  assert.equal(ea.method, 'POST')
  assert.equal(ea.path, MESSAGES)
  assert.equal(ea.status, 200)
  assert.equal(ea.bytes, Buffer.byteLength(a.body))
  assert.equal(typeof ea.durationMs, 'number')
  assert.equal(ea.error ?? null, null)
  assert.equal(eo.grant, g.id)
  assert.equal(eo.path, '/openai/v1/chat/completions')
  assert.equal(eo.status, 200)
  assert.equal(eo.bytes, Buffer.byteLength(o.body))
  assertNoSecrets(assert, audit, [...secrets, 'beta=true', 'stream=1'], 'the audit events')
})

test('audit: a Content-Length body, an empty 204 and a HEAD answer are recorded as complete, with their byte counts', async (t) => {
  const body = JSON.stringify({ ok: true, pad: 'x'.repeat(5000) })
  const up = await fakeUpstream(t, (req, res) => {
    if (req.url.endsWith('/embeddings')) {
      res.writeHead(204)
      return res.end()
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    res.end(req.method === 'HEAD' ? undefined : body)
  })
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['openai'] })
  const auth = { authorization: `Bearer ${g.env.OPENAI_API_KEY}` }
  const r1 = await send({ ...targetOf(g), path: '/openai/v1/models', headers: auth })
  assert.equal(r1.status, 200)
  assert.equal(r1.body, body)
  const r2 = await send({ ...targetOf(g), path: '/openai/v1/embeddings', headers: auth })
  assert.equal(r2.status, 204)
  const r3 = await send({ ...targetOf(g), method: 'HEAD', path: '/openai/v1/models', headers: auth })
  assert.equal(r3.status, 200)
  await waitFor(() => audit.length >= 3, 'three audit events')
  const [e1, e2, e3] = audit
  assert.deepEqual([e1.status, e1.bytes, e1.error ?? null], [200, Buffer.byteLength(body), null], JSON.stringify(e1))
  assert.deepEqual([e2.status, e2.bytes, e2.error ?? null], [204, 0, null], JSON.stringify(e2))
  assert.deepEqual([e3.method, e3.status, e3.bytes, e3.error ?? null], ['HEAD', 200, 0, null], JSON.stringify(e3))
})

test('401: no credentials, a wrong or foreign token, a revoked grant, another grant on this socket', async (t) => {
  const up = await fakeUpstream(t)
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up), tcp: true })
  const gA = broker.grant({ workspace: 'wa', providers: ['anthropic', 'openai'] })
  const gB = broker.grant({ workspace: 'wb', providers: ['anthropic', 'openai'] })
  const gC = broker.grant({ workspace: 'wc', providers: ['anthropic'], transport: 'tcp' })
  const tokA = gA.env.ANTHROPIC_API_KEY
  const tokO = gA.env.OPENAI_API_KEY
  const tokB = gB.env.ANTHROPIC_API_KEY
  const tokC = gC.env.ANTHROPIC_API_KEY
  const secrets = [KEYS.anthropic, KEYS.openai, tokA, tokO, tokB, tokC, gB.env.OPENAI_API_KEY]
  assert.equal(broker.revoke(gC.id), true)
  assert.equal(broker.revoke(gC.id), false)

  const onA = targetOf(gA)
  const cases = [
    ['no auth header', onA, MESSAGES, {}],
    ['a wrong token', onA, MESSAGES, { 'x-api-key': forgedToken() }],
    ['an empty x-api-key', onA, MESSAGES, { 'x-api-key': '' }],
    ['the openai token in x-api-key to anthropic', onA, MESSAGES, { 'x-api-key': tokO }],
    ['the openai token as Bearer to anthropic', onA, MESSAGES, { authorization: `Bearer ${tokO}` }],
    ['the anthropic token as Bearer to openai', onA, '/openai/v1/chat/completions', { authorization: `Bearer ${tokA}` }],
    ['x-api-key to openai (not its header)', onA, '/openai/v1/chat/completions', { 'x-api-key': tokO }],
    ['Basic instead of Bearer', onA, '/openai/v1/chat/completions', { authorization: `Basic ${tokO}` }],
    ['a revoked grant over TCP', targetOf(gC), MESSAGES, { 'x-api-key': tokC }],
    ['a revoked grant on another socket', onA, MESSAGES, { 'x-api-key': tokC }],
    ["grant B's token on grant A's socket", onA, MESSAGES, { 'x-api-key': tokB }],
    ["grant A's token on grant B's socket", targetOf(gB), MESSAGES, { 'x-api-key': tokA }],
  ]
  for (const [what, target, p, headers] of cases) {
    const r = await send({ ...target, method: 'POST', path: p, headers, body: '{}' })
    assert.equal(r.status, 401, `${what}: ${r.status} ${r.body}`)
    assertNoSecrets(assert, r, secrets, `the answer to ${what}`)
  }
  assert.equal(up.connections, 0, 'the upstream was contacted for a refused request')
  assert.equal(up.requests.length, 0)
  await waitFor(() => audit.length >= cases.length, 'an audit event per refusal')
  for (const e of audit) {
    assert.equal(e.status, 401)
    assert.equal(e.grant ?? null, null)
    assert.ok(e.error, 'a refusal says why')
  }
  assertNoSecrets(assert, audit, secrets, 'the audit events')

  // Controls: each live token works on its own route.
  assert.equal((await send({ ...onA, path: MESSAGES, headers: { 'x-api-key': tokA } })).status, 200)
  assert.equal((await send({ ...targetOf(gB), path: MESSAGES, headers: { 'x-api-key': tokB } })).status, 200)
  assert.equal(up.requests.length, 2)
})

/**
 * Sends each case (`[what, path, headers, status]`) and raw request (`[what, text]`, expecting
 * 400) on one socket grant of anthropic+openai, and checks together: each status, no secret in
 * any answer or audit event, an audit event per broker refusal without query, and no upstream
 * contact at all. `build({ tokA, tokO, tokOther, up })` makes the lists.
 */
async function expectRefusals(t, build) {
  const up = await fakeUpstream(t)
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['anthropic', 'openai'] })
  const other = broker.grant({ workspace: 'w2', providers: ['anthropic'] })
  const tokA = g.env.ANTHROPIC_API_KEY
  const tokO = g.env.OPENAI_API_KEY
  const tokOther = other.env.ANTHROPIC_API_KEY
  const secrets = [KEYS.anthropic, KEYS.openai, tokA, tokO, tokOther]
  const target = targetOf(g)
  const { cases = [], raws = [] } = build({ tokA, tokO, tokOther, up })
  // Every case runs; the failures are reported together.
  const wrong = []
  for (const [what, p, headers, status] of cases) {
    const before = up.requests.length
    const r = await send({ ...target, method: 'POST', path: p, headers, body: '{}' })
    assertNoSecrets(assert, r, secrets, `the answer to ${what}`)
    const reached = up.requests.length > before ? ` (forwarded as ${up.requests.at(-1).url.slice(0, 30)}…)` : ''
    if (r.status !== status || reached) wrong.push(`${what}: expected ${status}, got ${r.status}${reached}`)
  }
  for (const [what, text] of raws) {
    const before = up.requests.length
    const r = await rawRequest(target, text)
    assertNoSecrets(assert, r.text, secrets, `the answer to ${what}`)
    const reached = up.requests.length > before ? ' (forwarded)' : ''
    if (r.status !== 400 || reached) wrong.push(`${what} (raw): expected 400, got ${r.status}${reached}`)
  }
  await new Promise((r) => setTimeout(r, 50))
  const leaked = audit.filter((e) => secrets.some((s) => JSON.stringify(e).includes(s)))
  if (leaked.length) wrong.push(`audit events carrying a token: ${leaked.map((e) => `${e.status} ${e.path.slice(0, 30)}…`).join(', ')}`)
  assert.deepEqual(wrong, [], `refusals that did not happen:\n${wrong.join('\n')}`)
  assert.equal(up.connections, 0, 'the upstream was contacted')
  for (const e of audit) {
    assert.ok(e.status === 400 || e.status === 404, JSON.stringify(e))
    assert.ok(e.error, 'a refusal says why')
    assert.ok(!e.path.includes('?'), `the audit path has a query: ${e.path}`)
  }
  // Control: a clean request on the same route works.
  assert.equal((await send({ ...target, method: 'POST', path: MESSAGES, headers: { 'x-api-key': tokA }, body: '{}' })).status, 200)
  return { audit }
}

test('400 and 404: tokens outside the auth header, two auth headers, absolute-form, path tricks, unknown provider', async (t) => {
  const { audit } = await expectRefusals(t, ({ tokA, tokO, tokOther, up }) => {
    const auth = { 'x-api-key': tokA }
    return {
      cases: [
        ['the token in the query, with the auth header', `${MESSAGES}?key=${tokA}`, auth, 400],
        ['the token in the query, without an auth header', `${MESSAGES}?key=${tokA}`, {}, 400],
        ["another grant's token in the query", `${MESSAGES}?k=${tokOther}`, auth, 400],
        ['the token in x-other', MESSAGES, { ...auth, 'x-other': tokA }, 400],
        ['the openai token in x-other', MESSAGES, { ...auth, 'x-other': `Bearer ${tokO}` }, 400],
        ['the token in a cookie, no auth header', MESSAGES, { cookie: `t=${tokA}` }, 400],
        ['x-api-key and authorization', MESSAGES, { ...auth, authorization: `Bearer ${tokA}` }, 400],
        ['x-api-key twice', MESSAGES, { 'x-api-key': [tokA, tokA] }, 400],
        ['x-api-key and x-goog-api-key', MESSAGES, { ...auth, 'x-goog-api-key': tokA }, 400],
        ['a scheme-relative path', `//example.com${MESSAGES}`, auth, 400],
        ['a path starting //', '//anthropic/v1/messages', auth, 400],
        ['a backslash', '/anthropic/v1\\messages', auth, 400],
        ['an encoded backslash', '/anthropic/v1/%5Cmessages', auth, 400],
        ['a .. segment', '/anthropic/v1/../v1/messages', auth, 400],
        ['a trailing .. segment', '/anthropic/..', auth, 400],
        ['an encoded .. segment', '/anthropic/v1/%2e%2e/messages', auth, 400],
        ['an upper-case encoded .. segment', '/anthropic/v1/%2E%2E/messages', auth, 400],
        ['a half-encoded .. segment', '/anthropic/v1/.%2e/messages', auth, 400],
        ['a . segment', '/anthropic/./v1/messages', auth, 400],
        ['an unknown provider', '/nope/x', auth, 404],
        ['no provider', '/', auth, 404],
        ['a provider id in the wrong case', '/Anthropic/v1/messages', auth, 404],
      ],
      raws: [
        ['absolute-form target', `GET http://example.com${MESSAGES} HTTP/1.1\r\nHost: example.com\r\nx-api-key: ${tokA}\r\nConnection: close\r\n\r\n`],
        ['absolute-form target at the upstream', `GET http://127.0.0.1:${up.port}${MESSAGES} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nx-api-key: ${tokA}\r\nConnection: close\r\n\r\n`],
        ['two Content-Lengths', `POST ${MESSAGES} HTTP/1.1\r\nHost: x\r\nx-api-key: ${tokA}\r\nContent-Length: 2\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}`],
      ],
    }
  })
  // Refused before the token check, a request is audited by its provider segment only.
  assert.ok(audit.some((e) => e.path === '/anthropic/…' && /outside the auth header/.test(e.error ?? '')), 'a query refusal is audited by its provider segment')
  assert.ok(audit.every((e) => e.status !== 400 || !e.path.includes('/v1/')), 'no refused path is audited in full')
})

test('400: Content-Length together with Transfer-Encoding: chunked is refused, in either order', async (t) => {
  await expectRefusals(t, ({ tokA }) => ({
    raws: [
      ['Content-Length then Transfer-Encoding', `POST ${MESSAGES} HTTP/1.1\r\nHost: x\r\nx-api-key: ${tokA}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`],
      ['Transfer-Encoding then Content-Length', `POST ${MESSAGES} HTTP/1.1\r\nHost: x\r\nx-api-key: ${tokA}\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\nConnection: close\r\n\r\n0\r\n\r\n`],
    ],
  }))
})

test('400: a token in the path or percent-encoded in the query is refused, never forwarded nor audited', async (t) => {
  await expectRefusals(t, ({ tokA }) => {
    const auth = { 'x-api-key': tokA }
    return {
      cases: [
        ['the token percent-encoded in the query', `${MESSAGES}?key=${tokA.replaceAll('-', '%2D')}`, auth, 400],
        ['the token in the path', `${MESSAGES}/${tokA}`, auth, 400],
        ['the token in a path parameter', `${MESSAGES};${tokA}`, auth, 400],
      ],
    }
  })
})

test('keep-alive: a grant revoked between two requests on one connection refuses the second', async (t) => {
  const up = await fakeUpstream(t)
  const { broker } = await startBroker(t, { env: brokerEnv(up), tcp: true })
  const g = broker.grant({ workspace: 'w1', providers: ['anthropic'], transport: 'tcp' })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => agent.destroy())
  const headers = { 'x-api-key': g.env.ANTHROPIC_API_KEY }
  const first = await send({ ...targetOf(g), path: MESSAGES, headers, agent })
  assert.equal(first.status, 200)
  assert.equal(first.reused, false)
  assert.equal(broker.revoke(g.id), true)
  let second
  try {
    second = await send({ ...targetOf(g), path: MESSAGES, headers, agent })
  } catch (e) {
    second = { error: e.code }
  }
  t.diagnostic(second.status ? `second request: ${second.status}` : `second request: connection closed (${second.error})`)
  if (second.status !== undefined) {
    assert.equal(second.status, 401, second.body)
    assert.equal(second.reused, true, 'the second request went on the same connection')
  }
  await new Promise((r) => setTimeout(r, 50))
  assert.equal(up.requests.length, 1, 'the upstream saw the request after the revoke')
})

test('an upstream redirect is passed back unchanged, never followed', async (t) => {
  const elsewhere = await fakeUpstream(t)
  const location = `http://127.0.0.1:${elsewhere.port}/x`
  const up = await fakeUpstream(t, (req, res) => {
    res.writeHead(302, { location, 'content-type': 'text/plain' })
    res.end('moved')
  })
  const { broker } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['openai'] })
  const r = await send({ ...targetOf(g), path: '/openai/v1/models', headers: { authorization: `Bearer ${g.env.OPENAI_API_KEY}` } })
  assert.equal(r.status, 302)
  assert.equal(r.headers.location, location)
  assert.equal(r.body, 'moved')
  await new Promise((res) => setTimeout(res, 100))
  assert.equal(up.requests.length, 1)
  assert.equal(elsewhere.connections, 0, 'the broker followed the redirect')
})

test('response headers that echo the real key are dropped; others pass', async (t) => {
  const up = await fakeUpstream(t, (req, res) => {
    res.setHeader('x-echo', KEYS.openai)
    res.setHeader('x-echo-bearer', `Bearer ${KEYS.openai}`)
    res.setHeader('set-cookie', [`sid=${KEYS.openai}; Path=/; HttpOnly`])
    res.setHeader('x-fine', 'ok')
    res.setHeader('x-request-id', 'req_123')
    res.setHeader('content-type', 'application/json')
    res.writeHead(200)
    res.end('{"ok":true}')
  })
  const { broker } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['openai'] })
  const r = await send({ ...targetOf(g), path: '/openai/v1/models', headers: { authorization: `Bearer ${g.env.OPENAI_API_KEY}` } })
  assert.equal(r.status, 200)
  assert.equal(r.headers['x-echo'], undefined)
  assert.equal(r.headers['x-echo-bearer'], undefined)
  assert.equal(r.headers['set-cookie'], undefined)
  assert.equal(r.headers['x-fine'], 'ok')
  assert.equal(r.headers['x-request-id'], 'req_123')
  assert.equal(r.headers['content-type'], 'application/json')
  assertNoSecrets(assert, r.rawHeaders, [KEYS.openai, g.env.OPENAI_API_KEY], 'the response headers')
  assert.equal(r.body, '{"ok":true}')
})

test('streaming: SSE events reach the client as the upstream writes them', async (t) => {
  // A handshake, not a clock: the upstream writes event 0 and writes the rest only once the
  // client has received it. A broker that buffered the body would leave both waiting.
  let clientGotFirst
  const firstReceived = new Promise((resolve) => { clientGotFirst = resolve })
  let upstreamWaited = false
  const up = await fakeUpstream(t, async (req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    res.write('event: delta\ndata: {"i":0}\n\n')
    const got = await Promise.race([firstReceived.then(() => true), new Promise((r) => setTimeout(() => r(false), 20000))])
    upstreamWaited = got
    for (let i = 1; i < 5; i++) res.write(`event: delta\ndata: {"i":${i}}\n\n`)
    res.end()
  })
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['anthropic'] })
  const { body } = await new Promise((resolve, reject) => {
    const req = http.request({
      socketPath: g.route.hostSocket, method: 'POST', path: MESSAGES, agent: false,
      headers: { 'x-api-key': g.env.ANTHROPIC_API_KEY, 'content-type': 'application/json' },
    }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d) => {
        text += d
        if (text.includes('"i":0')) clientGotFirst()
      })
      res.on('end', () => resolve({ body: text }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end('{"stream":true}')
  })
  assert.equal(body.match(/^data: /gm)?.length, 5, body)
  assert.equal(upstreamWaited, true, 'the client got event 0 only after the upstream ended: the broker buffered')
  await waitFor(() => audit.length >= 1, 'the audit event')
  assert.equal(audit[0].bytes, Buffer.byteLength(body))
})

test('with PO_SANDBOX_LOG=trace the logs name broker requests but hold no key or token', async (t) => {
  const dir = tempDir(t, 'pbl-')
  const tokenFile = path.join(dir, 'token')
  const script = path.join(dir, 'child.cjs')
  writeFileSync(script, `
const http = require('node:http')
const { writeFileSync } = require('node:fs')
const { startCredentialBroker } = require(${JSON.stringify(path.join(root, 'index.js'))})
const [key, socketDir, tokenFile] = process.argv.slice(2)
function send(socketPath, path, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path, headers, method: 'POST', agent: false }, (res) => {
      res.resume(); res.on('end', () => resolve(res.statusCode))
    })
    req.on('error', reject)
    req.end('{"hello":"world"}')
  })
}
;(async () => {
  const up = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      if (req.url.startsWith('/v1/models')) { res.writeHead(302, { location: 'http://127.0.0.1:9/x' }); res.end() }
      else { res.writeHead(200, { 'content-type': 'application/json', 'x-echo': req.headers['x-api-key'] || '' }); res.end('{"ok":true}') }
    })
  })
  await new Promise((r) => up.listen(0, '127.0.0.1', r))
  const broker = await startCredentialBroker({ env: { ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: 'http://127.0.0.1:' + up.address().port }, socketDir })
  const g = broker.grant({ workspace: 'wlog', providers: ['anthropic'] })
  const token = g.env.ANTHROPIC_API_KEY
  writeFileSync(tokenFile, token)
  const sock = g.route.hostSocket
  const statuses = [
    await send(sock, '/anthropic/v1/messages?beta=true', { 'x-api-key': token }),
    await send(sock, '/anthropic/v1/messages', { 'x-api-key': token + 'x' }),
    await send(sock, '/anthropic/v1/messages?key=' + token, { 'x-api-key': token }),
    await send(sock, '/anthropic/v1/models', { 'x-api-key': token }),
  ]
  await new Promise((r) => setTimeout(r, 100))
  await broker.close()
  up.close()
  console.log('statuses ' + statuses.join(','))
})().catch((e) => { console.error('child failed: ' + e.message); process.exit(1) })
`)
  const { PO_SANDBOX_LOG: _, ...parentEnv } = process.env
  const child = await run(process.execPath, [script, KEYS.anthropic, dir, tokenFile], {
    env: { ...parentEnv, PO_SANDBOX_LOG: 'trace' },
    timeout: 20000,
  })
  const output = child.stdout + child.stderr
  assert.equal(child.code, 0, output.slice(-3000))
  assert.match(child.stdout, /statuses 200,401,400,302/)
  const token = readFileSync(tokenFile, 'utf8')
  assert.match(token, /^sk-ant-api03-[0-9a-f]{64}$/)
  assert.match(output, /broker request/, 'logging was on')
  assertNoSecrets(assert, output, [KEYS.anthropic, token], 'the trace log')
  // Also no distinctive part of either (a truncated or split secret).
  assertNoSecrets(assert, output, [KEYS.anthropic.slice(-32), token.slice(-32)], 'the trace log')
})

test('withheld credentials: AWS and Google stay on the host with reasons; PO_SANDBOX_BROKER=0 grants nothing', async (t) => {
  const up = await fakeUpstream(t)
  const cloud = {
    AWS_ACCESS_KEY_ID: 'AKIAREALKEYID1234567',
    AWS_SECRET_ACCESS_KEY: 'aws-secret-REAL-0123456789abcdef0123456789',
    AWS_PROFILE: 'prod-profile-real',
    GOOGLE_APPLICATION_CREDENTIALS: '/home/u/.config/gcloud/real-adc.json',
  }
  const { broker } = await startBroker(t, { env: brokerEnv(up, cloud) })
  const g = broker.grant({ workspace: 'w1' })
  const withheld = new Map(g.withheld.map((w) => [w.variable, w.reason]))
  for (const v of Object.keys(cloud)) {
    assert.ok(withheld.has(v), `${v} is not listed as withheld: ${JSON.stringify(g.withheld)}`)
    assert.ok(withheld.get(v).trim().length > 0, `${v} has no reason`)
    assert.equal(g.env[v], undefined)
  }
  assertNoSecrets(assert, g.env, Object.values(cloud), 'the grant env')
  assertNoSecrets(assert, g.env, [KEYS.anthropic, KEYS.openai], 'the grant env')
  assert.ok(g.providers.includes('anthropic') && g.providers.includes('openai'))

  const off = await startBroker(t, { env: brokerEnv(up, { ...cloud, PO_SANDBOX_BROKER: '0' }), tcp: true })
  assert.equal(off.broker.enabled, false)
  assert.equal(off.broker.address ?? null, null)
  const h = off.broker.grant({ workspace: 'w1', providers: ['anthropic', 'openai'] })
  assert.equal(h.route ?? null, null)
  assert.deepEqual(h.env, {})
  assert.deepEqual(h.providers, [])
  const offWithheld = new Map(h.withheld.map((w) => [w.variable, w.reason]))
  for (const v of ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', ...Object.keys(cloud)]) {
    assert.ok(offWithheld.get(v)?.trim(), `${v} is not withheld with a reason: ${JSON.stringify(h.withheld)}`)
  }
  assert.match(offWithheld.get('OPENAI_API_KEY'), /PO_SANDBOX_BROKER=0/)
  assert.deepEqual(readdirSync(off.socketDir), [], 'a disabled broker made a socket')
  assert.equal(up.connections, 0)
})

test('socket route: a 0700 folder and a 0600 socket, gone after revoke; the TCP port closes with the broker', async (t) => {
  const up = await fakeUpstream(t)
  const { broker, socketDir } = await startBroker(t, { env: brokerEnv(up), tcp: true })
  const g = broker.grant({ workspace: 'w1', providers: ['openai'] })
  const { hostDir, hostSocket } = g.route
  assert.equal(path.dirname(hostSocket), hostDir)
  assert.equal(path.dirname(hostDir), socketDir)
  const dirStat = statSync(hostDir)
  assert.ok(dirStat.isDirectory())
  assert.equal(dirStat.mode & 0o777, 0o700, `folder mode ${(dirStat.mode & 0o777).toString(8)}`)
  const sockStat = statSync(hostSocket)
  assert.ok(sockStat.isSocket())
  assert.equal(sockStat.mode & 0o777, 0o600, `socket mode ${(sockStat.mode & 0o777).toString(8)}`)
  assert.equal(sockStat.uid, process.getuid())
  assert.equal(await tryConnect({ socketPath: hostSocket }), 'connected')

  assert.equal(broker.revoke(g.id), true)
  assert.equal(existsSync(hostSocket), false, 'the socket outlived its grant')
  assert.equal(existsSync(hostDir), false, 'the grant folder outlived its grant')
  assert.notEqual(await tryConnect({ socketPath: hostSocket }), 'connected')

  const port = Number(broker.address.split(':')[1])
  assert.equal(await tryConnect({ port }), 'connected')
  await broker.close()
  // close() resolves after the listener is stopped: no retry loop.
  assert.equal(await tryConnect({ port }), 'ECONNREFUSED')
})

test('TCP route: loopback listener, host.docker.internal for the container, requests work', async (t) => {
  const up = await fakeUpstream(t)
  const { broker } = await startBroker(t, { env: brokerEnv(up), tcp: true })
  assert.match(broker.address, /^127\.0\.0\.1:\d+$/)
  const port = broker.address.split(':')[1]
  const g = broker.grant({ workspace: 'w1', providers: ['openai'], transport: 'tcp' })
  assert.equal(g.route.kind, 'tcp')
  assert.equal(g.route.address, broker.address)
  assert.equal(g.route.containerAddress, `host.docker.internal:${port}`)
  assert.equal(g.env.PO_BROKER_ADDRESS, `host.docker.internal:${port}`)
  assert.equal(g.env.PO_BROKER_SOCKET, undefined)
  assert.equal(g.route.hostSocket ?? null, null)
  const r = await send({
    port: Number(port), method: 'POST', path: '/openai/v1/chat/completions', body: '{"model":"m"}',
    headers: { authorization: `Bearer ${g.env.OPENAI_API_KEY}`, 'content-type': 'application/json' },
  })
  assert.equal(r.status, 200, r.body)
  assert.equal(up.requests.length, 1)
  assert.equal(up.requests[0].url, '/v1/chat/completions')
  assert.equal(up.requests[0].headers.authorization, `Bearer ${KEYS.openai}`)
  assert.equal(up.requests[0].headers.host, `127.0.0.1:${up.port}`)

  // A socket-only broker has no TCP route to give.
  const plain = await startBroker(t, { env: brokerEnv(up) })
  assert.equal(plain.broker.address ?? null, null)
  assert.throws(() => plain.broker.grant({ workspace: 'w1', providers: ['openai'], transport: 'tcp' }), { code: 'BROKER_FAILED' })
})

test('bad input: workspace, provider, transport, user, a non-loopback or malformed base URL', async (t) => {
  const up = await fakeUpstream(t)
  const { broker } = await startBroker(t, { env: brokerEnv(up) })
  assert.throws(() => broker.grant({ workspace: '../x' }), { code: 'WORKSPACE_INVALID' })
  assert.throws(() => broker.grant({ workspace: 'w1', providers: ['nope'] }), { code: 'OPTIONS_INVALID' })
  assert.throws(() => broker.grant({ workspace: 'w1', transport: 'udp' }), { code: 'OPTIONS_INVALID' })
  assert.throws(() => broker.grant({ workspace: 'w1', user: 'root' }), { code: 'OPTIONS_INVALID' })
  assert.throws(() => broker.grant(), { code: 'OPTIONS_INVALID' })
  for (const bad of [5, {}, { id: 7 }, null, undefined]) {
    assert.throws(() => broker.revoke(bad), { code: 'OPTIONS_INVALID' }, JSON.stringify(bad))
  }
  const g = broker.grant({ workspace: 'w1', providers: ['openai'] })
  assert.equal(broker.revoke(g), true, 'revoke takes the grant itself')
  assert.equal(broker.revoke(g), false)
  assert.equal(broker.revoke('no-such-grant'), false)

  for (const base of ['http://10.0.0.1:1', 'http://example.com', 'ftp://127.0.0.1', `http://user:pw@127.0.0.1:${up.port}`]) {
    const bad = await startBroker(t, { env: { ANTHROPIC_API_KEY: KEYS.anthropic, ANTHROPIC_BASE_URL: base } })
    assert.throws(() => bad.broker.grant({ workspace: 'w1', providers: ['anthropic'] }), (e) => {
      assert.equal(e.code, 'OPTIONS_INVALID')
      assert.match(e.message, /ANTHROPIC_BASE_URL/)
      assert.ok(!e.message.includes(KEYS.anthropic))
      assert.ok(!e.message.includes('pw@'), 'the error echoes a password in the URL')
      return true
    }, base)
    assert.deepEqual(readdirSync(bad.socketDir), [], `a refused grant (${base}) left a socket folder`)
  }
  assert.equal(up.connections, 0)
})

test('startCredentialBroker: a bad value rejects; a mistyped option throws synchronously, as everywhere in the API', async (t) => {
  const dir = tempDir(t, 'pbs-')
  const result = startCredentialBroker({ socketDir: 'relative', env: {} })
  assert.ok(result instanceof Promise)
  await assert.rejects(result, (err) => err instanceof Error && err.code === 'OPTIONS_INVALID' && /socketDir/.test(err.message))
  assert.throws(() => startCredentialBroker({ socketDir: dir, tcp: 'yes', env: {} }), (err) => err instanceof Error && err.code === 'OPTIONS_INVALID')
})
