// Shared pieces of the node:test suites: temp folders, fake sockets, child processes.
import { spawn, execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, existsSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const require = createRequire(import.meta.url)
export const addon = require('../index.js')

/** A fresh temp folder, removed when the test ends. */
export function tempDir(t, prefix = 'po-sandbox-test-') {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Gives the Po home (made if missing) an owner id of the test's own, in its `sandbox-owner`
 * file, and returns it: a cleanup that runs after the folder is gone names it (the Po home's
 * file is the only place its owner is kept). */
export function homeOwner(poHome) {
  const owner = `t${Math.random().toString(16).slice(2, 12).padEnd(10, '0')}`
  mkdirSync(poHome, { recursive: true })
  writeFileSync(path.join(poHome, 'sandbox-owner'), `${owner}\n`)
  return owner
}

/** An environment where only the given engine endpoint exists: no home sockets, no PATH hits. */
export function isolatedEnv(dir, extra = {}) {
  return { HOME: dir, XDG_RUNTIME_DIR: dir, PATH: dir, ...extra }
}

/** A Unix socket server; `onConnection` gets each socket. Closed when the test ends. */
export async function socketServer(t, socketPath, onConnection = () => {}) {
  const sockets = new Set()
  const server = net.createServer((s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    s.on('error', () => {})
    onConnection(s)
  })
  await new Promise((resolve, reject) => server.listen(socketPath, resolve).once('error', reject))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  return server
}

/** Leaves a socket file nobody listens on: a child binds it and is killed. */
export async function staleSocket(socketPath) {
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(socketPath)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve)
    child.once('exit', (code) => reject(new Error(`socket child exited early (${code})`)))
  })
  child.removeAllListeners('exit')
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
  if (!existsSync(socketPath)) throw new Error('the stale socket file vanished')
}

/** Which `docker` CLI to use for cross-checks. */
export function dockerCli(args) {
  return execFileSync('docker', args, { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] }).trim()
}

/** Fails with how to start an engine when none answers. */
export async function requireDocker() {
  const r = await addon.checkEngine({ engine: 'docker', timeoutMs: 30000 })
  if (!r.available) {
    throw new Error(`These tests need a running Docker engine; none answers (${r.reasonCode}: ${r.reason}). Run 'bash scripts/ensure-engine.sh' as root, or start Docker (sudo systemctl start docker).`)
  }
  return r
}

/** Runs a child to completion; resolves with its code and output. */
export function run(cmd, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...options })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr, pid: child.pid }))
    if (options.input !== undefined) child.stdin.end(options.input)
    else child.stdin.end()
  })
}

/** Polls `predicate` until it holds; fails after `ms` (a functional bound, not a timing check). */
export async function waitFor(predicate, what, ms = 10000) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await predicate()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${ms} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** The real pi coding agent's CLI (a devDependency). */
export const piBin = path.join(root, 'node_modules', '@earendil-works', 'pi-coding-agent', 'dist', 'bundle', 'cli.js')

/**
 * Sends `message` (default `/po-sandbox`) to the real pi in RPC mode with `extension` loaded
 * (a package directory: pi reads its manifest) and resolves with the first `notify` UI request;
 * pi has exited when it resolves.
 */
export function slashCommandInPi(t, { extension, env: extraEnv = {}, message = '/po-sandbox' }) {
  const home = tempDir(t, 'po-sandbox-pi-')
  const env = { ...process.env, PI_CODING_AGENT_DIR: path.join(home, 'agent'), PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0', HOME: home }
  for (const k of ['PO_SANDBOX', 'PO_WORKSPACE', 'PO_BROKER_PROVIDERS', 'PO_BROKER_SOCKET', 'PO_BROKER_ADDRESS']) delete env[k]
  Object.assign(env, extraEnv)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [piBin, '--mode', 'rpc', '--no-session', '--extension', extension], { cwd: home, env, stdio: ['pipe', 'pipe', 'pipe'] })
    let all = ''
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
    child.stdout.on('data', (d) => { all += d })
    onJsonLines(child.stdout, (msg, line) => {
      if (msg.type === 'extension_ui_request' && msg.method === 'notify') settle({ msg }, 'SIGTERM')
      else if (msg.type === 'response' && msg.success === false) settle({ error: new Error(`pi refused the prompt: ${line}`) }, 'SIGKILL')
    })
    child.once('error', (e) => settle({ error: e }, 'SIGKILL'))
    child.once('close', (code, signal) => {
      const o = outcome ?? { error: new Error(`pi exited (${code ?? signal}) without a notify. stdout: ${all}\nstderr: ${stderr}`) }
      clearTimeout(timer)
      if (o.error) reject(o.error)
      else resolve(o.msg)
    })
    child.stdin.write(`${JSON.stringify({ type: 'prompt', message })}\n`)
  })
}

/**
 * Calls `cb(message, line)` for every line of `stream` that is a JSON object (pi's RPC output),
 * also when a line arrives split across chunks; other lines are skipped.
 */
export function onJsonLines(stream, cb) {
  let rest = ''
  stream.on('data', (d) => {
    rest += d
    let i
    while ((i = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, i).trim()
      rest = rest.slice(i + 1)
      if (!line.startsWith('{')) continue
      let msg
      try { msg = JSON.parse(line) } catch { continue }
      cb(msg, line)
    }
  })
}

/**
 * Starts the real pi in RPC mode with `extension` loaded, sends each of `commands` (objects
 * without an id; each gets one) once the previous one was answered, and resolves with the
 * responses in order and pi's stderr; pi has exited (stdin closed) when it resolves.
 * `onResponse(msg)` sees each answer while pi still runs. `home` is pi's HOME (default: a
 * fresh temp folder).
 */
export function rpcInPi(t, { extension, env: extraEnv = {}, commands, cwd, home = tempDir(t, 'po-sandbox-pi-'), onResponse = () => {} }) {
  const env = { ...process.env, PI_CODING_AGENT_DIR: path.join(home, 'agent'), PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0', HOME: home }
  for (const k of Object.keys(env)) if (k.startsWith('PO_')) delete env[k]
  Object.assign(env, extraEnv)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [piBin, '--mode', 'rpc', '--no-session', '--extension', extension], { cwd: cwd ?? home, env, stdio: ['pipe', 'pipe', 'pipe'] })
    let all = ''
    let stderr = ''
    const responses = []
    let failure = null
    const timer = setTimeout(() => { failure = new Error(`pi did not answer within 60 s. stdout: ${all}\nstderr: ${stderr}`); child.kill('SIGKILL') }, 60000)
    const send = () => {
      const next = commands[responses.length]
      if (next) child.stdin.write(`${JSON.stringify({ ...next, id: `c${responses.length}` })}\n`)
      else child.stdin.end()
    }
    child.stderr.on('data', (d) => { stderr += d })
    child.stdout.on('data', (d) => { all += d })
    onJsonLines(child.stdout, (msg) => {
      if (msg.type !== 'response' || msg.id !== `c${responses.length}`) return
      responses.push(msg)
      try { onResponse(msg) } catch (e) { failure ??= e }
      send()
    })
    child.once('error', (e) => { failure = e })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      if (failure) reject(failure)
      else if (responses.length < commands.length) reject(new Error(`pi exited (${code ?? signal}) after ${responses.length} of ${commands.length} answers. stdout: ${all}\nstderr: ${stderr}`))
      else resolve({ responses, stderr, code })
    })
    send()
  })
}
