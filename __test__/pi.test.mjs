// The real pi coding agent loads the package's extension from its own manifest and answers
// /po-sandbox in RPC mode.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync, existsSync } from 'node:fs'
import path from 'node:path'

import { root, tempDir } from './helpers.mjs'

const piBin = path.join(root, 'node_modules', '@earendil-works', 'pi-coding-agent', 'dist', 'bundle', 'cli.js')

/** Runs `/po-sandbox` in pi's RPC mode with the package directory as the extension. */
function poSandboxInPi(t, extraEnv) {
  const home = tempDir(t, 'po-sandbox-pi-')
  const env = { ...process.env, PI_CODING_AGENT_DIR: path.join(home, 'agent'), PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0', HOME: home }
  for (const k of ['PO_SANDBOX', 'PO_WORKSPACE', 'PO_BROKER_PROVIDERS', 'PO_BROKER_SOCKET', 'PO_BROKER_ADDRESS']) delete env[k]
  Object.assign(env, extraEnv)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [piBin, '--mode', 'rpc', '--no-session', '--extension', root], { cwd: home, env, stdio: ['pipe', 'pipe', 'pipe'] })
    let all = ''
    let rest = ''
    let stderr = ''
    let outcome = null
    // Settles once pi has exited, so its home is not removed under it.
    const settle = (o, signal) => {
      if (outcome) return
      outcome = o
      clearTimeout(timer)
      child.kill(signal)
    }
    const timer = setTimeout(() => settle({ error: new Error(`pi gave no notify within 60 s. stdout: ${all}\nstderr: ${stderr}`) }, 'SIGKILL'), 60000)
    child.stderr.on('data', (d) => { stderr += d })
    child.stdout.on('data', (d) => {
      all += d
      rest += d
      let i
      while ((i = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, i).trim()
        rest = rest.slice(i + 1)
        if (!line.startsWith('{')) continue
        let msg
        try { msg = JSON.parse(line) } catch { continue }
        if (msg.type === 'extension_ui_request' && msg.method === 'notify') settle({ msg }, 'SIGTERM')
        else if (msg.type === 'response' && msg.success === false) settle({ error: new Error(`pi refused the prompt: ${line}`) }, 'SIGKILL')
      }
    })
    child.once('error', (e) => settle({ error: e }, 'SIGKILL'))
    child.once('close', (code, signal) => {
      const o = outcome ?? { error: new Error(`pi exited (${code ?? signal}) without a notify. stdout: ${all}\nstderr: ${stderr}`) }
      clearTimeout(timer)
      if (o.error) reject(o.error)
      else resolve(o.msg)
    })
    child.stdin.write(`${JSON.stringify({ type: 'prompt', message: '/po-sandbox' })}\n`)
  })
}

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
