// The real services the broker's git and registry routes are tested against, all on 127.0.0.1:
// `git http-backend` behind an HTTP front that requires a token, and Verdaccio (a
// devDependency) serving logged-in users only. `t` is a test context, or anything with
// `after(fn)` (a child process's own list of clean-ups).
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'

import { root, waitFor } from './helpers.mjs'
import { freePort } from './private-engine.mjs'
import { baseOptions, cleanupOwner, inspect, newOwner, openLayer, tempHome, writeBundle } from './provider-fixtures.mjs'

/** The host's git in `cwd`, with a fixed identity and no system config; its output, trimmed. */
export function git(cwd, ...args) {
  return execFileSync('git', ['-c', 'user.name=Host', '-c', 'user.email=host@test', '-c', 'init.defaultBranch=main', ...args], { cwd, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' } }).trim()
}

/** The ref updates at the head of a receive-pack request body. */
function pushCommands(body) {
  const out = []
  let at = 0
  while (at + 4 <= body.length) {
    const len = parseInt(body.subarray(at, at + 4).toString(), 16)
    if (!len) break
    const line = body.subarray(at + 4, at + len).toString().split('\0')[0].trim()
    out.push(line.split(' ').slice(1).join(' ') ? `${line.split(' ')[2]} ${line.split(' ')[1].slice(0, 7)}` : line)
    at += len
  }
  return out
}

/**
 * `git http-backend` for the repositories under `root`, behind an HTTP front on 127.0.0.1 that
 * answers 401 unless Basic auth carries `state.token`. Records every request and the ref
 * updates of every push that reached git.
 */
export async function gitServer(t, root, token) {
  const state = { token, requests: [], pushes: [] }
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (d) => chunks.push(d))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const url = new URL(req.url, 'http://front')
      const auth = req.headers.authorization ?? ''
      const [user, ...rest] = auth.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString().split(':') : []
      const ok = rest.join(':') === state.token
      state.requests.push({ method: req.method, path: url.pathname + url.search, auth: ok ? 'token' : auth ? 'wrong' : 'none' })
      if (!ok) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="test"' })
        return res.end('authenticate\n')
      }
      if (url.pathname.endsWith('/git-receive-pack') && req.method === 'POST') state.pushes.push(...pushCommands(body))
      const child = spawn('git', ['http-backend'], {
        env: {
          PATH: process.env.PATH, GIT_PROJECT_ROOT: root, GIT_HTTP_EXPORT_ALL: '1', REQUEST_METHOD: req.method,
          PATH_INFO: decodeURIComponent(url.pathname), QUERY_STRING: url.search.slice(1), CONTENT_TYPE: req.headers['content-type'] ?? '',
          CONTENT_LENGTH: String(body.length), REMOTE_USER: user, REMOTE_ADDR: '127.0.0.1', GIT_PROTOCOL: req.headers['git-protocol'] ?? '',
          HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        },
      })
      const out = []
      child.stdout.on('data', (d) => out.push(d))
      child.on('close', () => {
        const all = Buffer.concat(out)
        const split = all.indexOf('\r\n\r\n')
        const head = all.subarray(0, split).toString().split('\r\n')
        const headers = {}
        let status = 200
        for (const h of head) {
          const [k, ...v] = h.split(':')
          if (k.toLowerCase() === 'status') status = parseInt(v.join(':'), 10)
          else headers[k] = v.join(':').trim()
        }
        res.writeHead(status, headers)
        res.end(all.subarray(split + 4))
      })
      // git http-backend may answer (and exit) before it reads a body it does not need.
      child.stdin.on('error', () => {})
      child.stdin.end(body)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }))
  state.port = server.address().port
  return state
}

/** A bare repository `<root>/<name>` that takes pushes over HTTP, holding `source`'s `main`. */
export function bareRepository(root, name, source) {
  git(root, 'init', '-q', '--bare', path.join(root, name))
  git(path.join(root, name), 'config', 'http.receivepack', 'true')
  git(source, 'push', '-q', path.join(root, name), 'main')
}

/** A git config (for `GIT_CONFIG_GLOBAL`) whose credential store holds `token` for `origin`. */
export function credentialStore(dir, origin, token) {
  const store = path.join(dir, 'git-credentials')
  writeFileSync(store, `${origin.replace('://', `://po-host:${token}@`)}\n`, { mode: 0o600 })
  const config = path.join(dir, 'gitconfig')
  writeFileSync(config, `[credential]\n\thelper = store --file=${store}\n`)
  return config
}

/** Verdaccio on 127.0.0.1, every package for logged-in users only; resolves with its URL and a user's token. */
export async function verdaccio(t, dir) {
  const port = await freePort()
  const config = path.join(dir, 'verdaccio.yaml')
  writeFileSync(config, [
    `storage: ${path.join(dir, 'storage')}`,
    'auth:',
    '  htpasswd:',
    `    file: ${path.join(dir, 'htpasswd')}`,
    '    max_users: 10',
    'uplinks: {}',
    'packages:',
    "  '**':",
    '    access: $authenticated',
    '    publish: $authenticated',
    'log: { type: stdout, format: pretty, level: warn }',
    '',
  ].join('\n'))
  const bin = path.join(root, 'node_modules', 'verdaccio', 'bin', 'verdaccio')
  const child = spawn(process.execPath, [bin, '--config', config, '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { out += d })
  t.after(() => child.kill())
  const url = `http://127.0.0.1:${port}/`
  await waitFor(async () => (await fetch(`${url}-/ping`).catch(() => null))?.ok, `Verdaccio on ${url} (${out})`, 30000)
  const made = await fetch(`${url}-/user/org.couchdb.user:po`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'po', password: 'po-secret-password' }),
  })
  const { token } = await made.json()
  if (!token) throw new Error(`Verdaccio made no user: ${made.status}`)
  return { url, port, token }
}

/** `@acme/private@1.0.0`, published to `reg` from the host with its token. */
export function publishPrivate(reg, dir) {
  const pkg = path.join(dir, 'pkg')
  mkdirSync(pkg)
  writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: '@acme/private', version: '1.0.0', main: 'index.js' }))
  writeFileSync(path.join(pkg, 'index.js'), 'module.exports = "private from the registry"\n')
  const publishRc = path.join(dir, 'publish.npmrc')
  writeFileSync(publishRc, `//127.0.0.1:${reg.port}/:_authToken=${reg.token}\n`)
  execFileSync('npm', ['publish', '--registry', reg.url, '--userconfig', publishRc, '--no-audit'], { cwd: pkg, stdio: 'pipe' })
}

/** The host's npm config of a person with `reg`'s token for `@acme` (and `reg` as the default,
 * so no request goes past this machine). */
export function personNpmrc(file, reg) {
  writeFileSync(file, `registry=${reg.url}\n@acme:registry=${reg.url}\n//127.0.0.1:${reg.port}/:_authToken=${reg.token}\n`)
}

/**
 * Run inside a container (`node -e`): reads the npm user config the command was given, asks its
 * `@acme` registry route for `@acme/private` with the placeholder and without it; prints
 * `<status with> <name> <status without> <route URL>`.
 */
export const REGISTRY_PROBE = String.raw`
const rc = require('node:fs').readFileSync(process.env.npm_config_userconfig, 'utf8')
const route = rc.match(/^@acme:registry=(\S+)$/m)[1]
const ask = (headers) => fetch(route + '@acme%2fprivate', { headers }).then(async (r) => [r.status, r.ok ? (await r.json()).name : '-'], (e) => ['error', String(e.cause ?? e)])
;(async () => {
  const [status, name] = await ask({ authorization: 'Bearer ' + process.env.PO_BROKER_REGISTRY_TOKEN })
  const [without] = await ask({})
  console.log(status, name, without, route)
})()`

/**
 * A hub of a fresh owner serving one workspace (`id` at `ws`) with the host environment `env`:
 * waits for its container and checks that its posture names `brokered`. Its Po home, options,
 * layer and events, the container's id and environment.
 */
export async function brokeredWorkspace(t, { id, ws, env, brokered }) {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const options = baseOptions(poHome, owner, { workspaces: [{ id, path: ws }], env })
  const { layer, events } = openLayer(options)
  const status = await layer.provider.ready()
  const w = status.workspaces[0]
  assert.equal(w.state, 'running', JSON.stringify(w))
  // Its posture names what the broker carries for it.
  assert.ok(w.container.posture.brokered.includes(brokered), JSON.stringify(w.container.posture))
  const c = w.container.containerId
  return { poHome, options, layer, events, c, cenv: inspect(c).Config.Env }
}
