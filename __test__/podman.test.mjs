// Engine detection against real Podman's Docker-compatible API (`podman system service`), and
// the container provider on rootful Podman: a bind-mode and a clone-mode workspace of one hub.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'


import { addon, isolatedEnv, root, run, tempDir, waitFor } from './helpers.mjs'
import { LOOK_COPY, parseLines, plantAndApply, smallRepository, treeHash } from './clone-fixtures.mjs'
import { TEST_BASE, baseOptions, brokerDirOf, getJson, modelsUpstream, newOwner, openLayer, removePodmanOwner, tempHome, tempWorkspace, writeBundle } from './provider-fixtures.mjs'

let dir
let sock
let service

before(async () => {
  try {
    execFileSync('podman', ['--version'], { stdio: 'ignore' })
  } catch {
    throw new Error("These tests need Podman: install it (Debian: sudo apt-get install -y podman) or run 'bash scripts/ensure-engine.sh' as root.")
  }
  dir = mkdtempSync(path.join(os.tmpdir(), 'po-sandbox-podman-'))
  sock = path.join(dir, 'podman.sock')
  service = spawn('podman', ['system', 'service', '--time=0', `unix://${sock}`], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  service.stderr.on('data', (d) => { stderr += d })
  const deadline = Date.now() + 30000
  while (!existsSync(sock)) {
    if (service.exitCode !== null) throw new Error(`podman system service exited (${service.exitCode}): ${stderr}`)
    if (Date.now() > deadline) throw new Error(`podman system service did not create ${sock} within 30 s: ${stderr}`)
    await new Promise((r) => setTimeout(r, 100))
  }
})

after(async () => {
  if (service && service.exitCode === null) {
    const exited = new Promise((r) => service.once('exit', r))
    service.kill('SIGTERM')
    await exited
  }
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('CONTAINER_HOST pointing at Podman: available and reported as podman', async () => {
  const r = await addon.checkEngine({ timeoutMs: 10000, env: isolatedEnv(dir, { CONTAINER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'podman' }) })
  assert.equal(r.available, true, r.reason)
  assert.equal(r.engine, 'podman')
  assert.equal(r.source, 'CONTAINER_HOST')
  assert.equal(r.endpoint, `unix://${sock}`)
  assert.equal(r.engineVersion, execFileSync('podman', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' }).trim())
  const [major, minor] = r.apiVersion.split('.').map(Number)
  assert.ok(major === 1 && minor >= 41, `API ${r.apiVersion}`)
  assert.equal(r.osType, 'linux')
})

test('a Podman socket behind DOCKER_HOST is still reported as podman', async () => {
  const r = await addon.checkEngine({ timeoutMs: 10000, env: isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}` }) })
  assert.equal(r.available, true, r.reason)
  assert.equal(r.engine, 'podman')
  assert.equal(r.source, 'DOCKER_HOST')
  assert.equal(r.candidates[0].engine, 'docker')
  assert.equal(r.candidates[0].outcome, 'available')
})

/** Podman keeps its own images: the local test base, loaded into it once per run. */
let loaded
function loadBase() {
  loaded ??= run('bash', ['-c', `bash ${JSON.stringify(path.join(root, 'scripts/build-test-base-image.sh'))} >/dev/null && docker save ${TEST_BASE} | podman load`])
  return loaded.then((r) => assert.equal(r.code, 0, r.stderr))
}

test('the container provider on Podman: a hardened container, brokered calls, a clone-mode workspace beside it (planting, diff, apply), adoption by the next hub, stop', async (t) => {
  await loadBase()
  const poHome = tempHome(t)
  const owner = newOwner()
  const ws = tempWorkspace(t)
  writeBundle(poHome)
  // A second workspace of the same hub, in clone mode: created beside the first one.
  const repo = path.join(tempDir(t, 'po-podman-clone-'), 'project')
  mkdirSync(repo)
  const commit = await smallRepository(repo)
  const untouched = treeHash(repo)
  // Only this suite's own sandbox image (network.test builds its own from another base name).
  let image = null
  t.after(async () => {
    await removePodmanOwner(owner)
    if (image) await run('podman', ['rmi', '-f', image])
  })
  const REAL = `sk-REAL-podman-${'p'.repeat(24)}`
  const { seen, origin } = await modelsUpstream(t)
  // Podman's API service can take seconds to answer while other suites run.
  const env = { ...process.env, CONTAINER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'podman', PO_SANDBOX_ENGINE_TIMEOUT_MS: '20000', OPENAI_API_KEY: REAL, OPENAI_BASE_URL: origin }
  const options = { ...baseOptions(poHome, owner), baseImage: `localhost/${TEST_BASE}`, env, workspaces: [{ id: 'pw', path: ws }, { id: 'pc', path: repo, mode: 'clone' }] }

  const first = openLayer(options)
  const status = await first.layer.provider.ready()
  image = status.image
  assert.equal(status.engine, 'podman')
  const [w, wc] = ['pw', 'pc'].map((id) => status.workspaces.find((x) => x.id === id))
  assert.equal(w.state, 'running', JSON.stringify(w))
  assert.equal(wc.state, 'running', JSON.stringify(wc))
  const c = w.container
  const info = JSON.parse((await run('podman', ['inspect', c.containerId])).stdout)[0]
  assert.equal(info.HostConfig.Privileged, false)
  assert.ok(info.HostConfig.SecurityOpt.includes('no-new-privileges'), JSON.stringify(info.HostConfig.SecurityOpt))
  assert.ok(info.HostConfig.CapDrop.length >= 14, JSON.stringify(info.HostConfig.CapDrop))
  assert.equal(info.Config.User, `${process.getuid()}:${process.getgid()}`)
  assert.ok(Object.values(info.HostConfig.PortBindings).flat().every((b) => b.HostIp === '127.0.0.1'))
  assert.ok(!info.Config.Env.some((kv) => kv.includes(REAL)))

  // The holder's input chain (issue 24, item 1): inbound dropped but for the server's port from
  // the network's gateway, where netavark's port forwarding connects from; the hub's call
  // below reaches the server through it.
  const holder = JSON.parse((await run('podman', ['inspect', info.HostConfig.NetworkMode.replace(/^container:/, '')])).stdout)[0]
  const gateway = Object.values(holder.NetworkSettings.Networks)[0].Gateway
  const rules = (await run('nsenter', ['-t', String(holder.State.Pid), '-n', 'nft', 'list', 'chain', 'inet', 'po_sandbox', 'input'])).stdout
  assert.match(rules, /hook input priority filter; policy drop;/)
  assert.match(rules, new RegExp(`ip saddr ${gateway.replace(/\./g, '\\.')} tcp dport 7300 accept`))
  assert.match(rules, /counter name "?inbound_dropped"? drop/)

  // A model call from inside goes through the broker socket with the real key swapped in.
  const call = await getJson(c.url, '/call')
  assert.equal(call.status, 200, JSON.stringify(call))
  assert.deepEqual(seen.map((q) => q.headers.authorization), [`Bearer ${REAL}`])

  // A forwarded port works on Podman too (rootful, the hub root: it dials inside the holder's
  // namespace, Podman's SandboxKey), and ends with nothing left inside.
  const fwd = await first.layer.containers.forwardPort('pw', 7300)
  assert.equal(fwd.carrier, 'namespace')
  assert.equal((await getJson(fwd.url, '/whoami')).uid, process.getuid())
  const listed = await addon.listSandboxContainers({ poHome, owner, forwards: true, env })
  assert.deepEqual(listed.find((r) => r.workspaceId === 'pw').forwards, [{ port: 7300, hostPort: fwd.hostPort }])
  await fwd.close()
  // The relay inside ends once its input is closed: a moment after close() (as ports.test waits).
  await waitFor(async () => !/po-sandbox-forward/.test((await run('podman', ['top', c.containerId, 'args'])).stdout), 'no relay left in the container', 10000)

  // The clone-mode workspace (issue 25 on rootful Podman): its copy, uploaded through the
  // engine, holds the host's commit and work and is the container user's inside and on the
  // host; then the shared acceptance: every planting route leaves the host tree byte for byte
  // the same, apply brings the same commit ids to the named branch with HEAD, index and working
  // tree untouched, a second apply is a no-op, a host commit on the branch meanwhile is refused.
  const cc = wc.container
  assert.equal(cc.workspaceMode, 'clone')
  const inside = (script) => run('podman', ['exec', '-w', repo, cc.containerId, 'sh', '-c', script])
  const look = await inside(LOOK_COPY)
  assert.equal(look.code, 0, look.stderr)
  const copySeen = parseLines(look.stdout)
  assert.equal(copySeen.log, commit, 'the same commit id')
  assert.equal(copySeen.status, ' M tracked.txt|?? untracked.txt|')
  assert.equal(copySeen.user, `${process.getuid()}:${process.getgid()}`)
  assert.equal(copySeen.owners, copySeen.user, 'the copy is owned by the container user')
  const sandbox = { exec: inside, diff: () => first.layer.containers.diff('pc'), apply: (o) => first.layer.containers.apply('pc', o) }
  const took = await plantAndApply(sandbox, repo, untouched, 'po-sandbox/agent-work')
  const copies = async () => JSON.parse((await run('podman', ['volume', 'ls', '--format', 'json', '--filter', `label=po.workspace=${wc.id}`])).stdout)
    .filter((v) => v.Labels['po.workspace-copy'] === '1' && v.Labels['po.owner'] === owner).map((v) => v.Name)
  const [copy] = await copies()
  const mountpoint = JSON.parse((await run('podman', ['volume', 'inspect', copy])).stdout)[0].Mountpoint
  assert.equal(readFileSync(path.join(mountpoint, 'untracked.txt'), 'utf8'), 'new on the host\n')
  assert.equal(statSync(path.join(mountpoint, '.git/objects')).uid, process.getuid())

  // The next hub adopts both (Podman reports CapDrop as the list of dropped capabilities); the
  // copy keeps the agent's work and outlives its container (stopAll keeps it).
  const second = openLayer(options)
  const again = await second.layer.provider.ready()
  const adopted = ['pw', 'pc'].map((id) => again.workspaces.find((x) => x.id === id).container)
  assert.deepEqual(adopted.map((a) => [a.containerId, a.adopted]), [[c.containerId, true], [cc.containerId, true]])
  assert.equal((await inside('git rev-parse HEAD')).stdout.trim(), took.second, 'the agent work is still there')
  // exec (issue 26): the first takes the engine's exec and starts the container's spawner (behind
  // the rules' gate: no health check runs here without systemd); the next ones are its children.
  const parent = path.join(ws, 'parent.txt')
  const probe = ['sh', '-c', 'if [ "$PPID" = 0 ]; then echo engine; else tr "\\0" " " </proc/$PPID/cmdline; fi > parent.txt; exit 3']
  assert.equal(await second.layer.containers.exec('pw', probe), 3)
  assert.equal(readFileSync(parent, 'utf8').trim(), 'engine')
  await waitFor(async () => (await second.layer.containers.exec('pw', probe)) === 3 && /po-sandbox-exec/.test(readFileSync(parent, 'utf8')), 'an exec through the spawner', 20000)
  // Both at once: Podman runs no init, so a server that ignores SIGTERM takes the stop's grace.
  assert.deepEqual((await second.layer.containers.stopAll()).sort(), ['pc', 'pw'])
  assert.equal((await run('podman', ['ps', '-aq', '--filter', `label=po.owner=${owner}`])).stdout.trim(), '')
  assert.deepEqual(await copies(), [copy], 'stopAll keeps the copy')
  // A discard removes it, and nothing of the other workspace (Podman lists the volumes that
  // match any one of several label filters).
  const volumes = async (ws) => JSON.parse((await run('podman', ['volume', 'ls', '--format', 'json', '--filter', `label=po.owner=${owner}`])).stdout)
    .filter((v) => v.Labels['po.workspace'] === ws).map((v) => v.Name).sort()
  const kept = await volumes('pw')
  assert.ok(kept.length > 0)
  await addon.stopSandboxContainers({ poHome, owner, workspace: 'pc', discard: true, env })
  assert.deepEqual(await copies(), [], 'a discard removes the copy')
  assert.deepEqual(await volumes('pw'), kept)
})

test('on Podman a --runtime run flag makes start-up fail with RUN_FLAGS_INVALID (its Docker API would ignore it), and nothing is made', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  const ws = tempWorkspace(t)
  writeBundle(poHome)
  t.after(() => rmSync(brokerDirOf(owner), { recursive: true, force: true }))
  const env = { ...process.env, CONTAINER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'podman', PO_SANDBOX_ENGINE_TIMEOUT_MS: '20000' }
  const options = { ...baseOptions(poHome, owner), baseImage: `localhost/${TEST_BASE}`, env, workspaces: [{ id: 'pr', path: ws }], runFlags: ['--runtime=runsc', '--memory=1g'] }
  const { layer } = openLayer(options)
  const status = await layer.provider.ready()
  assert.equal(status.state, 'unavailable')
  assert.equal(status.code, 'RUN_FLAGS_INVALID', status.reason)
  assert.match(status.reason, /'--runtime=runsc'.*Podman.*containers\.conf/)
  assert.equal((await run('podman', ['ps', '-aq', '--filter', `label=po.owner=${owner}`])).stdout.trim(), '')
  await assert.rejects(layer.containers.start({ id: 'pr', path: ws }), (err) => err.code === 'RUN_FLAGS_INVALID')
})
