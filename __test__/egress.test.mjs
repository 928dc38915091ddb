// The allowlist mode's egress proxy (issue 10, point 2) on a real container: from inside, through
// a loopback bridge to /run/po-broker/egress.sock (as the pi extension sets it up), to upstreams
// this test starts on the host's 127.0.0.1 under made-up names that `networkResolve` maps there
// (an HTTPS one with a test CA, a plain-HTTP one serving a git repository). Allowed, denied,
// SNI and Host mismatches, names resolving to loopback, IP literals, the audit events, git clone
// through the proxy, and the real pi getting the proxy variables; then npm install, run by the
// real pi's bash tool in the workspace container, from a fake registry in networkAllow and from
// one that is not. Traffic goes only to listeners this test created; the container cannot reach
// the host's loopback except through the proxy.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import path from 'node:path'

import { root, run, tempDir, waitFor } from './helpers.mjs'
import { PI_DRIVER, bundlePiAndExtension, piAnswers, piInContainer, piLines } from './pi-fixtures.mjs'
import {
  TEST_BASE, baseOptions, brokerDirOf, brokerFolder, cleanupOwner, inspect, newOwner, openLayer,
  tempHome, tempWorkspace, useTestBaseImage, writeBundle,
} from './provider-fixtures.mjs'

useTestBaseImage()

const PI_IN_CONTAINER = '/pkg/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js'

/** A test CA and a leaf for `names`, made with openssl in `dir`. */
function testCertificates(dir, names) {
  const ossl = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  ossl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=po egress test CA'])
  ossl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', `/CN=${names[0]}`])
  writeFileSync(path.join(dir, 'ext.cnf'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`)
  ossl(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '1', '-extfile', 'ext.cnf'])
  const read = (f) => readFileSync(path.join(dir, f), 'utf8')
  return { ca: read('ca.pem'), cert: read('leaf.pem'), key: read('leaf.key') }
}

/** A server on 127.0.0.1 that records what it got; closed when the test ends. */
async function listen(t, server) {
  const seen = []
  server.on('connection', () => seen.push('connection'))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve) }))
  return { port: server.address().port, seen }
}

/** A bare git repository with one commit, served as files (git's dumb HTTP protocol). */
function gitRepository(dir) {
  const work = path.join(dir, 'work')
  mkdirSync(work, { recursive: true })
  const git = (args, cwd = work) => execFileSync('git', args, { cwd, stdio: 'pipe', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } })
  git(['init', '-q', '-b', 'main'])
  writeFileSync(path.join(work, 'hello.txt'), 'hello through the egress proxy\n')
  git(['add', '.'])
  git(['commit', '-qm', 'one'])
  git(['clone', '-q', '--bare', work, path.join(dir, 'repo.git')], dir)
  git(['update-server-info'], path.join(dir, 'repo.git'))
  return dir
}

/**
 * Runs in the container: a loopback bridge to the egress socket (what the extension starts),
 * then each probe; prints one JSON line of results. A probe is `{ kind: 'tls', connect,
 * servername, path }` (CONNECT, then TLS with the test CA), `{ kind: 'raw', text }` (bytes as
 * given, the answer as text), or `{ kind: 'git', url }` (git clone with http_proxy set).
 */
const PROBE = String.raw`
const net = require('node:net'), tls = require('node:tls'), { execFileSync } = require('node:child_process')
const probes = JSON.parse(process.env.PROBES), ca = process.env.CA
const bridge = net.createServer((c) => { const u = net.connect(process.env.PO_BROKER_EGRESS_SOCKET); c.pipe(u); u.pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()) })
const collect = (s) => new Promise((resolve) => { let out = ''; s.on('data', (d) => { out += d }); s.on('error', (e) => resolve(out + '\n[error ' + e.message + ']')); s.on('close', () => resolve(out)); setTimeout(() => { s.destroy(); resolve(out) }, 8000) })
async function raw(port, text) { const s = net.connect(port, '127.0.0.1'); s.write(text); return collect(s) }
async function viaTls(port, p) {
  const s = net.connect(port, '127.0.0.1')
  s.write('CONNECT ' + p.connect + ' HTTP/1.1\r\nHost: ' + p.connect + '\r\n\r\n')
  const head = await new Promise((resolve) => { let got = ''; const on = (d) => { got += d; if (got.includes('\r\n\r\n')) { s.off('data', on); resolve(got) } }; s.on('data', on); s.on('close', () => resolve(got)) })
  if (!head.startsWith('HTTP/1.1 200')) return { head }
  const t = tls.connect({ socket: s, servername: p.servername, ca })
  try {
    await new Promise((resolve, reject) => { t.once('secureConnect', resolve); t.once('error', reject) })
  } catch (e) { return { head, tlsError: e.message } }
  t.write('GET ' + p.path + ' HTTP/1.1\r\nHost: ' + p.connect.split(':')[0] + '\r\nConnection: close\r\n\r\n')
  return { head, answer: await collect(t) }
}
bridge.listen(0, '127.0.0.1', async () => {
  const port = bridge.address().port, results = []
  for (const p of probes) {
    if (p.kind === 'tls') results.push(await viaTls(port, p))
    else if (p.kind === 'raw') results.push({ answer: await raw(port, p.text) })
    else if (p.kind === 'git') {
      const proxy = 'http://127.0.0.1:' + port
      const r = await new Promise((resolve) => require('node:child_process').execFile('git', ['clone', '-q', p.url, '/tmp/clone'], { env: { ...process.env, http_proxy: proxy, HTTP_PROXY: proxy, GIT_TERMINAL_PROMPT: '0', GIT_CURL_VERBOSE: '1', HOME: '/tmp' }, timeout: 30000 }, (error, stdout, stderr) => resolve({ error, stderr })))
      try { results.push({ file: require('node:fs').readFileSync('/tmp/clone/hello.txt', 'utf8') }) } catch { results.push({ error: String(r.error), stderr: r.stderr.slice(-3000) }) }
    }
  }
  console.log(JSON.stringify(results))
  process.exit(0)
})
`

async function probe(containerId, probes, ca) {
  const r = await run('docker', ['exec', '-e', 'PATH=/usr/local/bin:/usr/bin:/bin', '-e', `PROBES=${JSON.stringify(probes)}`, '-e', `CA=${ca}`, containerId, 'node', '-e', PROBE])
  assert.equal(r.code, 0, `the probe failed:\n${r.stdout}\n${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

test('allowlist egress through the proxy: allowed, denied, SNI and Host mismatch, loopback names, literals, audit events, git clone, pi', { timeout: 420000 }, async (t) => {
  const dir = tempDir(t, 'po-egress-')
  const certs = testCertificates(dir, ['allowed.test', 'other.test'])
  const httpsUp = await listen(t, https.createServer({ cert: certs.cert, key: certs.key }, (req, res) => {
    res.end(`tls upstream saw ${req.method} ${req.url} host=${req.headers.host}`)
  }))
  const plainRequests = []
  const files = gitRepository(path.join(dir, 'git'))
  const plainUp = await listen(t, http.createServer((req, res) => {
    plainRequests.push({ url: req.url, host: req.headers.host, proxyAuth: req.headers['proxy-authorization'] })
    if (req.url.startsWith('/repo.git/')) {
      try {
        res.end(readFileSync(path.join(files, decodeURIComponent(req.url.split('?')[0]))))
      } catch {
        res.writeHead(404).end()
      }
      return
    }
    res.end(`plain upstream saw ${req.method} ${req.url}`)
  }))

  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  const ws = tempWorkspace(t)
  writeBundle(poHome)
  const options = baseOptions(poHome, owner, {
    workspaces: [{ id: 'egress', path: ws }],
    network: 'allowlist',
    networkAllow: [`allowed.test:${httpsUp.port}`, `plain.test:${plainUp.port}`, `localhost:${plainUp.port}`, `*.wild.test:${plainUp.port}`],
    networkResolve: ['allowed.test=127.0.0.1', 'plain.test=127.0.0.1', 'other.test=127.0.0.1', 'a.wild.test=127.0.0.1'],
  })
  const { layer, events } = openLayer(options)
  const status = await layer.provider.ready()
  assert.equal(status.workspaces[0].state, 'running', JSON.stringify(status.workspaces[0]))
  const c = status.workspaces[0].container
  const env = Object.fromEntries(inspect(c.containerId).Config.Env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
  assert.equal(env.PO_BROKER_EGRESS_SOCKET, '/run/po-broker/egress.sock')

  const P = plainUp.port
  const S = httpsUp.port
  const results = await probe(c.containerId, [
    /* 0 */ { kind: 'tls', connect: `allowed.test:${S}`, servername: 'allowed.test', path: '/hello' },
    /* 1 */ { kind: 'raw', text: `GET http://plain.test:${P}/plain?q=1 HTTP/1.1\r\nHost: plain.test:${P}\r\nProxy-Authorization: Basic eDp5\r\nConnection: close\r\n\r\n` },
    /* 2 */ { kind: 'raw', text: 'CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n' },
    /* 3 */ { kind: 'tls', connect: `allowed.test:${S}`, servername: 'other.test', path: '/sni' },
    /* 4 */ { kind: 'raw', text: `GET http://plain.test:${P}/host HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n` },
    /* 5 */ { kind: 'raw', text: `GET http://plain.test:${P}/one HTTP/1.1\r\nHost: plain.test:${P}\r\n\r\nGET http://plain.test:${P}/two HTTP/1.1\r\nHost: plain.test:${P}\r\nHost: evil.test\r\nConnection: close\r\n\r\n` },
    /* 6 */ { kind: 'raw', text: `CONNECT localhost:${P} HTTP/1.1\r\n\r\n` },
    /* 7 */ { kind: 'raw', text: `CONNECT 127.0.0.1:${P} HTTP/1.1\r\n\r\n` },
    /* 8 */ { kind: 'raw', text: `CONNECT 0x7f.1:${P} HTTP/1.1\r\n\r\n` },
    /* 9 */ { kind: 'raw', text: `GET http://PLAIN.TEST.:${P}/case HTTP/1.1\r\nHost: plain.test:${P}\r\nConnection: close\r\n\r\n` },
    /* 10 */ { kind: 'raw', text: `GET http://a.wild.test:${P}/wild HTTP/1.1\r\nHost: a.wild.test:${P}\r\nConnection: close\r\n\r\n` },
    /* 11 */ { kind: 'raw', text: `GET http://user@plain.test:${P}/userinfo HTTP/1.1\r\nHost: plain.test:${P}\r\nConnection: close\r\n\r\n` },
    /* 12 */ { kind: 'git', url: `http://plain.test:${P}/repo.git` },
  ], certs.ca)

  // Allowed HTTPS: the tunnel reaches the test upstream, TLS verified against the test CA.
  assert.match(results[0].head, /^HTTP\/1\.1 200/)
  assert.match(results[0].answer, /tls upstream saw GET \/hello host=allowed\.test/)
  // Allowed plain HTTP: origin form upstream, the proxy's own headers dropped.
  assert.match(results[1].answer, /^HTTP\/1\.1 200/)
  assert.match(results[1].answer, /plain upstream saw GET \/plain\?q=1/)
  assert.deepEqual(plainRequests.find((r) => r.url === '/plain?q=1'), { url: '/plain?q=1', host: `plain.test:${P}`, proxyAuth: undefined })
  // A denied host: 403 and the one-line reason.
  assert.match(results[2].answer, /^HTTP\/1\.1 403/)
  assert.match(results[2].answer, /egress denied: denied\.test:443 is not in networkAllow \(the sandbox policy\); the person can allow it on the host: po-sandbox allow denied\.test:443\n$/)
  // SNI mismatch: refused before anything is dialled (a TLS alert, no TLS session).
  assert.match(results[3].head, /^HTTP\/1\.1 200/)
  assert.ok(results[3].tlsError, JSON.stringify(results[3]))
  // Host mismatch, also on the second request of a kept-alive connection.
  assert.match(results[4].answer, /^HTTP\/1\.1 403[\s\S]*egress denied: the Host header evil\.test:80 does not match the target plain\.test:/)
  assert.match(results[5].answer, /^HTTP\/1\.1 200[\s\S]*plain upstream saw GET \/one[\s\S]*HTTP\/1\.1 403[\s\S]*more than one Host header/)
  assert.ok(!plainRequests.some((r) => r.url === '/two' || r.url === '/host'))
  // An allowed name that resolves to loopback, unmapped: refused. IP literals, in any spelling: refused.
  assert.match(results[6].answer, /^HTTP\/1\.1 403[\s\S]*egress denied: localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
  assert.match(results[7].answer, new RegExp(`^HTTP/1\\.1 403[\\s\\S]*egress denied: 127\\.0\\.0\\.1:${P} is not in networkAllow`))
  assert.match(results[8].answer, new RegExp(`egress denied: 127\\.0\\.0\\.1:${P} is not in networkAllow`))
  // Case and a trailing dot are the same name; a wildcard entry; userinfo refused.
  assert.match(results[9].answer, /^HTTP\/1\.1 200[\s\S]*saw GET \/case/)
  assert.match(results[10].answer, /^HTTP\/1\.1 200[\s\S]*saw GET \/wild/)
  assert.match(results[11].answer, /^HTTP\/1\.1 403[\s\S]*userinfo/)
  // git clone over plain HTTP through the proxy (every request checked).
  assert.equal(results[12].file, 'hello through the egress proxy\n', JSON.stringify(results[12]))

  // One audit event per tunnel and per request, with the fields; never a path or a header.
  const egress = () => events.filter((e) => e.type === 'egress')
  await waitFor(() => egress().some((e) => e.decision === 'allowed' && e.host === 'allowed.test'), 'the allowed tunnel event')
  const tunnel = egress().find((e) => e.decision === 'allowed' && e.host === 'allowed.test')
  assert.equal(tunnel.workspaceId, 'egress')
  assert.equal(tunnel.port, S)
  assert.ok(tunnel.bytesUp > 0 && tunnel.bytesDown > 0, JSON.stringify(tunnel))
  assert.equal(tunnel.reason, undefined)
  assert.match(tunnel.grant, /^g\d+-/)
  const denied = egress().find((e) => e.host === 'denied.test')
  assert.deepEqual({ ...denied, grant: 'g', durationMs: 0 }, {
    type: 'egress', workspaceId: 'egress', grant: 'g', host: 'denied.test', port: 443, decision: 'denied',
    reason: 'denied.test:443 is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow denied.test:443', bytesUp: 0, bytesDown: 0, durationMs: 0,
  })
  const sni = egress().find((e) => e.host === 'allowed.test' && e.decision === 'denied')
  assert.match(sni.reason, /names "other\.test", not the CONNECT host allowed\.test/)
  assert.ok(egress().some((e) => e.host === 'plain.test' && e.decision === 'allowed' && e.bytesDown > 0))
  assert.ok(!JSON.stringify(egress()).includes('/plain'), 'no path in the audit')
  // The SNI-refused tunnel never reached the upstream: one TLS connection, from probe 0.
  assert.equal(httpsUp.seen.length, 1)

  // The real pi in a container on this grant (its socket folder and variables) gets the proxy
  // variables for its tools, and its bash reaches an allowed host through them.
  const folder = brokerFolder(brokerDirOf(owner), owner, 'egress')
  const keep = Object.entries(env).filter(([k]) => k.startsWith('PO_'))
  const name = `po-egress-pi-${process.pid}-${Date.now()}`
  t.after(() => run('docker', ['rm', '-f', name]))
  // Node's http module with NODE_USE_ENV_PROXY sends absolute-form requests to HTTP_PROXY (its
  // fetch tunnels even http:// through CONNECT, which the proxy refuses without TLS).
  const fetchScript = `require('node:http').get('http://plain.test:${P}/from-pi', (r) => { let b = ''; r.on('data', (d) => { b += d }); r.on('end', () => console.log(r.statusCode, b)) })`
  const commands = [
    { type: 'bash', command: 'echo "proxy=$HTTPS_PROXY|$HTTP_PROXY|$https_proxy|$http_proxy no=$NO_PROXY"', excludeFromContext: true },
    { type: 'bash', command: `NODE_USE_ENV_PROXY=1 node -e "${fetchScript}"`, excludeFromContext: true },
    { type: 'bash', command: `git clone -q http://plain.test:${P}/repo.git /tmp/from-pi && cat /tmp/from-pi/hello.txt`, excludeFromContext: true },
  ]
  const user = `${process.getuid()}:${process.getgid()}`
  const r = await run('docker', [
    'run', '--name', name, '--network', 'none', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--user', user, '-w', '/tmp',
    '-v', `${folder}:/run/po-broker`, '-v', `${root}:/pkg:ro`,
    ...keep.flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    '-e', 'HOME=/tmp', '-e', 'PI_CODING_AGENT_DIR=/tmp/agent', '-e', 'PI_OFFLINE=1', '-e', 'PI_SKIP_VERSION_CHECK=1', '-e', 'PI_TELEMETRY=0',
    '-e', `COMMANDS=${JSON.stringify(commands)}`, '-e', `PI=${PI_IN_CONTAINER}`, '-e', 'EXTENSION=/pkg',
    TEST_BASE, 'node', '-e', PI_DRIVER,
  ])
  const answers = piAnswers(r.stdout)
  const out = (id) => answers.find((a) => a.id === id)?.data?.output ?? ''
  assert.match(out('c0'), /^proxy=(http:\/\/127\.0\.0\.1:\d+)\|\1\|\1\|\1 no=.*localhost,127\.0\.0\.1,::1/, `pi's bash output:\n${r.stdout}\n${r.stderr}`)
  assert.match(out('c1'), /200 plain upstream saw GET \/from-pi/, `pi's bash output:\n${r.stdout}\n${r.stderr}`)
  assert.equal(out('c2'), 'hello through the egress proxy\n', `pi's bash output:\n${r.stdout}\n${r.stderr}`)
})

/**
 * A fake npm registry on 127.0.0.1 serving one package, `name`@1.0.0 (its `index.js` exports
 * `text`): the packument at `/<name>` and a tarball built here, whose URL in the packument names
 * `host:<port>` as npm would get it from a real registry. Records every request it gets.
 */
async function fakeRegistry(t, dir, host, name, text) {
  const pkg = path.join(dir, host, 'package')
  mkdirSync(pkg, { recursive: true })
  writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name, version: '1.0.0', main: 'index.js' }))
  writeFileSync(path.join(pkg, 'index.js'), `module.exports = ${JSON.stringify(text)}\n`)
  execFileSync('tar', ['-czf', 'package.tgz', 'package'], { cwd: path.join(dir, host) })
  const tarball = readFileSync(path.join(dir, host, 'package.tgz'))
  const tarballPath = `/${name}/-/${name}-1.0.0.tgz`
  const requests = []
  let packument
  const up = await listen(t, http.createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, host: req.headers.host, proxyAuth: req.headers['proxy-authorization'] })
    if (req.url === `/${name}`) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument))
    else if (req.url === tarballPath) res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tarball)
    else res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}')
  }))
  const origin = `http://${host}:${up.port}`
  packument = {
    name,
    'dist-tags': { latest: '1.0.0' },
    versions: {
      '1.0.0': {
        name, version: '1.0.0', main: 'index.js',
        dist: {
          tarball: origin + tarballPath,
          shasum: createHash('sha1').update(tarball).digest('hex'),
          integrity: 'sha512-' + createHash('sha512').update(tarball).digest('base64'),
        },
      },
    },
  }
  return { ...up, origin, tarballPath, requests }
}

test('npm install in a workspace container goes through the egress proxy: an allowed registry installs, an unlisted one is refused with the reason', { timeout: 120000 }, async (t) => {
  const dir = tempDir(t, 'po-egress-npm-')
  const allowed = await fakeRegistry(t, dir, 'registry.npm.test', 'po-tiny', 'po-tiny from the allowed registry')
  const unlisted = await fakeRegistry(t, dir, 'unlisted.npm.test', 'po-tiny', 'po-tiny from the unlisted registry')

  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  const ws = tempWorkspace(t)
  const inBundle = bundlePiAndExtension(writeBundle(poHome))
  // Two projects in the workspace, each depending on po-tiny from one registry (.npmrc), and npm
  // itself (the test base image has node, not npm).
  for (const [app, registry] of [['allowed', allowed], ['unlisted', unlisted]]) {
    mkdirSync(path.join(ws, app))
    writeFileSync(path.join(ws, app, 'package.json'), JSON.stringify({ name: app, version: '1.0.0', private: true, dependencies: { 'po-tiny': '^1.0.0' } }))
    writeFileSync(path.join(ws, app, '.npmrc'), `registry=${registry.origin}/\n`)
  }
  const npmRoot = path.dirname(path.dirname(execFileSync('bash', ['-c', 'readlink -f "$(command -v npm)"'], { encoding: 'utf8' }).trim()))
  cpSync(npmRoot, path.join(ws, '.tools', 'npm'), { recursive: true })
  const npm = `node ${ws}/.tools/npm/bin/npm-cli.js install --no-audit --no-fund --no-update-notifier --fetch-retries=0`

  // Both names map to the host's loopback (where the registries listen); only one is listed.
  const { layer, events } = openLayer(baseOptions(poHome, owner, {
    workspaces: [{ id: 'npm', path: ws }],
    network: 'allowlist',
    networkAllow: [`registry.npm.test:${allowed.port}`],
    networkResolve: ['registry.npm.test=127.0.0.1', 'unlisted.npm.test=127.0.0.1'],
  }))
  const status = await layer.provider.ready()
  assert.equal(status.workspaces[0].state, 'running', JSON.stringify(status.workspaces[0]))
  const c = status.workspaces[0].container
  // What the container itself has: the egress socket, no proxy variable; the extension sets those.
  const env = inspect(c.containerId).Config.Env
  assert.ok(env.includes('PO_BROKER_EGRESS_SOCKET=/run/po-broker/egress.sock'), env.join('\n'))
  // Every process of the container (not only pi's session) reaches the proxy: the variables
  // point at the bridge its start gate runs.
  assert.deepEqual(env.filter((kv) => /^(https?_proxy|HTTPS?_PROXY)=/.test(kv)).sort(), ['HTTPS_PROXY', 'HTTP_PROXY', 'http_proxy', 'https_proxy'].map((k) => `${k}=http://127.0.0.1:47391`).sort())

  // The real pi in the workspace container, its extension loaded: its bash tool runs npm with
  // the environment the extension gave pi (no proxy flag: npm reads the variables).
  const commands = [
    { type: 'bash', command: 'echo "proxy=$HTTPS_PROXY|$HTTP_PROXY|$https_proxy|$http_proxy no=$NO_PROXY"', excludeFromContext: true },
    { type: 'bash', command: `cd ${ws}/allowed && ${npm} 2>&1; echo "npm exit $?"; node -e "console.log(require('po-tiny'))"`, excludeFromContext: true },
    { type: 'bash', command: `cd ${ws}/unlisted && ${npm} 2>&1; echo "npm exit $?"`, excludeFromContext: true },
    { type: 'await_notify', match: `unlisted.npm.test:${unlisted.port}` },
  ]
  const r = await piInContainer(c.containerId, inBundle, commands, { workdir: ws })
  const out = (id) => r.answer(id)?.data?.output ?? ''
  const { all } = r
  const [, proxy] = out('c0').match(/^proxy=(http:\/\/127\.0\.0\.1:\d+)\|\1\|\1\|\1 no=/) ?? []
  assert.ok(proxy, all)

  // The allowed registry: installed, the content is the package's, the lock names the registry.
  assert.match(out('c1'), /npm exit 0\npo-tiny from the allowed registry\n/, all)
  assert.equal(readFileSync(path.join(ws, 'allowed', 'node_modules', 'po-tiny', 'index.js'), 'utf8'), 'module.exports = "po-tiny from the allowed registry"\n')
  const lock = JSON.parse(readFileSync(path.join(ws, 'allowed', 'package-lock.json'), 'utf8'))
  assert.equal(lock.packages['node_modules/po-tiny'].resolved, allowed.origin + allowed.tarballPath)
  // It saw the packument and the tarball requests, under the test name, as the proxy sends them
  // (origin form, no proxy headers): the container resolves no name and reaches no host port.
  assert.deepEqual(allowed.requests.map((q) => [q.method, q.url, q.host, q.proxyAuth]), [
    ['GET', '/po-tiny', `registry.npm.test:${allowed.port}`, undefined],
    ['GET', allowed.tarballPath, `registry.npm.test:${allowed.port}`, undefined],
  ])
  // One allowed audit event per request, for the listed host.
  const egress = () => events.filter((e) => e.type === 'egress')
  await waitFor(() => egress().filter((e) => e.host === 'registry.npm.test').length === 2, 'two egress events for registry.npm.test')
  for (const e of egress().filter((e) => e.host === 'registry.npm.test')) {
    assert.equal(e.decision, 'allowed', JSON.stringify(e))
    assert.equal(e.workspaceId, 'npm')
    assert.equal(e.port, allowed.port)
    assert.ok(e.bytesUp > 0 && e.bytesDown > 0, JSON.stringify(e))
  }

  // The unlisted registry: npm fails on the proxy's 403, its reason in npm's output; the registry
  // behind the name never got a connection; the denial is audited.
  const reason = `unlisted.npm.test:${unlisted.port} is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow unlisted.npm.test:${unlisted.port}`
  assert.match(out('c2'), /npm error code E403/, all)
  assert.ok(out('c2').includes(`egress denied: ${reason}`), all)
  assert.match(out('c2'), /npm exit [1-9]/, all)
  assert.deepEqual(unlisted.seen, [])
  assert.deepEqual(unlisted.requests, [])
  await waitFor(() => egress().some((e) => e.host === 'unlisted.npm.test'), 'the egress event for unlisted.npm.test')
  assert.deepEqual(egress().filter((e) => e.host === 'unlisted.npm.test').map((e) => [e.decision, e.port, e.reason]), [['denied', unlisted.port, reason]])
  assert.ok(!existsSync(path.join(ws, 'unlisted', 'node_modules', 'po-tiny')))
  // The extension showed the person (a notify UI request, not the model's context) the denial,
  // with the host command that allows it.
  const notices = piLines(r.stdout).filter((m) => m.type === 'extension_ui_request' && m.method === 'notify')
  const denial = notices.filter((m) => m.message.includes(`unlisted.npm.test:${unlisted.port}`))
  assert.ok(denial.length >= 1, all)
  assert.equal(denial[0].notifyType, 'warning')
  assert.match(denial[0].message, new RegExp(`^Po sandbox refused a connection: unlisted\\.npm\\.test:${unlisted.port}( \\(\\d+ times\\))? is not in the allow list; to allow it, run on the host: po-sandbox allow unlisted\\.npm\\.test:${unlisted.port}$`), all)
})
