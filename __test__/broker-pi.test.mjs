// End to end with the REAL pi coding agent: pi in print mode with a grant's environment and
// this package's extension → loopback bridge → credential broker → fake upstream. The fake
// upstream must see the real key in the header pi uses for that provider, never the token, on
// the path of the model's own base URL.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { addon, onJsonLines, root, tempDir } from './helpers.mjs'
import { modelRequest, startUpstream } from './upstreams.mjs'

const { startCredentialBroker } = addon
const piBin = path.join(root, 'node_modules', '@earendil-works', 'pi-coding-agent', 'dist', 'bundle', 'cli.js')
const hex = () => randomBytes(16).toString('hex')

/** Runs `pi -p` once with exactly `env` (plus an isolated home) and this package as extension. */
function runPi(t, { env, provider, model, prompt = 'ping', setup }) {
  const home = tempDir(t, 'po-broker-pi-')
  const agentDir = path.join(home, 'agent')
  mkdirSync(agentDir, { recursive: true })
  setup?.(agentDir)
  const childEnv = {
    PATH: process.env.PATH,
    HOME: home,
    PI_CODING_AGENT_DIR: agentDir,
    PI_OFFLINE: '1',
    PI_SKIP_VERSION_CHECK: '1',
    PI_TELEMETRY: '0',
    ...env,
  }
  const args = [piBin, '-p', '--no-session', '--extension', root, '--provider', provider, '--model', model, prompt]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: home, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`pi did not finish within 90 s.\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, 90000)
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    child.once('error', (e) => { clearTimeout(timer); reject(e) })
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }) })
  })
}

/** pi in RPC mode: `send(command)` resolves with its response; `until(pred)` with the next event. */
function rpcPi(t, { env, provider, model }) {
  const home = tempDir(t, 'po-broker-rpc-')
  const childEnv = { PATH: process.env.PATH, HOME: home, PI_CODING_AGENT_DIR: path.join(home, 'agent'), PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0', ...env }
  const args = [piBin, '--mode', 'rpc', '--no-session', '--extension', root, '--provider', provider, '--model', model]
  const child = spawn(process.execPath, args, { cwd: home, env: childEnv, stdio: ['pipe', 'pipe', 'pipe'] })
  const exited = new Promise((resolve) => child.once('close', resolve))
  t.after(() => { child.kill('SIGKILL'); return exited })
  let stderr = ''
  const waiters = []
  child.stderr.on('data', (d) => { stderr += d })
  onJsonLines(child.stdout, (msg) => {
    for (const w of [...waiters]) {
      if (w.pred(msg)) { waiters.splice(waiters.indexOf(w), 1); clearTimeout(w.timer); w.resolve(msg) }
    }
  })
  const until = (pred, what) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pi sent no ${what} within 60 s. stderr: ${stderr}`)), 60000)
    waiters.push({ pred, resolve, timer })
  })
  let n = 0
  const send = async (command) => {
    const id = `c${++n}`
    const response = until((m) => m.type === 'response' && m.id === id, `response to ${command.type}`)
    child.stdin.write(`${JSON.stringify({ id, ...command })}\n`)
    const r = await response
    assert.equal(r.success, true, `${command.type} failed: ${JSON.stringify(r)}`)
    return r.data
  }
  const prompt = async (message) => {
    const settled = until((m) => m.type === 'agent_settled', 'agent_settled')
    await send({ type: 'prompt', message })
    await settled
    return (await send({ type: 'get_last_assistant_text' }))?.text
  }
  const quit = () => { child.stdin.end(); return exited }
  return { send, prompt, quit, stderr: () => stderr }
}

/** Whether something listens on 127.0.0.1:`port`. */
function listening(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => { s.destroy(); resolve(true) })
    s.once('error', () => resolve(false))
  })
}

/**
 * Fake upstreams for anthropic, openrouter and groq, a broker whose upstreams they are, and a
 * grant for the three providers over `transport`.
 */
async function brokered(t, transport = 'socket', network = undefined) {
  const up = {
    anthropic: await startUpstream({ name: 'anthropic', t }),
    openrouter: await startUpstream({ name: 'openrouter', t }),
    groq: await startUpstream({ name: 'groq', t }),
  }
  const keys = {
    anthropic: `sk-ant-api03-REAL-${hex()}`,
    openrouter: `sk-or-v1-REAL-${hex()}`,
    groq: `gsk_REAL_${hex()}`,
  }
  const socketDir = tempDir(t, 'pob-')
  const broker = await startCredentialBroker({
    env: {
      ANTHROPIC_API_KEY: keys.anthropic,
      ANTHROPIC_BASE_URL: up.anthropic.origin,
      OPENROUTER_API_KEY: keys.openrouter,
      OPENROUTER_BASE_URL: up.openrouter.origin,
      GROQ_API_KEY: keys.groq,
      GROQ_BASE_URL: up.groq.origin,
      ...(network ? { PO_SANDBOX_NETWORK: network } : {}),
    },
    socketDir,
    tcp: transport === 'tcp',
  })
  t.after(() => broker.close())
  const grant = broker.grant({
    workspace: 'w1',
    providers: ['anthropic', 'openrouter', 'groq'],
    ...(transport === 'tcp' ? { transport: 'tcp', containerHost: '127.0.0.1' } : {}),
  })
  t.after(() => broker.revoke(grant.id))
  assert.equal(grant.route?.kind, transport)
  const tokens = {
    anthropic: grant.env.ANTHROPIC_API_KEY,
    openrouter: grant.env.OPENROUTER_API_KEY,
    groq: grant.env.GROQ_API_KEY,
  }
  for (const [p, token] of Object.entries(tokens)) {
    assert.ok(token, `the grant has no token for ${p}: ${JSON.stringify(Object.keys(grant.env))}`)
    assert.notEqual(token, keys[p])
  }
  for (const value of Object.values(grant.env)) {
    for (const key of Object.values(keys)) assert.ok(!value.includes(key), 'a real key is in the grant environment')
  }
  return { up, keys, tokens, grant, broker }
}

const cases = [
  {
    title: 'anthropic (x-api-key) over the bridge',
    provider: 'anthropic',
    model: 'claude-haiku-4-5',
    header: 'x-api-key',
    api: 'anthropic-messages',
    path: '/v1/messages',
  },
  {
    title: 'groq (Authorization: Bearer, OpenAI chat completions at /openai/v1)',
    provider: 'groq',
    model: 'llama-3.1-8b-instant',
    header: 'authorization',
    api: 'openai-completions',
    path: '/openai/v1/chat/completions',
  },
  {
    title: 'openrouter model on https://openrouter.ai/api/v1 (OpenAI chat completions, Bearer)',
    provider: 'openrouter',
    model: 'openai/gpt-4o-mini',
    header: 'authorization',
    api: 'openai-completions',
    path: '/api/v1/chat/completions',
  },
  {
    title: 'openrouter model on https://openrouter.ai/api (Anthropic messages, x-api-key)',
    provider: 'openrouter',
    model: 'anthropic/claude-haiku-4.5',
    header: 'x-api-key',
    api: 'anthropic-messages',
    path: '/api/v1/messages',
  },
]

// In the `none` mode the broker forwards only the body shapes of plain model calls: what the
// real pi sends (its system prompt, its tools' schemas, streaming) is such a call in each API.
for (const c of cases) {
  test(`pi → bridge → broker (network none: bodies held to the allowlist of shapes): ${c.title}`, { timeout: 180000 }, async (t) => {
    const { up, keys, tokens, grant } = await brokered(t, 'socket', 'none')
    const r = await runPi(t, { env: grant.env, provider: c.provider, model: c.model })
    assert.equal(r.code, 0, `pi failed (${r.code}).\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
    assert.equal(r.stdout.trim(), up[c.provider].reply, `stderr: ${r.stderr}`)
    const req = modelRequest(up[c.provider], { key: keys[c.provider], token: tokens[c.provider], header: c.header, api: c.api, path: c.path })
    assert.equal(req.body.model, c.model)
    assert.equal(req.body.stream, true)
    for (const [other, u] of Object.entries(up)) {
      if (other !== c.provider) assert.equal(u.requests.length, 0, `${other}'s upstream was called`)
    }
  })
}

test('pi → broker over a TCP route (no bridge): anthropic', { timeout: 180000 }, async (t) => {
  const { up, keys, tokens, grant } = await brokered(t, 'tcp')
  assert.ok(grant.env.PO_BROKER_ADDRESS && !grant.env.PO_BROKER_SOCKET, JSON.stringify(grant.env))
  const r = await runPi(t, { env: grant.env, provider: 'anthropic', model: 'claude-haiku-4-5' })
  assert.equal(r.code, 0, `pi failed (${r.code}).\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
  assert.equal(r.stdout.trim(), up.anthropic.reply, `stderr: ${r.stderr}`)
  modelRequest(up.anthropic, { key: keys.anthropic, token: tokens.anthropic, header: 'x-api-key', api: 'anthropic-messages', path: '/v1/messages' })
})

test('without broker variables the extension re-points nothing', { timeout: 180000 }, async (t) => {
  const up = await startUpstream({ name: 'direct', t })
  const key = `sk-ant-api03-DIRECT-${hex()}`
  const r = await runPi(t, {
    env: { ANTHROPIC_API_KEY: key },
    provider: 'anthropic',
    model: 'claude-haiku-4-5',
    // pi's own way to point a built-in provider elsewhere: its models.json. Were the extension to
    // re-point anthropic, the request would leave this path (or never arrive).
    setup: (agentDir) => writeFileSync(path.join(agentDir, 'models.json'), JSON.stringify({ providers: { anthropic: { baseUrl: `${up.origin}/direct` } } })),
  })
  assert.equal(r.code, 0, `pi failed (${r.code}).\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
  assert.equal(r.stdout.trim(), up.reply, `stderr: ${r.stderr}`)
  assert.equal(r.stderr.includes('po-sandbox'), false, `the extension reported something: ${r.stderr}`)
  const calls = up.requests.filter((q) => q.api)
  assert.equal(calls.length, 1)
  assert.equal(calls[0].path, '/direct/v1/messages')
  assert.equal(calls[0].headers['x-api-key'], key)
})

test('inconsistent sandbox variables fail closed: the token never reaches the provider\'s upstream', { timeout: 180000 }, async (t) => {
  const { grant } = await brokered(t)
  const up = await startUpstream({ name: 'direct', t })
  // A container's variables without PO_WORKSPACE; anthropic's own upstream is the test's
  // listener (pi's models.json), where a provider left un-re-pointed would send the token.
  const env = { ...grant.env, PO_SANDBOX: '1' }
  delete env.PO_WORKSPACE
  const r = await runPi(t, {
    env,
    provider: 'anthropic',
    model: 'claude-haiku-4-5',
    setup: (agentDir) => writeFileSync(path.join(agentDir, 'models.json'), JSON.stringify({ providers: { anthropic: { baseUrl: `${up.origin}/direct` } } })),
  })
  assert.deepEqual(up.requests.filter((q) => q.api), [], `the upstream was called.\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
  assert.notEqual(r.code, 0, `pi answered.\nstdout: ${r.stdout}`)
  assert.match(r.stdout + r.stderr, /brokered providers \([a-z, ]*anthropic[a-z, ]*\) are blocked .*PO_WORKSPACE is not set/s)
})

test('a new session gets a new bridge, the old one closes, models are re-pointed once', { timeout: 180000 }, async (t) => {
  const { up, keys, tokens, grant } = await brokered(t)
  const pi = rpcPi(t, { env: grant.env, provider: 'openrouter', model: 'anthropic/claude-haiku-4.5' })
  const portOf = async () => {
    const { model } = await pi.send({ type: 'get_state' })
    const m = /^http:\/\/127\.0\.0\.1:(\d+)\/openrouter\/api$/.exec(model?.baseUrl ?? '')
    assert.ok(m, `the session model is not re-pointed at the bridge: ${model?.baseUrl}`)
    return Number(m[1])
  }
  const first = await portOf()
  assert.equal(await listening(first), true)
  assert.equal(await pi.prompt('ping'), up.openrouter.reply)

  const { cancelled } = await pi.send({ type: 'new_session' })
  assert.equal(cancelled, false)
  const second = await portOf()
  assert.notEqual(second, first)
  assert.equal(await listening(first), false, 'the first bridge still listens')
  assert.equal(await listening(second), true)
  assert.equal(await pi.prompt('ping again'), up.openrouter.reply)

  const calls = up.openrouter.requests.filter((r) => r.api)
  assert.equal(calls.length, 2)
  for (const r of calls) {
    assert.equal(r.path, '/api/v1/messages')
    assert.equal(r.headers['x-api-key'], keys.openrouter)
    assert.ok(!JSON.stringify(r.headers).includes(tokens.openrouter))
  }
  await pi.quit()
})
