// The real pi coding agent loads the package's extension from its own manifest and answers
// /po-sandbox in RPC mode.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, existsSync } from 'node:fs'
import path from 'node:path'

import { piBin, root, slashCommandInPi } from './helpers.mjs'

/** Runs `/po-sandbox` in pi's RPC mode with the package directory as the extension. */
const poSandboxInPi = (t, extraEnv) => slashCommandInPi(t, { extension: root, env: extraEnv })

test('the package manifest declares the pi extension', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  assert.ok(pkg.keywords.includes('pi-package'))
  assert.deepEqual(pkg.pi.extensions, ['./extensions/server.js'])
  assert.ok(existsSync(path.join(root, pkg.pi.extensions[0])))
  assert.ok(existsSync(piBin), `pi is not installed at ${piBin}: run npm install`)
})

test('/po-sandbox in the real pi on the host says the session runs on the host', async (t) => {
  const msg = await poSandboxInPi(t, {})
  assert.equal(msg.notifyType, 'info')
  assert.match(msg.message, /runs directly on the host, not in a sandbox container/)
})

test('/po-sandbox in the real pi with PO_SANDBOX=1 says it runs inside a sandbox container', async (t) => {
  const msg = await poSandboxInPi(t, { PO_SANDBOX: '1', PO_WORKSPACE: 'acme' })
  assert.equal(msg.notifyType, 'info')
  assert.match(msg.message, /runs inside a sandbox container, for workspace "acme"/)
})

test('/po-sandbox reports contradictory broker variables as a warning', async (t) => {
  const msg = await poSandboxInPi(t, { PO_SANDBOX: '1', PO_WORKSPACE: 'acme', PO_BROKER_PROVIDERS: 'openai', PO_BROKER_SOCKET: '/a.sock', PO_BROKER_ADDRESS: '127.0.0.1:1' })
  assert.equal(msg.notifyType, 'warning')
  assert.match(msg.message, /Both PO_BROKER_SOCKET and PO_BROKER_ADDRESS are set/)
})
