// The container provider against the real Docker engine: what a workspace container is, how
// hubs adopt, replace and race for containers, how start-up fails, and what stops remove.
// Every test has its own Po home and owner, and removes its containers and volumes by label.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import os from 'node:os'
import http from 'node:http'
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { addon, dockerCli, run, tempDir, waitFor } from './helpers.mjs'
import {
  FAKE_KEY, HOST_ONLY_PATH, RUNTIME_VERSION, SERVER_PORT, TEST_BASE, useTestBaseImage,
  baseOptions, brokerDirOf, brokerFolder, cleanupOwner, containersWith, fakeHost, getJson, hostEnv, inspect, isRunning,
  killHub, newOwner, openLayer, serverSource, sha256File, spawnHub, tempHome, tempWorkspace,
  modelsUpstream, volumesOf, writeBundle, writeHubChild,
} from './provider-fixtures.mjs'

const { registerSandboxLayer, ensureSandboxImage } = addon
const uidGid = `${process.getuid()}:${process.getgid()}`

useTestBaseImage()

/** A Po home with a bundle, an owner cleaned up by label, and a layer over them. */
function setup(t, extra = {}) {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  const bundleDir = writeBundle(poHome)
  return { poHome, owner, bundleDir, options: baseOptions(poHome, owner, extra) }
}

function assertCode(code, re) {
  return (err) => {
    assert.ok(err instanceof Error, `not an Error: ${err}`)
    assert.equal(err.code, code, err.message)
    if (re) assert.match(err.message, re)
    return true
  }
}

const mountKey = (m) => `${m.Type}|${m.Type === 'volume' ? m.Name : m.Source}|${m.Destination}|${m.RW ? 'rw' : 'ro'}`

test('three workspaces come up as hardened containers with exactly the allowed mounts, env and loopback port', async (t) => {
  const { poHome, owner, bundleDir } = setup(t)
  const brokerDir = brokerDirOf(owner)
  writeFileSync(path.join(poHome, 'modes.yaml'), 'modes: []\n')
  writeFileSync(path.join(poHome, 'config.yaml'), 'config: {}\n')
  const ids = ['ws1', 'ws2', 'ws3']
  const paths = Object.fromEntries(ids.map((id) => [id, tempWorkspace(t)]))
  const { layer, events } = openLayer(baseOptions(poHome, owner, { workspaces: ids.map((id) => ({ id, path: paths[id] })) }))
  const status = await layer.provider.ready()
  assert.equal(status.state, 'ready', JSON.stringify(status))
  assert.equal(status.settled, true)
  assert.equal(status.owner, owner)
  assert.match(status.image, /^po-sandbox:/)
  assert.deepEqual(status.workspaces.map((w) => [w.id, w.state]), ids.map((id) => [id, 'running']), JSON.stringify(status.workspaces))
  assert.equal(containersWith({ 'po.owner': owner }).length, 3)

  for (const w of status.workspaces) {
    const id = w.id
    const c = w.container
    const P = path.join(poHome, 'sandboxes', id)
    const tokenFile = path.join(poHome, 'sandbox-tokens', owner, `${id}.token`)
    // The result object.
    assert.equal(c.workspaceId, id)
    assert.equal(c.name, `po-${owner}-${id}`)
    assert.equal(c.image, status.image)
    assert.equal(c.state, 'running')
    assert.ok(Number.isInteger(c.hostPort) && c.hostPort > 0, `hostPort ${c.hostPort}`)
    assert.equal(c.url, `http://127.0.0.1:${c.hostPort}`)
    assert.equal(c.tokenFile, tokenFile)
    assert.equal(c.adopted, false)

    const info = inspect(c.containerId)
    assert.equal(info.Id, c.containerId)
    assert.equal(info.State.Running, true)
    const hc = info.HostConfig
    assert.deepEqual(hc.CapDrop, ['ALL'])
    assert.ok(!hc.CapAdd || hc.CapAdd.length === 0, `CapAdd ${JSON.stringify(hc.CapAdd)}`)
    assert.equal(hc.Privileged, false)
    assert.ok((hc.SecurityOpt || []).includes('no-new-privileges'), `SecurityOpt ${JSON.stringify(hc.SecurityOpt)}`)
    assert.ok(hc.PidsLimit > 0, `PidsLimit ${hc.PidsLimit}`)
    assert.equal(info.Config.User, uidGid)
    assert.equal(info.Config.Labels['po.owner'], owner)
    assert.equal(info.Config.Labels['po.workspace'], id)

    // One port, published on loopback only, by its network namespace holder (the container
    // joins the holder's namespace and publishes none itself).
    assert.deepEqual(hc.PortBindings ?? {}, {})
    const holder = inspect(hc.NetworkMode.replace(/^container:/, ''))
    assert.equal(holder.Config.Labels['po.holder-of'], id)
    const bindings = Object.entries(holder.HostConfig.PortBindings || {})
    assert.equal(bindings.length, 1, JSON.stringify(hc.PortBindings))
    assert.equal(bindings[0][0], `${SERVER_PORT}/tcp`)
    assert.ok(bindings[0][1].length > 0 && bindings[0][1].every((b) => b.HostIp === '127.0.0.1'), JSON.stringify(bindings))
    const live = Object.values(holder.NetworkSettings.Ports || {}).filter(Boolean).flat()
    assert.ok(live.length > 0, JSON.stringify(holder.NetworkSettings.Ports))
    assert.ok(live.every((b) => b.HostIp === '127.0.0.1'), JSON.stringify(holder.NetworkSettings.Ports))
    assert.ok(live.some((b) => Number(b.HostPort) === c.hostPort), JSON.stringify(live))

    // Exactly the allowed mounts.
    const expected = [
      `bind|${paths[id]}|${paths[id]}|rw`,
      `bind|${bundleDir}|/opt/po|ro`,
      `bind|${P}|${P}|rw`,
      `bind|${tokenFile}|/run/po-sandbox/token|ro`,
      `bind|${path.join(poHome, 'modes.yaml')}|${P}/modes.yaml|ro`,
      `bind|${path.join(poHome, 'config.yaml')}|${P}/config.yaml|ro`,
      `volume|po-${owner}-${id}-home|/po-home|rw`,
      `volume|po-${owner}-${id}-cache|/po-runtime|rw`,
      `volume|po-${owner}-${id}-git|/po-git|rw`,
      // The credential broker's socket folder for this workspace (its own, 0700).
      `bind|${brokerFolder(brokerDir, owner, id)}|/run/po-broker|rw`,
      // The guarded paths, each read-only onto itself (no repository here: .git itself).
      ...['.git', '.pi', '.agents', '.claude', '.mcp.json', '.cursor', '.codex', '.devcontainer', '.vscode', '.idea', '.direnv', '.husky'].map((g) => `bind|${paths[id]}/${g}|${paths[id]}/${g}|ro`),
    ]
    assert.deepEqual(info.Mounts.map(mountKey).sort(), expected.sort())
    const allowedUnderHome = new Set([bundleDir, P, tokenFile, path.join(poHome, 'modes.yaml'), path.join(poHome, 'config.yaml')])
    for (const m of info.Mounts.filter((m) => m.Type === 'bind')) {
      assert.ok(!m.Source.includes('docker.sock'), m.Source)
      assert.notEqual(m.Source, poHome)
      if (m.Source.startsWith(poHome + path.sep)) assert.ok(allowedUnderHome.has(m.Source), `mounts ${m.Source} from the Po home`)
      assert.ok(!m.Source.endsWith('domains.yaml') && !m.Destination.endsWith('domains.yaml'), 'domains.yaml does not exist, so it is not mounted')
    }

    // Environment: the fixed variables, and nothing secret or engine-related from the host.
    const env = info.Config.Env
    for (const v of ['PO_SANDBOX=1', `PO_HOME=${P}`, `PO_WORKSPACE=${id}`]) assert.ok(env.includes(v), `${v} in ${JSON.stringify(env)}`)
    assert.ok(!env.some((e) => e.startsWith('FAKE_API_KEY=') || e.includes(FAKE_KEY)), JSON.stringify(env))
    assert.ok(!env.some((e) => e.startsWith('DOCKER_HOST=')), JSON.stringify(env))
    assert.ok(!env.some((e) => e.includes(HOST_ONLY_PATH) || e === `PATH=${process.env.PATH}`), JSON.stringify(env))

    // The token file: 0600, outside P.
    const st = statSync(tokenFile)
    assert.equal(st.mode & 0o777, 0o600)
    assert.ok(path.relative(P, tokenFile).startsWith('..' + path.sep), `${tokenFile} is inside ${P}`)

    // Ask the live server.
    const who = await getJson(c.url)
    assert.equal(who.env.PO_SANDBOX, '1')
    assert.equal(who.env.PO_WORKSPACE, id)
    assert.equal(who.env.PO_HOME, P)
    assert.equal(who.env.FAKE_API_KEY, undefined)
    assert.equal(who.env.DOCKER_HOST, undefined)
    assert.equal(`${who.uid}:${who.gid}`, uidGid)
    assert.equal(who.tokenReadable, true, `token error: ${who.tokenError}`)
    assert.equal(who.tokenSha256, sha256File(tokenFile), 'the container reads the token the host holds')
  }
  // Each workspace was reported created and ready.
  await waitFor(() => ids.every((id) => events.some((e) => e.type === 'workspace' && e.workspaceId === id && e.state === 'ready')), 'ready events')
})

async function hubSurvivesAndIsAdopted(t, ending) {
  const { poHome, owner } = setup(t)
  const workspaces = ['alpha', 'beta'].map((id) => ({ id, path: tempWorkspace(t) }))
  const script = writeHubChild(t)
  const payload = { options: baseOptions(poHome, owner, { workspaces }), mode: ending === 'exit75' ? 'exit75' : 'wait' }

  const first = spawnHub(t, script, payload)
  const s1 = await first.result()
  assert.equal(s1.state, 'ready', JSON.stringify(s1))
  assert.deepEqual(s1.workspaces.map((w) => w.state), ['running', 'running'], JSON.stringify(s1.workspaces))
  assert.ok(s1.workspaces.every((w) => w.container.adopted === false))
  const ids = s1.workspaces.map((w) => w.container.containerId)
  if (ending === 'exit75') {
    assert.deepEqual(await first.exited, { code: 75, signal: null })
  } else {
    assert.deepEqual(await killHub(first), { code: null, signal: 'SIGKILL' })
  }
  for (const id of ids) assert.equal(isRunning(id), true, `container ${id} still runs after the hub ended (${ending})`)

  const second = spawnHub(t, script, { ...payload, mode: 'wait' })
  const s2 = await second.result()
  assert.equal(s2.state, 'ready', JSON.stringify(s2))
  assert.deepEqual(s2.workspaces.map((w) => w.container?.containerId), ids)
  assert.ok(s2.workspaces.every((w) => w.state === 'running' && w.container.adopted === true), JSON.stringify(s2.workspaces))
  assert.equal(s2.imageBuilt, false)
  assert.deepEqual(containersWith({ 'po.owner': owner }).sort(), [...ids].sort(), 'no new container')
  await waitFor(() => second.events().some((e) => e.type === 'image' && e.phase === 'cached'), 'an image cached event')
  assert.ok(!second.events().some((e) => e.type === 'image' && ['building', 'built'].includes(e.phase)), 'no rebuild')
  assert.ok(!second.events().some((e) => e.type === 'workspace' && e.state === 'created'), 'nothing created')
  await killHub(second)
}

test('a hub killed with SIGKILL leaves its containers running, and the next hub adopts them without a rebuild', async (t) => {
  await hubSurvivesAndIsAdopted(t, 'SIGKILL')
})

test('a hub that exits with code 75 leaves its containers running, and the next hub adopts them without a rebuild', async (t) => {
  await hubSurvivesAndIsAdopted(t, 'exit75')
})

test('ten concurrent starts of one workspace in one process share one container', async (t) => {
  const { options, owner } = setup(t)
  const wsPath = tempWorkspace(t)
  const { layer } = openLayer(options)
  const results = await Promise.all(Array.from({ length: 10 }, () => layer.containers.start({ id: 'same', path: wsPath })))
  const ids = new Set(results.map((r) => r.containerId))
  assert.equal(ids.size, 1, [...ids].join(', '))
  assert.deepEqual(containersWith({ 'po.owner': owner, 'po.workspace': 'same' }), [...ids])
  assert.equal(isRunning([...ids][0]), true)
})

test('two hub processes racing to start the same workspace end with one container, the same id, and the token the container reads', async (t) => {
  const script = writeHubChild(t)
  // A few rounds, each with its own Po home and owner: who wins, and when the loser looks, varies.
  for (let round = 1; round <= 3; round++) {
    const { options, owner } = setup(t)
    const payload = { options, mode: 'wait', workspace: { id: 'raced', path: tempWorkspace(t) } }
    const a = spawnHub(t, script, payload)
    const b = spawnHub(t, script, payload)
    const [ra, rb] = await Promise.allSettled([a.result('container'), b.result('container')])
    for (const r of [ra, rb]) if (r.status === 'rejected') throw new Error(`round ${round}: ${r.reason.message}`)
    const [ca, cb] = [ra.value, rb.value]
    assert.equal(ca.containerId, cb.containerId, `round ${round}`)
    assert.deepEqual(containersWith({ 'po.owner': owner, 'po.workspace': 'raced' }), [ca.containerId], `round ${round}`)
    assert.equal(isRunning(ca.containerId), true, `round ${round}`)
    assert.deepEqual([ca.adopted, cb.adopted].sort(), [false, true], `round ${round}: one created, one adopted`)
    assert.equal(ca.tokenFile, cb.tokenFile)
    // Whichever hub won, the token file on the host must be the one mounted into the container.
    const who = await getJson(ca.url)
    assert.equal(who.tokenReadable, true)
    assert.equal(who.tokenSha256, sha256File(ca.tokenFile), `round ${round}: the host token file differs from the token the container reads`)
    await Promise.all([killHub(a), killHub(b)])
  }
})

test('stale lock files in P are removed on create without following links; nothing is removed on adoption', async (t) => {
  const { poHome, owner, options } = setup(t)
  const wsPath = tempWorkspace(t)
  const P = path.join(poHome, 'sandboxes', 'locks')
  const elsewhere = tempWorkspace(t)
  const target = path.join(elsewhere, 'victim.txt')
  mkdirSync(path.join(P, 'x', 'y'), { recursive: true })
  writeFileSync(path.join(P, 'a.po-v4.lock'), '1')
  writeFileSync(path.join(P, 'x', 'y', 'nested.po-v4.lock'), '2')
  writeFileSync(path.join(P, 'keep.txt'), 'keep')
  mkdirSync(path.join(P, 'dir.po-v4.lock'))
  writeFileSync(target, 'victim content')
  symlinkSync(target, path.join(P, 'link.po-v4.lock'))
  writeFileSync(path.join(poHome, 'outside.po-v4.lock'), 'outside')

  const { layer } = openLayer(options)
  const c = await layer.containers.start({ id: 'locks', path: wsPath })
  assert.equal(c.adopted, false)
  assert.equal(existsSync(path.join(P, 'a.po-v4.lock')), false)
  assert.equal(existsSync(path.join(P, 'x', 'y', 'nested.po-v4.lock')), false)
  assert.throws(() => lstatSync(path.join(P, 'link.po-v4.lock')), { code: 'ENOENT' })
  assert.equal(readFileSync(target, 'utf8'), 'victim content')
  assert.equal(readFileSync(path.join(P, 'keep.txt'), 'utf8'), 'keep')
  assert.ok(statSync(path.join(P, 'dir.po-v4.lock')).isDirectory())
  assert.equal(readFileSync(path.join(poHome, 'outside.po-v4.lock'), 'utf8'), 'outside')

  // A lock made while the container runs belongs to it: adoption removes nothing.
  writeFileSync(path.join(P, 'fresh.po-v4.lock'), 'live')
  const { layer: again } = openLayer(baseOptions(poHome, owner))
  const c2 = await again.containers.start({ id: 'locks', path: wsPath })
  assert.equal(c2.adopted, true)
  assert.equal(c2.containerId, c.containerId)
  assert.equal(readFileSync(path.join(P, 'fresh.po-v4.lock'), 'utf8'), 'live')
})

test('a running container that keeps its capabilities is replaced, with the reason, not adopted', async (t) => {
  const { options, owner, bundleDir } = setup(t)
  const wsPath = tempWorkspace(t)
  const name = `po-${owner}-drift`
  // --init only so that the replaced container stops at once; its drift is the capabilities.
  const oldId = dockerCli(['run', '-d', '--init', '--name', name, '--label', `po.owner=${owner}`, '--label', 'po.workspace=drift',
    '-p', `127.0.0.1::${SERVER_PORT}`, '-v', `${bundleDir}:/opt/po:ro`, TEST_BASE, 'node', '/opt/po/server.js'])
  assert.equal(isRunning(oldId), true)

  const { layer, events } = openLayer(options)
  const c = await layer.containers.start({ id: 'drift', path: wsPath })
  assert.notEqual(c.containerId, oldId)
  assert.equal(c.adopted, false)
  assert.match(c.replacedReason ?? '', /capabilit/)
  const replaced = await waitFor(() => events.find((e) => e.type === 'workspace' && e.state === 'replaced'), 'a replaced event')
  assert.equal(replaced.workspaceId, 'drift')
  assert.equal(replaced.containerId, oldId)
  assert.match(replaced.reason ?? '', /capabilit/)
  assert.notEqual((await run('docker', ['inspect', oldId])).code, 0, 'the old container is gone')
  assert.deepEqual(containersWith({ 'po.owner': owner }), [c.containerId])
  assert.deepEqual(inspect(c.containerId).HostConfig.CapDrop, ['ALL'])
})

test('a missing or invalid container-runtime.json makes the provider unavailable, naming the key, and starts nothing', async (t) => {
  const valid = { entry: '/opt/po/server.js', port: SERVER_PORT }
  const cases = [
    { name: 'no container-runtime folder', install: null, code: 'RUNTIME_NOT_INSTALLED', says: /container-runtime/ },
    { name: 'a version folder without the file', install: 'folder-only', code: 'RUNTIME_NOT_INSTALLED', says: /container-runtime\.json/ },
    { name: 'invalid JSON', json: '{ "entry": "/opt/po/server.js", ', says: /\(file\): is not valid JSON/ },
    { name: 'an unknown key', json: { ...valid, bogus: 1 }, says: /: bogus: is not a known key/ },
    { name: 'a relative entry', json: { ...valid, entry: 'server.js' }, says: /: entry: .*relative/ },
    { name: 'an entry outside /opt/po', json: { ...valid, entry: '/etc/passwd' }, says: /: entry: must be inside \/opt\/po/ },
    { name: 'an entry with ..', json: { ...valid, entry: '/opt/po/../etc/x' }, says: /: entry: must not contain a '\.\.' segment/ },
    { name: 'a port of the wrong type', json: { ...valid, port: '7300' }, says: /: port: must be a whole number/ },
    { name: 'an oversized file', json: JSON.stringify(valid) + ' '.repeat(64 * 1024), says: /\(file\): .*64 KiB/ },
  ]
  for (const c of cases) {
    const poHome = tempHome(t)
    const owner = newOwner()
    cleanupOwner(t, owner)
    if (c.install === 'folder-only') mkdirSync(path.join(poHome, 'container-runtime', RUNTIME_VERSION), { recursive: true })
    else if (c.install !== null) writeBundle(poHome, { json: c.json })
    const wsPath = tempWorkspace(t)
    const { layer, events } = openLayer(baseOptions(poHome, owner, { workspaces: [{ id: 'w', path: wsPath }] }))
    const status = await layer.provider.ready()
    const code = c.code ?? 'RUNTIME_INVALID'
    assert.equal(status.state, 'unavailable', `${c.name}: ${JSON.stringify(status)}`)
    assert.equal(status.code, code, `${c.name}: ${status.reason}`)
    assert.match(status.reason, c.says, c.name)
    assert.equal(status.workspaces[0].state, 'failed', c.name)
    assert.equal(status.workspaces[0].errorCode, code, c.name)
    const rt = await waitFor(() => events.find((e) => e.type === 'runtime'), `${c.name}: a runtime event`)
    assert.equal(rt.ok, false, c.name)
    assert.equal(rt.code, code, c.name)
    assert.ok(!events.some((e) => e.type === 'image'), `${c.name}: no image step`)
    assert.deepEqual(containersWith({ 'po.owner': owner }), [], `${c.name}: no container`)
    assert.equal(existsSync(path.join(poHome, 'sandboxes')), false, `${c.name}: no sandbox folder`)
    await assert.rejects(layer.containers.start({ id: 'w', path: wsPath }), assertCode(code))
  }
})

test('with no engine the provider is unavailable and attempts nothing else', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const { layer, events } = openLayer(baseOptions(poHome, owner, {
    workspaces: [{ id: 'w', path: tempWorkspace(t) }],
    env: hostEnv({ DOCKER_HOST: 'unix:///nonexistent/docker.sock', PO_SANDBOX_ENGINE: 'docker' }),
  }))
  const status = await layer.provider.ready()
  assert.equal(status.state, 'unavailable')
  assert.equal(status.code, 'ENGINE_UNAVAILABLE')
  assert.match(status.reason, /\/nonexistent\/docker\.sock/)
  assert.equal(status.workspaces[0].state, 'failed')
  assert.equal(status.workspaces[0].errorCode, 'ENGINE_UNAVAILABLE')
  await waitFor(() => events.some((e) => e.type === 'provider' && e.state === 'unavailable'), 'the unavailable event')
  const engine = events.find((e) => e.type === 'engine')
  assert.ok(engine, JSON.stringify(events))
  assert.equal(engine.available, false)
  assert.ok(engine.reason)
  assert.ok(!events.some((e) => e.type === 'runtime' || e.type === 'image' || e.type === 'workspace'), JSON.stringify(events))
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])

  // A listener added after start-up settled is replayed what it missed, once, in order.
  const late = []
  layer.containers.onEvent((e) => late.push(e))
  await waitFor(() => late.length >= events.length, 'the replayed events')
  await new Promise((r) => setTimeout(r, 100))
  assert.deepEqual(late, events)
})

test('an engine that comes up after the hub: start-up is retried (in the background, and by a start), and the configured workspaces start', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  // The engine's socket appears later, as when dockerd starts after the hub.
  const dir = tempDir(t, 'po-late-engine-')
  const sock = path.join(dir, 'docker.sock')
  const wsPath = tempWorkspace(t)
  const { layer, events } = openLayer(baseOptions(poHome, owner, {
    workspaces: [{ id: 'late', path: wsPath }],
    env: hostEnv({ DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' }),
  }))
  const down = await layer.provider.ready()
  assert.equal(down.state, 'unavailable')
  assert.equal(down.code, 'ENGINE_UNAVAILABLE')
  assert.equal(down.workspaces[0].state, 'failed')
  // Listings and stops never retry; a start does (at most every 2 s) and fails while it is down.
  await assert.rejects(layer.containers.list(), assertCode('ENGINE_UNAVAILABLE'))
  await new Promise((r) => setTimeout(r, 2100))
  await assert.rejects(layer.containers.start({ id: 'late', path: wsPath }), assertCode('ENGINE_UNAVAILABLE'))

  // The engine comes up; nobody calls: the background retry (2, 4, 8… s) brings the provider
  // up and starts the configured workspace.
  symlinkSync('/var/run/docker.sock', sock)
  const up = await waitFor(() => {
    const st = layer.provider.status()
    return st.state === 'ready' && st.settled && st.workspaces[0].state === 'running' && st
  }, 'the background retry to start the configured workspace', 60000)
  const late = up.workspaces[0]
  assert.equal(late.error ?? null, null)
  assert.ok(isRunning(late.container.containerId))
  // A start now adopts that same container.
  const c = await layer.containers.start({ id: 'late', path: wsPath })
  assert.equal(c.containerId, late.container.containerId)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [c.containerId])
  assert.ok(events.some((e) => e.type === 'provider' && e.state === 'ready'), JSON.stringify(events.map((e) => e.type + ':' + (e.state ?? e.phase ?? ''))))
})

/**
 * The real Docker engine behind a plain-HTTP TCP endpoint on this machine's non-loopback
 * address (as `DOCKER_HOST=tcp://…` would reach an engine elsewhere); `name` replaces the
 * machine name the engine reports in its info, so the engine appears to run on that machine.
 */
async function engineOverTcp(t, name) {
  const address = Object.values(os.networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal)?.address
  assert.ok(address, 'this test needs a non-loopback IPv4 address on this machine')
  const server = http.createServer((req, res) => {
    const up = http.request({ socketPath: '/var/run/docker.sock', path: req.url, method: req.method, headers: req.headers }, (ur) => {
      if (!name || !/\/info$/.test(new URL(req.url, 'http://x').pathname)) {
        res.writeHead(ur.statusCode, ur.headers)
        return ur.pipe(res)
      }
      let body = ''
      ur.setEncoding('utf8')
      ur.on('data', (d) => { body += d })
      ur.on('end', () => {
        const info = JSON.parse(body)
        info.Name = name
        const text = JSON.stringify(info)
        res.writeHead(ur.statusCode, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
        res.end(text)
      })
    })
    up.on('error', () => res.destroy())
    // A client gone (a hub's event stream among them) ends its request to the engine too: an
    // open one would keep this process alive after the tests.
    res.on('close', () => up.destroy())
    req.pipe(up)
  })
  await new Promise((resolve) => server.listen(0, address, resolve))
  // Listening ends first: a hub still running here (the provider test leaves its layer) must not
  // open a connection between the two and keep the close waiting.
  t.after(() => new Promise((resolve) => { server.close(resolve); server.closeAllConnections() }))
  return `tcp://${address}:${server.address().port}`
}

test('an engine on another machine (tcp://, another host name) is reported remote, and the provider takes it (its sandboxes are carried: remote-engine.test.mjs)', async (t) => {
  const elsewhere = await engineOverTcp(t, 'buildbox-elsewhere')
  const report = await addon.checkEngine({ engine: 'docker', timeoutMs: 30000, env: { DOCKER_HOST: elsewhere } })
  assert.equal(report.available, true, JSON.stringify(report))
  assert.equal(report.hostName, 'buildbox-elsewhere')
  assert.equal(report.remote, true)

  // The same engine, reporting this machine's name, is local.
  const here = await engineOverTcp(t, null)
  const local = await addon.checkEngine({ engine: 'docker', timeoutMs: 30000, env: { DOCKER_HOST: here } })
  assert.equal(local.available, true)
  assert.equal(local.hostName, os.hostname())
  assert.equal(local.remote, false)

  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const { layer } = openLayer(baseOptions(poHome, owner, {
    env: hostEnv({ DOCKER_HOST: elsewhere, PO_SANDBOX_ENGINE: 'docker' }),
  }))
  const status = await layer.provider.ready()
  assert.equal(status.state, 'ready', JSON.stringify(status))
  assert.equal(status.endpoint, elsewhere)
})

test('bad workspace ids, paths and options are coded errors thrown before anything is registered or created', async (t) => {
  const { poHome, owner, options } = setup(t)
  const wsPath = tempWorkspace(t)
  const badIds = ['../x', 'a/b', '', '.', 'x'.repeat(300)]
  for (const id of badIds) {
    const host = fakeHost()
    assert.throws(() => registerSandboxLayer(host, { ...options, workspaces: [{ id, path: wsPath }] }), assertCode('WORKSPACE_INVALID'), JSON.stringify(id))
    assert.deepEqual(host.calls, [], `nothing registered for ${JSON.stringify(id)}`)
  }
  for (const bad of [{ poHome: 'relative' }, { pidsLimit: -1 }, { imageVariant: 'tiny' }, { user: 'root' }, { brokerTransport: 'udp' }, { env: { ...options.env, PO_SANDBOX_BROKER_TRANSPORT: 'unix' } }]) {
    const host = fakeHost()
    assert.throws(() => registerSandboxLayer(host, { ...options, ...bad }), assertCode('OPTIONS_INVALID'), JSON.stringify(bad))
    assert.deepEqual(host.calls, [], `nothing registered for ${JSON.stringify(bad)}`)
  }
  // A git host entry that is not a host, or an origin that is not scheme://host[:port]: named, with the form.
  for (const hosts of ['git.test=ftp://x.test', 'Git.Test', 'git%2etest', 'git.test=https://u:p@x.test', 'git.test=https://x.test/path', 'git.test=https://x.test?q', 'github.com, =https://x.test', 'git.test=']) {
    const host = fakeHost()
    assert.throws(() => registerSandboxLayer(host, { ...options, env: { ...options.env, PO_SANDBOX_GIT_HOSTS: hosts } }), (e) => e.code === 'OPTIONS_INVALID' && /PO_SANDBOX_GIT_HOSTS/.test(e.message) && /expected NAME or NAME=ORIGIN/.test(e.message), hosts)
    assert.deepEqual(host.calls, [], `nothing registered for ${hosts}`)
  }

  const { layer, host } = openLayer(options)
  assert.deepEqual(host.calls, ['registerSandboxProvider', 'publishService'])
  assert.equal((await layer.provider.ready()).state, 'ready')
  for (const id of badIds) {
    assert.throws(() => layer.containers.start({ id, path: wsPath }), assertCode('WORKSPACE_INVALID'), JSON.stringify(id))
  }
  for (const p of ['relative/ws', path.join(wsPath, 'missing')]) {
    assert.throws(() => layer.containers.start({ id: 'ok', path: p }), assertCode('WORKSPACE_INVALID', /path/), p)
  }
  assert.equal(existsSync(path.join(poHome, 'sandboxes')), false, 'no sandbox folder was made')
  // The start-up kept the engine's facts for the next one (docs/files.md); nothing else.
  assert.deepEqual(readdirSync(poHome).sort(), ['container-runtime', 'engine-facts.json'])
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
})

test('a global, uncontained host gets the provider and the po/workspace-containers service as (name, service)', async (t) => {
  const owner = newOwner()
  cleanupOwner(t, owner)
  const host = fakeHost()
  const layer = registerSandboxLayer(host, {
    poHome: tempHome(t),
    owner,
    env: { DOCKER_HOST: 'unix:///nonexistent/docker.sock', PO_SANDBOX_ENGINE: 'docker' },
  })
  assert.ok(layer && layer.provider && layer.containers)
  assert.equal(layer.provider.kind, 'container')
  assert.deepEqual(host.calls, ['registerSandboxProvider', 'publishService'])
  const [registered, published] = host.received
  assert.equal(registered.length, 1)
  assert.equal(registered[0], layer.provider, 'registerSandboxProvider(provider)')
  assert.equal(published.length, 2, `publishService got ${published.length} argument(s): ${JSON.stringify(published.map((a) => Array.isArray(a) ? `array of ${a.length}` : typeof a))}`)
  assert.equal(published[0], 'po/workspace-containers')
  assert.equal(published[1], layer.containers, 'publishService(name, service)')
  assert.equal((await layer.provider.ready()).code, 'ENGINE_UNAVAILABLE')
})

test('a contained host, a contained environment, or a non-global scope registers nothing', (t) => {
  const poHome = tempHome(t)
  const options = { poHome, owner: newOwner() }
  const cases = [
    [{ identity: { contained: true } }, options],
    [{}, { ...options, env: { PO_SANDBOX: '1' } }],
    [{ scope: 'workspace' }, options],
    [{ scope: 'session' }, options],
  ]
  for (const [overrides, opts] of cases) {
    const host = fakeHost(overrides)
    assert.equal(registerSandboxLayer(host, opts), null, JSON.stringify(overrides))
    assert.deepEqual(host.calls, [], JSON.stringify(overrides))
  }
  assert.deepEqual(readdirSync(poHome), [], 'nothing was written to the Po home')
})

test("onCleanStop removes this hub's containers only and keeps their volumes", async (t) => {
  const a = setup(t)
  const b = setup(t)
  const la = openLayer(baseOptions(a.poHome, a.owner, { workspaces: [{ id: 'shared', path: tempWorkspace(t) }] }))
  const lb = openLayer(baseOptions(b.poHome, b.owner, { workspaces: [{ id: 'shared', path: tempWorkspace(t) }] }))
  const [sa, sb] = await Promise.all([la.layer.provider.ready(), lb.layer.provider.ready()])
  assert.equal(sa.workspaces[0].state, 'running', JSON.stringify(sa))
  assert.equal(sb.workspaces[0].state, 'running', JSON.stringify(sb))
  assert.equal(sa.image, sb.image)
  const bId = sb.workspaces[0].container.containerId

  assert.deepEqual(await la.layer.provider.onCleanStop(), ['shared'])
  assert.deepEqual(containersWith({ 'po.owner': a.owner }), [])
  assert.equal(isRunning(bId), true)
  assert.deepEqual(containersWith({ 'po.owner': b.owner }), [bId])
  assert.equal(volumesOf(a.owner).length, 3, 'A keeps its volumes')
  assert.equal(la.layer.provider.status().workspaces[0].state, 'stopped')
})

test('onCleanStop right after registration: start-up starts nothing more, and nothing it started outlives the stop', async (t) => {
  const { owner, options } = setup(t)
  const workspaces = ['s1', 's2', 's3', 's4', 's5'].map((id) => ({ id, path: tempWorkspace(t) }))
  const { layer } = openLayer({ ...options, workspaces, concurrency: 2 })
  const stopped = await layer.provider.onCleanStop()
  const status = await layer.provider.ready()
  assert.equal(status.state, 'ready')
  assert.deepEqual(containersWith({ 'po.owner': owner }), [], `containers outlived onCleanStop (stopped: ${JSON.stringify(stopped)})`)
  for (const w of status.workspaces) assert.equal(w.state, 'stopped', JSON.stringify(status.workspaces))
})

test('the image is built once per recipe, then reused; a different recipe is a different tag', async (t) => {
  const rand = newOwner().slice(1)
  const base1 = `po-sandbox-test-base:img-${rand}`
  const base2 = `po-sandbox-test-base:img2-${rand}`
  const made = []
  t.after(async () => {
    for (const tag of made) await run('docker', ['rmi', tag])
    await run('docker', ['rmi', base1, base2])
  })
  dockerCli(['tag', TEST_BASE, base1])
  dockerCli(['tag', TEST_BASE, base2])

  const one = setup(t, { baseImage: base1 })
  const first = openLayer(one.options)
  const s1 = await first.layer.provider.ready()
  made.push(s1.image)
  assert.equal(s1.state, 'ready', JSON.stringify(s1))
  assert.equal(s1.imageBuilt, true)
  await waitFor(() => first.events.some((e) => e.type === 'image' && e.phase === 'built' && e.tag === s1.image), 'an image built event')
  assert.equal(dockerCli(['image', 'inspect', '-f', '{{index .Config.Labels "po.image-base"}}', s1.image]), base1)

  const two = setup(t, { baseImage: base1 })
  const second = openLayer(two.options)
  const s2 = await second.layer.provider.ready()
  assert.equal(s2.image, s1.image)
  assert.equal(s2.imageBuilt, false)
  await waitFor(() => second.events.some((e) => e.type === 'image' && e.phase === 'cached'), 'an image cached event')
  assert.ok(!second.events.some((e) => e.type === 'image' && ['building', 'built'].includes(e.phase)))

  const three = setup(t, { baseImage: base2 })
  const third = openLayer(three.options)
  const s3 = await third.layer.provider.ready()
  made.push(s3.image)
  assert.equal(s3.state, 'ready', JSON.stringify(s3))
  assert.match(s3.image, /^po-sandbox:/)
  assert.notEqual(s3.image, s1.image)
})

test('a stopped leftover container is removed, with the reason, and a new one made on the same volumes', async (t) => {
  const { owner, options } = setup(t)
  const ws = tempWorkspace(t)
  const first = openLayer(options)
  const c1 = await first.layer.containers.start({ id: 'left', path: ws })
  const volumes = volumesOf(owner)
  assert.ok(volumes.length > 0)
  dockerCli(['stop', '-t', '1', c1.containerId])
  assert.equal(inspect(c1.containerId).State.Running, false)

  const next = openLayer(options)
  const c2 = await next.layer.containers.start({ id: 'left', path: ws })
  assert.notEqual(c2.containerId, c1.containerId)
  assert.equal(c2.adopted, false)
  assert.equal(isRunning(c2.containerId), true)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [c2.containerId], 'the leftover is gone')
  const removed = await waitFor(() => next.events.find((e) => e.type === 'workspace' && e.state === 'removed' && e.containerId === c1.containerId), 'a removed event for the leftover')
  assert.match(removed.reason, /leftover container was exited/)
  assert.deepEqual(volumesOf(owner), volumes, 'the new container uses the same volumes')
  const who = await getJson(c2.url)
  assert.equal(who.env.PO_WORKSPACE, 'left')
  assert.equal(who.tokenReadable, true)
})

test('a container without our labels that holds the workspace name (create answers 409) is removed with the reason, and ours is made', async (t) => {
  const { owner, options } = setup(t)
  const ws = tempWorkspace(t)
  const name = `po-${owner}-squat`
  // Not labelled as ours, so only the create call finds it: the name-conflict path.
  const squatter = dockerCli(['run', '-d', '--name', name, TEST_BASE, 'sleep', '600'])
  t.after(async () => { await run('docker', ['rm', '-f', squatter]) })
  const { layer, events } = openLayer(options)
  const c = await layer.containers.start({ id: 'squat', path: ws })
  assert.equal(c.name, name)
  assert.notEqual(c.containerId, squatter)
  assert.equal((await run('docker', ['inspect', squatter])).code, 1, 'the squatter is still there')
  const removed = await waitFor(() => events.find((e) => e.type === 'workspace' && e.state === 'removed' && e.containerId === squatter), 'a removed event for the squatter')
  assert.match(removed.reason, new RegExp(`held the name ${name} and was not adopted: it does not drop all capabilities`))
  assert.equal((await getJson(c.url)).env.PO_WORKSPACE, 'squat')
})

test('concurrent ensureSandboxImage calls share one build, and each caller sees its progress', async (t) => {
  const base = `po-sandbox-test-base:shared-${newOwner().slice(1)}`
  dockerCli(['tag', TEST_BASE, base])
  let tag
  t.after(async () => { await run('docker', ['rmi', ...(tag ? [tag] : []), base]) })
  const options = { baseImage: base, imageVariant: 'minimal', engine: 'docker' }
  const seen = [[], [], []]
  const results = await Promise.all(seen.map((events) => ensureSandboxImage(options, (e) => events.push(e))))
  tag = results[0].tag
  for (const r of results) {
    assert.equal(r.tag, tag)
    assert.equal(r.digest, results[0].digest)
    assert.equal(r.built, true, 'every caller waited on the build that made it')
  }
  await waitFor(() => seen.every((events) => events.some((e) => e.phase === 'built')), 'a built event for every caller')
  const progress = seen.map((events) => events.filter((e) => e.phase === 'progress').map((e) => e.message))
  assert.ok(progress[0].some((m) => /^Step \d+\/\d+ : RUN /.test(m)), JSON.stringify(progress[0]))
  // One build: every caller got the same lines, including the same intermediate container ids.
  assert.deepEqual(progress[1], progress[0])
  assert.deepEqual(progress[2], progress[0])
  for (const events of seen) assert.equal(events.filter((e) => e.phase === 'building').length, 1)
  // Built now: the next call finds it.
  const again = await ensureSandboxImage(options)
  assert.deepEqual(again, { ...results[0], built: false })
})

test('a failing image build is IMAGE_BUILD_FAILED naming the step and its output, and leaves no image or container', async (t) => {
  const rand = newOwner().slice(1)
  const base = `po-sandbox-test-base:broken-${rand}`
  const marker = `po-broken-shell-${rand}`
  // A base whose /bin/sh prints a marker and fails, so the recipe's RUN step fails on it.
  const dockerfile = [
    `FROM ${TEST_BASE}`,
    `RUN rm /bin/sh && printf '#!/bin/busybox sh\\necho ${marker} >&2\\nexit 7\\n' > /bin/sh && chmod 755 /bin/sh`,
    '',
  ].join('\n')
  const built = await run('docker', ['build', '-q', '-t', base, '-'], { input: dockerfile })
  assert.equal(built.code, 0, built.stderr)
  t.after(async () => { await run('docker', ['rmi', base]) })
  // Build containers of this recipe's RUN step (other suites' builds remove theirs too).
  const buildContainers = () => dockerCli(['ps', '-a', '--no-trunc', '--format', '{{.ID}} {{.Command}}']).split('\n').filter((l) => l.includes('setup-dirs.sh'))
  const before = buildContainers()
  const events = []
  await assert.rejects(ensureSandboxImage({ baseImage: base, imageVariant: 'minimal', engine: 'docker' }, (e) => events.push(e)), (err) => {
    assert.equal(err.code, 'IMAGE_BUILD_FAILED', err.message)
    assert.match(err.message, /failed at Step \d+\/\d+ : RUN sh \/usr\/local\/lib\/po-sandbox\/setup-dirs\.sh/, err.message)
    assert.match(err.message, /non-zero code: 7/, err.message)
    assert.ok(err.message.includes(marker), err.message)
    return true
  })
  const tag = events.find((e) => e.phase === 'building')?.tag
  assert.ok(tag, JSON.stringify(events))
  assert.equal((await run('docker', ['image', 'inspect', tag])).code, 1, `${tag} exists after a failed build`)
  assert.deepEqual(buildContainers().filter((l) => !before.includes(l)), [], 'the failed build left a container')
})

test('stop removes a workspace container but keeps its volumes and folder; a second stop says false', async (t) => {
  const { options, owner, poHome } = setup(t)
  const wsPath = tempWorkspace(t)
  writeFileSync(path.join(wsPath, 'work.txt'), 'mine')
  const { layer } = openLayer(options)
  const c = await layer.containers.start({ id: 'stoppable', path: wsPath })
  assert.deepEqual((await layer.containers.list()).map((x) => x.containerId), [c.containerId])
  assert.equal(await layer.containers.stop('stoppable'), true)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  assert.notEqual((await run('docker', ['inspect', c.containerId])).code, 0, 'the container is gone')
  assert.deepEqual(volumesOf(owner), ['cache', 'git', 'home'].map((s) => `po-${owner}-stoppable-${s}`))
  assert.equal(readFileSync(path.join(wsPath, 'work.txt'), 'utf8'), 'mine')
  assert.ok(statSync(path.join(poHome, 'sandboxes', 'stoppable')).isDirectory())
  assert.deepEqual(await layer.containers.list(), [])
  assert.equal(await layer.containers.stop('stoppable'), false)
})

test('a server that never answers its health path fails the start with its last log lines and leaves no container', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  const marker = `po-unhealthy-marker-${owner}`
  writeBundle(poHome, { server: serverSource({ listenPort: SERVER_PORT + 1, marker }) })
  const { layer } = openLayer(baseOptions(poHome, owner, { healthTimeoutMs: 8000 }))
  await assert.rejects(layer.containers.start({ id: 'sick', path: tempWorkspace(t) }), (err) => {
    assert.equal(err.code, 'CONTAINER_UNHEALTHY', err.message)
    assert.ok(err.message.includes(`${marker} starting, will listen on ${SERVER_PORT + 1}`), err.message)
    return true
  })
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
})

test('containers reach model providers through the credential broker: a token inside, the real key only upstream, also after adoption', async (t) => {
  const REAL = `sk-REAL-${'k'.repeat(40)}`
  const { seen, origin } = await modelsUpstream(t)
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  const env = hostEnv({ OPENAI_API_KEY: REAL, OPENAI_BASE_URL: origin, AWS_SECRET_ACCESS_KEY: 'aws-secret-never-inside' })
  const { layer } = openLayer(baseOptions(poHome, owner, { env }))
  const c = await layer.containers.start({ id: 'bw', path: ws })
  const info = inspect(c.containerId)
  const cenv = Object.fromEntries(info.Config.Env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
  assert.equal(cenv.PO_BROKER_SOCKET, '/run/po-broker/broker.sock')
  assert.equal(cenv.PO_BROKER_ADDRESS, undefined)
  assert.ok(cenv.PO_BROKER_PROVIDERS.split(',').includes('openai'), cenv.PO_BROKER_PROVIDERS)
  assert.match(cenv.OPENAI_API_KEY, /^sk-[0-9a-f]{64}$/)
  assert.ok(!info.Config.Env.some((kv) => kv.includes(REAL) || kv.includes('aws-secret-never-inside')), 'a real credential reached the container')
  const folder = brokerFolder(brokerDirOf(owner), owner, 'bw')
  assert.equal(statSync(folder).mode & 0o777, 0o700)
  assert.equal(statSync(path.join(folder, 'broker.sock')).mode & 0o777, 0o600)

  const call = await getJson(c.url, '/call')
  assert.equal(call.status, 200, JSON.stringify(call))
  assert.equal(seen.length, 1)
  assert.equal(seen[0].url, '/v1/models?limit=1')
  assert.equal(seen[0].headers.authorization, `Bearer ${REAL}`)
  assert.ok(!JSON.stringify(seen).includes(cenv.OPENAI_API_KEY), 'the upstream saw the token')

  // Starting the running workspace again in the same hub keeps its live grant (socket and
  // tokens), so the container's calls keep working.
  const same = await layer.containers.start({ id: 'bw', path: ws })
  assert.equal(same.containerId, c.containerId)
  const callSame = await getJson(c.url, '/call')
  assert.equal(callSame.status, 200, JSON.stringify(callSame))
  assert.equal(seen.length, 2)
  assert.equal(seen[1].headers.authorization, `Bearer ${REAL}`)
  seen.length = 1

  // A new hub adopts the container and honours the tokens it was made with.
  const again = openLayer(baseOptions(poHome, owner, { env }))
  const adopted = await again.layer.containers.start({ id: 'bw', path: ws })
  assert.equal(adopted.containerId, c.containerId)
  assert.equal(adopted.adopted, true)
  const call2 = await getJson(c.url, '/call')
  assert.equal(call2.status, 200, JSON.stringify(call2))
  assert.equal(seen.length, 2)
  assert.equal(seen[1].headers.authorization, `Bearer ${REAL}`)

  // The first hub still serves the socket: the second only took part (one owner at a time).
  // Stopping the workspace (from either hub) ends the grants; the hub that served the socket
  // removes it.
  assert.equal(await again.layer.containers.stop('bw'), true)
  await waitFor(() => !existsSync(folder), 'the serving hub to remove the socket folder')
})

test('stopSandboxContainers (po-sandbox stop) also removes the broker socket a running hub granted; the hub re-grants on its next start', async (t) => {
  const REAL = `sk-REAL-${'s'.repeat(40)}`
  const { seen, origin } = await modelsUpstream(t)
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  const env = hostEnv({ OPENAI_API_KEY: REAL, OPENAI_BASE_URL: origin })
  const { layer } = openLayer(baseOptions(poHome, owner, { env }))
  const c1 = await layer.containers.start({ id: 'cut', path: ws })
  assert.equal((await getJson(c1.url, '/call')).status, 200)
  const folder = brokerFolder(brokerDirOf(owner), owner, 'cut')
  assert.ok(existsSync(path.join(folder, 'broker.sock')))

  const stopped = await addon.stopSandboxContainers({ poHome, owner, workspace: 'cut', engine: 'docker' })
  assert.deepEqual(stopped, ['cut'])
  assert.equal(existsSync(folder), false, 'the socket folder outlived its container')
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])

  // The hub still runs: its next start makes a new container with a live route.
  const c2 = await layer.containers.start({ id: 'cut', path: ws })
  assert.notEqual(c2.containerId, c1.containerId)
  assert.ok(existsSync(path.join(folder, 'broker.sock')))
  assert.equal((await getJson(c2.url, '/call')).status, 200)
  assert.deepEqual(seen.map((q) => q.headers.authorization), [`Bearer ${REAL}`, `Bearer ${REAL}`])
})

test('with the broker off (PO_SANDBOX_BROKER=0) a container gets no route and no credentials', async (t) => {
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  const env = hostEnv({ OPENAI_API_KEY: 'sk-REAL-off-key-000000', PO_SANDBOX_BROKER: '0' })
  const { layer } = openLayer(baseOptions(poHome, owner, { env }))
  const c = await layer.containers.start({ id: 'off', path: ws })
  const info = inspect(c.containerId)
  assert.ok(!info.Config.Env.some((kv) => kv.startsWith('PO_BROKER_') || kv.startsWith('OPENAI_API_KEY=')), JSON.stringify(info.Config.Env))
  assert.ok(!info.Mounts.some((m) => m.Destination === '/run/po-broker'))
})

test('two hubs on one Po home: one serves the broker socket at a time; when it is killed the other takes over with no call, and a hub that did not serve never removes the socket', async (t) => {
  const REAL = `sk-REAL-${'h'.repeat(40)}`
  const { seen, origin } = await modelsUpstream(t)
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  const env = hostEnv({ OPENAI_API_KEY: REAL, OPENAI_BASE_URL: origin })
  const script = writeHubChild(t)
  const payload = { options: baseOptions(poHome, owner, { env }), mode: 'wait', workspace: { id: 'two', path: ws } }
  const first = spawnHub(t, script, payload)
  const c = await first.result('container')
  const folder = brokerFolder(brokerDirOf(owner), owner, 'two')
  const socket = path.join(folder, 'broker.sock')
  // A socket file's identity: its inode number and its change time in nanoseconds (a socket
  // bound after the old one was unlinked may get the freed inode number back).
  const identity = () => { const st = statSync(socket, { bigint: true }); return `${st.ino}@${st.ctimeNs}` }
  const bound = identity()
  assert.equal((await getJson(c.url, '/call')).status, 200)

  // The second hub adopts the container but leaves the socket to the first.
  const second = spawnHub(t, script, payload)
  const c2 = await second.result('container')
  assert.equal(c2.containerId, c.containerId)
  assert.equal(c2.adopted, true)
  assert.equal(identity(), bound, 'the second hub replaced the socket the first serves')
  // The second hub killed: nothing changes for the container.
  await killHub(second)
  assert.equal(identity(), bound)
  const afterSecond = await getJson(c.url, '/call')
  assert.equal(afterSecond.status, 200, JSON.stringify(afterSecond))

  // The reverse: a third hub adopts, then the serving hub is killed; the third serves the
  // container's broker within seconds, with no call to it.
  const third = spawnHub(t, script, payload)
  await third.result('container')
  await killHub(first)
  const served = await waitFor(async () => {
    const r = await getJson(c.url, '/call').catch(() => null)
    return r && r.status === 200 && r
  }, 'the surviving hub to serve the broker socket', 10000)
  assert.equal(served.status, 200)
  assert.equal(seen.at(-1).headers.authorization, `Bearer ${REAL}`)
  assert.notEqual(identity(), bound, 'the survivor bound its own socket')
})
