// Shared pieces of the container-provider suite: Po homes with a test runtime bundle, per-test
// owners cleaned up by label, layers that record their events, hub child processes, and
// Docker cross-checks.
import { spawn } from 'node:child_process'
import http from 'node:http'
import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { after, before } from 'node:test'
import assert from 'node:assert/strict'

import { addon, dockerCli, requireDocker, root, run, tempDir, waitFor } from './helpers.mjs'

export const TEST_BASE = 'po-sandbox-test-base:node24-nft'
export const RUNTIME_VERSION = '1.0.0'
export const SERVER_PORT = 7300
export const FAKE_KEY = 'sk-fake-123'
/** A PATH entry only the host has, to prove the host's PATH never reaches a container. */
export const HOST_ONLY_PATH = '/po-test-host-only-path'

/** A random owner id: 't' + 10 lowercase hex digits. */
export function newOwner() {
  return 't' + randomBytes(5).toString('hex')
}

/** A fresh Po home (canonical path), removed when the test ends. */
export function tempHome(t, prefix = 'po-provider-home-') {
  return realpathSync(tempDir(t, prefix))
}

/** A fresh workspace folder (canonical path), removed when the test ends. */
export function tempWorkspace(t) {
  return realpathSync(tempDir(t, 'po-provider-ws-'))
}

/** Removes every container and volume of `owner` when the test ends, pass or fail. */
export function cleanupOwner(t, owner) {
  t.after(async () => {
    await removeOwner(owner)
  })
}

export async function removeOwner(owner) {
  rmSync(brokerDirOf(owner), { recursive: true, force: true })
  const ids = (await run('docker', ['ps', '-aq', '--filter', `label=po.owner=${owner}`])).stdout.split(/\s+/).filter(Boolean)
  if (ids.length) await run('docker', ['rm', '-f', ...ids])
  const vols = (await run('docker', ['volume', 'ls', '-q', '--filter', `label=po.owner=${owner}`])).stdout.split(/\s+/).filter(Boolean)
  if (vols.length) await run('docker', ['volume', 'rm', '-f', ...vols])
  const nets = (await run('docker', ['network', 'ls', '-q', '--filter', `label=po.owner=${owner}`])).stdout.split(/\s+/).filter(Boolean)
  if (nets.length) await run('docker', ['network', 'rm', ...nets])
}

/** Removes everything `owner` has on the Podman behind the `podman` CLI: containers, volumes,
 * its per-hub network, and its broker folder. */
export async function removePodmanOwner(owner) {
  const ids = (args) => run('podman', args).then((r) => r.stdout.split(/\s+/).filter(Boolean))
  const containers = await ids(['ps', '-aq', '--filter', `label=po.owner=${owner}`])
  if (containers.length) await run('podman', ['rm', '-f', ...containers])
  const vols = await ids(['volume', 'ls', '-q', '--filter', `label=po.owner=${owner}`])
  if (vols.length) await run('podman', ['volume', 'rm', '-f', ...vols])
  const nets = await ids(['network', 'ls', '-q', '--filter', `label=po.owner=${owner}`])
  if (nets.length) await run('podman', ['network', 'rm', ...nets])
  rmSync(brokerDirOf(owner), { recursive: true, force: true })
}

/** Ids of the workspace containers (any state) carrying every given label: those with a
 * `po.workspace` label, so never a network namespace holder (`po.holder-of`). */
export function containersWith(labels) {
  const args = ['ps', '-aq', '--no-trunc', '--filter', 'label=po.workspace']
  for (const [k, v] of Object.entries(labels)) args.push('--filter', `label=${k}=${v}`)
  return dockerCli(args).split(/\s+/).filter(Boolean)
}

export function volumesOf(owner) {
  return dockerCli(['volume', 'ls', '-q', '--filter', `label=po.owner=${owner}`]).split(/\s+/).filter(Boolean).sort()
}

export function inspect(id) {
  return JSON.parse(dockerCli(['inspect', id]))[0]
}

export function isRunning(id) {
  return dockerCli(['inspect', '-f', '{{.State.Running}}', id]) === 'true'
}

/**
 * The test server: answers 200 on every path; on /whoami its uid, gid, environment and
 * whether (and what) it can read from the token file. Prints a recognisable line first.
 */
export function serverSource({ listenPort = SERVER_PORT, marker = 'po-test-server' } = {}) {
  return `'use strict'
const http = require('node:http')
const fs = require('node:fs')
const crypto = require('node:crypto')
const LISTEN = ${JSON.stringify(listenPort)}
console.log(${JSON.stringify(marker)} + ' starting, will listen on ' + LISTEN)
http.createServer((req, res) => {
  let body = { ok: true, path: req.url }
  if (req.url === '/whoami') {
    let token = null
    let tokenError = null
    try { token = fs.readFileSync('/run/po-sandbox/token', 'utf8') } catch (e) { tokenError = String(e.code || e.message) }
    body = {
      uid: process.getuid(),
      gid: process.getgid(),
      env: process.env,
      tokenReadable: token !== null && token.length > 0,
      tokenSha256: token === null ? null : crypto.createHash('sha256').update(token).digest('hex'),
      tokenError,
    }
  }
  if (req.url === '/call' || req.url === '/call-fetch') {
    // A model call as a session would make it: through the broker socket, with the token;
    // /call-fetch asks the provider to fetch a URL (an MCP server), which none and allowlist refuse.
    const fetching = req.url === '/call-fetch'
    const target = fetching
      ? { method: 'POST', path: '/openai/v1/responses', headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' } }
      : { path: '/openai/v1/models?limit=1', headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY } }
    const call = http.request({ socketPath: process.env.PO_BROKER_SOCKET, ...target }, (up) => {
      let text = ''
      up.on('data', (d) => { text += d })
      up.on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ status: up.statusCode, body: text })) })
    })
    call.on('error', (e) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ error: String(e.code || e.message) })) })
    call.end(fetching ? JSON.stringify({ model: 'm', input: 'hi', tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://evil.example/mcp' }] }) : undefined)
    return
  }
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}).listen(LISTEN, '0.0.0.0', () => console.log(${JSON.stringify(marker)} + ' listening on ' + LISTEN))
`
}

/**
 * Installs a runtime bundle at `<poHome>/container-runtime/<version>/`. `json` replaces the
 * container-runtime.json text when given (a string is written verbatim).
 */
export function writeBundle(poHome, { version = RUNTIME_VERSION, json, server = serverSource() } = {}) {
  const dir = path.join(poHome, 'container-runtime', version)
  mkdirSync(dir, { recursive: true })
  const text = json === undefined
    ? JSON.stringify({ entry: '/opt/po/server.js', port: SERVER_PORT, healthPath: '/api/health' })
    : typeof json === 'string' ? json : JSON.stringify(json)
  writeFileSync(path.join(dir, 'container-runtime.json'), text)
  writeFileSync(path.join(dir, 'server.js'), server)
  return dir
}

/** The environment the layer reads: the host's, with a fake key and markers that must not leak. */
export function hostEnv(extra = {}) {
  return {
    ...process.env,
    FAKE_API_KEY: FAKE_KEY,
    DOCKER_HOST: 'unix:///var/run/docker.sock',
    PATH: `${process.env.PATH}:${HOST_ONLY_PATH}`,
    ...extra,
  }
}

export function baseOptions(poHome, owner, extra = {}) {
  return {
    poHome,
    owner,
    // Broker sockets in a folder of this owner's, removed with its containers.
    brokerSocketDir: brokerDirOf(owner),
    baseImage: TEST_BASE,
    imageVariant: 'minimal',
    healthTimeoutMs: 20000,
    // A busy engine on a 2-core CI machine may answer `info` slowly; this is no timing check.
    engineTimeoutMs: 30000,
    env: hostEnv(),
    ...extra,
  }
}

/** A global-scope host that records which of its functions were called, and with what. */
export function fakeHost(overrides = {}) {
  const host = {
    scope: 'global',
    identity: { contained: false },
    calls: [],
    received: [],
    registerSandboxProvider(...args) { this.calls.push('registerSandboxProvider'); this.received.push(args); this.provider = args[0] },
    publishService(...args) { this.calls.push('publishService'); this.received.push(args); this.service = args[1] },
    ...overrides,
  }
  return host
}

/** Registers a layer on a fake host and records every event. */
export function openLayer(options, hostOverrides = {}) {
  const host = fakeHost(hostOverrides)
  const layer = addon.registerSandboxLayer(host, options)
  const events = []
  if (layer) layer.provider.onEvent((e) => events.push(e))
  return { host, layer, events }
}

/** GET `<url><p>` as JSON, bounded. */
export async function getJson(url, p = '/whoami') {
  const res = await fetch(url + p, { signal: AbortSignal.timeout(10000) })
  if (res.status !== 200) throw new Error(`${url}${p} answered ${res.status}`)
  return res.json()
}

export function sha256File(file) {
  return createHash('sha256').update(readFileSync(file)).digest('hex')
}

const HUB_CHILD = `'use strict'
// A Po hub in its own process: registers the layer with the options it is given, prints every
// event and then its status (or the container it started) as JSON lines, then waits forever
// (mode 'wait') or exits with 75 (mode 'exit75').
const { registerSandboxLayer } = require(process.env.PO_TEST_ADDON)
const { options, mode, workspace } = JSON.parse(process.argv[2])
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n')
const host = { scope: 'global', identity: { contained: false }, registerSandboxProvider(p) { this.provider = p }, publishService(name, s) { this.service = s } }
const layer = registerSandboxLayer(host, options)
layer.provider.onEvent((event) => out({ event }))
;(async () => {
  try {
    const status = await layer.provider.ready()
    if (workspace) out({ container: await layer.containers.start(workspace) })
    out({ status })
    if (mode === 'exit75') process.exit(75)
    setInterval(() => {}, 1 << 30)
  } catch (e) {
    out({ error: { code: e.code, message: e.message } })
    process.exit(1)
  }
})()
`

/** Writes the hub child script into a temp folder; returns its path. */
export function writeHubChild(t) {
  const file = path.join(tempDir(t, 'po-provider-hub-'), 'hub-child.cjs')
  writeFileSync(file, HUB_CHILD)
  return file
}

/**
 * Spawns a hub child (`env` added to this process's); `lines` fills with its parsed JSON lines.
 * It is SIGKILLed when the test ends if it still runs.
 */
export function spawnHub(t, script, payload, env = {}) {
  const child = spawn(process.execPath, [script, JSON.stringify(payload)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PO_TEST_ADDON: path.join(root, 'index.js'), ...env },
  })
  const hub = { child, lines: [], stderr: '', exitCode: undefined, signal: undefined }
  let buf = ''
  child.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      if (line.trim()) hub.lines.push(JSON.parse(line))
    }
  })
  child.stderr.on('data', (d) => { hub.stderr += d })
  hub.exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    hub.exitCode = code
    hub.signal = signal
    resolve({ code, signal })
  }))
  hub.events = () => hub.lines.filter((l) => l.event).map((l) => l.event)
  /** Waits (bounded) for its status line, or fails with what it printed. */
  hub.result = async (key = 'status', ms = 120000) => {
    const line = await waitFor(() => hub.lines.find((l) => l[key] || l.error) || (hub.exitCode !== undefined && { exited: true }), `the hub child's ${key}`, ms)
    if (!line[key]) throw new Error(`hub child failed: ${JSON.stringify(line)}; stderr: ${hub.stderr}`)
    return line[key]
  }
  t.after(async () => {
    if (hub.exitCode === undefined && hub.signal === undefined) {
      child.kill('SIGKILL')
      await hub.exited
    }
  })
  return hub
}

/** Kills a hub child with SIGKILL and waits until it is gone. */
export async function killHub(hub) {
  hub.child.kill('SIGKILL')
  return hub.exited
}

/** Where a test owner's broker sockets go (short: socket paths are limited to ~100 bytes). */
export function brokerDirOf(owner) {
  return path.join(os.tmpdir(), `pb-${owner}`)
}

/** The broker socket folder the provider gives a workspace: `<dir>/<owner>-<12 hex of sha256(id)>`. */
export function brokerFolder(dir, owner, id) {
  return path.join(dir, `${owner}-${createHash('sha256').update(id).digest('hex').slice(0, 12)}`)
}

/**
 * A fake model provider on 127.0.0.1 answering every request with a models list; `seen` records
 * each request's url and headers. Closed when the test ends.
 */
export async function modelsUpstream(t) {
  const seen = []
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url, headers: req.headers })
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"data":[{"id":"m1"}]}')
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  return { seen, origin: `http://127.0.0.1:${server.address().port}` }
}

/** Removes the provider images built on the test base (what `npm test` does once at its end). */
export async function removeTestImages() {
  const ids = (await run('docker', ['images', '-q', '--filter', `label=po.image-base=${TEST_BASE}`])).stdout.split(/\s+/).filter(Boolean)
  if (ids.length) await run('docker', ['rmi', '-f', ...new Set(ids)])
}

/**
 * Podman keeps its own image storage: copies the local test base into it (`docker save | podman
 * load`, as `localhost/<TEST_BASE>`), unless it already holds that very image (the same image
 * id: a load keeps Docker's). After useTestBaseImage's hook, which makes the image current.
 */
export async function testBaseInPodman() {
  const id = (await run('docker', ['image', 'inspect', '--format', '{{.Id}}', TEST_BASE])).stdout.trim().replace(/^sha256:/, '')
  const there = await run('podman', ['image', 'inspect', '--format', '{{.Id}}', `localhost/${TEST_BASE}`])
  if (id && there.code === 0 && there.stdout.trim() === id) return
  const r = await run('bash', ['-c', `docker save ${TEST_BASE} | podman load`])
  assert.equal(r.code, 0, `docker save ${TEST_BASE} | podman load: ${r.stderr}`)
}

/**
 * A file's hooks for suites on real containers: the engine must answer and the local test base
 * image be current before any test; the provider images built on it are removed after the file,
 * unless other files share them (`npm test` runs several at once and removes them at its end:
 * PO_SANDBOX_TEST_SHARED_IMAGES=1).
 */
export function useTestBaseImage() {
  before(async () => {
    await requireDocker()
    const r = await run('bash', [path.join(root, 'scripts/build-test-base-image.sh')])
    assert.equal(r.code, 0, `build-test-base-image.sh failed:\n${r.stderr}`)
    assert.equal(r.stdout.trim().split('\n').pop(), TEST_BASE)
  })
  after(async () => {
    if (process.env.PO_SANDBOX_TEST_SHARED_IMAGES !== '1') await removeTestImages()
  })
}
