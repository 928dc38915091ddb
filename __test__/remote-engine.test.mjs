// Remote engines (issue 37): a second Docker engine of the test's own that is another machine's
// in all but its network (its own mount and UTS namespaces: its own host name, and no path of
// the hub's exists for it), reached over TLS on 127.0.0.1 (certificates of the test's own CA)
// and over SSH through a private sshd on a loopback port (its own host key, authorized key and
// known-hosts file; the person's ~/.ssh is never read). Nothing here leaves this machine.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'

import { addon, homeOwner, root, run, tempDir, waitFor } from './helpers.mjs'
import { privateEngine, testCa } from './private-engine.mjs'
import { privateSshd } from './private-sshd.mjs'
import { baseOptions, getJson, killHub, newOwner, openLayer, spawnHub, tempHome, tempWorkspace, useTestBaseImage, writeBundle, writeHubChild } from './provider-fixtures.mjs'
import { REGISTRY_PROBE, bareRepository, credentialStore, git, gitServer, personNpmrc, publishPrivate, verdaccio } from './service-fixtures.mjs'
import { startUpstream } from './upstreams.mjs'

const HOSTNAME = 'po-remote-box'
const REAL = `sk-ant-api03-REMOTE-${'r'.repeat(32)}`

useTestBaseImage()

/** A model call from inside the container, through the broker socket its environment names. */
const BROKER_CALL = `const http = require('node:http')
const body = JSON.stringify({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
const req = http.request({ socketPath: process.env.PO_BROKER_SOCKET, path: '/anthropic/v1/messages', method: 'POST',
  headers: { 'content-type': 'application/json', 'x-api-key': process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01' } }, (res) => {
  let t = ''; res.on('data', (d) => { t += d }); res.on('end', () => { console.log(res.statusCode + ' ' + t.length); process.exit(0) })
})
req.on('error', (e) => { console.log('error ' + e.code); process.exit(1) })
req.end(body)`

/** Each of TEXTS through the egress socket (as the bridge does), then a direct connection to
 * DIRECT: one JSON line of what each got. */
const EGRESS_PROBE = String.raw`const net = require('node:net')
const once = (connect, text) => new Promise((resolve) => {
  let out = ''
  const s = connect()
  s.on('connect', () => { if (text) s.write(text); else { s.destroy(); resolve('connected') } })
  s.on('data', (d) => { out += d; if (/^HTTP\/1\.1 [0-9]{3}[^]*\r\n\r\n/.test(out) && !/^HTTP\/1\.1 200/.test(out)) s.destroy() })
  s.on('error', (e) => resolve(out || 'error ' + e.code))
  s.on('close', () => resolve(out))
  setTimeout(() => { s.destroy(); resolve(out || 'timeout') }, 8000)
})
;(async () => {
  const results = []
  for (const t of JSON.parse(process.env.TEXTS)) results.push(await once(() => net.connect(process.env.PO_BROKER_EGRESS_SOCKET), t))
  const [host, port] = process.env.DIRECT.split(':')
  results.push(await once(() => net.connect(Number(port), host), null))
  console.log(JSON.stringify(results))
})()`

/** One transport's round: a hub child starts the workspace's sandbox on the remote engine (a copy,
 * its parts in volumes filled through the engine), serves its server here and carries the broker's
 * socket back to this machine's broker; killed and started again, the hub adopts it. */
async function remoteSandbox(t, engine, transport, env) {
  const upstream = await startUpstream({ name: 'anthropic', t })
  const dir = tempDir(t, `po-remote-${transport}-`)
  const folder = path.join(dir, 'project')
  mkdirSync(folder)
  writeFileSync(path.join(folder, 'hello.txt'), `hello from ${transport}\n`)
  for (const args of [['init', '-q', '-b', 'main'], ['add', '.'], ['-c', 'user.name=A', '-c', 'user.email=a@example.invalid', 'commit', '-q', '-m', 'first']]) {
    const r = await run('git', ['-C', folder, ...args])
    assert.equal(r.code, 0, r.stderr)
  }
  const poHome = path.join(dir, 'home')
  writeBundle(poHome)
  writeFileSync(path.join(poHome, 'modes.yaml'), 'modes: []\n')
  // The folder's own id and the Po home's owner: the CLI below finds the hub's sandbox.
  const owner = homeOwner(poHome)
  const { id } = addon.workspaceForFolder(folder)
  const hostEnv = { ...process.env, ...env, ANTHROPIC_API_KEY: REAL, ANTHROPIC_BASE_URL: upstream.origin }
  const services = transport === 'tls' ? await brokeredServices(t, dir, folder, hostEnv) : null
  const options = baseOptions(poHome, owner, { engine: 'docker', env: hostEnv, workspaces: [{ id, path: folder }] })
  const script = writeHubChild(t)
  t.after(async () => {
    const ids = (await engine.docker('ps', '-aq', '--filter', `label=po.owner=${owner}`)).stdout.split(/\s+/).filter(Boolean)
    if (ids.length) await engine.docker('rm', '-f', ...ids)
  })
  const first = spawnHub(t, script, { options, mode: 'wait' })
  const s1 = await first.result()
  assert.equal(s1.state, 'ready', JSON.stringify(s1))
  const c = s1.workspaces[0].container
  assert.ok(c, JSON.stringify(s1.workspaces[0]))
  assert.equal(c.workspaceMode, 'clone', 'a remote engine works on a copy by default')
  // Nothing of this machine is bound: the bundle and the token in read-only volumes, P in one.
  const info = JSON.parse((await engine.docker('inspect', c.containerId)).stdout)[0]
  assert.deepEqual(info.Mounts.filter((m) => m.Type === 'bind'), [], JSON.stringify(info.Mounts))
  for (const dest of ['/opt/po', '/run/po-sandbox']) {
    assert.ok(info.Mounts.some((m) => m.Type === 'volume' && m.Destination === dest && !m.RW), `${dest}: ${JSON.stringify(info.Mounts)}`)
  }
  assert.equal((await engine.docker('ps', '-aq', '--filter', `label=po.fill-of=${id}`)).stdout.trim(), '', 'no fill container left')
  // Its rules refuse the engine's machine's own addresses, learned there (that machine shares
  // this one's network in this test, so they are this machine's).
  const holder = JSON.parse((await engine.docker('inspect', `pon-${owner}-${id}`)).stdout)[0]
  const rules = holder.Config.Env.find((e) => e.startsWith('PO_NET_RULES='))
  // The address of the interface of the default route (bridges come and go with other suites).
  const dev = (await run('ip', ['route', 'show', 'default'])).stdout.match(/ dev (\S+)/)?.[1]
  const own = (os.networkInterfaces()[dev] ?? []).filter((i) => i.family === 'IPv4')
  assert.ok(own.length > 0, `this test needs an IPv4 address on the default route's interface (${dev})`)
  for (const { address } of own) {
    assert.match(rules, new RegExp(`ip daddr \\{[^}]*\\b${address.replaceAll('.', '\\.')}\\b[^}]*\\} jump refuse`), `${address} is not refused`)
  }
  // Its server answers here, through the hub's forward; its token file is the one made here.
  const who = await getJson(c.url, '/whoami')
  assert.equal(who.tokenReadable, true, JSON.stringify(who))
  const token = readFileSync(c.tokenFile, 'utf8').trim()
  assert.equal(who.tokenSha256, createHash('sha256').update(token).digest('hex'))
  assert.ok(!JSON.stringify(who.env).includes(REAL), 'the real key is in the container')
  const look = await engine.docker('exec', c.containerId, 'sh', '-c', 'cat hello.txt; cat "$PO_HOME/modes.yaml"; touch "$PO_HOME/x" && echo p-writable; stat -c %a "$PO_HOME" "$PO_HOME/modes.yaml" /run/po-sandbox/token; touch /opt/po/x 2>/dev/null || echo bundle-read-only')
  assert.equal(look.code, 0, look.stderr)
  assert.equal(look.stdout, `hello from ${transport}\nmodes: []\np-writable\n1777\n444\n400\nbundle-read-only\n`)
  // A model call from inside reaches the fake provider through the carrier and this broker.
  const call = await engine.docker('exec', c.containerId, 'node', '-e', BROKER_CALL)
  assert.match(call.stdout, /^200 /, `${call.stdout} ${call.stderr}`)
  assert.equal(upstream.requests.at(-1).headers['x-api-key'], REAL)
  if (services) await services.check(engine, c.containerId)
  // exec, diff and apply as locally: the agent's commit arrives as a branch here.
  const cli = path.join(root, 'bin', 'po-sandbox.js')
  const image = ['--base-image', options.baseImage, '--image-variant', 'minimal']
  const po = (command, ...rest) => run(process.execPath, [cli, command, folder, '--po-home', poHome, ...image, ...rest], { env: hostEnv })
  if (transport === 'ssh') {
    // The real pi inside (copied in through an exec's input): its streamed call rides the carrier.
    const pi = await po('exec', '--', 'pi', '-p', '--no-session', '--provider', 'anthropic', '--model', 'claude-haiku-4-5', 'ping')
    assert.equal(pi.code, 0, `pi in the remote sandbox failed:\n${pi.stdout}\n${pi.stderr}`)
    assert.match(pi.stdout, /pong from anthropic/)
    const calls = upstream.requests.filter((q) => q.api === 'anthropic-messages')
    assert.ok(calls.length >= 2 && calls.every((q) => q.headers['x-api-key'] === REAL), JSON.stringify(calls.map((q) => q.headers['x-api-key'])))
  }
  // A command's input reaches it, and so does its end (over SSH too: the command exits). 1 MiB.
  const input = 'x'.repeat(1 << 20)
  const piped = await run(process.execPath, [cli, 'exec', folder, '--po-home', poHome, ...image, '--', 'sh', '-c', 'wc -c; echo ended'], { env: hostEnv, input })
  assert.equal(piped.code, 0, piped.stderr)
  assert.equal(piped.stdout, `${input.length}\nended\n`)
  const work = await po('exec', '--', 'sh', '-c', 'echo agent > agent.txt && git add agent.txt && git -c user.name=Agent -c user.email=agent@example.invalid commit -q -m agent && git rev-parse HEAD')
  assert.equal(work.code, 0, work.stderr)
  const commit = work.stdout.trim()
  const diff = await po('diff', '--json')
  assert.equal(diff.code, 0, diff.stderr)
  assert.deepEqual(JSON.parse(diff.stdout).commits.map((x) => x.id), [commit])
  const applied = await po('apply', '--json')
  assert.equal(applied.code, 0, applied.stderr)
  const branch = JSON.parse(applied.stdout).branch
  assert.equal((await run('git', ['-C', folder, 'rev-parse', branch])).stdout.trim(), commit)
  // port: a server inside answers on this machine's loopback, through the exec carrier.
  const served = await engine.docker('exec', '-d', c.containerId, 'node', '-e', "require('http').createServer((q, r) => r.end('inside ' + q.url)).listen(5173, '127.0.0.1')")
  assert.equal(served.code, 0, served.stderr)
  const port = spawn(process.execPath, [cli, 'port', folder, '5173', '--po-home', poHome, ...image], { stdio: ['ignore', 'pipe', 'pipe'], env: hostEnv })
  t.after(() => port.kill('SIGKILL'))
  let printed = ''
  port.stdout.on('data', (d) => { printed += d })
  port.stderr.on('data', (d) => { printed += d })
  const url = await waitFor(() => printed.match(/http:\/\/127\.0\.0\.1:\d+/)?.[0], `the forward's URL (${printed})`, 60000)
  const answer = await waitFor(async () => (await fetch(`${url}/far`).then((r) => r.text()).catch(() => null)), 'the server inside to answer', 20000)
  assert.equal(answer, 'inside /far')
  port.kill('SIGINT')
  // The hub ends without stopping anything; the next one adopts the same container.
  await killHub(first)
  const second = spawnHub(t, script, { options, mode: 'wait' })
  const s2 = await second.result()
  const c2 = s2.workspaces[0].container
  assert.equal(c2?.containerId, c.containerId, JSON.stringify(s2.workspaces[0]))
  assert.equal(c2.adopted, true)
  assert.equal((await getJson(c2.url, '/whoami')).tokenSha256, who.tokenSha256)
  const before = upstream.requests.length
  const again = await engine.docker('exec', c.containerId, 'node', '-e', BROKER_CALL)
  assert.match(again.stdout, /^200 /, `${again.stdout} ${again.stderr}`)
  assert.equal(upstream.requests.length, before + 1)
  await killHub(second)
}

/** The broker's git and registry routes for a remote sandbox: a git server and a Verdaccio
 * here, the folder's remote naming the git host, the hub's environment (`env`, changed) with the
 * person's credentials. `check` fetches and pushes a new branch with the container's git and asks
 * the registry route for a private package, both through the carrier. */
async function brokeredServices(t, dir, folder, env) {
  const TOKEN = 'ghp_remote-host-token-0123456789'
  const srv = path.join(dir, 'srv')
  mkdirSync(srv)
  bareRepository(srv, 'acme/app.git', folder)
  const server = await gitServer(t, srv, TOKEN)
  const origin = `http://127.0.0.1:${server.port}`
  git(folder, 'remote', 'add', 'origin', 'https://git.test/acme/app.git')
  const reg = await verdaccio(t, dir)
  publishPrivate(reg, dir)
  const npmrc = path.join(dir, 'person.npmrc')
  personNpmrc(npmrc, reg)
  Object.assign(env, { PO_SANDBOX_GIT_HOSTS: `git.test=${origin}`, GIT_CONFIG_GLOBAL: credentialStore(dir, origin, TOKEN), npm_config_userconfig: npmrc })
  for (const k of ['GH_TOKEN', 'GITHUB_TOKEN', 'NPM_TOKEN', 'NPM_CONFIG_USERCONFIG', 'PIP_INDEX_URL']) delete env[k]
  // In a clone of its own in /tmp: the workspace's commits are the diff's.
  const check = async (engine, container) => {
    const who = 'git -c user.name=Agent -c user.email=agent@test'
    const pushed = await engine.docker('exec', container, 'sh', '-c', `cd /tmp && git clone -q https://git.test/acme/app.git far 2>&1 && cd far && echo far > far.txt && git add far.txt && ${who} commit -q -m far && git push origin HEAD:refs/heads/agent/far 2>&1`)
    assert.equal(pushed.code, 0, pushed.stdout + pushed.stderr)
    assert.equal(git(path.join(srv, 'acme/app.git'), 'log', '-1', '--format=%s', 'agent/far'), 'far')
    assert.ok(server.requests.some((q) => q.path.startsWith('/acme/app.git/git-receive-pack') && q.auth === 'token'), JSON.stringify(server.requests))
    // The route's socket is carried too (nothing listens on the engine's machine).
    const asked = await engine.docker('exec', container, 'node', '-e', REGISTRY_PROBE)
    assert.match(asked.stdout.trim(), /^200 @acme\/private 401 http:\/\/127\.0\.0\.1:474\d\d\/$/, asked.stdout + asked.stderr)
    const grep = await engine.docker('exec', container, 'sh', '-c', `grep -rl -e '${TOKEN}' -e '${reg.token}' /proc/[0-9]*/environ /tmp "$HOME" . 2>/dev/null; echo done`)
    assert.equal(grep.stdout.trim(), 'done', grep.stdout)
  }
  return { check }
}

const check = (env, extra = {}) => addon.checkEngine({ engine: 'docker', timeoutMs: 15000, env: { HOME: process.env.HOME, PATH: process.env.PATH, ...env }, ...extra })

test('a remote engine over TLS and SSH: detected, named remote by its identity, refused with the fix when its keys or certificates are wrong', async (t) => {
  if (process.getuid() !== 0) throw new Error('This suite starts a Docker engine and an sshd of its own and needs root for them: run npm test as root.')
  const engine = await privateEngine(t, { hostname: HOSTNAME, tls: true })
  const dir = tempDir(t, 'po-remote-')
  const sshd = await privateSshd(t, path.join(dir, 'ssh'))
  const sshHost = `ssh://root@127.0.0.1:${sshd.port}${engine.sock}`
  const tlsEnv = { DOCKER_HOST: `tcp://127.0.0.1:${engine.tlsPort}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: engine.clientCerts }
  const sshEnv = { DOCKER_HOST: sshHost, PO_SANDBOX_SSH_COMMAND: sshd.command }

  await t.test('the engine is another machine for every path: a bind of a hub folder fails there', async () => {
    const folder = tempDir(t, 'po-remote-hub-folder-')
    const imported = await run('sh', ['-c', `tar cf - --files-from /dev/null | docker -H ${engine.host} import - po-remote-empty:1`])
    assert.equal(imported.code, 0, imported.stderr)
    const bind = await engine.docker('create', '--mount', `type=bind,src=${folder},dst=/x`, 'po-remote-empty:1', '/none')
    assert.notEqual(bind.code, 0, 'a bind of a hub folder was accepted by the engine in its own mount namespace')
    assert.match(bind.stderr, /bind source path does not exist/)
    assert.equal((await engine.docker('info', '--format', '{{.Name}}')).stdout.trim(), HOSTNAME)
  })

  await t.test('TLS: the engine answers, reached over TLS with the certificates of DOCKER_CERT_PATH, and is remote', async () => {
    const r = await check(tlsEnv)
    assert.equal(r.available, true, `${r.reasonCode}: ${r.reason}`)
    assert.equal(r.transport, 'tls')
    assert.equal(r.tlsCerts, engine.clientCerts)
    assert.equal(r.endpoint, `tcp://127.0.0.1:${engine.tlsPort}`)
    assert.equal(r.hostName, HOSTNAME)
    assert.equal(r.remote, true, 'an engine on a loopback port that names another machine is remote')
    // The person says otherwise: the option, then the variable.
    assert.equal((await check(tlsEnv, { engineRemote: false })).remote, false)
    assert.equal((await check({ ...tlsEnv, PO_SANDBOX_ENGINE_REMOTE: '0' })).remote, false)
    const bad = await check({ ...tlsEnv, PO_SANDBOX_ENGINE_REMOTE: 'maybe' }).catch((e) => e)
    assert.equal(bad.code, 'OPTIONS_INVALID')
    assert.match(bad.message, /PO_SANDBOX_ENGINE_REMOTE/)
  })

  await t.test('TLS: a Docker context with TLS material is reached the same way', async () => {
    const config = path.join(dir, 'docker-config')
    const name = 'po-remote'
    const sha = (s) => execFileSync('sh', ['-c', `printf %s '${s}' | sha256sum`], { encoding: 'utf8' }).split(' ')[0]
    const meta = path.join(config, 'contexts', 'meta', sha(name))
    const material = path.join(config, 'contexts', 'tls', sha(name), 'docker')
    mkdirSync(meta, { recursive: true })
    mkdirSync(material, { recursive: true })
    writeFileSync(path.join(meta, 'meta.json'), JSON.stringify({ Name: name, Metadata: {}, Endpoints: { docker: { Host: `tcp://127.0.0.1:${engine.tlsPort}`, SkipTLSVerify: false } } }))
    for (const f of ['ca.pem', 'cert.pem', 'key.pem']) copyFileSync(path.join(engine.clientCerts, f), path.join(material, f))
    const r = await check({ DOCKER_CONFIG: config, DOCKER_CONTEXT: name })
    assert.equal(r.available, true, `${r.reasonCode}: ${r.reason}`)
    assert.equal(r.transport, 'tls')
    assert.equal(r.context, name)
    assert.equal(r.tlsCerts, material)
  })

  await t.test('TLS: an engine certificate from another CA, a client certificate the engine does not trust, and TLS without verification are each refused with the fix', async () => {
    const other = testCa(path.join(dir, 'other-ca'), 'another CA')
    const otherClient = other.issue('client')
    const wrongCa = path.join(dir, 'wrong-ca')
    mkdirSync(wrongCa)
    copyFileSync(path.join(other.dir, 'ca.pem'), path.join(wrongCa, 'ca.pem'))
    copyFileSync(path.join(engine.clientCerts, 'cert.pem'), path.join(wrongCa, 'cert.pem'))
    copyFileSync(path.join(engine.clientCerts, 'key.pem'), path.join(wrongCa, 'key.pem'))
    let r = await check({ ...tlsEnv, DOCKER_CERT_PATH: wrongCa })
    assert.equal(r.available, false)
    assert.equal(r.reasonCode, 'ENGINE_TLS_UNTRUSTED')
    assert.match(r.reason, /does not trust/)
    assert.ok(r.reason.includes(path.join(wrongCa, 'ca.pem')), r.reason)
    const wrongClient = path.join(dir, 'wrong-client')
    mkdirSync(wrongClient)
    copyFileSync(path.join(engine.clientCerts, 'ca.pem'), path.join(wrongClient, 'ca.pem'))
    copyFileSync(otherClient.cert, path.join(wrongClient, 'cert.pem'))
    copyFileSync(otherClient.key, path.join(wrongClient, 'key.pem'))
    r = await check({ ...tlsEnv, DOCKER_CERT_PATH: wrongClient })
    assert.equal(r.available, false)
    assert.equal(r.reasonCode, 'ENGINE_TLS_UNTRUSTED')
    assert.match(r.reason, /refused this client's certificate/)
    r = await check({ ...tlsEnv, DOCKER_CERT_PATH: path.join(dir, 'nowhere') })
    assert.equal(r.reasonCode, 'ENGINE_TLS_FILES')
    assert.ok(r.reason.includes(path.join(dir, 'nowhere', 'ca.pem')), r.reason)
    r = await check({ DOCKER_HOST: tlsEnv.DOCKER_HOST, DOCKER_TLS: '1' })
    assert.equal(r.reasonCode, 'ENGINE_UNSUPPORTED_ENDPOINT')
    assert.match(r.reason, /DOCKER_TLS_VERIFY=1/)
  })

  await t.test('SSH: the engine answers through ssh … docker system dial-stdio, over one SSH connection', async () => {
    const before = sshd.logins()
    const r = await check(sshEnv)
    assert.equal(r.available, true, `${r.reasonCode}: ${r.reason}`)
    assert.equal(r.transport, 'ssh')
    assert.equal(r.endpoint, sshHost)
    assert.equal(r.hostName, HOSTNAME)
    assert.equal(r.remote, true)
    for (let i = 0; i < 4; i++) assert.equal((await check(sshEnv)).available, true)
    const doctor = await addon.doctor(process.version, { engine: 'docker', env: { HOME: process.env.HOME, PATH: process.env.PATH, ...sshEnv } })
    assert.match(doctor.text, /over SSH \(ssh … docker system dial-stdio\), machine po-remote-box \(another machine\), \d+ ms a round trip/)
    assert.ok(doctor.roundTripMs >= 1, String(doctor.roundTripMs))
    assert.match(doctor.text, /carried through the engine: the workspace as a copy; the runtime bundle, P and the token in volumes/)
    assert.equal(sshd.logins() - before, 1, `six checks and a doctor logged in more than once:\n${sshd.log()}`)
  })

  await t.test('SSH: a host key that is not the known one, and a host not known at all, are refused with the fix and never accepted', async () => {
    const wrong = await check({ DOCKER_HOST: `ssh://root@localhost:${sshd.port}${engine.sock}`, PO_SANDBOX_SSH_COMMAND: sshd.wrongKey })
    assert.equal(wrong.available, false)
    assert.equal(wrong.reasonCode, 'ENGINE_SSH_HOST_KEY', wrong.reason)
    assert.match(wrong.reason, /not the key your known hosts hold/)
    assert.match(wrong.reason, /ssh-keygen -R localhost/)
    const unknownFile = path.join(dir, 'ssh', 'unknown_known_hosts')
    const unknown = await check({ DOCKER_HOST: `ssh://root@[::1]:${sshd.port}`, PO_SANDBOX_SSH_COMMAND: sshd.unknown })
    assert.equal(unknown.available, false)
    // sshd listens on 127.0.0.1 only: ::1 is refused before any key is seen.
    assert.equal(unknown.reasonCode, 'ENGINE_SSH_FAILED', unknown.reason)
    const unknownV4 = await check({ DOCKER_HOST: `ssh://root@localhost:${sshd.port}${engine.sock}`, PO_SANDBOX_SSH_COMMAND: sshd.unknown })
    assert.equal(unknownV4.reasonCode, 'ENGINE_SSH_HOST_KEY', unknownV4.reason)
    assert.match(unknownV4.reason, /not in your known hosts/)
    assert.equal(readFileSync(unknownFile, 'utf8'), '', 'the host key was recorded without the person')
  })

  await t.test('over TLS and over SSH: a hub runs a clone-mode sandbox there with nothing of this machine bound, serves it here, carries the broker back, and a restarted hub adopts it', async (t) => {
    for (const [transport, env] of [['tls', tlsEnv], ['ssh', sshEnv]]) await remoteSandbox(t, engine, transport, env)
  })

  await t.test('SSH lost while a sandbox runs: calls fail coded and bounded, the status says the engine is not answering, and everything resumes when it returns', async (t) => {
    const upstream = await startUpstream({ name: 'anthropic', t })
    const poHome = tempHome(t)
    const owner = newOwner()
    writeBundle(poHome)
    const env = { ...process.env, ...sshEnv, ANTHROPIC_API_KEY: REAL, ANTHROPIC_BASE_URL: upstream.origin }
    const { layer } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env, workspaces: [{ id: 'cut', path: tempWorkspace(t) }] }))
    t.after(() => layer.containers.stopAll().catch(() => {}))
    const status = await layer.provider.ready()
    const c = status.workspaces[0].container
    assert.ok(c, JSON.stringify(status.workspaces[0]))
    assert.equal((await getJson(c.url, '/api/health')).ok, true)

    await sshd.stop()
    const began = Date.now()
    const failed = await layer.containers.list().then(() => null, (e) => e)
    assert.ok(failed, 'a call over a dead SSH connection succeeded')
    assert.match(failed.code, /^ENGINE_/, `${failed.code}: ${failed.message}`)
    assert.ok(Date.now() - began < 35000, `the call took ${Date.now() - began} ms`)
    const down = layer.provider.status()
    assert.equal(down.engineAnswering, false, JSON.stringify(down))
    assert.match(down.engineProblem, /probes the engine every \d+ s/)
    // Its URL is this machine's forward: down with the connection, not answered by anything else.
    assert.equal(await fetch(`${c.url}/api/health`, { signal: AbortSignal.timeout(5000) }).then(() => 'answered', () => 'down'), 'down')

    await sshd.start()
    await waitFor(() => layer.provider.status().engineAnswering, 'the provider to see the engine answer again', 30000)
    // The hub's links come back by themselves: the same URL, the broker's carrier too.
    assert.equal((await waitFor(() => getJson(c.url, '/api/health').catch(() => null), 'the server to answer on the same URL', 30000)).ok, true)
    const call = await waitFor(async () => {
      const r = await engine.docker('exec', c.containerId, 'node', '-e', BROKER_CALL)
      return /^200 /.test(r.stdout) && r
    }, 'a model call through the carrier again', 30000)
    assert.match(call.stdout, /^200 /)
    assert.equal(upstream.requests.at(-1).headers['x-api-key'], REAL)
    assert.equal((await layer.containers.list()).length, 1)
  })

  await t.test('allowlist over SSH: the egress proxy, carried back to this machine, lets the container reach an allowed stand-in here and nothing else', async (t) => {
    const seen = []
    const standIn = http.createServer((req, res) => { seen.push(req.url); res.end(`stand-in saw ${req.url}`) })
    await new Promise((resolve) => standIn.listen(0, '0.0.0.0', resolve))
    t.after(() => new Promise((resolve) => { standIn.close(resolve); standIn.closeAllConnections() }))
    const P = standIn.address().port
    const poHome = tempHome(t)
    writeBundle(poHome)
    const { layer } = openLayer(baseOptions(poHome, newOwner(), {
      engine: 'docker',
      env: { ...process.env, ...sshEnv },
      network: 'allowlist',
      networkAllow: [`allowed.test:${P}`],
      networkResolve: ['allowed.test=127.0.0.1', 'denied.test=127.0.0.1'],
      workspaces: [{ id: 'fence', path: tempWorkspace(t) }],
    }))
    t.after(() => layer.containers.stopAll().catch(() => {}))
    const status = await layer.provider.ready()
    const c = status.workspaces[0].container
    assert.ok(c, JSON.stringify(status.workspaces[0]))
    const dev = (await run('ip', ['route', 'show', 'default'])).stdout.match(/ dev (\S+)/)?.[1]
    const here = (os.networkInterfaces()[dev] ?? []).find((i) => i.family === 'IPv4')?.address
    assert.ok(here, `this test needs an IPv4 address on the default route's interface (${dev})`)
    const texts = [
      `GET http://allowed.test:${P}/in HTTP/1.1\r\nHost: allowed.test:${P}\r\nConnection: close\r\n\r\n`,
      `GET http://denied.test:${P}/out HTTP/1.1\r\nHost: denied.test:${P}\r\nConnection: close\r\n\r\n`,
      `CONNECT ${here}:${P} HTTP/1.1\r\nHost: ${here}:${P}\r\n\r\n`,
    ]
    const r = await engine.docker('exec', '-e', `TEXTS=${JSON.stringify(texts)}`, '-e', `DIRECT=${here}:${P}`, c.containerId, 'node', '-e', EGRESS_PROBE)
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`)
    const [allowed, denied, literal, direct] = JSON.parse(r.stdout.trim().split('\n').pop())
    assert.match(allowed, /^HTTP\/1\.1 200[^]*stand-in saw \/in/)
    assert.match(denied, /^HTTP\/1\.1 403/)
    assert.match(literal, /^HTTP\/1\.1 403/)
    // Without the proxy, this machine (the engine's, here) is refused by the rules.
    assert.match(direct, /^error (EHOSTUNREACH|ECONNREFUSED|ENETUNREACH|EACCES|EPERM)/)
    assert.deepEqual(seen, ['/in'], 'only the allowed request reached the stand-in')
  })

  await t.test('a workspace that asks for bind mode is refused with the fix, making nothing there', async (t) => {
    const poHome = tempHome(t)
    const owner = newOwner()
    writeBundle(poHome)
    const ws = tempWorkspace(t)
    const env = { ...process.env, ...sshEnv }
    const { layer } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env, workspaceMode: 'bind', workspaces: [{ id: 'near', path: ws }] }))
    t.after(() => layer.containers.stopAll().catch(() => {}))
    const status = await layer.provider.ready()
    const w = status.workspaces[0]
    assert.equal(w.errorCode, 'WORKSPACE_INVALID', JSON.stringify(status))
    assert.match(w.error, /its mode is bind, but the engine runs on another machine/)
    assert.match(w.error, /workspaceMode 'clone'/)
    assert.equal((await engine.docker('ps', '-aq', '--filter', `label=po.owner=${owner}`)).stdout.trim(), '')
    assert.equal((await engine.docker('volume', 'ls', '-q', '--filter', `label=po.owner=${owner}`)).stdout.trim(), '')
  })
})
