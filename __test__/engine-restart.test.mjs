// A real engine restart (issue 11): the test starts a Docker engine of its own (its own data
// root, socket and bridge; the shared dockerd of the other suites is never touched), runs a
// provider on it, and restarts that engine. The container comes back by its restart policy on
// another host port (the test holds the old one while the engine is down, so the engine must
// pick another), and status() must show the current port within 10 s with no call.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import net from 'node:net'

import { run, waitFor } from './helpers.mjs'
import { privateEngine } from './private-engine.mjs'
import {
  baseOptions, getJson, hostEnv, newOwner, openLayer, removeOwner, tempHome, tempWorkspace, useTestBaseImage, writeBundle,
} from './provider-fixtures.mjs'

useTestBaseImage()

/** Holds a TCP port on 127.0.0.1 until released. */
async function holdPort(port) {
  const server = net.createServer((s) => s.destroy())
  await new Promise((resolve, reject) => server.listen(port, '127.0.0.1', resolve).once('error', reject))
  return () => new Promise((resolve) => server.close(resolve))
}

test('an engine restart: the container comes back on another port and status() shows it within 10 s with no call; a restarted event says where', async (t) => {
  const hadDocker0 = (await run('ip', ['link', 'show', 'docker0'])).code === 0
  const engine = await privateEngine(t)
  const poHome = tempHome(t)
  const owner = newOwner()
  // The provider's broker folder; the engine's containers go with the engine.
  t.after(() => removeOwner(owner))
  writeBundle(poHome)
  const ws = tempWorkspace(t)
  const ws2 = tempWorkspace(t)
  const env = hostEnv({ DOCKER_HOST: engine.host })
  // Two workspaces: the engine starts holders and workspace containers at once, and a workspace
  // started before its holder is left down by its failed start until the hub starts it.
  const { layer, events } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env, workspaces: [{ id: 'rs', path: ws }, { id: 'rs2', path: ws2 }] }))
  t.after(() => layer.containers.stopAll().catch(() => {}))
  const status = await layer.provider.ready()
  assert.deepEqual(status.workspaces.map((w) => [w.id, w.state]), [['rs', 'running'], ['rs2', 'running']], JSON.stringify(status.workspaces))
  const before = status.workspaces[0].container
  assert.equal(typeof (await getJson(before.url)).uid, 'number', 'the server answers before the restart')

  let release = null
  await engine.restart(async () => {
    // The engine is down and its proxy gone: the test takes the old port, so the engine must
    // publish the container elsewhere when it restarts it.
    release = await holdPort(before.hostPort)
  })
  t.after(() => release?.())
  const back = Date.now()

  // The port is published by the workspace's network namespace holder.
  const holderId = (await engine.docker('inspect', '-f', '{{.HostConfig.NetworkMode}}', before.containerId)).stdout.trim().replace(/^container:/, '')
  const current = async () => {
    const r = await engine.docker('port', holderId, '7300/tcp')
    const m = /127\.0\.0\.1:(\d+)/.exec(r.stdout)
    return m ? Number(m[1]) : null
  }
  const port = await waitFor(current, 'the engine to restart the container', 30000)
  assert.notEqual(port, before.hostPort, 'the engine published the port the test holds')
  // No call to the provider: only status() is read.
  // The holder publishes the port; its workspace container may still be on its way back then
  // (restarted into the holder's new namespace): status() shows both within the 10 s.
  await waitFor(() => {
    const c = layer.provider.status().workspaces[0].container
    return c?.hostPort === port && c.state === 'running'
  }, 'status() to show the port the engine publishes now, and the container running', 10000)
  const seen = Date.now() - back
  const now = layer.provider.status().workspaces[0].container
  assert.equal(now.url, `http://127.0.0.1:${port}`)
  assert.equal(now.containerId, before.containerId, 'the same container, restarted by its policy: not a new one')
  assert.equal(now.state, 'running')
  // The event may come a moment after status() shows the port (the feed updates the status
  // when it looks at the died container, which the engine may have restarted by then, and
  // says `restarted` on the engine's start event; events reach JS on a later turn).
  const restartedEvents = () => events.filter((e) => e.type === 'workspace' && e.workspaceId === 'rs' && e.state === 'restarted')
  await waitFor(() => restartedEvents().length >= 1, 'a restarted event', 10000).catch(() => {
    assert.fail(`no restarted event: ${JSON.stringify(events.filter((e) => e.type === 'workspace'))}`)
  })
  const restarted = restartedEvents()
  assert.match(restarted.at(-1).reason, new RegExp(`now on 127\\.0\\.0\\.1:${port}`))
  // The status's url answers: the container's server is reachable where the status says.
  await waitFor(async () => {
    try {
      return (await getJson(now.url)) !== null
    } catch {
      return false
    }
  }, 'the restarted server to answer on its new port', 20000)
  t.diagnostic(`status() showed the new port ${seen} ms after the engine answered again`)
  // Every workspace comes back, whatever order the engine started them in.
  await waitFor(() => layer.provider.status().workspaces.every((w) => w.container?.state === 'running'), 'both workspaces running again', 20000).catch(() => {
    assert.fail(`not every workspace came back: ${JSON.stringify(layer.provider.status().workspaces.map((w) => [w.id, w.container?.state]))}`)
  })
  const other = layer.provider.status().workspaces.find((w) => w.id === 'rs2').container
  assert.equal((await engine.docker('inspect', '-f', '{{.State.Running}}', other.containerId)).stdout.trim(), 'true')
  // The holder came back with a fresh namespace and no rules; the event of its start had a
  // rules helper load them (the workspace's process waited at its start gate meanwhile): the
  // host's root lists them there, and from inside the gateway is refused at once.
  const holderPid = (await engine.docker('inspect', '-f', '{{.State.Pid}}', holderId)).stdout.trim()
  const rules = await run('nsenter', ['-t', holderPid, '-n', 'nft', 'list', 'table', 'inet', 'po_sandbox'])
  assert.equal(rules.code, 0, rules.stderr)
  const hash = (await engine.docker('inspect', '-f', '{{index .Config.Labels "po.net-rules"}}', holderId)).stdout.trim()
  assert.match(rules.stdout, new RegExp(`counter po_rules_${hash}`))
  const gw = (await engine.docker('network', 'inspect', '-f', '{{(index .IPAM.Config 0).Gateway}}', `po-net-${owner}`)).stdout.trim()
  const probe = `const s=require('net').connect(7300,'${gw}');const t0=Date.now();s.on('error',(e)=>{console.log(e.code,Date.now()-t0);process.exit()});s.on('connect',()=>{console.log('connected');process.exit()})`
  const inside = await engine.docker('exec', '-w', '/', before.containerId, 'node', '-e', probe)
  assert.match(inside.stdout, /^ECONNREFUSED \d+$/m, `the gateway from inside after the restart: ${inside.stdout}${inside.stderr}`)
  // No rules helper is left behind on the test's engine.
  const left = await engine.docker('ps', '-aq', '--filter', 'label=po.rules-for')
  assert.equal(left.stdout.trim(), '')
  // The shared engine's bridge was left alone by the test's engine.
  if (hadDocker0) assert.equal((await run('ip', ['link', 'show', 'docker0'])).code, 0, "the shared engine's docker0 is gone")
})
