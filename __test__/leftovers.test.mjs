// Nothing left behind (issue 27): a hub killed between a write-aside and its rename (a failpoint
// of the test build blocks it right there, then SIGKILL), the files of start/stop cycles, and
// per-hub networks whose containers were removed behind the hub's back on an engine of the
// test's own whose address pool is tiny.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'

import { root, run, tempDir, waitFor } from './helpers.mjs'
import { privateEngine } from './private-engine.mjs'
import {
  baseOptions, brokerDirOf, cleanupOwner, hostEnv, killHub, newOwner, openLayer, removeOwner, spawnHub, TEST_BASE, tempHome, tempWorkspace,
  useTestBaseImage, writeBundle, writeHubChild,
} from './provider-fixtures.mjs'

useTestBaseImage()

const CLI = path.join(root, 'bin/po-sandbox.js')
const asides = (dir) => readdirSync(dir).filter((n) => /\.tmp-\d+$/.test(n))
/** The entries of a folder, sorted ([] when it is missing). */
const entries = (dir) => (existsSync(dir) ? readdirSync(dir).sort() : [])

test('a hub killed between the write-aside and the rename of a token file, then of a rules record: the next start leaves no *.tmp-* and both are whole; start/stop cycles leave nothing of a stopped workspace', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const workspace = { id: 'kill', path: tempWorkspace(t) }
  const tokens = path.join(poHome, 'sandbox-tokens', owner)
  const options = baseOptions(poHome, owner)
  const script = writeHubChild(t)
  const marker = path.join(tempDir(t, 'po-failpoint-'), 'reached')
  for (const at of ['token', 'net']) {
    const reached = `${marker}-${at}`
    const hub = spawnHub(t, script, { options, mode: 'wait', workspace }, { PO_SANDBOX_FAILPOINT: at, PO_SANDBOX_FAILPOINT_MARKER: reached })
    await waitFor(() => existsSync(reached) || hub.exitCode !== undefined, `the hub to reach its ${at} failpoint`, 120000)
    assert.ok(existsSync(reached), `the hub exited first: ${JSON.stringify(hub.lines)} ${hub.stderr}`)
    await killHub(hub)
    // The aside of the killed hub is there; the earlier one was swept by this hub's start.
    assert.deepEqual(asides(tokens), [`kill.${at}.tmp-${hub.child.pid}`])
  }

  const { layer } = openLayer({ ...options, workspaces: [workspace] })
  t.after(() => layer.containers.stopAll().catch(() => {}))
  const status = await layer.provider.ready()
  await waitFor(() => layer.provider.status().settled, 'the start-up to settle', 120000)
  assert.equal(layer.provider.status().workspaces[0].state, 'running', JSON.stringify(layer.provider.status().workspaces))
  assert.equal(status.state, 'ready')
  assert.deepEqual(asides(tokens), [], 'no write-aside is left')
  assert.match(readFileSync(path.join(tokens, 'kill.token'), 'utf8'), /^[0-9a-f]{64}$/, 'the token file is whole')
  assert.match(readFileSync(path.join(tokens, 'kill.net'), 'utf8'), /^\S+ \S+ \S+\n$/, 'the rules record is whole')

  // While it runs: its token, record and start lock; its broker folder (with the socket) and lock.
  const brokerDir = brokerDirOf(owner)
  assert.deepEqual(entries(tokens), ['kill.lock', 'kill.net', 'kill.token'])
  assert.equal(entries(brokerDir).length, 2, entries(brokerDir).join(' '))
  for (let i = 0; i < 2; i++) {
    assert.equal(await layer.containers.stop('kill'), true)
    assert.deepEqual(entries(tokens), [], `after stop ${i + 1}`)
    assert.deepEqual(entries(brokerDir), [], `after stop ${i + 1}`)
    await layer.containers.start(workspace)
  }
  await layer.containers.onCleanStop()
  assert.deepEqual(entries(tokens), [])
  assert.deepEqual(entries(brokerDir), [])
})

/** Runs the CLI against `env`; its JSON output. */
async function cli(args, env) {
  const r = await run(process.execPath, [CLI, ...args, '--json'], { env })
  try {
    return { code: r.code, json: JSON.parse(r.stdout) }
  } catch {
    throw new Error(`po-sandbox ${args.join(' ')} printed no JSON (${r.code}): ${r.stdout}${r.stderr}`)
  }
}

test('per-hub networks left behind exhaust a tiny address pool: the create fails with ENGINE_NETWORK_POOL_EXHAUSTED naming prune, the doctor counts them, prune removes exactly those, then a create succeeds', async (t) => {
  const hadDocker0 = (await run('ip', ['link', 'show', 'docker0'])).code === 0
  // A pool of the test's own: four /28 networks in 10.214.<n>.0/26, n free on this host.
  const routes = (await run('ip', ['-4', 'route'])).stdout
  const used = new Set([...routes.matchAll(/^10\.214\.(\d+)\./gm)].map((m) => Number(m[1])))
  const third = [...Array(256).keys()].find((n) => !used.has(n) && n > 0)
  // The provider image, built on the shared engine by the test above (or now): loaded with it.
  const poHome = tempHome(t)
  writeBundle(poHome)
  const common = ['--po-home', poHome, '--base-image', TEST_BASE, '--image-variant', 'minimal']
  const shared = await cli(['doctor', ...common], hostEnv())
  const tag = shared.json.image.tag
  assert.ok(shared.json.image.present, `the provider image ${tag} was built by the test above`)
  const engine = await privateEngine(t, { args: ['--default-address-pool', `base=10.214.${third}.0/26,size=28`], load: `${tag} ${TEST_BASE}` })
  const env = hostEnv({ DOCKER_HOST: engine.host, PO_SANDBOX_PRUNE_GRACE_MS: '0' })

  // One per-hub network in use (a container on it), the rest left by containers removed behind
  // their hubs' backs, until the engine has no pool left.
  const label = (o) => ['--label', 'po.sandbox=1', '--label', `po.owner=${o}`, '--label', 'po.network=workspaces', `po-net-${o}`]
  const inUse = `t${randomBytes(5).toString('hex')}`
  assert.equal((await engine.docker('network', 'create', ...label(inUse))).code, 0)
  const user = await engine.docker('run', '-d', '--network', `po-net-${inUse}`, '--entrypoint', 'sleep', TEST_BASE, '600')
  assert.equal(user.code, 0, user.stderr)
  const left = []
  for (;;) {
    const o = `t${randomBytes(5).toString('hex')}`
    const r = await engine.docker('network', 'create', ...label(o))
    if (r.code !== 0) {
      assert.match(r.stderr, /non-overlapping IPv4 address pool/)
      break
    }
    left.push(`po-net-${o}`)
    assert.ok(left.length < 8, 'the pool is not that large')
  }
  left.sort()

  const owner = newOwner()
  t.after(() => removeOwner(owner))
  const workspace = { id: 'pool', path: tempWorkspace(t) }
  const { layer } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env }))
  t.after(() => layer.containers.stopAll().catch(() => {}))
  await layer.provider.ready()
  await assert.rejects(layer.containers.start(workspace), (err) => {
    assert.equal(err.code, 'ENGINE_NETWORK_POOL_EXHAUSTED', err.message)
    assert.match(err.message, new RegExp(`${left.length + 1} per-hub networks of po-sandbox exist, ${left.length} of them with no container`))
    assert.match(err.message, /po-sandbox prune/)
    return true
  })

  const doctor = await cli(['doctor', ...common], env)
  assert.deepEqual(doctor.json.networks, { perHub: left.length + 1, unused: left.length })
  const dry = await cli(['prune', '--dry-run'], env)
  assert.equal(dry.code, 0)
  assert.deepEqual(dry.json, { networks: left, volumes: [], dryRun: true })
  const pruned = await cli(['prune'], env)
  assert.deepEqual(pruned.json, { networks: left, volumes: [], dryRun: false })
  const remaining = (await engine.docker('network', 'ls', '--format', '{{.Name}}', '--filter', 'label=po.network=workspaces')).stdout.split(/\s+/).filter(Boolean)
  assert.deepEqual(remaining, [`po-net-${inUse}`], 'the network in use stays')

  const started = await layer.containers.start(workspace)
  assert.equal(started.state, 'running')
  if (hadDocker0) assert.equal((await run('ip', ['link', 'show', 'docker0'])).code, 0, "the shared engine's docker0 is gone")
})
