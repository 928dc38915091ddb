// Shared pieces of the node:test suites: temp folders, fake sockets, child processes.
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, existsSync } from 'node:fs'
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
    child.once('close', (code) => resolve({ code, stdout, stderr }))
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
