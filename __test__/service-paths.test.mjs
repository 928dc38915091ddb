// The service paths the provider suite does not walk: `containers.adopt()` (adoption without
// creation, and the removal of a drifted container), `stopAll()` and `onCleanStop()` and what
// they leave on the engine and on disk, `sandbox: 'none'` workspaces, `NESTING_REFUSED` (on the
// host with PO_SANDBOX=1, and inside a real sandbox container), and the Po home's
// `domains.yaml` mounted read-only into P. Against the real Docker engine; every test has its
// own Po home and owner and removes its containers and volumes by label.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { addon, dockerCli, root, run, waitFor } from './helpers.mjs'
import {
  TEST_BASE, useTestBaseImage, baseOptions, brokerDirOf, brokerFolder, cleanupOwner, containersWith,
  getJson, hostEnv, inspect, isRunning, modelsUpstream, newOwner, openLayer, tempHome, tempWorkspace,
  volumesOf, writeBundle,
} from './provider-fixtures.mjs'

const { listSandboxContainers, stopSandboxContainers, pruneSandboxLeftovers, ensureSandboxImage, registerSandboxLayer } = addon

useTestBaseImage()

/** A Po home with the test bundle and an owner cleaned up by label. */
function setup(t) {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  return { poHome, owner }
}

/** The environment with a key the broker carries, so every container gets a socket route. */
function brokeredEnv(origin) {
  return hostEnv({ OPENAI_API_KEY: `sk-REAL-${'p'.repeat(40)}`, OPENAI_BASE_URL: origin })
}

const tokenFile = (poHome, owner, id) => path.join(poHome, 'sandbox-tokens', owner, `${id}.token`)
const sandboxDir = (poHome, id) => path.join(poHome, 'sandboxes', id)
const workspaceEvents = (events, state) => events.filter((e) => e.type === 'workspace' && e.state === state)

/** `docker exec` in a container as its own user; resolves with code and output. */
function execIn(id, script) {
  return run('docker', ['exec', id, 'sh', '-c', script])
}

/** Whether nobody holds the flock on `file` (util-linux flock, non-blocking). */
async function lockIsFree(file) {
  const r = await run('flock', ['-n', file, 'true'])
  assert.ok(r.code === 0 || r.code === 1, `flock ${file}: ${r.code} ${r.stderr}`)
  return r.code === 0
}

function assertCode(code, re) {
  return (err) => {
    assert.ok(err instanceof Error, `not an Error: ${err}`)
    assert.equal(err.code, code, err.message)
    if (re) assert.match(err.message, re)
    return true
  }
}

// ---------------------------------------------------------------------------------------------
// containers.adopt()

test('adopt() takes over the running container another hub made, with no path or with one; it never creates', async (t) => {
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  const first = openLayer(baseOptions(poHome, owner))
  const made = await first.layer.containers.start({ id: 'ad', path: ws })
  assert.equal(made.adopted, false)

  // A second hub on the same home and owner (what a hub restart is).
  const second = openLayer(baseOptions(poHome, owner))
  const adopted = await second.layer.containers.adopt('ad')
  assert.ok(adopted, 'adopt() found nothing')
  assert.equal(adopted.containerId, made.containerId)
  assert.equal(adopted.adopted, true)
  assert.equal(adopted.workspaceId, 'ad')
  assert.equal(adopted.workspacePath, ws, 'the path comes from the container label')
  // On Linux the folder is at the same path inside (Windows maps it under /mnt/<drive>/).
  assert.equal(adopted.containerPath, ws)
  assert.equal(made.containerPath, ws)
  assert.ok(adopted.posture.mounts.some((m) => m.source === ws && m.target === adopted.containerPath && !m.readOnly), JSON.stringify(adopted.posture.mounts))
  assert.equal(adopted.url, made.url)
  assert.equal(adopted.tokenFile, tokenFile(poHome, owner, 'ad'))
  assert.equal(adopted.replacedReason, undefined)
  assert.equal((await getJson(adopted.url)).env.PO_WORKSPACE, 'ad')
  assert.equal((await second.layer.containers.adopt('ad', ws)).containerId, made.containerId)
  const adoptedEvent = await waitFor(() => workspaceEvents(second.events, 'adopted').find((e) => e.containerId === made.containerId), 'an adopted event')
  assert.equal(adoptedEvent.workspaceId, 'ad')
  assert.deepEqual(workspaceEvents(second.events, 'removed'), [])
  assert.deepEqual(containersWith({ 'po.owner': owner }), [made.containerId])
  assert.equal(isRunning(made.containerId), true)

  // Nothing to adopt: null, and nothing is created (no container, volume, token or P).
  assert.equal(await second.layer.containers.adopt('never'), null)
  assert.deepEqual(containersWith({ 'po.owner': owner, 'po.workspace': 'never' }), [])
  assert.ok(!volumesOf(owner).some((v) => v.includes('-never-')), volumesOf(owner).join(' '))
  assert.equal(existsSync(tokenFile(poHome, owner, 'never')), false)
  assert.equal(existsSync(sandboxDir(poHome, 'never')), false)

  // A stopped container is not adopted (adopt only takes a running one) and not started.
  dockerCli(['stop', '-t', '1', made.containerId])
  assert.equal(await second.layer.containers.adopt('ad'), null)
  assert.equal(isRunning(made.containerId), false)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [made.containerId])

  // A bad id is thrown synchronously, before any call.
  assert.throws(() => second.layer.containers.adopt('../x'), assertCode('WORKSPACE_INVALID'))
})

test('adopt() removes a drifted container (posture, spec hash, mounts, a foreign one with our labels), keeps the volumes, and the next start creates on them', async (t) => {
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  const volumes = ['cache', 'git', 'home'].map((s) => `po-${owner}-dr-${s}`)

  // 1. Posture: a hub with a higher pid limit made it; this hub allows at most 2048.
  const loose = openLayer(baseOptions(poHome, owner, { pidsLimit: 4096 }))
  const c1 = await loose.layer.containers.start({ id: 'dr', path: ws })
  assert.equal(inspect(c1.containerId).HostConfig.PidsLimit, 4096)
  assert.equal((await execIn(c1.containerId, 'echo kept > /po-home/keep.txt')).code, 0)
  const { layer, events } = openLayer(baseOptions(poHome, owner))
  assert.equal(await layer.containers.adopt('dr'), null)
  const r1 = await waitFor(() => workspaceEvents(events, 'removed').find((e) => e.containerId === c1.containerId), 'a removed event (pid limit)')
  assert.equal(r1.workspaceId, 'dr')
  assert.match(r1.reason, /^not adopted: its pid limit is Some\(4096\), not at most 2048$/)
  assert.equal((await run('docker', ['inspect', c1.containerId])).code, 1, 'the drifted container is gone')
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  assert.deepEqual(volumesOf(owner), volumes, 'its volumes are kept')
  assert.equal(existsSync(tokenFile(poHome, owner, 'dr')), false, 'the token file outlived its container')
  assert.ok(statSync(sandboxDir(poHome, 'dr')).isDirectory(), 'P is kept')

  // The next start creates a new container on the same volumes.
  const c2 = await layer.containers.start({ id: 'dr', path: ws })
  assert.equal(c2.adopted, false)
  assert.equal(inspect(c2.containerId).HostConfig.PidsLimit, 2048)
  assert.equal((await execIn(c2.containerId, 'cat /po-home/keep.txt')).stdout, 'kept\n')

  // 2. Spec hash only: the bundle's args changed (same mounts, same posture).
  const bundleJson = path.join(poHome, 'container-runtime', '1.0.0', 'container-runtime.json')
  const json = JSON.parse(readFileSync(bundleJson, 'utf8'))
  writeFileSync(bundleJson, JSON.stringify({ ...json, args: ['--changed'] }))
  const changed = openLayer(baseOptions(poHome, owner))
  assert.equal(await changed.layer.containers.adopt('dr', ws), null)
  const r2 = await waitFor(() => workspaceEvents(changed.events, 'removed').find((e) => e.containerId === c2.containerId), 'a removed event (spec hash)')
  assert.match(r2.reason, /its spec changed \(image, runtime bundle, mounts or settings differ/)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  const c3 = await changed.layer.containers.start({ id: 'dr', path: ws })
  assert.deepEqual(inspect(c3.containerId).Config.Cmd.slice(-1), ['--changed'])

  // 3. Mounts: domains.yaml appeared in the Po home since the container was made.
  writeFileSync(path.join(poHome, 'domains.yaml'), 'domains: []\n')
  assert.equal(await changed.layer.containers.adopt('dr'), null)
  const r3 = await waitFor(() => workspaceEvents(changed.events, 'removed').find((e) => e.containerId === c3.containerId), 'a removed event (mounts)')
  assert.match(r3.reason, new RegExp(`${sandboxDir(poHome, 'dr')}/domains\\.yaml is not mounted read-only`))
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])

  // 4. A container that only carries our labels (made outside the provider, no hardening).
  const name = `po-${owner}-dr`
  const foreign = dockerCli(['run', '-d', '--name', name, '--label', 'po.sandbox=1', '--label', `po.owner=${owner}`,
    '--label', 'po.workspace=dr', '--label', `po.workspace-path=${ws}`, TEST_BASE, 'sleep', '600'])
  // Another owner's container for the same workspace id is none of this hub's business.
  const other = newOwner()
  cleanupOwner(t, other)
  const otherLayer = openLayer(baseOptions(poHome, other))
  const theirs = await otherLayer.layer.containers.start({ id: 'dr', path: ws })
  assert.equal(await changed.layer.containers.adopt('dr'), null)
  const r4 = await waitFor(() => workspaceEvents(changed.events, 'removed').find((e) => e.containerId === foreign), 'a removed event (labels only)')
  assert.match(r4.reason, /not adopted: it does not drop all capabilities/)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  assert.equal(isRunning(theirs.containerId), true, "another owner's container was touched")
  assert.deepEqual(volumesOf(owner), volumes, 'the volumes outlive every removal')
  assert.deepEqual(containersWith({ 'po.workspace': 'dr', 'po.owner': other }), [theirs.containerId])

  // After all that, a start makes one container again, with the data of the first.
  const c5 = await changed.layer.containers.start({ id: 'dr', path: ws })
  assert.equal((await execIn(c5.containerId, 'cat /po-home/keep.txt')).stdout, 'kept\n')
  assert.deepEqual(containersWith({ 'po.owner': owner }), [c5.containerId])
})

// ---------------------------------------------------------------------------------------------
// stopAll() and onCleanStop()

test("stopAll() stops every container of this owner (configured, started later, or made by another hub of the owner) and no other owner's; tokens and sockets go, volumes and P stay", async (t) => {
  const { origin } = await modelsUpstream(t)
  const a = setup(t)
  const b = setup(t)
  const env = brokeredEnv(origin)
  const wsA1 = tempWorkspace(t)
  const wsA2 = tempWorkspace(t)
  const wsA3 = tempWorkspace(t)
  const wsB = tempWorkspace(t)
  const wsB2 = tempWorkspace(t)
  writeFileSync(path.join(wsA1, 'work.txt'), 'mine')
  const la = openLayer(baseOptions(a.poHome, a.owner, { env, workspaces: [{ id: 'a1', path: wsA1 }] }))
  const lb = openLayer(baseOptions(b.poHome, b.owner, { env, workspaces: [{ id: 'b1', path: wsB }, { id: 'a1', path: wsB2 }] }))
  const [sa, sb] = await Promise.all([la.layer.provider.ready(), lb.layer.provider.ready()])
  assert.deepEqual(sa.workspaces.map((w) => w.state), ['running'], JSON.stringify(sa))
  assert.deepEqual(sb.workspaces.map((w) => w.state), ['running', 'running'], JSON.stringify(sb))
  // One started by a call, one by another hub process of the same owner and home.
  const a2 = await la.layer.containers.start({ id: 'a2', path: wsA2 })
  const otherHub = openLayer(baseOptions(a.poHome, a.owner, { env }))
  const a3 = await otherHub.layer.containers.start({ id: 'a3', path: wsA3 })
  const aIds = containersWith({ 'po.owner': a.owner }).sort()
  assert.equal(aIds.length, 3)
  const bIds = containersWith({ 'po.owner': b.owner }).sort()
  assert.equal(bIds.length, 2)
  const brokerA = brokerDirOf(a.owner)
  for (const id of ['a1', 'a2', 'a3']) {
    assert.ok(existsSync(tokenFile(a.poHome, a.owner, id)), `token ${id}`)
  }
  assert.ok(existsSync(path.join(brokerFolder(brokerA, a.owner, 'a1'), 'broker.sock')))
  assert.ok(existsSync(path.join(brokerFolder(brokerA, a.owner, 'a2'), 'broker.sock')))
  assert.ok(existsSync(path.join(brokerFolder(brokerA, a.owner, 'a3'), 'broker.sock')))

  assert.deepEqual(await la.layer.containers.stopAll(), ['a1', 'a2', 'a3'])

  // The engine: none of A's containers (in any state), both of B's running, as before.
  assert.deepEqual(containersWith({ 'po.owner': a.owner }), [])
  for (const id of aIds) assert.equal((await run('docker', ['inspect', id])).code, 1, `${id} is still on the engine`)
  assert.deepEqual(containersWith({ 'po.owner': b.owner }).sort(), bIds)
  for (const id of bIds) assert.equal(isRunning(id), true)
  assert.equal((await getJson(sb.workspaces[1].container.url)).env.PO_WORKSPACE, 'a1', "B's a1 still answers")
  // Volumes and P are kept; the workspace folder is untouched.
  assert.deepEqual(volumesOf(a.owner), ['a1', 'a2', 'a3'].flatMap((id) => ['cache', 'git', 'home'].map((s) => `po-${a.owner}-${id}-${s}`)))
  for (const id of ['a1', 'a2', 'a3']) assert.ok(statSync(sandboxDir(a.poHome, id)).isDirectory())
  assert.equal(readFileSync(path.join(wsA1, 'work.txt'), 'utf8'), 'mine')
  // Token files go (so no hub serves them any more); B's stay.
  for (const id of ['a1', 'a2', 'a3']) assert.equal(existsSync(tokenFile(a.poHome, a.owner, id)), false, `token ${id} outlived stopAll`)
  for (const id of ['b1', 'a1']) assert.ok(existsSync(tokenFile(b.poHome, b.owner, id)))
  // The broker sockets: the ones this hub served go at once; the other hub of the owner, which
  // served a3, drops its socket when it sees the token file gone (its watch, about a second).
  assert.equal(existsSync(brokerFolder(brokerA, a.owner, 'a1')), false)
  assert.equal(existsSync(brokerFolder(brokerA, a.owner, 'a2')), false)
  await waitFor(() => !existsSync(brokerFolder(brokerA, a.owner, 'a3')), "the other hub to remove a3's socket folder", 10000)
  // Their lock files go with them (each by the hub that held it): nothing is left.
  await waitFor(() => readdirSync(brokerA).length === 0, `the socket folder to be empty: ${readdirSync(brokerA)}`, 10000)
  for (const id of ['b1', 'a1']) assert.ok(existsSync(path.join(brokerFolder(brokerDirOf(b.owner), b.owner, id), 'broker.sock')))
  // Stopped events, one per container, with its id.
  const stopped = workspaceEvents(la.events, 'stopped').map((e) => [e.workspaceId, e.containerId]).sort()
  assert.deepEqual(stopped.map(([w]) => w), ['a1', 'a2', 'a3'])
  assert.deepEqual(stopped.map(([, c]) => c).sort(), aIds)
  assert.deepEqual(workspaceEvents(la.events, 'died'), [], 'a stop on request is not a death')
  // What the status says, and that the list is empty; a second stopAll has nothing to do.
  assert.deepEqual(await la.layer.containers.list(), [])
  assert.deepEqual(await la.layer.containers.stopAll(), [])
  // The status follows: the configured workspace is stopped, with no container.
  assert.deepEqual(la.layer.provider.status().workspaces, [{ id: 'a1', state: 'stopped' }])
  // The owner can start again afterwards: a new container on the kept volumes.
  const again = await la.layer.containers.start({ id: 'a2', path: wsA2 })
  assert.notEqual(again.containerId, a2.containerId)
  assert.equal(again.adopted, false)
  assert.notEqual(a3.containerId, again.containerId)

  // B, untouched so far, stops one workspace: only that one, and its status says so.
  assert.equal(await lb.layer.containers.stop('b1'), true)
  assert.deepEqual(lb.layer.provider.status().workspaces.map((w) => [w.id, w.state, w.container?.containerId]),
    [['b1', 'stopped', undefined], ['a1', 'running', sb.workspaces[1].container.containerId]])
  assert.deepEqual(containersWith({ 'po.owner': b.owner }), [sb.workspaces[1].container.containerId])
  assert.equal(existsSync(tokenFile(b.poHome, b.owner, 'b1')), false)
})

test("onCleanStop() (the provider's hook, and the service's): stops and removes this owner's containers, marks them stopped, leaves skipped ones, keeps volumes and P", async (t) => {
  const { origin } = await modelsUpstream(t)
  const { poHome, owner } = setup(t)
  const env = brokeredEnv(origin)
  const wsRun = tempWorkspace(t)
  const wsNone = tempWorkspace(t)
  const { layer, events } = openLayer(baseOptions(poHome, owner, {
    env, workspaces: [{ id: 'run', path: wsRun }, { id: 'off', path: wsNone, sandbox: 'none' }],
  }))
  const status = await layer.provider.ready()
  assert.deepEqual(status.workspaces.map((w) => [w.id, w.state]), [['run', 'running'], ['off', 'skipped']])
  const extra = await layer.containers.start({ id: 'extra', path: tempWorkspace(t) })
  const ids = containersWith({ 'po.owner': owner }).sort()
  assert.deepEqual(ids, [status.workspaces[0].container.containerId, extra.containerId].sort())
  const brokerDir = brokerDirOf(owner)
  // This hub holds each workspace's broker lock (it serves the socket) while the container runs.
  const brokerLocks = ['run', 'extra'].map((id) => `${brokerFolder(brokerDir, owner, id)}.lock`)
  for (const lock of brokerLocks) assert.equal(await lockIsFree(lock), false, `${lock} is not held`)
  for (const id of ['run', 'extra']) assert.ok(existsSync(path.join(brokerFolder(brokerDir, owner, id), 'broker.sock')))

  assert.deepEqual(await layer.provider.onCleanStop(), ['extra', 'run'])
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  for (const id of ids) assert.equal((await run('docker', ['inspect', id])).code, 1)
  assert.equal(volumesOf(owner).length, 6, 'volumes are kept')
  for (const id of ['run', 'extra']) {
    assert.ok(statSync(sandboxDir(poHome, id)).isDirectory(), `P of ${id} is kept`)
    assert.equal(existsSync(tokenFile(poHome, owner, id)), false, `token of ${id}`)
    assert.equal(existsSync(brokerFolder(brokerDir, owner, id)), false, `broker socket folder of ${id}`)
  }
  // Its locks are released and their files removed (nothing of a stopped workspace is left,
  // docs/files.md): another hub could serve (and start) these workspaces now.
  for (const lock of brokerLocks) assert.equal(existsSync(lock), false, `${lock} is left`)
  for (const id of ['run', 'extra']) {
    const startLock = tokenFile(poHome, owner, id).replace(/\.token$/, '.lock')
    assert.equal(existsSync(startLock), false, `${startLock} is left`)
  }
  const after = layer.provider.status()
  assert.deepEqual(after.workspaces.map((w) => [w.id, w.state]), [['run', 'stopped'], ['off', 'skipped']])
  assert.deepEqual(workspaceEvents(events, 'stopped').map((e) => e.workspaceId).sort(), ['extra', 'run'])
  assert.ok(!events.some((e) => e.type === 'workspace' && e.workspaceId === 'off'), 'the skipped workspace has no events')

  // The service's onCleanStop is the same hook: after a new start it stops that one too.
  const back = await layer.containers.start({ id: 'run', path: wsRun })
  assert.ok(existsSync(tokenFile(poHome, owner, 'run')))
  assert.deepEqual(await layer.containers.onCleanStop(), ['run'])
  assert.equal((await run('docker', ['inspect', back.containerId])).code, 1)
  assert.equal(existsSync(tokenFile(poHome, owner, 'run')), false)
  assert.deepEqual(await layer.provider.onCleanStop(), [])
})

// ---------------------------------------------------------------------------------------------
// sandbox: 'none'

test("sandbox: 'none' (and 'host') workspaces are skipped: no container, volume, token, P or socket, no events, in the status as skipped", async (t) => {
  const { origin } = await modelsUpstream(t)
  const { poHome, owner } = setup(t)
  const workspaces = [
    { id: 'plain', path: tempWorkspace(t), sandbox: 'none' },
    { id: 'hosted', path: tempWorkspace(t), sandbox: 'host' },
    { id: 'boxed', path: tempWorkspace(t), sandbox: 'container' },
    { id: 'default', path: tempWorkspace(t) },
  ]
  const { layer, events } = openLayer(baseOptions(poHome, owner, { env: brokeredEnv(origin), workspaces }))
  // Skipped from the first status on, before start-up settles.
  assert.deepEqual(layer.provider.status().workspaces.filter((w) => w.state === 'skipped').map((w) => w.id), ['plain', 'hosted'])
  const status = await layer.provider.ready()
  assert.equal(status.state, 'ready', JSON.stringify(status))
  assert.deepEqual(status.workspaces.map((w) => [w.id, w.state]), [['plain', 'skipped'], ['hosted', 'skipped'], ['boxed', 'running'], ['default', 'running']])
  assert.equal(containersWith({ 'po.owner': owner }).length, 2)
  for (const id of ['plain', 'hosted']) {
    const w = status.workspaces.find((x) => x.id === id)
    assert.equal(w.container, undefined)
    assert.equal(w.errorCode, undefined)
    assert.deepEqual(containersWith({ 'po.owner': owner, 'po.workspace': id }), [])
    assert.ok(!volumesOf(owner).some((v) => v.includes(`-${id}-`)), volumesOf(owner).join(' '))
    assert.equal(existsSync(tokenFile(poHome, owner, id)), false)
    assert.equal(existsSync(sandboxDir(poHome, id)), false)
    assert.equal(existsSync(brokerFolder(brokerDirOf(owner), owner, id)), false)
    assert.ok(!events.some((e) => e.type === 'workspace' && e.workspaceId === id), JSON.stringify(events.filter((e) => e.type === 'workspace')))
  }
  assert.deepEqual((await layer.containers.list()).map((c) => c.workspaceId), ['boxed', 'default'])

  // Any other value is refused, naming the option, before anything is registered.
  const host = { scope: 'global', identity: { contained: false }, calls: 0, registerSandboxProvider() { this.calls++ }, publishService() { this.calls++ } }
  assert.throws(() => registerSandboxLayer(host, baseOptions(poHome, newOwner(), { workspaces: [{ id: 'x', path: workspaces[0].path, sandbox: 'vm' }] })),
    assertCode('OPTIONS_INVALID', /workspaces\[\]\.sandbox: "vm" is not 'container', 'none' or 'host'/))
  assert.equal(host.calls, 0)
})

// ---------------------------------------------------------------------------------------------
// NESTING_REFUSED

const NESTING = /Refusing to manage containers from inside a sandbox container \(PO_SANDBOX=1\): sandboxes do not nest\. Run this on the host\./

/**
 * Node code that calls every container-managing entry point and prints, as one JSON line, what
 * each did: the coded error, or that it did not refuse.
 */
function nestingProbe(addonPath, owner) {
  return `
const a = require(${JSON.stringify(addonPath)})
const out = {}
const calls = {
  list: () => a.listSandboxContainers({ allOwners: true }),
  stop: () => a.stopSandboxContainers({ all: true, owner: ${JSON.stringify(owner)} }),
  image: () => a.ensureSandboxImage({ baseImage: ${JSON.stringify(TEST_BASE)}, imageVariant: 'minimal' }),
}
;(async () => {
  for (const [name, call] of Object.entries(calls)) {
    try { await call(); out[name] = { refused: false } } catch (e) { out[name] = { code: e.code, message: e.message } }
  }
  const host = { scope: 'global', identity: { contained: false }, registerSandboxProvider() { out.registered = true }, publishService() { out.published = true } }
  out.layer = a.registerSandboxLayer(host, { owner: ${JSON.stringify(owner)} })
  out.contained = new a.DefaultSandboxExtensionService().contained
  console.log(JSON.stringify(out))
})()
`
}

function assertRefused(out) {
  for (const name of ['list', 'stop', 'image']) {
    assert.equal(out[name].code, 'NESTING_REFUSED', `${name}: ${JSON.stringify(out[name])}`)
    assert.match(out[name].message, NESTING)
  }
  assert.equal(out.layer, null, 'registerSandboxLayer registered a provider')
  assert.equal(out.registered, undefined)
  assert.equal(out.published, undefined)
  assert.equal(out.contained, true)
}

test('NESTING_REFUSED on a host process with PO_SANDBOX=1: ls, stop and the image build refuse before touching the engine, and the layer registers nothing', async (t) => {
  const { poHome, owner } = setup(t)
  const { layer } = openLayer(baseOptions(poHome, owner))
  const c = await layer.containers.start({ id: 'nest', path: tempWorkspace(t) })

  // A child process whose own environment says it is contained.
  const r = await run(process.execPath, ['-e', nestingProbe(path.join(root, 'index.js'), owner)], { env: { ...process.env, PO_SANDBOX: '1' } })
  assert.equal(r.code, 0, r.stderr)
  assertRefused(JSON.parse(r.stdout))
  // The refused stop did nothing.
  assert.equal(isRunning(c.containerId), true)
  assert.ok(existsSync(tokenFile(poHome, owner, 'nest')))

  // The same through the env option, synchronously, with an engine that would answer.
  const env = hostEnv({ PO_SANDBOX: '1' })
  assert.throws(() => listSandboxContainers({ env }), assertCode('NESTING_REFUSED', NESTING))
  assert.throws(() => stopSandboxContainers({ all: true, owner, poHome, env }), assertCode('NESTING_REFUSED', NESTING))
  assert.throws(() => pruneSandboxLeftovers({ env }), assertCode('NESTING_REFUSED', NESTING))
  assert.throws(() => ensureSandboxImage({ env, baseImage: TEST_BASE, imageVariant: 'minimal' }), assertCode('NESTING_REFUSED', NESTING))
  assert.equal(isRunning(c.containerId), true)

  // The CLI says so and exits 1.
  const cli = path.join(root, 'bin', 'po-sandbox.js')
  const folder = tempWorkspace(t)
  const commands = [[1, 'ls'], [1, 'stop', '--all', '--owner', owner], [1, 'up', folder, '--po-home', poHome],
    [1, 'down', folder, '--po-home', poHome], [125, 'exec', folder, '--po-home', poHome, '--', 'true']]
  for (const [code, ...args] of commands) {
    const res = await run(process.execPath, [cli, ...args], { env: { ...process.env, PO_SANDBOX: '1' } })
    assert.equal(res.code, code, `${args.join(' ')}: ${res.stdout}${res.stderr}`)
    assert.match(res.stderr, /NESTING_REFUSED/, args.join(' '))
  }
  assert.equal(isRunning(c.containerId), true)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [c.containerId])
})

test('NESTING_REFUSED inside a real sandbox container: the addon loaded there refuses ls, stop and the image build, and registers no layer', async (t) => {
  const { poHome, owner } = setup(t)
  const ws = tempWorkspace(t)
  // The package as a session inside would load it: index.js and the built addon.
  for (const f of ['package.json', 'index.js', ...readdirSync(root).filter((n) => n.endsWith('.node'))]) {
    cpSync(path.join(root, f), path.join(ws, 'pkg', f))
  }
  const { layer } = openLayer(baseOptions(poHome, owner))
  const c = await layer.containers.start({ id: 'inner', path: ws })
  const r = await run('docker', ['exec', '-w', ws, c.containerId, 'node', '-e', nestingProbe(path.join(ws, 'pkg', 'index.js'), owner)])
  assert.equal(r.code, 0, r.stderr)
  assertRefused(JSON.parse(r.stdout))
  assert.equal(isRunning(c.containerId), true)
  assert.deepEqual(containersWith({ 'po.owner': owner }), [c.containerId])
})

// ---------------------------------------------------------------------------------------------
// domains.yaml

test('domains.yaml in the Po home is mounted read-only at P/domains.yaml: readable inside, no write, no delete; absent, no mount', async (t) => {
  const { poHome, owner } = setup(t)
  const text = 'domains:\n  - name: example.test\n    allow: true\n'
  const domains = path.join(poHome, 'domains.yaml')
  writeFileSync(domains, text)
  const { layer } = openLayer(baseOptions(poHome, owner))
  const c = await layer.containers.start({ id: 'dom', path: tempWorkspace(t) })
  const P = sandboxDir(poHome, 'dom')
  const info = inspect(c.containerId)
  const mounts = info.Mounts.filter((m) => m.Source === domains || m.Destination.endsWith('/domains.yaml'))
  assert.deepEqual(mounts.map((m) => [m.Type, m.Source, m.Destination, m.RW]), [['bind', domains, `${P}/domains.yaml`, false]])
  assert.ok(info.Config.Env.includes(`PO_HOME=${P}`))

  const read = await execIn(c.containerId, 'cat "$PO_HOME/domains.yaml"')
  assert.equal(read.code, 0, read.stderr)
  assert.equal(read.stdout, text)
  const write = await execIn(c.containerId, 'echo changed > "$PO_HOME/domains.yaml"')
  assert.notEqual(write.code, 0, 'a write from inside succeeded')
  assert.match(write.stderr, /Read-only file system/)
  const remove = await execIn(c.containerId, 'rm -f "$PO_HOME/domains.yaml"')
  assert.notEqual(remove.code, 0, 'a delete from inside succeeded')
  const rename = await execIn(c.containerId, 'mv "$PO_HOME/domains.yaml" "$PO_HOME/moved.yaml"')
  assert.notEqual(rename.code, 0, 'a rename from inside succeeded')
  assert.equal(readFileSync(domains, 'utf8'), text, 'the host file changed')
  // P itself stays writable next to it.
  assert.equal((await execIn(c.containerId, 'echo ok > "$PO_HOME/mine.txt" && cat "$PO_HOME/mine.txt"')).stdout, 'ok\n')

  // A Po home without domains.yaml: no such mount, nothing at that path inside.
  const bare = setup(t)
  const other = openLayer(baseOptions(bare.poHome, bare.owner))
  const c2 = await other.layer.containers.start({ id: 'dom', path: tempWorkspace(t) })
  const info2 = inspect(c2.containerId)
  assert.deepEqual(info2.Mounts.filter((m) => m.Source.endsWith('domains.yaml') || m.Destination.endsWith('domains.yaml')), [])
  const absent = await execIn(c2.containerId, 'test -e "$PO_HOME/domains.yaml"')
  assert.equal(absent.code, 1, 'something is at P/domains.yaml')

  // Removed from the home later: the next start replaces the container, without the mount.
  rmSync(domains)
  const { layer: later, events } = openLayer(baseOptions(poHome, owner))
  const c3 = await later.containers.start({ id: 'dom', path: path.join(c.workspacePath) })
  assert.notEqual(c3.containerId, c.containerId)
  assert.match(c3.replacedReason, /domains\.yaml/)
  assert.ok(workspaceEvents(events, 'replaced').some((e) => e.containerId === c.containerId))
  assert.deepEqual(inspect(c3.containerId).Mounts.filter((m) => m.Destination.endsWith('domains.yaml')), [])
  // What the README's Limits say: the engine's mount point stays behind in P, empty.
  assert.equal(statSync(path.join(P, 'domains.yaml')).size, 0)
  assert.equal((await execIn(c3.containerId, 'wc -c < "$PO_HOME/domains.yaml"')).stdout.trim(), '0')
})

test('workspaces that would expose the host are refused (WORKSPACE_INVALID): the home folder, one containing it, one inside the Po home, two that overlap; nothing is made for them', async (t) => {
  const { poHome, owner } = setup(t)
  const outer = tempWorkspace(t)
  const home = path.join(outer, 'home')
  mkdirSync(home)
  const inPoHome = path.join(poHome, 'inner')
  mkdirSync(inPoHome)
  const shared = tempWorkspace(t)
  const nested = path.join(shared, 'sub')
  mkdirSync(nested)
  const workspaces = [
    { id: 'home', path: home }, { id: 'outer', path: outer }, { id: 'inpo', path: inPoHome },
    { id: 'shared', path: shared }, { id: 'nested', path: nested },
  ]
  const { layer } = openLayer(baseOptions(poHome, owner, { env: hostEnv({ HOME: home }), workspaces }))
  const status = await layer.provider.ready()
  const byId = Object.fromEntries(status.workspaces.map((w) => [w.id, w]))
  const why = { home: /it is your home folder/, outer: /it contains your home folder/, inpo: /overlaps the Po home/ }
  for (const [id, re] of Object.entries(why)) {
    assert.equal(byId[id].state, 'failed', JSON.stringify(byId[id]))
    assert.equal(byId[id].errorCode, 'WORKSPACE_INVALID')
    assert.match(byId[id].error, re)
  }
  // Of the two overlapping folders, the one claimed first runs; the other names it.
  const states = [byId.shared.state, byId.nested.state].sort()
  assert.deepEqual(states, ['failed', 'running'], JSON.stringify(status.workspaces))
  const [lost, won] = byId.shared.state === 'failed' ? ['shared', 'nested'] : ['nested', 'shared']
  assert.match(byId[lost].error, new RegExp(`overlaps the folder .* of workspace '${won}' of this hub`))
  for (const id of ['home', 'outer', 'inpo', lost]) {
    assert.deepEqual(containersWith({ 'po.owner': owner, 'po.workspace': id }), [], id)
    assert.ok(!volumesOf(owner).some((v) => v.includes(`-${id}-`)), id)
    assert.equal(existsSync(tokenFile(poHome, owner, id)), false, id)
    assert.equal(existsSync(sandboxDir(poHome, id)), false, id)
    assert.equal(existsSync(brokerFolder(brokerDirOf(owner), owner, id)), false, id)
  }
  // A call is refused the same way (a link to the home folder is the home folder).
  symlinkSync(home, path.join(outer, 'link-home'))
  await assert.rejects(layer.containers.start({ id: 'link', path: path.join(outer, 'link-home') }), assertCode('WORKSPACE_INVALID', /home folder/))
  // Once the winner stops, its folder is free for the other.
  await layer.containers.stop(won)
  const again = await layer.containers.start({ id: lost, path: lost === 'shared' ? shared : nested })
  assert.equal(again.state, 'running')
})
