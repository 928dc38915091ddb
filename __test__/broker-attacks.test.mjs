// The credential broker attacked from inside a container: code that holds its grant's tokens and
// writes raw bytes to the broker's socket (a few cases over the TCP route). Each rule of the
// hardened broker (methods, request targets, framing, token placement, audit of refusals,
// response headers, resources, trailers) is tried plain, encoded, double-encoded, split across
// writes, repeated, case-varied and out of place. Every refusal is checked for its status, for
// no upstream contact at all, and for no token or key in the answer or the audit events; the
// failures of a test are collected and reported together.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { root, run, tempDir } from './helpers.mjs'
import {
  KEYS, assertNoSecrets, brokerEnv, fakeUpstream, forgedToken, send, startBroker, targetOf,
} from './broker-fixtures.mjs'

const MESSAGES = '/anthropic/v1/messages'
const CHAT = '/openai/v1/chat/completions'
const PROVIDERS = ['anthropic', 'openai']
/** The status of a framing refusal: a 4xx from the broker or its HTTP parser, or a close. */
const FRAMING = '4xx or closed'
/** A 64 KiB+ head: 431 or 400 from the parser, or a close. */
const TOO_BIG = [400, 431, null]

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Polls `predicate` every 5 ms for up to `ms`; resolves with whether it held. */
async function until(predicate, ms) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) return false
    await sleep(5)
  }
  return true
}

/** Every byte of `s` as `%xx` (or `%XX` with `upper`). */
function encodeAll(s, upper = false) {
  const hex = [...Buffer.from(s)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')
  return upper ? hex.toUpperCase() : hex
}

/** Every other character of `s` as `%XX`. */
const encodeSome = (s) => [...s].map((c, i) => (i % 2 ? encodeAll(c, true) : c)).join('')

/** One more round of percent-encoding: `%XX` becomes `%25XX`. */
const encodeAgain = (s) => s.replaceAll('%', '%25')

/**
 * A raw request head: the request line, `host`, the `lines` as they are, `Connection: close`
 * (unless `close` is false), each line ended by `eol`, then the blank line.
 */
function head(method, target, lines = [], { eol = '\r\n', host = 'Host: broker', close = true } = {}) {
  const all = [`${method} ${target} HTTP/1.1`, ...(host ? [host] : []), ...lines, ...(close ? ['Connection: close'] : [])]
  return all.join(eol) + eol + eol
}

/** A POST with a Content-Length body. */
const post = (target, lines, body = '{}') => head('POST', target, [...lines, `Content-Length: ${Buffer.byteLength(body)}`]) + body

/**
 * Writes `bytes` (a latin1 string, or a list of them written `gapMs` apart) on a fresh
 * connection to the broker and reads until the broker closes it or `timeoutMs` passes.
 * Resolves `{ status, text }`; `status` is null without an answer.
 */
function exchange(target, bytes, { gapMs = 1, timeoutMs = 3000 } = {}) {
  return new Promise((resolve) => {
    const s = target.socketPath ? net.connect(target.socketPath) : net.connect(target.port, '127.0.0.1')
    const pieces = Array.isArray(bytes) ? [...bytes] : [bytes]
    let text = ''
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      s.destroy()
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text)
      resolve({ status: m ? Number(m[1]) : null, text })
    }
    const timer = setTimeout(finish, timeoutMs)
    const next = () => {
      if (done || s.destroyed || !pieces.length) return
      s.write(Buffer.from(pieces.shift(), 'latin1'))
      if (pieces.length) setTimeout(next, gapMs)
    }
    s.setEncoding('latin1')
    s.on('data', (d) => { text += d })
    // A broker that cuts the connection while bytes are still going out: EPIPE, ECONNRESET.
    s.on('error', finish)
    s.on('end', finish)
    s.on('close', finish)
    s.once('connect', next)
  })
}

/** `text` cut into pieces of `size` characters (a head written in many small writes). */
const chop = (text, size) => Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size))

/**
 * A broker with two grants on the same route kind (w1: anthropic and openai, the attacker's own;
 * w2: another workspace, both providers) and a recording upstream for both providers.
 */
async function attackBed(t, { tcp = false, handler, env = {} } = {}) {
  const up = await fakeUpstream(t, handler)
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up, env), tcp })
  const transport = tcp ? 'tcp' : 'socket'
  const g = broker.grant({ workspace: 'w1', providers: ['anthropic', 'openai'], transport })
  const other = broker.grant({ workspace: 'w2', providers: ['anthropic', 'openai'], transport })
  const tokA = g.env.ANTHROPIC_API_KEY
  const tokO = g.env.OPENAI_API_KEY
  const tokOther = other.env.ANTHROPIC_API_KEY
  const labelled = [
    ['the anthropic key', KEYS.anthropic],
    ['the openai key', KEYS.openai],
    ['the anthropic token', tokA],
    ['the openai token', tokO],
    ["w2's anthropic token", tokOther],
    ["w2's openai token", other.env.OPENAI_API_KEY],
  ]
  return {
    up, broker, audit, g, target: targetOf(g), tokA, tokO, tokOther, labelled,
    secrets: labelled.map(([, s]) => s),
    authA: `x-api-key: ${tokA}`,
    authO: `Authorization: Bearer ${tokO}`,
  }
}

/** The labels of the secrets (and `extra` strings) in `text`, in any letter case. */
function leaksIn(text, labelled, extra = []) {
  const lower = text.toLowerCase()
  return [...labelled, ...extra.map((s) => ['an encoded token', s])]
    .filter(([, s]) => lower.includes(s.toLowerCase()))
    .map(([label]) => label)
}

/** `text` with every secret replaced by its label, for failure messages. */
function redact(text, labelled, max = 120) {
  let out = String(text)
  for (const [label, s] of labelled) out = out.replace(new RegExp(s.replace(/[^\w]/g, '\\$&'), 'gi'), `<${label}>`)
  return out.length > max ? `${out.slice(0, max)}…` : out
}

/**
 * The audit paths a pre-token refusal of `target` may have (rule 5: the provider segment and an
 * ellipsis, or `/…`) and the raw tail that must not appear.
 */
function cutPath(target) {
  const first = /^\/([^/]*)/.exec(target)?.[1]
  if (PROVIDERS.includes(first)) return { paths: [`/${first}/…`], tail: target.slice(first.length + 1) }
  return { paths: ['/…'], tail: target }
}

const statusOk = (want, got) => (want === FRAMING ? got === null || (got >= 400 && got < 500) : [want].flat().includes(got))

/**
 * Runs refusal cases one by one, each on a fresh connection:
 * `{ what, bytes, status, gapMs?, audit?, paths?, tail?, method?, hide? }`. Checks the status,
 * that the upstream saw nothing (no request, no refused request, no connection), no secret (nor
 * `hide`) in the answer or in the audit events, and each event's path (`paths`, without `tail`)
 * and method. `audit: 'optional'` (framing) needs an event only when the broker itself answered.
 * Resolves with the failures and the answers.
 */
async function runRefusals(bed, cases) {
  const { up, audit, target, labelled } = bed
  const wrong = []
  const texts = []
  for (const c of cases) {
    const fail = (m) => wrong.push(`${c.what}: ${redact(m, labelled)}`)
    const seen = { requests: up.requests.length, refused: up.refused, connections: up.connections }
    const before = audit.length
    const r = await exchange(target, c.bytes, { gapMs: c.gapMs })
    texts.push(r.text)
    const fromBroker = r.text.includes('"po_broker"')
    const needAudit = c.audit === 'optional' ? fromBroker : true
    // Audit events arrive through a thread-safe callback, shortly after the answer.
    await until(() => audit.length > before, needAudit ? 2000 : 60)
    await sleep(15)
    if (!statusOk(c.status, r.status)) fail(`expected ${c.status}, got ${r.status ?? 'a close without an answer'}`)
    const forwarded = up.requests.slice(seen.requests).map((q) => `${q.method} ${q.url}`)
    if (up.refused > seen.refused) forwarded.push('a request the upstream could not parse')
    if (!forwarded.length && up.connections > seen.connections) forwarded.push('a connection')
    if (forwarded.length) fail(`forwarded: ${forwarded.join(', ')}`)
    const leaked = leaksIn(r.text, labelled, c.hide)
    if (leaked.length) fail(`the answer holds ${leaked.join(', ')}`)
    const events = audit.slice(before)
    if (needAudit && !events.length) fail('no audit event')
    const { paths = ['/…'], tail } = c
    for (const e of events) {
      const inEvent = leaksIn(JSON.stringify(e), labelled, c.hide)
      if (inEvent.length) fail(`an audit event holds ${inEvent.join(', ')}`)
      if (!paths.includes(e.path)) fail(`[audit path] ${e.path}, expected ${paths.join(' or ')}`)
      else if (tail && tail.length > 1 && e.path.includes(tail)) fail(`[audit path] ${e.path} holds the path tail`)
      if (c.method && e.method !== c.method) fail(`[audit method] ${e.method}, expected ${c.method}`)
      if (e.status >= 400 && !e.error) fail('an audit event without a reason')
    }
  }
  return { wrong, texts }
}

/**
 * Runs requests that must pass (`{ what, bytes, url, method?, auditPath }`): 200, exactly one
 * upstream request with that method and target, audited with the full path without query.
 */
async function runForwarded(bed, cases) {
  const { up, audit, target, labelled } = bed
  const wrong = []
  for (const c of cases) {
    const fail = (m) => wrong.push(`${c.what} (must pass): ${redact(m, labelled)}`)
    const seen = up.requests.length
    const before = audit.length
    const r = await exchange(target, c.bytes, { gapMs: c.gapMs })
    if (r.status !== 200) fail(`expected 200, got ${r.status ?? 'a close'}: ${r.text.slice(-200)}`)
    const got = up.requests.slice(seen)
    if (got.length !== 1) fail(`the upstream saw ${got.length} requests`)
    else {
      if (got[0].url !== c.url) fail(`the upstream saw ${got[0].url}, expected ${c.url}`)
      if (got[0].method !== (c.method ?? 'GET')) fail(`the upstream saw ${got[0].method}`)
    }
    await until(() => audit.length > before, 2000)
    const e = audit[before]
    if (!e) fail('no audit event')
    else if (e.path !== c.auditPath) fail(`[audit path] ${e.path}, expected ${c.auditPath}`)
    const leaked = leaksIn(r.text, labelled)
    if (leaked.length) fail(`the answer holds ${leaked.join(', ')}`)
  }
  return wrong
}

/** Fails with every collected failure, then checks answers and audit once more for secrets. */
function report(bed, wrong, texts = []) {
  assert.deepEqual(wrong, [], `${wrong.length} failures:\n${wrong.join('\n')}`)
  assertNoSecrets(assert, texts.join('\n'), bed.secrets, 'the answers')
  assertNoSecrets(assert, bed.audit, bed.secrets, 'the audit events')
}

// Rule 1: only GET, HEAD, POST, PUT, PATCH, DELETE; anything else is 405 and audited as "(other)".
function methodCases({ tokA, tokO, tokOther, authA, authO }) {
  const refused = (what, method, { route = MESSAGES, auth = authA, status = 405, pieces } = {}) => {
    const bytes = head(method, route, [auth, 'Content-Length: 0'])
    return {
      what, bytes: pieces ? pieces(bytes) : bytes, status, method: '(other)', gapMs: 2,
      ...cutPath(route),
    }
  }
  return [
    refused('TRACE (echoes the request, auth header and all)', 'TRACE'),
    refused('TRACK', 'TRACK'),
    refused('CONNECT with an origin-form target (a tunnel)', 'CONNECT'),
    refused('OPTIONS', 'OPTIONS'),
    refused('PROPFIND (WebDAV)', 'PROPFIND'),
    refused('PURGE (a cache method)', 'PURGE'),
    refused('lower-case get', 'get'),
    refused('mixed-case Post', 'Post'),
    refused('mixed-case dElEtE', 'dElEtE'),
    refused('the anthropic token as the method', tokA),
    refused("w2's token as the method", tokOther),
    refused('the openai token as the method, to openai', tokO, { route: CHAT, auth: authO }),
    refused('the token upper-cased as the method', tokA.toUpperCase()),
    refused('the token as the method, written in pieces', tokA, { pieces: (b) => chop(b, 7) }),
  ]
}

test('rule 1, methods: TRACE, TRACK, CONNECT, OPTIONS, WebDAV, odd case and a token as the method are 405, audited as (other)', async (t) => {
  const bed = await attackBed(t)
  const { wrong, texts } = await runRefusals(bed, methodCases(bed))
  // Controls: the six methods pass, with the method as sent.
  const controls = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => ({
    what: m, bytes: head(m, `${MESSAGES}?m=${m}`, [bed.authA, 'Content-Length: 0']), url: `/v1/messages?m=${m}`,
    method: m, auditPath: MESSAGES,
  }))
  wrong.push(...await runForwarded(bed, controls))
  report(bed, wrong, texts)
})

test('rule 1, methods: CONNECT and OPTIONS with their own target forms are refused (400 or 405), never forwarded', async (t) => {
  const bed = await attackBed(t)
  const { port } = bed.up
  const { wrong, texts } = await runRefusals(bed, [
    // Which check comes first (method or target) is not specified: either refusal will do.
    { what: 'CONNECT to the upstream in authority-form', bytes: head('CONNECT', `127.0.0.1:${port}`, [bed.authA]), status: [400, 405], paths: ['/…'] },
    { what: 'OPTIONS *', bytes: head('OPTIONS', '*', [bed.authA]), status: [400, 405], paths: ['/…'] },
  ])
  report(bed, wrong, texts)
})

// Rule 2: request targets, checked after full percent-decoding with ;parameters stripped.
function targetCases({ up, authA, authO }) {
  const refused = (what, target, extra = {}) => ({
    what: `${what} (${target.length > 60 ? `${target.slice(0, 60)}…` : target})`,
    bytes: head('GET', target, [target.startsWith('/openai') ? authO : authA]),
    status: 400,
    ...cutPath(target),
    ...extra,
  })
  const absolute = { paths: ['/…', '/anthropic/…'] }
  return [
    // '//': an upstream URL join may read what follows as a new authority.
    refused('// after the provider', '/openai//evil.example/x'),
    refused('// mid-path', '/anthropic/v1//messages'),
    refused('// at the end', '/anthropic/v1/messages//'),
    refused('// before the provider', '//anthropic/v1/messages'),
    refused('encoded //', '/openai/%2F%2Fevil.example/x'),
    refused('lower-case encoded / next to a /', '/openai/%2f/evil'),
    refused('encoded / then a /', '/openai/v1%2F/evil'),
    refused('double-encoded //', '/openai/%252F%252Fevil.example/x'),
    refused('triple-encoded //', '/openai/%25252f%25252fevil.example/x'),
    refused('an empty segment once ;parameters are stripped', '/anthropic/v1/;x=1/messages'),
    // Backslashes: some servers read them as '/'.
    refused('a backslash', '/anthropic/v1\\messages'),
    refused('backslash-dot-dot', '/anthropic/v1\\..\\admin'),
    refused('%5C', '/anthropic/v1/%5Cmessages'),
    refused('%5c', '/anthropic/v1/%5cmessages'),
    refused('%255C', '/anthropic/v1/%255Cmessages'),
    refused('%25255c', '/anthropic/v1/%25255cmessages'),
    // Dot segments, in every spelling.
    refused('..', '/anthropic/v1/../v1/messages'),
    refused('a trailing ..', '/anthropic/..'),
    refused('.', '/anthropic/./v1/messages'),
    refused('a trailing .', '/anthropic/v1/.'),
    refused('%2e%2e', '/anthropic/v1/%2e%2e/messages'),
    refused('%2E.', '/anthropic/v1/%2E./messages'),
    refused('.%2E', '/anthropic/v1/.%2E/messages'),
    refused('%2e alone', '/anthropic/%2e/v1/messages'),
    refused('%252e%252e', '/anthropic/v1/%252e%252e/messages'),
    refused('%252E.', '/anthropic/v1/%252E./messages'),
    refused('%25252e%25252e', '/anthropic/v1/%25252e%25252e/messages'),
    refused('%252e%252e, a byte per write', '/anthropic/v1/%252e%252e/messages', { bytes: chop(head('GET', '/anthropic/v1/%252e%252e/messages', [authA]), 1) }),
    refused('..;', '/anthropic/v1/..;/admin'),
    refused('..;x=1', '/anthropic/v1/..;x=1/admin'),
    refused('.;', '/anthropic/.;/v1/messages'),
    refused('%2e%2e%3b (..; once decoded)', '/anthropic/v1/%2e%2e%3b/admin'),
    refused('%2e%2e;jsessionid=1', '/anthropic/v1/%2e%2e;jsessionid=1/admin'),
    refused('v1%2F..%2Fadmin', '/anthropic/v1%2F..%2Fadmin'),
    refused('v1%2f%2e%2e%2fadmin', '/anthropic/v1%2f%2e%2e%2fadmin'),
    refused('v1%252f..%252fadmin', '/anthropic/v1%252f..%252fadmin'),
    // Control characters and non-ASCII once decoded.
    refused('%00', '/anthropic/v1/messages%00'),
    refused('%2500', '/anthropic/v1/messages%2500'),
    refused('%0d%0a (a header injected upstream)', '/anthropic/v1/messages%0d%0aX-Injected:%201'),
    refused('%0a', '/anthropic/v1/%0amessages'),
    refused('%09', '/anthropic/v1/%09messages'),
    refused('%20', '/anthropic/v1/mess%20ages'),
    refused('%7f', '/anthropic/v1/messages%7f'),
    refused('%c0%ae%c0%ae (overlong UTF-8 dots)', '/anthropic/v1/%c0%ae%c0%ae/admin'),
    refused('%ef%bc%8e%ef%bc%8e (fullwidth dots)', '/anthropic/v1/%ef%bc%8e%ef%bc%8e/admin'),
    refused('%c3%a9 (an accented letter)', '/anthropic/v1/caf%c3%a9'),
    // Raw non-ASCII may already fail the HTTP parser (no audit then).
    refused('raw UTF-8 bytes', '/anthropic/v1/caf\xc3\xa9', { audit: 'optional' }),
    // Other target forms.
    refused('absolute-form', `http://example.com${MESSAGES}`, absolute),
    refused('absolute-form naming the upstream', `http://127.0.0.1:${up.port}${MESSAGES}`, absolute),
    refused('absolute-form, upper-case scheme', `HTTP://example.com${MESSAGES}`, absolute),
    refused('absolute-form, https', `https://example.com${MESSAGES}`, absolute),
    refused('authority-form', 'example.com:443', { paths: ['/…'] }),
    refused('authority-form naming the upstream', `127.0.0.1:${up.port}`, { paths: ['/…'] }),
    refused('asterisk-form', '*', { paths: ['/…'] }),
  ]
}

test('rule 2, targets: //, backslashes, dot segments, control and non-ASCII characters, other target forms are 400 in every encoding', async (t) => {
  // The two odd-looking controls are not model endpoints: the host allows them (rule 9).
  const bed = await attackBed(t, { env: { PO_SANDBOX_BROKER_ALLOW_PATHS: 'anthropic:/v1...x,openai:/.well' } })
  const { wrong, texts } = await runRefusals(bed, targetCases(bed))
  // Controls: ordinary targets pass, the upstream sees them exactly as sent.
  wrong.push(...await runForwarded(bed, [
    { what: 'plain', bytes: head('GET', MESSAGES, [bed.authA]), url: '/v1/messages', auditPath: MESSAGES },
    { what: 'an encoded / in the query', bytes: head('GET', `${CHAT}?x=a%2Fb`, [bed.authO]), url: '/v1/chat/completions?x=a%2Fb', auditPath: CHAT },
    { what: 'a segment with three dots inside', bytes: head('GET', '/anthropic/v1...x', [bed.authA]), url: '/v1...x', auditPath: '/anthropic/v1...x' },
    { what: 'a segment starting with a dot', bytes: head('GET', '/openai/.well', [bed.authO]), url: '/.well', auditPath: '/openai/.well' },
  ]))
  report(bed, wrong, texts)
})

// Rule 9: only each provider's model endpoints are forwarded; any other path, or one that only
// looks like one (a suffix, a trailing slash, another case, encoded letters), is 403 once the
// token is checked, naming the path and how to allow it; never forwarded.
function pathCases({ authA, authO }) {
  const refused = (what, target, auth = authA, status = 403) => ({
    what, bytes: head('GET', target, [auth]), status, paths: [target.split('?')[0]],
  })
  return [
    refused('Anthropic files', '/anthropic/v1/files'),
    refused('Anthropic message batches', '/anthropic/v1/messages/batches'),
    refused('a suffix after -', '/anthropic/v1/messages-evil'),
    refused('a suffix', '/anthropic/v1/messagesx'),
    refused('a trailing slash', '/anthropic/v1/messages/'),
    refused('another case', '/anthropic/V1/Messages'),
    refused('encoded letters', '/anthropic/v1/%6d%65%73%73%61%67%65%73'),
    refused('an encoded / inside', '/anthropic/v1/messages%2Fbatches'),
    refused('a double-encoded / inside', '/anthropic/v1/messages%252Fbatches'),
    refused('a query on a refused path', '/anthropic/v1/files?x=/v1/messages'),
    refused('OpenAI files', '/openai/v1/files', authO),
    refused('OpenAI batches', '/openai/v1/batches', authO),
    refused('OpenAI fine-tuning', '/openai/v1/fine_tuning/jobs', authO),
    refused('an Anthropic path on openai', '/openai/v1/messages', authO),
    refused('a model id with an encoded /', '/openai/v1/models/a%2Fb', authO),
    { ...refused('a .. after an allowed path', '/anthropic/v1/messages/../files'), status: 400, paths: ['/anthropic/…'] },
  ]
}

test('rule 9, paths: outside a provider\'s model endpoints is 403 naming the path and the way to allow it, never forwarded', async (t) => {
  const bed = await attackBed(t)
  const { wrong, texts } = await runRefusals(bed, pathCases(bed))
  for (const text of texts.filter((x) => /^HTTP\/1\.1 403/.test(x))) {
    if (!/PO_SANDBOX_BROKER_ALLOW_PATHS/.test(text)) wrong.push(`a 403 without the way to allow it: ${text.slice(-200)}`)
  }
  const files = texts[0] ?? ''
  if (!files.includes('/v1/files') || !files.includes('anthropic:/v1/files')) wrong.push(`the 403 names neither the path nor the entry: ${files.slice(-300)}`)
  wrong.push(...await runForwarded(bed, [
    { what: 'messages with a query', bytes: head('GET', `${MESSAGES}?x=/../files`, [bed.authA]), url: '/v1/messages?x=/../files', auditPath: MESSAGES },
    { what: 'count_tokens', bytes: head('GET', '/anthropic/v1/messages/count_tokens', [bed.authA]), url: '/v1/messages/count_tokens', auditPath: '/anthropic/v1/messages/count_tokens' },
    { what: 'a model by id', bytes: head('GET', '/openai/v1/models/gpt-4o-mini', [bed.authO]), url: '/v1/models/gpt-4o-mini', auditPath: '/openai/v1/models/gpt-4o-mini' },
    { what: 'responses', bytes: post('/openai/v1/responses', [bed.authO]), url: '/v1/responses', method: 'POST', auditPath: '/openai/v1/responses' },
  ]))
  report(bed, wrong, texts)
})

test('rule 9, paths: PO_SANDBOX_BROKER_ALLOW_PATHS adds a path for one provider only', async (t) => {
  const bed = await attackBed(t, { env: { PO_SANDBOX_BROKER_ALLOW_PATHS: 'openai:/v1/files,openai:/v1/batches/**' } })
  const { wrong, texts } = await runRefusals(bed, [
    { what: 'files on anthropic', bytes: head('GET', '/anthropic/v1/files', [bed.authA]), status: 403, paths: ['/anthropic/v1/files'] },
    { what: 'below an exact entry', bytes: head('GET', '/openai/v1/files/f1', [bed.authO]), status: 403, paths: ['/openai/v1/files/f1'] },
    { what: 'the ** entry\'s own base', bytes: head('GET', '/openai/v1/batches', [bed.authO]), status: 403, paths: ['/openai/v1/batches'] },
  ])
  wrong.push(...await runForwarded(bed, [
    { what: 'an allowed exact path', bytes: head('GET', '/openai/v1/files', [bed.authO]), url: '/v1/files', auditPath: '/openai/v1/files' },
    { what: 'below a ** entry', bytes: head('GET', '/openai/v1/batches/b1/cancel', [bed.authO]), url: '/v1/batches/b1/cancel', auditPath: '/openai/v1/batches/b1/cancel' },
  ]))
  report(bed, wrong, texts)
})

test('rule 9, paths: a bad PO_SANDBOX_BROKER_ALLOW_PATHS entry is OPTIONS_INVALID naming it', async (t) => {
  for (const value of ['openai', 'nope:/v1/files', 'openai:/v1/../files', 'openai:v1/files']) {
    await assert.rejects(
      startBroker(t, { env: { OPENAI_API_KEY: 'sk-x', PO_SANDBOX_BROKER_ALLOW_PATHS: value } }),
      (err) => err.code === 'OPTIONS_INVALID' && err.message.includes('PO_SANDBOX_BROKER_ALLOW_PATHS') && err.message.includes(value),
      value,
    )
  }
})

// Rule 10: in the `none` and `allowlist` modes a body that asks the provider to fetch a URL is
// 403 (keys, not words inside strings; escaped, split across writes, deep); a body up to 1 MiB
// never reaches the upstream at all, a longer one never as a complete request.
const MCP = JSON.stringify({ model: 'm', max_tokens: 8, mcp_servers: [{ type: 'url', url: 'https://evil.example/mcp', name: 'x' }], messages: [{ role: 'user', content: 'hi' }] })
const fetchBodies = {
  'mcp_servers': MCP,
  'a web_fetch tool': JSON.stringify({ model: 'm', tools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }], messages: [] }),
  'an image by URL': JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://evil.example/i.png' } }] }] }),
  'an escaped key': '{"model":"m","\\u006dcp_servers":[],"messages":[]}',
  'OpenRouter\'s :online web search': JSON.stringify({ model: 'openai/gpt-4o:online', messages: [{ role: 'user', content: 'hi' }] }),
  'a key nested deep': '{"a":[[[[{"b":{"c":[{"server_url":"https://evil.example"}]}}]]]]}',
}
const CLEAN = JSON.stringify({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'please read "mcp_servers": [] and "url": "https://x"' }] })
// OpenAI chat completions (the shape OpenRouter and most providers take): what is not a plain
// model call's field, kind or inline value.
const chatBodies = {
  'an OpenRouter file part with an https URL': JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'file', file: { filename: 'a.pdf', file_data: 'https://evil.example/a.pdf' } }] }] }),
  'an image part by an escaped URL': '{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":" \\u0068ttps:\\/\\/evil.example/i.png"}}]}]}',
  'a model that searches by itself': JSON.stringify({ model: 'openai/gpt-4o-search-preview', messages: [{ role: 'user', content: 'hi' }] }),
  'a model that browses, in the fallback list': JSON.stringify({ model: 'm', models: ['m', 'perplexity/sonar-pro'], messages: [] }),
  'a field no plain call has (xAI live search)': JSON.stringify({ model: 'grok-4', search_parameters: { mode: 'on' }, messages: [] }),
  'OpenRouter\'s web plugin': JSON.stringify({ model: 'm', plugins: [{ id: 'web' }], messages: [] }),
  'a hosted tool in tools': JSON.stringify({ model: 'm', tools: [{ type: 'web_search' }], messages: [] }),
}
const CLEAN_CHAT = JSON.stringify({
  model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: [{ type: 'text', text: 'fetch https://x' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,AAAA' } }] }],
  tools: [{ type: 'function', function: { name: 'get', parameters: { type: 'object', properties: { url: { type: 'string' }, web_search_options: {} } } } }],
})

function fetchCases({ authA, authO }) {
  const refused = (what, body, pieces) => {
    const bytes = post(MESSAGES, [authA, 'Content-Type: application/json'], body)
    return { what, bytes: pieces ? chop(bytes, pieces) : bytes, status: 403, paths: [MESSAGES], gapMs: 1 }
  }
  return [
    ...Object.entries(fetchBodies).map(([what, body]) => refused(what, body)),
    refused('mcp_servers written 3 bytes at a time', MCP, 3),
    ...Object.entries(chatBodies).map(([what, body]) => ({ what, bytes: post(CHAT, [authO, 'Content-Type: application/json'], body), status: 403, paths: [CHAT], gapMs: 1 })),
    { what: 'a body to the model list', bytes: post('/anthropic/v1/models', [authA], '{}'), status: 403, paths: ['/anthropic/v1/models'] },
    { what: 'a gzip body', bytes: head('POST', MESSAGES, [authA, 'Content-Encoding: gzip', 'Content-Length: 2']) + '{}', status: 403, paths: [MESSAGES] },
  ]
}

for (const mode of ['none', 'allowlist']) {
  test(`rule 10, fetch screen: in ${mode} a body asking the provider to fetch is 403 and never reaches the upstream; words in strings pass`, async (t) => {
    const bed = await attackBed(t, { env: { PO_SANDBOX_NETWORK: mode } })
    const { wrong, texts } = await runRefusals(bed, fetchCases(bed))
    for (const text of texts) {
      if (!/PO_SANDBOX_BROKER_ALLOW_FETCH/.test(text)) wrong.push(`a 403 without the way to allow it: ${text.slice(-200)}`)
    }
    wrong.push(...await runForwarded(bed, [
      { what: 'a clean body naming the words in a string', bytes: post(MESSAGES, [bed.authA], CLEAN), url: '/v1/messages', method: 'POST', auditPath: MESSAGES },
      { what: 'a chat call with inline image and file data and a tool schema naming url', bytes: post(CHAT, [bed.authO], CLEAN_CHAT), url: '/v1/chat/completions', method: 'POST', auditPath: CHAT },
    ]))
    report(bed, wrong, texts)
  })
}

test('an early refusal is read by a client still sending its body: the broker answers, ends its side and reads the rest for a moment instead of resetting', async (t) => {
  const bed = await attackBed(t, { env: { PO_SANDBOX_NETWORK: 'none' } })
  const bytes = post(MESSAGES, [bed.authA, 'Content-Type: application/json'], MCP)
  // The head and the key first, nothing read; the rest 300 ms later, once the 403 is out: a
  // broker that closed at once fails that write (EPIPE), the client never reading its answer.
  const at = bytes.indexOf('mcp_servers') + 20
  const s = net.connect(bed.target.socketPath)
  t.after(() => s.destroy())
  await new Promise((resolve) => s.once('connect', resolve))
  s.pause()
  s.write(Buffer.from(bytes.slice(0, at), 'latin1'))
  await sleep(300)
  const wrote = await new Promise((resolve) => s.write(Buffer.from(bytes.slice(at), 'latin1'), (err) => resolve(err ? err.code : 'ok')))
  let text = ''
  s.setEncoding('latin1')
  s.on('data', (d) => { text += d })
  const ended = new Promise((resolve) => { s.once('end', resolve); s.once('close', resolve); s.once('error', resolve) })
  s.resume()
  await ended
  assert.equal(wrote, 'ok', 'the rest of the body could not be written')
  assert.match(text, /^HTTP\/1\.1 403/, text)
  assert.match(text, /PO_SANDBOX_BROKER_ALLOW_FETCH/)
  report(bed, [], [text])
})

test('rule 10, fetch screen: past 1 MiB the body streams and a late finding cuts it before its end: no request reaches the upstream', async (t) => {
  const bed = await attackBed(t, { env: { PO_SANDBOX_NETWORK: 'none' } })
  const pad = 'a'.repeat(1536 * 1024)
  const late = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: pad }], mcp_servers: [] })
  const before = bed.up.requests.length
  const r = await exchange(bed.target, post(MESSAGES, [bed.authA], late), { timeoutMs: 20000 })
  assert.equal(r.status, 403, r.text.slice(-300))
  assert.match(r.text, /mcp_servers/)
  await sleep(200)
  assert.equal(bed.up.requests.length, before, 'the upstream got a complete request')
  // The same length without the key streams through whole.
  const clean = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: pad }], metadata: { user_id: 'mcp_servers' } })
  const ok = await exchange(bed.target, post(MESSAGES, [bed.authA], clean), { timeoutMs: 20000 })
  assert.equal(ok.status, 200, ok.text.slice(-300))
  assert.equal(bed.up.requests.at(-1)?.body, clean)
  report(bed, [], [r.text, ok.text])
})

test('rule 10, fetch screen: in open mode, and for a provider in PO_SANDBOX_BROKER_ALLOW_FETCH, the same bodies pass', async (t) => {
  for (const env of [{}, { PO_SANDBOX_NETWORK: 'open' }, { PO_SANDBOX_NETWORK: 'none', PO_SANDBOX_BROKER_ALLOW_FETCH: 'anthropic' }]) {
    const bed = await attackBed(t, { env })
    const wrong = await runForwarded(bed, Object.entries(fetchBodies).map(([what, body]) => ({
      what: `${JSON.stringify(env)}: ${what}`, bytes: post(MESSAGES, [bed.authA], body), url: '/v1/messages', method: 'POST', auditPath: MESSAGES,
    })))
    const last = bed.up.requests.at(-1)
    if (last?.body !== fetchBodies['a key nested deep']) wrong.push(`${JSON.stringify(env)}: the upstream got another body`)
    report(bed, wrong)
  }
})

// Rule 3: framing. Every request carries a valid token, so anything not refused is forwarded.
function framingCases({ authA }) {
  const framing = (what, bytes, extra = {}) => ({
    what, bytes, status: FRAMING, audit: 'optional', ...cutPath(MESSAGES), ...extra,
  })
  const exact = (what, bytes, extra) => framing(what, bytes, { status: 400, ...extra })
  const lf = (lines, body = '0\r\n\r\n') => head('POST', MESSAGES, [authA, ...lines], { eol: '\n' }) + body
  const crlf = (lines, body = '0\r\n\r\n') => head('POST', MESSAGES, [authA, ...lines]) + body
  const clte = ['Content-Length: 5', 'Transfer-Encoding: chunked']
  const tecl = ['Transfer-Encoding: chunked', 'Content-Length: 5']
  // A second request, valid on its own, and a first request whose body holds it under one framing
  // and ends before it under the other.
  const smuggled = `GET /anthropic/v1/smuggled HTTP/1.1\r\nHost: broker\r\n${authA}\r\nConnection: close\r\n\r\n`
  const front = (lines, eol = '\r\n') => [`POST ${MESSAGES} HTTP/1.1`, 'Host: broker', authA, ...lines].join(eol) + eol + eol
  const clteBody = `0\r\n\r\n${smuggled}`
  const teclBody = `${Buffer.byteLength(smuggled).toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`
  const big = `X-Pad: ${'a'.repeat(70 * 1024)}`
  return [
    // Content-Length with Transfer-Encoding, in every shape a parser might disagree on.
    framing('CL + TE, bare-LF line endings', lf(clte)),
    framing('TE + CL, bare-LF line endings', lf(tecl)),
    framing('CL + TE, bare LF in the body too', lf(clte, '0\n\n')),
    framing('CL + TE, mixed line endings', `POST ${MESSAGES} HTTP/1.1\r\nHost: broker\n${authA}\r\nContent-Length: 5\nTransfer-Encoding: chunked\r\nConnection: close\n\r\n0\r\n\r\n`),
    framing('CL + TE, only the blank line bare', crlf(clte).replace('\r\n\r\n', '\r\n\n')),
    framing('CL then TE', crlf(clte)),
    framing('TE then CL', crlf(tecl)),
    framing('TE: Chunked', crlf(['Content-Length: 5', 'Transfer-Encoding: Chunked'])),
    framing('TRANSFER-ENCODING: CHUNKED', crlf(['content-LENGTH: 5', 'TRANSFER-ENCODING: CHUNKED'])),
    framing('TE with spaces around chunked', crlf(['Content-Length: 5', 'Transfer-Encoding:   chunked  '])),
    framing('TE with a tab before chunked', crlf(['Content-Length: 5', 'Transfer-Encoding:\tchunked'])),
    framing('a space before the TE colon', crlf(['Content-Length: 5', 'Transfer-Encoding : chunked'])),
    framing('TE: gzip, chunked', crlf(['Content-Length: 5', 'Transfer-Encoding: gzip, chunked'])),
    framing('TE: chunked, identity', crlf(['Content-Length: 5', 'Transfer-Encoding: chunked, identity'])),
    framing('two TE headers', crlf(['Content-Length: 5', 'Transfer-Encoding: chunked', 'Transfer-Encoding: identity'])),
    framing('two TE: chunked headers', crlf(['Transfer-Encoding: chunked', 'Content-Length: 5', 'Transfer-Encoding: chunked'])),
    framing('CL + TE, split inside the header names', chop(crlf(clte), 23), { gapMs: 3 }),
    framing('CL + TE, a byte per write', chop(crlf(clte), 1)),
    framing('CL + TE, bare LF, a byte per write', chop(lf(clte), 1)),
    // Bare LF anywhere in a head, with or without a body.
    framing('a bare-LF GET', head('GET', MESSAGES, [authA], { eol: '\n' })),
    framing('a bare-LF POST with Content-Length', lf(['Content-Length: 2'], '{}')),
    framing('one bare-LF header line', `GET ${MESSAGES} HTTP/1.1\r\nHost: broker\r\n${authA}\nConnection: close\r\n\r\n`),
    framing('a bare-LF request line', `GET ${MESSAGES} HTTP/1.1\nHost: broker\r\n${authA}\r\nConnection: close\r\n\r\n`),
    framing('a bare CR inside a header line', `GET ${MESSAGES} HTTP/1.1\r\nHost: broker\r\n${authA}\r\nX-A: 1\rX-B: 2\r\nConnection: close\r\n\r\n`),
    // Obsolete line folding: a continuation line may hide a header from one parser.
    framing('a folded header (space)', crlf(['X-Folded: a', ' b', 'Content-Length: 2'], '{}')),
    framing('a folded header (tab)', crlf(['X-Folded: a', '\tb', 'Content-Length: 2'], '{}')),
    framing('Transfer-Encoding hidden in a fold', crlf(['Content-Length: 5', 'X-Folded: a', ' Transfer-Encoding: chunked'])),
    // Content-Length: one, well-formed.
    exact('two equal Content-Lengths', crlf(['Content-Length: 2', 'Content-Length: 2'], '{}')),
    exact('two different Content-Lengths', crlf(['Content-Length: 2', 'Content-Length: 3'], '{} ')),
    exact('two Content-Lengths, case-varied', crlf(['Content-Length: 2', 'content-length: 2'], '{}')),
    exact('Content-Length: 2, 2', crlf(['Content-Length: 2, 2'], '{}')),
    exact('Content-Length: +2', crlf(['Content-Length: +2'], '{}')),
    exact('Content-Length: 2 with junk', crlf(['Content-Length:  2 x '], '{}')),
    exact('Content-Length: 0x2', crlf(['Content-Length: 0x2'], '{}')),
    exact('Content-Length: -1', crlf(['Content-Length: -1'], '{}')),
    // A head over 64 KiB, at once and trickled in small writes.
    framing('a 70 KiB header in one write', head('GET', MESSAGES, [authA, big]), { status: TOO_BIG }),
    framing('a 70 KiB header in 1 KiB writes', chop(head('GET', MESSAGES, [authA, big]), 1024), { status: TOO_BIG }),
    // Smuggling: the second request must never reach the upstream as a request of its own.
    framing('CL.TE smuggling', front([`Content-Length: ${clteBody.length}`, 'Transfer-Encoding: chunked']) + clteBody),
    framing('CL.TE smuggling, bare LF', front([`Content-Length: ${clteBody.length}`, 'Transfer-Encoding: chunked'], '\n') + clteBody),
    framing('CL.TE smuggling, bare LF, a byte per write', chop(front([`Content-Length: ${clteBody.length}`, 'Transfer-Encoding: chunked'], '\n') + clteBody, 1)),
    framing('TE.CL smuggling', front(['Content-Length: 4', 'Transfer-Encoding: chunked']) + teclBody),
    framing('TE.TE smuggling (chunked, then identity)', front(['Transfer-Encoding: chunked', 'Transfer-Encoding: identity', `Content-Length: ${clteBody.length}`]) + clteBody),
    framing('CL.TE smuggling with an odd-case TE', front([`Content-Length: ${clteBody.length}`, 'Transfer-Encoding: cHuNkEd']) + clteBody),
  ]
}

test('rule 3, framing: CL with TE in any spelling, bare LF, folding, bad Content-Length, 64 KiB+ heads and smuggling are refused, never forwarded', async (t) => {
  const bed = await attackBed(t)
  const { wrong, texts } = await runRefusals(bed, framingCases(bed))
  assert.deepEqual(bed.up.requests.filter((q) => q.url.includes('smuggled')).map((q) => q.url), [], 'a smuggled request reached the upstream')
  // Controls: plain chunked and Content-Length uploads pass with their bodies.
  const chunked = `POST ${MESSAGES} HTTP/1.1\r\nHost: broker\r\n${bed.authA}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n`
  wrong.push(...await runForwarded(bed, [
    { what: 'a chunked POST', bytes: chunked, url: '/v1/messages', method: 'POST', auditPath: MESSAGES },
    { what: 'a chunked POST written in pieces', bytes: chop(chunked, 9), url: '/v1/messages', method: 'POST', auditPath: MESSAGES },
    { what: 'a Content-Length POST', bytes: post(MESSAGES, [bed.authA]), url: '/v1/messages', method: 'POST', auditPath: MESSAGES },
  ]))
  assert.deepEqual(bed.up.requests.slice(-3).map((q) => q.body), ['{}', '{}', '{}'], 'the control bodies')
  report(bed, wrong, texts)
})

// Rule 4: a live token anywhere but the one auth header; two auth headers.
function placementCases({ tokA, tokO, tokOther, authA, authO }) {
  const refused = (what, target, lines, extra = {}) => ({
    what, bytes: head('GET', target, lines), status: 400, ...cutPath(target), ...extra,
  })
  const inHead = (what, lines, extra) => refused(what, MESSAGES, [authA, ...lines], extra)
  const inTarget = (what, target, encoded) => refused(what, target, [target.startsWith('/openai') ? authO : authA], { hide: [encoded] })
  // Which check comes first for two auth headers is not said: cut or full path.
  const twice = (what, lines, target = MESSAGES) => refused(what, target, lines, { paths: [cutPath(target).paths[0], target], tail: null })
  const full = encodeAll(tokA)
  const FULL = encodeAll(tokA, true)
  const some = encodeSome(tokA)
  const twiceEncoded = encodeAgain(full)
  const otherTwice = encodeAgain(encodeAll(tokOther))
  return [
    // Header names.
    inHead('the token as part of a header name', [`x-${tokA}: 1`]),
    inHead('the token as a header name, upper-cased', [`X-${tokA.toUpperCase()}: 1`]),
    inHead('the token as the whole header name', [`${tokA}: 1`]),
    inHead("w2's token in a header name", [`x-${tokOther}: 1`]),
    // Header values other than the auth header.
    inHead('the token in x-other', [`x-other: ${tokA}`]),
    inHead("w2's token in x-other", [`x-other: ${tokOther}`]),
    inHead("this grant's openai token in x-other", [`x-other: ${tokO}`]),
    inHead('the token upper-cased in x-other', [`x-other: ${tokA.toUpperCase()}`]),
    inHead('the token inside a longer value', [`x-other: before-${tokA}-after`]),
    inHead('the token in a cookie', [`Cookie: a=1; t=${tokA}`]),
    inHead('the token in User-Agent', [`User-Agent: agent/${tokA}`]),
    inHead('the token in Proxy-Authorization', [`Proxy-Authorization: Bearer ${tokA}`]),
    refused('the token as the Host', MESSAGES, [authA], { bytes: head('GET', MESSAGES, [authA], { host: `Host: ${tokA}` }) }),
    refused('the token in x-other, written in two pieces cutting it', MESSAGES, [], {
      bytes: ((b) => [b.slice(0, b.lastIndexOf(tokA) + 20), b.slice(b.lastIndexOf(tokA) + 20)])(head('GET', MESSAGES, [authA, `x-other: ${tokA}`])),
      gapMs: 20,
    }),
    refused('the token in a header, no auth header', MESSAGES, [`x-other: ${tokA}`]),
    // The path and the query, plain and encoded.
    inTarget('the token as a path segment', `/anthropic/v1/${tokA}`, tokA),
    inTarget('the token as a path parameter', `${MESSAGES};k=${tokA}`, tokA),
    inTarget('the token fully encoded in the path', `${MESSAGES}/${full}`, full),
    inTarget('the token fully encoded in the path, upper-case hex', `${MESSAGES}/${FULL}`, FULL),
    inTarget('the token partly encoded in the path', `${MESSAGES}/${some}`, some),
    inTarget('the token double-encoded in the path', `${MESSAGES}/${twiceEncoded}`, twiceEncoded),
    inTarget('the token fully encoded in the query', `${MESSAGES}?k=${full}`, full),
    inTarget('the token partly encoded in the query', `${MESSAGES}?k=${some}`, some),
    inTarget('the token double-encoded in the query', `${MESSAGES}?k=${twiceEncoded}`, twiceEncoded),
    inTarget("w2's token double-encoded in the query", `${MESSAGES}?k=${otherTwice}`, otherTwice),
    inTarget('the openai token double-encoded in the openai query', `${CHAT}?k=${encodeAgain(encodeAll(tokO))}`, encodeAgain(encodeAll(tokO))),
    // Two auth headers.
    twice('authorization and x-api-key', [authA, `Authorization: Bearer ${tokA}`]),
    twice('x-api-key twice, the same token', [authA, authA]),
    twice('x-api-key twice, the second forged', [authA, `x-api-key: ${forgedToken()}`]),
    twice('x-api-key twice, the second empty', [authA, 'x-api-key: ']),
    twice('X-API-KEY and x-api-key', [`X-API-KEY: ${tokA}`, authA]),
    twice('x-api-key and x-goog-api-key', [authA, `x-goog-api-key: ${tokA}`]),
    twice('x-api-key and api-key', [authA, `api-key: ${tokA}`]),
    twice('authorization twice, to openai', [authO, authO], CHAT),
    twice('authorization and x-api-key, to openai', [authO, `x-api-key: ${tokO}`], CHAT),
  ]
}

test('rule 4, token placement: a live token in a header name or value, the path or query (encoded, double-encoded, upper-cased), or two auth headers is 400', async (t) => {
  const bed = await attackBed(t)
  const { wrong, texts } = await runRefusals(bed, placementCases(bed))
  // Controls: a split token is no token (only its halves travel); the auth header alone passes.
  const half = bed.tokA.slice(0, 30)
  wrong.push(...await runForwarded(bed, [
    { what: 'half a token in x-other', bytes: head('GET', MESSAGES, [bed.authA, `x-other: ${half}`]), url: '/v1/messages', auditPath: MESSAGES },
    { what: 'the auth header alone', bytes: post(MESSAGES, [bed.authA]), url: '/v1/messages', method: 'POST', auditPath: MESSAGES },
  ]))
  report(bed, wrong, texts)
})

test('rule 5, audit: a refusal before the token check names only the provider segment; after it, the full path without query', async (t) => {
  const secret = 'secret-tail-4f1c'
  // Not a model endpoint: the host allows it, so that the 200 below reaches the upstream.
  const bed = await attackBed(t, { env: { PO_SANDBOX_BROKER_ALLOW_PATHS: `anthropic:/v1/${secret}` } })
  const { authA } = bed
  const { wrong, texts } = await runRefusals(bed, [
    { what: 'method', bytes: head('TRACE', `/anthropic/v1/${secret}`, [authA]), status: 405, paths: ['/anthropic/…'], tail: `/v1/${secret}`, method: '(other)' },
    { what: 'target', bytes: head('GET', `/anthropic/v1//${secret}`, [authA]), status: 400, paths: ['/anthropic/…'], tail: `/v1//${secret}` },
    { what: 'framing', bytes: head('POST', `/anthropic/v1/${secret}`, [authA, 'Content-Length: 5', 'Transfer-Encoding: chunked']) + '0\r\n\r\n', status: 400, paths: ['/anthropic/…'], tail: `/v1/${secret}` },
    { what: 'token elsewhere', bytes: head('GET', `/anthropic/v1/${secret}`, [authA, `x-other: ${bed.tokA}`]), status: 400, paths: ['/anthropic/…'], tail: `/v1/${secret}` },
    { what: 'unknown provider', bytes: head('GET', `/nope/${secret}`, [authA]), status: 404, paths: ['/…'], tail: secret },
    { what: 'provider in the wrong case', bytes: head('GET', `/Anthropic/${secret}`, [authA]), status: 404, paths: ['/…'], tail: secret },
  ])
  // After the token check: 401 and 200 name the full path, never the query.
  const before = bed.audit.length
  const r401 = await exchange(bed.target, head('GET', `/anthropic/v1/${secret}?q=${secret}`, [`x-api-key: ${forgedToken()}`]))
  const r200 = await exchange(bed.target, head('GET', `/anthropic/v1/${secret}?q=${secret}`, [authA]))
  assert.equal(r401.status, 401)
  assert.equal(r200.status, 200)
  assert.ok(await until(() => bed.audit.length >= before + 2, 2000), 'two audit events')
  assert.deepEqual(bed.audit.slice(before).map((e) => [e.status, e.path]), [[401, `/anthropic/v1/${secret}`], [200, `/anthropic/v1/${secret}`]])
  report(bed, wrong, [...texts, r401.text, r200.text])
})

test('rule 6, response headers: the real key in a header name or value, in any case, inside a longer value or one Set-Cookie of several, drops that header only', async (t) => {
  const up = await fakeUpstream(t, (req, res) => {
    const k = req.url.startsWith('/v1/messages') ? KEYS.anthropic : KEYS.openai
    res.setHeader(`x-a-${k}`, '1') // the key as part of a name
    res.setHeader(`x-b-${k.toLowerCase()}`, '1') // lower-cased
    res.setHeader(`x-c-${k.toUpperCase()}`, '1') // upper-cased
    res.setHeader('x-echo', k)
    res.setHeader('x-echo-lower', k.toLowerCase())
    res.setHeader('x-echo-upper', k.toUpperCase())
    res.setHeader('x-echo-inside', `key=${k}; rotated=no`)
    res.setHeader('www-authenticate', `Bearer realm="${k}"`)
    res.setHeader('set-cookie', ['a=1; Path=/', `sid=${k}; Path=/; HttpOnly`, `SID2=${k.toUpperCase()}`, 'b=2; Path=/'])
    res.setHeader('x-fine', 'ok')
    res.setHeader('retry-after', '7')
    res.writeHead(429, { 'content-type': 'application/json' })
    res.end('{"error":"slow down"}')
  })
  const { broker } = await startBroker(t, { env: brokerEnv(up), tcp: true })
  const gs = broker.grant({ workspace: 'w1', providers: ['anthropic', 'openai'] })
  const gt = broker.grant({ workspace: 'w2', providers: ['openai'], transport: 'tcp' })
  const calls = [
    ['openai over the socket', targetOf(gs), CHAT, { authorization: `Bearer ${gs.env.OPENAI_API_KEY}` }, KEYS.openai],
    ['anthropic over the socket', targetOf(gs), MESSAGES, { 'x-api-key': gs.env.ANTHROPIC_API_KEY }, KEYS.anthropic],
    ['openai over TCP', targetOf(gt), CHAT, { authorization: `Bearer ${gt.env.OPENAI_API_KEY}` }, KEYS.openai],
  ]
  const wrong = []
  for (const [what, target, p, headers, key] of calls) {
    const r = await send({ ...target, path: p, headers })
    const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase())
    if (r.status !== 429) wrong.push(`${what}: status ${r.status}`)
    if (r.body !== '{"error":"slow down"}') wrong.push(`${what}: body ${r.body}`)
    const dropped = ['x-echo', 'x-echo-lower', 'x-echo-upper', 'x-echo-inside', 'www-authenticate'].filter((n) => names.includes(n))
    if (dropped.length) wrong.push(`${what}: kept ${dropped.join(', ')}`)
    const named = names.filter((n) => /^x-[abc]-/.test(n))
    if (named.length) wrong.push(`${what}: kept ${named.length} header(s) named after the key`)
    for (const [n, v] of [['x-fine', 'ok'], ['retry-after', '7'], ['content-type', 'application/json']]) {
      if (r.headers[n] !== v) wrong.push(`${what}: ${n} is ${r.headers[n]}`)
    }
    if (JSON.stringify(r.headers['set-cookie']) !== JSON.stringify(['a=1; Path=/', 'b=2; Path=/'])) {
      wrong.push(`${what}: set-cookie ${JSON.stringify(r.headers['set-cookie']).replaceAll(key, '<key>').replaceAll(key.toLowerCase(), '<key>').replaceAll(key.toUpperCase(), '<KEY>')}`)
    }
    const raw = JSON.stringify(r.rawHeaders).toLowerCase()
    if (raw.includes(key.toLowerCase())) wrong.push(`${what}: the key is in the response headers`)
  }
  assert.deepEqual(wrong, [], wrong.join('\n'))
  assert.equal(up.requests.length, calls.length)
})

test('rule 7, resources: idle connections on one grant (100, then past 512) starve neither another grant nor, once gone, the grant itself', async (t) => {
  const up = await fakeUpstream(t)
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up) })
  const gA = broker.grant({ workspace: 'wa', providers: ['anthropic'] })
  const gB = broker.grant({ workspace: 'wb', providers: ['anthropic'] })
  const tokA = gA.env.ANTHROPIC_API_KEY
  const idle = []
  t.after(() => { for (const s of idle) s.destroy() })
  // Connects `n` sockets to A that send nothing or half a head; resolves with the outcomes.
  const open = (n) => Promise.all(Array.from({ length: n }, (_, i) => new Promise((resolve) => {
    const s = net.connect(gA.route.hostSocket)
    idle.push(s)
    s.on('error', (e) => resolve(e.code))
    s.once('connect', () => {
      if (i % 2) s.write(`POST ${MESSAGES} HTTP/1.1\r\nHost: broker\r\nx-api-key: ${tokA}\r\nContent-Le`)
      resolve('connected')
    })
  })))
  // A bound on the wait, so a starved grant fails instead of hanging (not a timing check).
  const within = (p, ms, what) => Promise.race([p, sleep(ms).then(() => ({ status: `no answer within ${ms} ms (${what})` }))])
  const onB = () => within(send({ ...targetOf(gB), path: MESSAGES, headers: { 'x-api-key': gB.env.ANTHROPIC_API_KEY } }).catch((e) => ({ status: e.code })), 5000, 'B')

  const first = await open(100)
  t.diagnostic(`100 idle connections on A: ${first.filter((o) => o === 'connected').length} connected`)
  assert.equal((await onB()).status, 200, "grant B with 100 idle connections on A's socket")
  // Past the broker-wide bound of 512 of the old build: a per-grant bound keeps B served.
  const more = await open(420)
  t.diagnostic(`420 more on A: ${more.filter((o) => o === 'connected').length} connected`)
  assert.equal((await onB()).status, 200, "grant B with 520 idle connections on A's socket")

  for (const s of idle) s.destroy()
  // A is served again once its idle connections are gone (the broker may take a moment to see).
  let last
  for (let i = 0; i < 20 && last?.status !== 200; i++) {
    if (i) await sleep(250)
    last = await within(send({ ...targetOf(gA), path: MESSAGES, headers: { 'x-api-key': tokA } }).catch((e) => ({ status: e.code })), 2000, 'A')
  }
  assert.equal(last.status, 200, 'grant A after its idle connections closed')
  assert.deepEqual(up.requests.map((q) => q.url), ['/v1/messages', '/v1/messages', '/v1/messages'], 'only the three real requests were forwarded')
  assertNoSecrets(assert, audit, [tokA, gB.env.ANTHROPIC_API_KEY, KEYS.anthropic], 'the audit events')
})

test('rule 7, resources: a head trickled in a byte a second is cut by the broker within 15 s, never forwarded', async (t) => {
  const up = await fakeUpstream(t)
  const { broker, audit } = await startBroker(t, { env: brokerEnv(up) })
  const g = broker.grant({ workspace: 'w1', providers: ['anthropic'] })
  const tok = g.env.ANTHROPIC_API_KEY
  const bytes = head('POST', MESSAGES, [`x-api-key: ${tok}`, 'Content-Length: 2']) + '{}'
  const s = net.connect(g.route.hostSocket)
  let text = ''
  let sent = 0
  const outcome = await new Promise((resolve) => {
    let tick
    const limit = setTimeout(() => finish('still open after 15 s'), 15000)
    const finish = (how) => {
      clearInterval(tick)
      clearTimeout(limit)
      s.destroy()
      resolve(how)
    }
    s.setEncoding('latin1')
    s.on('data', (d) => { text += d })
    s.on('end', () => finish('closed by the broker'))
    s.on('error', (e) => finish(`closed by the broker (${e.code})`))
    s.on('close', () => finish('closed by the broker'))
    s.once('connect', () => {
      s.write(bytes[sent++])
      tick = setInterval(() => { if (sent < bytes.length) s.write(bytes[sent++]) }, 1000)
    })
  })
  t.diagnostic(`${outcome} after ${sent} bytes; answer: ${text.split('\r\n')[0] || 'none'}`)
  assert.match(outcome, /^closed by the broker/)
  assert.equal(up.connections, 0, 'the trickled request reached the upstream')
  assertNoSecrets(assert, [text, audit], [tok, KEYS.anthropic], 'the answer and audit')
})

test('rule 8, trailers: a token in a chunked upload\'s trailer never reaches the upstream', async (t) => {
  // The upstream records the trailers node parsed, too.
  const bed = await attackBed(t, {
    handler: (req, res, rec) => {
      rec.trailers = [...req.rawTrailers]
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"ok":true}')
    },
  })
  const { tokA, tokOther, authA, labelled } = bed
  const chunked = (trailers, declared = 'Trailer: x-t') =>
    `POST ${MESSAGES} HTTP/1.1\r\nHost: broker\r\n${authA}\r\n${declared ? `${declared}\r\n` : ''}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n${trailers.map((l) => `${l}\r\n`).join('')}\r\n`
  const cases = [
    ['the token in a declared trailer', chunked([`x-t: ${tokA}`])],
    ['the token in an undeclared trailer', chunked([`x-t: ${tokA}`], null)],
    ['an auth header as a trailer', chunked([`x-api-key: ${tokA}`], 'Trailer: x-api-key')],
    ["w2's token in a trailer", chunked([`x-t: ${tokOther}`])],
    ['the token upper-cased in a trailer', chunked([`x-t: ${tokA.toUpperCase()}`])],
    ['the token as a trailer name', chunked([`x-${tokA}: 1`], `Trailer: x-${tokA}`)],
    ['the trailer written in pieces', chop(chunked([`x-t: ${tokA}`]), 11)],
  ]
  const wrong = []
  const texts = []
  for (const [what, bytes] of cases) {
    const r = await exchange(bed.target, bytes)
    t.diagnostic(`${what}: ${r.status ?? 'closed'}`)
    texts.push(r.text)
    // The request itself may pass or be refused.
    if (r.status !== 200 && r.status !== 400) wrong.push(`${what}: status ${r.status}`)
    const leaked = leaksIn(r.text, labelled)
    if (leaked.length) wrong.push(`${what}: the answer holds ${leaked.join(', ')}`)
  }
  await sleep(50)
  const seen = leaksIn(JSON.stringify(bed.up.requests), labelled.filter(([label]) => label.includes('token')))
  if (seen.length) wrong.push(`the upstream saw ${seen.join(', ')}`)
  if (bed.up.refused) wrong.push(`the upstream could not parse ${bed.up.refused} forwarded request(s)`)
  report(bed, wrong, texts)
})

test('over the TCP route: a sample of every rule is refused the same way', async (t) => {
  const bed = await attackBed(t, { tcp: true })
  const pick = (list, whats) => whats.map((w) => {
    const c = list.find((x) => x.what.startsWith(w))
    assert.ok(c, `no case ${w}`)
    return c
  })
  const { wrong, texts } = await runRefusals(bed, [
    ...pick(methodCases(bed), ['TRACE', 'lower-case get', 'the anthropic token as the method']),
    ...pick(targetCases(bed), ['// after the provider', '%255C', '%252e%252e', '..;x=1', '%0d%0a', 'absolute-form naming', 'asterisk']),
    ...pick(framingCases(bed), ['CL + TE, bare-LF', 'a bare-LF GET', 'TE: chunked, identity', 'Content-Length: 2, 2', 'CL.TE smuggling, bare LF', 'a 70 KiB header in one']),
    ...pick(placementCases(bed), ['the token as part of a header name', 'the token upper-cased in x-other', 'the token double-encoded in the query', 'X-API-KEY and x-api-key']),
  ])
  wrong.push(...await runForwarded(bed, [
    { what: 'a plain request', bytes: post(CHAT, [bed.authO]), url: '/v1/chat/completions', method: 'POST', auditPath: CHAT },
  ]))
  report(bed, wrong, texts)
})

test('with PO_SANDBOX_LOG=trace the refused attacks leave no token or key in the logs', async (t) => {
  const dir = tempDir(t, 'pba-')
  const secretsFile = path.join(dir, 'secrets.json')
  const script = path.join(dir, 'child.cjs')
  writeFileSync(script, `
const http = require('node:http')
const net = require('node:net')
const { writeFileSync } = require('node:fs')
const { startCredentialBroker } = require(${JSON.stringify(path.join(root, 'index.js'))})
const [keyA, keyO, socketDir, secretsFile] = process.argv.slice(2)
const enc = (s) => [...Buffer.from(s)].map((b) => '%' + b.toString(16).padStart(2, '0')).join('')
function raw(socketPath, pieces) {
  return new Promise((resolve) => {
    const s = net.connect(socketPath)
    let text = ''
    const done = () => { clearTimeout(timer); s.destroy(); resolve((/^HTTP\\/1\\.1 (\\d+)/.exec(text) || [])[1] || 'closed') }
    const timer = setTimeout(done, 3000)
    s.setEncoding('latin1')
    s.on('data', (d) => { text += d })
    s.on('error', done)
    s.on('close', done)
    s.once('connect', async () => {
      for (const p of pieces) { s.write(Buffer.from(p, 'latin1')); await new Promise((r) => setTimeout(r, 2)) }
    })
  })
}
;(async () => {
  const up = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const k = req.headers['x-api-key'] || ''
      res.setHeader('x-' + k.toLowerCase(), '1')
      res.setHeader('x-echo', k.toUpperCase())
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"ok":true}')
    })
  })
  up.on('clientError', (e, s) => s.destroy())
  await new Promise((r) => up.listen(0, '127.0.0.1', r))
  const base = 'http://127.0.0.1:' + up.address().port
  const broker = await startCredentialBroker({ env: { ANTHROPIC_API_KEY: keyA, ANTHROPIC_BASE_URL: base, OPENAI_API_KEY: keyO, OPENAI_BASE_URL: base }, socketDir })
  const g = broker.grant({ workspace: 'wlog', providers: ['anthropic', 'openai'] })
  const other = broker.grant({ workspace: 'wother', providers: ['anthropic'] })
  const tok = g.env.ANTHROPIC_API_KEY
  const tokO = g.env.OPENAI_API_KEY
  const tokOther = other.env.ANTHROPIC_API_KEY
  writeFileSync(secretsFile, JSON.stringify([tok, tokO, tokOther]))
  const sock = g.route.hostSocket
  const auth = 'x-api-key: ' + tok
  const h = (m, target, lines, eol = '\\r\\n') => [m + ' ' + target + ' HTTP/1.1', 'Host: b', ...lines, 'Connection: close'].join(eol) + eol + eol
  const sets = [
    [h(tok, '/anthropic/v1/messages', [auth])],
    [h('TRACE', '/anthropic/v1/messages', [auth, 'x-other: ' + tokOther])],
    [h('GET', '/anthropic/v1/messages', [auth, 'x-' + tok + ': 1'])],
    [h('GET', '/anthropic/v1/messages', [auth, 'x-other: ' + tok.toUpperCase()])],
    [h('GET', '/anthropic/v1/messages?k=' + enc(tok).replaceAll('%', '%25'), [auth])],
    [h('GET', '/anthropic/v1/messages/' + enc(tok), [auth])],
    [h('GET', '/anthropic/' + tok + '/%252e%252e/admin', [auth])],
    [h('GET', '/anthropic/v1/messages%0d%0ax-key:%20' + enc(tok), [auth])],
    [h('POST', '/anthropic/v1/messages', [auth, 'Content-Length: 5', 'Transfer-Encoding: chunked'], '\\n') + '0\\r\\n\\r\\n'],
    [h('POST', '/anthropic/v1/messages', [auth, 'Content-Length: 5', 'Transfer-Encoding: chunked']) + '0\\r\\n\\r\\nGET /anthropic/v1/smuggled HTTP/1.1\\r\\n' + auth + '\\r\\n\\r\\n'],
    [h('GET', '/anthropic/v1/messages', [auth, 'Authorization: Bearer ' + tok])],
    [h('GET', '/anthropic/v1/messages', [auth, 'X-Pad: ' + tok.repeat(1200)])],
    [h('GET', '/anthropic/v1/messages', [auth, 'X-Folded: a', ' ' + tok])],
    [h('POST', '/anthropic/v1/messages', [auth, 'Trailer: x-t', 'Transfer-Encoding: chunked']) + '2\\r\\n{}\\r\\n0\\r\\nx-t: ' + tok + '\\r\\n\\r\\n'],
    [h('GET', '/openai/v1/models', ['Authorization: Bearer ' + tokO, 'x-api-key: ' + tokO])],
    [h('GET', '/anthropic/v1/messages', [auth])],
  ]
  const statuses = []
  for (const pieces of sets) statuses.push(await raw(sock, pieces))
  await new Promise((r) => setTimeout(r, 100))
  await broker.close()
  up.close()
  console.log('statuses ' + statuses.join(','))
})().catch((e) => { console.error('child failed: ' + e.message); process.exit(1) })
`)
  const { PO_SANDBOX_LOG: _, ...parentEnv } = process.env
  const child = await run(process.execPath, [script, KEYS.anthropic, KEYS.openai, dir, secretsFile], {
    env: { ...parentEnv, PO_SANDBOX_LOG: 'trace' },
    timeout: 30000,
  })
  const output = child.stdout + child.stderr
  const tokens = JSON.parse(readFileSync(secretsFile, 'utf8'))
  const secrets = [KEYS.anthropic, KEYS.openai, ...tokens]
  const names = ['the anthropic key', 'the openai key', 'the anthropic token', 'the openai token', "the other grant's token"]
  const labelled = secrets.map((s, i) => [names[i], s])
  assert.equal(child.code, 0, redact(output.slice(-3000), labelled, 3000))
  t.diagnostic(child.stdout.trim())
  assert.match(output, /broker request/, 'logging was on')
  // Any letter case, whole, a distinctive tail, or percent-encoded; the log without its colours.
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '')
  const lower = plain.toLowerCase()
  const found = secrets.flatMap((s, i) => [[s, 'whole'], [s.slice(-32), 'its tail'], [encodeAll(s), 'percent-encoded']]
    .filter(([f]) => lower.includes(f.toLowerCase()))
    .map(([f, form]) => {
      const at = lower.indexOf(f.toLowerCase())
      const around = plain.slice(Math.max(0, at - 150), at + f.length + 50).replace(new RegExp(encodeAll(s), 'gi'), '<encoded>')
      return `${names[i]} (${form}) in: …${redact(around, labelled, 300)}`
    }))
  assert.deepEqual(found, [], 'the trace log holds a token or key')
  assertNoSecrets(assert, output, secrets, 'the trace log')
})
