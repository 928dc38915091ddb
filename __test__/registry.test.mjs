// npm's registries through the broker, with no token inside the container: a real Verdaccio of
// this test's own on 127.0.0.1 that only serves logged-in users holds a private scoped package;
// the host's npm config (its HOME's .npmrc) has the registry and its token; the real npm inside a
// real workspace container with no network at all installs the package through the broker's
// registry route. The container holds only the placeholder; the lockfile names the registry, not
// the route; a request without the placeholder, or one that would publish, is refused.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { root, run, tempDir, waitFor } from './helpers.mjs'
import { freePort } from './private-engine.mjs'
import { hostEnv, useTestBaseImage } from './provider-fixtures.mjs'
import { brokeredWorkspace, personNpmrc, publishPrivate, verdaccio } from './service-fixtures.mjs'

useTestBaseImage()

test('npm install of a private scoped package from a real registry, inside a none container, through the broker; no token inside', { timeout: 240000 }, async (t) => {
  const dir = tempDir(t, 'po-registry-')
  const reg = await verdaccio(t, dir)

  // The package, published from the host with the token.
  publishPrivate(reg, dir)
  // Without the token the registry refuses it.
  assert.equal((await fetch(`${reg.url}@acme%2fprivate`)).status, 401)

  // The person's npm config on the host: the scope's registry and its token.
  const home = path.join(dir, 'home')
  mkdirSync(home)
  // Its default registry is the test's own too: no request of the test goes past this machine.
  personNpmrc(path.join(home, '.npmrc'), reg)

  // The workspace: a project that depends on the package, and the host's npm to run inside.
  const ws = path.join(dir, 'ws')
  mkdirSync(ws)
  writeFileSync(path.join(ws, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, dependencies: { '@acme/private': '1.0.0' } }))
  const npmRoot = path.dirname(path.dirname(execFileSync('bash', ['-c', 'readlink -f "$(command -v npm)"'], { encoding: 'utf8' }).trim()))
  cpSync(npmRoot, path.join(ws, '.tools', 'npm'), { recursive: true })
  execFileSync('chmod', ['-R', 'a+rwX', ws])

  const env = hostEnv({ HOME: home, PO_SANDBOX_NETWORK: 'none', PO_SANDBOX_GIT_HOSTS: 'none' })
  for (const k of ['NPM_TOKEN', 'npm_config_userconfig', 'NPM_CONFIG_USERCONFIG', 'PIP_INDEX_URL']) delete env[k]
  const { c, cenv } = await brokeredWorkspace(t, { id: 'regws', ws, env, brokered: 'registries npm, npm @acme' })

  // The container: the placeholder, npm's config naming the route; never the token.
  const placeholder = cenv.find((kv) => kv.startsWith('PO_BROKER_REGISTRY_TOKEN='))?.split('=')[1]
  assert.match(placeholder ?? '', /^po-reg-[0-9a-f]{64}$/, cenv.join('\n'))
  assert.ok(cenv.includes('npm_config_userconfig=/tmp/po-sandbox-npmrc'), cenv.join('\n'))
  assert.ok(!cenv.some((kv) => kv.includes(reg.token)), cenv.join('\n'))
  const npmrc = await run('docker', ['exec', c, 'cat', '/tmp/po-sandbox-npmrc'])
  // The default registry has a route of its own (npm sends every tarball to its URL).
  assert.match(npmrc.stdout, /^registry=http:\/\/127\.0\.0\.1:47400\/$/m, npmrc.stdout)
  assert.match(npmrc.stdout, /^@acme:registry=http:\/\/127\.0\.0\.1:47401\/$/m, npmrc.stdout)
  assert.match(npmrc.stdout, /^\/\/127\.0\.0\.1:47401\/:_authToken=\$\{PO_BROKER_REGISTRY_TOKEN\}$/m, npmrc.stdout)
  assert.match(npmrc.stdout, /^replace-registry-host=always$/m, npmrc.stdout)

  // npm install, with no network but the broker's routes.
  const npm = `node ${ws}/.tools/npm/bin/npm-cli.js install --no-audit --no-fund --no-update-notifier --fetch-retries=0`
  const r = await run('docker', ['exec', '-w', ws, c, 'sh', '-c', `${npm} 2>&1; echo "npm exit $?"`])
  assert.match(r.stdout, /npm exit 0/, r.stdout + r.stderr)
  assert.equal(readFileSync(path.join(ws, 'node_modules', '@acme', 'private', 'index.js'), 'utf8'), 'module.exports = "private from the registry"\n')
  // The lockfile names the registry itself, not the route.
  const lock = JSON.parse(readFileSync(path.join(ws, 'package-lock.json'), 'utf8'))
  assert.equal(lock.packages['node_modules/@acme/private'].resolved, `${reg.url}@acme/private/-/private-1.0.0.tgz`)

  // The route refuses a request without the placeholder, and one that would publish.
  const probe = String.raw`
const http = require('node:http')
const ask = (method, headers) => new Promise((resolve) => { const q = http.request({ host: '127.0.0.1', port: 47400, path: '/@acme%2fprivate', method, headers }, (res) => { res.resume(); resolve(res.statusCode) }); q.on('error', (e) => resolve(e.message)); q.end() })
;(async () => { console.log(await ask('GET', {}), await ask('PUT', { authorization: 'Bearer ' + process.env.PO_BROKER_REGISTRY_TOKEN }), await ask('GET', { authorization: 'Bearer ' + process.env.PO_BROKER_REGISTRY_TOKEN })) })()
`
  const refused = await run('docker', ['exec', c, 'node', '-e', probe])
  assert.equal(refused.stdout.trim(), '401 405 200', refused.stdout + refused.stderr)

  // Only the placeholder inside: its environment, its processes, its files.
  const grep = await run('docker', ['exec', c, 'sh', '-c', `grep -rl '${reg.token}' /proc/[0-9]*/environ /tmp "$HOME" '${ws}' 2>/dev/null; echo done`])
  assert.equal(grep.stdout.trim(), 'done', grep.stdout)
})

/** pypiserver on 127.0.0.1 (from the tests' venv), downloads and listings for its user only; one private wheel in it. */
async function pypiserver(t, dir) {
  const venv = path.join(root, '.tmp', 'casefold-venv')
  const py = path.join(venv, 'bin', 'python')
  const packages = path.join(dir, 'packages')
  mkdirSync(packages)
  const make = String.raw`
import base64, hashlib, sys, zipfile
from passlib.apache import HtpasswdFile
out, htpasswd = sys.argv[1], sys.argv[2]
h = HtpasswdFile(htpasswd, new=True); h.set_password('po-user', 'po-index-password-123'); h.save()
name, ver = 'po_private', '1.0'
files = {name + '/__init__.py': b'VALUE = "private from the index"\n',
         name + '-' + ver + '.dist-info/METADATA': b'Metadata-Version: 2.1\nName: po-private\nVersion: 1.0\n',
         name + '-' + ver + '.dist-info/WHEEL': b'Wheel-Version: 1.0\nGenerator: po-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
record = ''.join('%s,sha256=%s,%d\n' % (p, base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode(), len(d)) for p, d in files.items())
record += name + '-' + ver + '.dist-info/RECORD,,\n'
with zipfile.ZipFile(out + '/' + name + '-' + ver + '-py3-none-any.whl', 'w') as z:
    for p, d in files.items(): z.writestr(p, d)
    z.writestr(name + '-' + ver + '.dist-info/RECORD', record)
`
  const htpasswd = path.join(dir, 'htpasswd')
  try {
    execFileSync(py, ['-c', make, packages, htpasswd], { stdio: 'pipe' })
  } catch (e) {
    throw new Error(`the private index needs pypiserver and passlib in ${venv}: run 'bash scripts/casefold-venv.sh' (npm test runs it with the engine set-up). ${e.stderr ?? e.message}`)
  }
  const port = await freePort()
  const child = spawn(path.join(venv, 'bin', 'pypi-server'), ['run', '-i', '127.0.0.1', '-p', String(port), '-P', htpasswd, '-a', 'download,list,update', packages], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { out += d })
  t.after(() => child.kill())
  const url = `http://127.0.0.1:${port}/simple/`
  await waitFor(async () => (await fetch(url).catch(() => null))?.status === 401, `pypiserver on ${url} (${out})`, 30000)
  return { url, port, venv, password: 'po-index-password-123' }
}

test('pip install from a real index with basic auth, inside a none container, through the broker; no password inside', { timeout: 240000 }, async (t) => {
  const dir = tempDir(t, 'po-registry-pip-')
  const index = await pypiserver(t, dir)
  const ws = path.join(dir, 'ws')
  mkdirSync(ws)
  // The tests' pip (pure Python), for the container's Python to run.
  const site = execFileSync(path.join(index.venv, 'bin', 'python'), ['-c', 'import pip, os; print(os.path.dirname(os.path.dirname(pip.__file__)))'], { encoding: 'utf8' }).trim()
  cpSync(path.join(site, 'pip'), path.join(ws, '.tools', 'py', 'pip'), { recursive: true })
  execFileSync('chmod', ['-R', 'a+rwX', ws])

  const home = path.join(dir, 'home')
  mkdirSync(home)
  const env = hostEnv({ HOME: home, PO_SANDBOX_NETWORK: 'none', PO_SANDBOX_GIT_HOSTS: 'none', PIP_INDEX_URL: `http://po-user:${index.password}@127.0.0.1:${index.port}/simple/` })
  for (const k of ['NPM_TOKEN', 'npm_config_userconfig', 'NPM_CONFIG_USERCONFIG']) delete env[k]
  const { c, cenv } = await brokeredWorkspace(t, { id: 'pipws', ws, env, brokered: 'registries pip' })

  const indexUrl = cenv.find((kv) => kv.startsWith('PIP_INDEX_URL='))?.slice('PIP_INDEX_URL='.length)
  assert.match(indexUrl ?? '', /^http:\/\/po:po-reg-[0-9a-f]{64}@127\.0\.0\.1:47400\/simple\/$/, cenv.join('\n'))
  assert.ok(!cenv.some((kv) => kv.includes(index.password)), cenv.join('\n'))

  const pip = `PYTHONPATH=${ws}/.tools/py python3 -m pip install --disable-pip-version-check --no-cache-dir --target ${ws}/pydeps po-private`
  const r = await run('docker', ['exec', '-w', ws, c, 'sh', '-c', `${pip} 2>&1; echo "pip exit $?"`])
  assert.match(r.stdout, /pip exit 0/, r.stdout + r.stderr)
  assert.equal(readFileSync(path.join(ws, 'pydeps', 'po_private', '__init__.py'), 'utf8'), 'VALUE = "private from the index"\n')
  const grep = await run('docker', ['exec', c, 'sh', '-c', `grep -rl '${index.password}' /proc/[0-9]*/environ /tmp "$HOME" '${ws}' 2>/dev/null; echo done`])
  assert.equal(grep.stdout.trim(), 'done', grep.stdout)
})
