// The real pi inside a real container (the local test base image: Node 24, no network at all)
// reaches the host's credential broker only through the bind-mounted socket: pi → extension →
// loopback bridge → /run/po-broker/broker.sock → broker → fake upstream on the host. No real key
// is inside; the upstream sees the real key and never the token.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { addon, requireDocker, root, run, waitFor } from './helpers.mjs'
import { startUpstream } from './upstreams.mjs'

const TEST_BASE = 'po-sandbox-test-base:node24-nft'
const PI_IN_CONTAINER = '/pkg/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js'

/** `docker run` options for a hardened, network-less container of the test base image with
 * the grant's env, the grant's socket folder at /run/po-broker and this package at /pkg. */
function containerArgs(name, grant, workspace, user) {
  const env = {
    ...grant.env,
    HOME: '/tmp',
    PI_CODING_AGENT_DIR: '/tmp/agent',
    PI_OFFLINE: '1',
    PI_SKIP_VERSION_CHECK: '1',
    PI_TELEMETRY: '0',
    PO_SANDBOX: '1',
    PO_WORKSPACE: workspace,
  }
  return [
    '--name', name, '--network', 'none', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
    '--user', user, '-w', '/tmp',
    '-v', `${grant.route.hostDir}:/run/po-broker`,
    '-v', `${root}:/pkg:ro`,
    ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
  ]
}

before(async () => {
  await requireDocker()
  const r = await run('bash', [path.join(root, 'scripts/build-test-base-image.sh')])
  assert.equal(r.code, 0, `build-test-base-image.sh failed:\n${r.stderr}`)
})

test('pi inside a container with no network answers through the bind-mounted broker socket; no real key inside', async (t) => {
  const REAL = `sk-ant-api03-REAL-${'c'.repeat(32)}`
  const upstream = await startUpstream({ name: 'anthropic', t })
  // A short folder: Unix socket paths are limited to about 100 bytes.
  const socketDir = mkdtempSync(path.join(os.tmpdir(), 'pbc-'))
  t.after(() => rmSync(socketDir, { recursive: true, force: true }))
  const broker = await addon.startCredentialBroker({
    env: { ANTHROPIC_API_KEY: REAL, ANTHROPIC_BASE_URL: upstream.origin },
    socketDir,
  })
  t.after(() => broker.close())
  const audit = []
  broker.onEvent((e) => audit.push(e))
  const user = `${process.getuid()}:${process.getgid()}`
  const grant = broker.grant({ workspace: 'inbox', providers: ['anthropic'], containerSocketPath: '/run/po-broker/broker.sock', user })
  const token = grant.env.ANTHROPIC_API_KEY
  assert.notEqual(token, REAL)
  assert.equal(grant.env.PO_BROKER_SOCKET, '/run/po-broker/broker.sock')

  const name = `po-broker-pi-${process.pid}-${Date.now()}`
  t.after(() => run('docker', ['rm', '-f', name]))
  const r = await run('docker', [
    'run', ...containerArgs(name, grant, 'inbox', user),
    TEST_BASE,
    'node', PI_IN_CONTAINER, '-p', '--no-session', '--extension', '/pkg', '--provider', 'anthropic', '--model', 'claude-haiku-4-5', 'ping',
  ])
  assert.equal(r.code, 0, `pi in the container failed:\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
  assert.match(r.stdout, /pong from anthropic/)

  // The container's environment held the token, never the key.
  const inspected = JSON.parse((await run('docker', ['inspect', name])).stdout)[0]
  assert.ok(inspected.Config.Env.includes(`ANTHROPIC_API_KEY=${token}`))
  assert.ok(!inspected.Config.Env.some((kv) => kv.includes(REAL)))
  assert.equal(inspected.HostConfig.NetworkMode, 'none')

  // The upstream saw the real key in x-api-key, never the token.
  const seen = upstream.requests.filter((q) => q.api === 'anthropic-messages')
  assert.ok(seen.length >= 1, JSON.stringify(upstream.requests))
  for (const q of seen) {
    assert.equal(q.headers['x-api-key'], REAL)
    assert.ok(!JSON.stringify(q).includes(token), 'the upstream saw the token')
  }
  await waitFor(() => audit.some((e) => e.provider === 'anthropic' && e.status === 200 && e.workspace === 'inbox'), 'an anthropic audit event with status 200 for inbox')
})

test('inside the container, Bearer and both openrouter base paths go through the same socket: groq, openrouter /api/v1 and /api', async (t) => {
  const up = {
    groq: await startUpstream({ name: 'groq', t }),
    openrouter: await startUpstream({ name: 'openrouter', t }),
  }
  const keys = { groq: `gsk_REAL_${'g'.repeat(40)}`, openrouter: `sk-or-v1-REAL-${'o'.repeat(40)}` }
  const socketDir = mkdtempSync(path.join(os.tmpdir(), 'pbc-'))
  t.after(() => rmSync(socketDir, { recursive: true, force: true }))
  const broker = await addon.startCredentialBroker({
    env: { GROQ_API_KEY: keys.groq, GROQ_BASE_URL: up.groq.origin, OPENROUTER_API_KEY: keys.openrouter, OPENROUTER_BASE_URL: up.openrouter.origin },
    socketDir,
  })
  t.after(() => broker.close())
  const user = `${process.getuid()}:${process.getgid()}`
  const grant = broker.grant({ workspace: 'multi', providers: ['groq', 'openrouter'], containerSocketPath: '/run/po-broker/broker.sock', user })

  // One long-lived container (as a workspace's is); each pi run is a `docker exec` in it.
  const name = `po-broker-multi-${process.pid}-${Date.now()}`
  t.after(() => run('docker', ['rm', '-f', name]))
  const started = await run('docker', [
    'run', '-d', ...containerArgs(name, grant, 'multi', user),
    TEST_BASE, 'sleep', '600',
  ])
  assert.equal(started.code, 0, started.stderr)

  const cases = [
    { provider: 'groq', model: 'llama-3.1-8b-instant', header: 'authorization', path: '/openai/v1/chat/completions' },
    { provider: 'openrouter', model: 'openai/gpt-4o-mini', header: 'authorization', path: '/api/v1/chat/completions' },
    { provider: 'openrouter', model: 'anthropic/claude-haiku-4.5', header: 'x-api-key', path: '/api/v1/messages' },
  ]
  for (const c of cases) {
    const before = up[c.provider].requests.length
    const r = await run('docker', ['exec', name, 'node', PI_IN_CONTAINER, '-p', '--no-session', '--extension', '/pkg', '--provider', c.provider, '--model', c.model, 'ping'])
    assert.equal(r.code, 0, `${c.provider} ${c.model}: pi in the container failed:\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
    assert.match(r.stdout, new RegExp(`pong from ${c.provider}`))
    const seen = up[c.provider].requests.slice(before).filter((q) => q.api)
    assert.ok(seen.length >= 1, JSON.stringify(up[c.provider].requests))
    const token = grant.env[c.provider === 'groq' ? 'GROQ_API_KEY' : 'OPENROUTER_API_KEY']
    for (const q of seen) {
      assert.equal(q.path, c.path, `${c.model}`)
      const sent = q.headers[c.header]
      assert.equal(sent, c.header === 'authorization' ? `Bearer ${keys[c.provider]}` : keys[c.provider], `${c.model}: the ${c.header} header`)
      assert.ok(!JSON.stringify(q).includes(token), 'the upstream saw the token')
    }
  }
  const inspected = JSON.parse((await run('docker', ['inspect', name])).stdout)[0]
  assert.ok(!inspected.Config.Env.some((kv) => Object.values(keys).some((k) => kv.includes(k))), 'a real key is in the container')
})
