// DefaultSandboxExtensionService: sandbox state from the environment it is given.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { addon } from './helpers.mjs'

const { DefaultSandboxExtensionService } = addon

test('on the host with nothing set', () => {
  const s = new DefaultSandboxExtensionService({})
  assert.equal(s.contained, false)
  assert.deepEqual(s.state(), { contained: false, brokeredProviders: [], brokered: false, guardedPaths: [], problems: [], clone: false, gitHosts: [], registries: [] })
  assert.match(s.report(), /runs directly on the host, not in a sandbox container/)
})

test('defaults to the process environment', () => {
  const s = new DefaultSandboxExtensionService()
  assert.equal(s.contained, process.env.PO_SANDBOX === '1')
})

test('inside a container with a workspace and a socket route', () => {
  const s = new DefaultSandboxExtensionService({
    PO_SANDBOX: '1',
    PO_WORKSPACE: 'acme',
    PO_BROKER_PROVIDERS: 'anthropic,openai',
    PO_BROKER_SOCKET: '/run/po-broker/broker.sock',
    UNRELATED: undefined,
  })
  const state = s.state()
  assert.equal(state.contained, true)
  assert.equal(state.workspace, 'acme')
  assert.deepEqual(state.brokeredProviders, ['anthropic', 'openai'])
  assert.deepEqual(state.route, { kind: 'socket', target: '/run/po-broker/broker.sock' })
  assert.equal(state.brokered, true)
  assert.deepEqual(state.problems, [])
  assert.match(s.report(), /inside a sandbox container, for workspace "acme"/)
  assert.match(s.report(), /Brokered providers: anthropic, openai/)
})

test('a TCP route', () => {
  const state = new DefaultSandboxExtensionService({ PO_BROKER_PROVIDERS: 'openai', PO_BROKER_ADDRESS: 'host.docker.internal:40001' }).state()
  assert.deepEqual(state.route, { kind: 'tcp', target: 'host.docker.internal:40001' })
})

test('malformed or contradictory variables are reported plainly, never thrown', () => {
  const cases = [
    [{ PO_BROKER_PROVIDERS: 'openai', PO_BROKER_SOCKET: '/a.sock', PO_BROKER_ADDRESS: '127.0.0.1:9' }, /Both PO_BROKER_SOCKET and PO_BROKER_ADDRESS are set/],
    [{ PO_BROKER_PROVIDERS: '', PO_BROKER_SOCKET: '/a.sock' }, /PO_BROKER_PROVIDERS is set but names no provider/],
    [{ PO_BROKER_PROVIDERS: 'openai', PO_BROKER_SOCKET: 'broker.sock' }, /is not an absolute path/],
    [{ PO_SANDBOX: 'true' }, /not understood/],
    [{ PO_SANDBOX: '1' }, /PO_WORKSPACE is not set/],
  ]
  for (const [env, re] of cases) {
    const s = new DefaultSandboxExtensionService(env)
    const state = s.state()
    assert.equal(state.brokered, false, JSON.stringify(env))
    assert.ok(state.problems.some((p) => re.test(p)), `${JSON.stringify(env)}: ${state.problems}`)
    assert.match(s.report(), /Problems:/)
    assert.match(s.report(), re)
  }
})

test('a non-object environment is a synchronous OPTIONS_INVALID', () => {
  assert.throws(() => new DefaultSandboxExtensionService('PO_SANDBOX=1'), (err) => err.code === 'OPTIONS_INVALID' && /env/.test(err.message))
})
