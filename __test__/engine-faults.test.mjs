// The provider against a real Docker engine that stops answering: a relay on a Unix socket in
// front of dockerd that the test can freeze (requests are held, as a hung dockerd holds them)
// and thaw. Calls must settle with an engine code within the call bound, the status must say
// why, and the provider must notice by itself when the engine answers again.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import net from 'node:net'
import path from 'node:path'

import { run, tempDir, waitFor } from './helpers.mjs'
import {
  baseOptions, cleanupOwner, hostEnv, inspect, newOwner, openLayer, tempHome, tempWorkspace, useTestBaseImage, writeBundle,
} from './provider-fixtures.mjs'

useTestBaseImage()

/** A relay to dockerd's socket. `freeze(match)` holds the request bytes of every connection
 * whose next request line matches `match` (every request when none is given), as a hung
 * dockerd holds them, until `thaw()`; `freezeReplies()` holds what the engine sends back. */
async function freezableEngine(t, target = '/var/run/docker.sock') {
  const sock = path.join(tempDir(t, 'pef-'), 'engine.sock')
  let frozen = null
  let repliesFrozen = false
  const held = []
  const sockets = new Set()
  const server = net.createServer((client) => {
    const upstream = net.connect(target)
    let holding = false
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => { sockets.delete(s); client.destroy(); upstream.destroy() })
    }
    upstream.on('data', (d) => (repliesFrozen ? held.push([client, d]) : client.write(d)))
    client.on('data', (d) => {
      // Once a request is held, so is everything after it on that connection.
      holding ||= frozen !== null && frozen.test(d.subarray(0, 200).toString('latin1').split('\r\n')[0])
      if (holding) held.push([upstream, d])
      else upstream.write(d)
    })
  })
  await new Promise((resolve, reject) => server.listen(sock, resolve).once('error', reject))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  return {
    sock,
    freeze(match = /./) { frozen = match },
    freezeReplies() { repliesFrozen = true },
    thaw() {
      frozen = null
      repliesFrozen = false
      for (const [s, d] of held.splice(0)) if (!s.destroyed) s.write(d)
    },
  }
}

test('a frozen engine: calls settle with ENGINE_TIMEOUT within the bound, status says the engine is not answering, and the provider recovers by itself', async (t) => {
  const engine = await freezableEngine(t)
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const env = hostEnv({ DOCKER_HOST: `unix://${engine.sock}`, PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS: '2000' })
  const { layer, events } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env }))
  const status = await layer.provider.ready()
  assert.equal(status.state, 'ready', JSON.stringify(status))
  assert.equal(status.engineAnswering, true)
  const ws = tempWorkspace(t)
  const c = await layer.containers.start({ id: 'w', path: ws })
  assert.equal(c.state, 'running')

  engine.freeze()
  for (const call of [() => layer.containers.list(), () => layer.containers.start({ id: 'w', path: ws })]) {
    const started = Date.now()
    await assert.rejects(call(), (err) => {
      assert.equal(err.code, 'ENGINE_TIMEOUT', err.message)
      assert.match(err.message, /did not answer in time/)
      return true
    })
    // A functional bound: the 2 s call bound, not bollard's 120 s.
    assert.ok(Date.now() - started < 30000, `settled after ${Date.now() - started} ms`)
  }
  const down = layer.provider.status()
  assert.equal(down.state, 'ready', 'the service stays usable: only the engine is not answering')
  assert.equal(down.engineAnswering, false)
  assert.match(down.engineProblem ?? '', /did not answer in time.*probes the engine every 2 s/s)
  const lost = events.filter((e) => e.type === 'engine' && e.available === false)
  assert.equal(lost.length, 1, `one event for the loss: ${JSON.stringify(lost)}`)
  assert.equal(lost[0].code, 'ENGINE_TIMEOUT')

  engine.thaw()
  // No call: the provider's own probe sees the engine again.
  await waitFor(() => layer.provider.status().engineAnswering, 'the provider to see the engine answer again', 20000)
  assert.equal(layer.provider.status().engineProblem ?? null, null)
  assert.ok(events.some((e) => e.type === 'engine' && e.available === true && events.indexOf(e) > events.indexOf(lost[0])), 'an engine event says it answers again')
  const listed = await layer.containers.list()
  assert.deepEqual(listed.map((x) => [x.workspaceId, x.state]), [['w', 'running']])
})

test('engine calls are bounded by what they do: a read by PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS, a create by PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS, each named', async (t) => {
  const engine = await freezableEngine(t)
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const env = hostEnv({ DOCKER_HOST: `unix://${engine.sock}`, PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS: '1000', PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS: '4000' })
  const { layer } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env }))
  assert.equal((await layer.provider.ready()).state, 'ready')

  // Only container creation hangs: the list, inspects and volume calls before it answer.
  engine.freeze(/^POST \/(v[\d.]+\/)?containers\/create/)
  await assert.rejects(layer.containers.start({ id: 'slow', path: tempWorkspace(t) }), (err) => {
    assert.equal(err.code, 'ENGINE_TIMEOUT', err.message)
    assert.match(err.message, /in time to create container \S+ \(bound: 4000 ms, PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS\)/)
    return true
  })
  engine.thaw()
  await waitFor(() => layer.provider.status().engineAnswering, 'the engine to answer again', 20000)

  engine.freeze(/^GET \/(v[\d.]+\/)?containers\/json/)
  await assert.rejects(layer.containers.list(), (err) => {
    assert.equal(err.code, 'ENGINE_TIMEOUT', err.message)
    assert.match(err.message, /in time to list containers \(bound: 1000 ms, PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS\)/)
    return true
  })
  engine.thaw()
  // A bound given badly is refused by name before any call.
  assert.throws(() => openLayer(baseOptions(poHome, owner, { engine: 'docker', env: { ...env, PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS: 'soon' } })), (err) => {
    assert.equal(err.code, 'OPTIONS_INVALID')
    assert.match(err.message, /PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS: 'soon' is not a whole number of milliseconds between 1000 and 600000/)
    return true
  })
})

test('an image build is bounded by its progress: a build whose output stops fails with IMAGE_BUILD_FAILED naming PO_SANDBOX_IMAGE_BUILD_IDLE_TIMEOUT_MS', async (t) => {
  const engine = await freezableEngine(t)
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  // A fresh tag of the test base: a new image digest, so this start builds.
  const base = `po-sandbox-test-base:idle-${process.pid}`
  assert.equal((await run('docker', ['tag', 'po-sandbox-test-base:node24-nft', base])).code, 0)
  t.after(async () => {
    const ids = (await run('docker', ['images', '-q', '--filter', `label=po.image-base=${base}`])).stdout.split(/\s+/).filter(Boolean)
    await run('docker', ['rmi', '-f', base, ...new Set(ids)])
  })
  const env = hostEnv({ DOCKER_HOST: `unix://${engine.sock}`, PO_SANDBOX_IMAGE_BUILD_IDLE_TIMEOUT_MS: '2000' })
  const { layer, events } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env, baseImage: base }))
  // The build's first output line: from then on, nothing the engine sends comes through.
  await waitFor(() => events.some((e) => e.type === 'image' && e.phase === 'progress'), 'the build to start', 60000)
  engine.freezeReplies()
  const status = await layer.provider.ready()
  engine.thaw()
  assert.equal(status.state, 'unavailable', JSON.stringify(status))
  assert.equal(status.code, 'IMAGE_BUILD_FAILED')
  assert.match(status.reason, /sent no build output for 2000 ms \(PO_SANDBOX_IMAGE_BUILD_IDLE_TIMEOUT_MS\)/)
  assert.ok(events.some((e) => e.type === 'image' && e.phase === 'failed'))
})

test('a container whose server dies is restarted by the engine: died and restarted events with the reason, and status() shows it running behind its holder\'s port with no call', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const ws = tempWorkspace(t)
  const { layer, events } = openLayer(baseOptions(poHome, owner, { workspaces: [{ id: 'crash', path: ws }] }))
  const status = await layer.provider.ready()
  assert.equal(status.workspaces[0].state, 'running', JSON.stringify(status.workspaces))
  const c = status.workspaces[0].container
  // A crash: the server's process killed inside the container.
  const killed = await run('docker', ['exec', c.containerId, 'sh', '-c', 'kill -9 $(pidof node)'])
  assert.equal(killed.code, 0, killed.stderr)
  const ofWorkspace = (state) => events.find((e) => e.type === 'workspace' && e.workspaceId === 'crash' && e.state === state)
  await waitFor(() => ofWorkspace('restarted'), 'a restarted event', 20000)
  const died = ofWorkspace('died')
  assert.ok(died, JSON.stringify(events.filter((e) => e.type === 'workspace')))
  assert.match(died.reason, /exited with code 137/)
  assert.equal(died.containerId, c.containerId)
  assert.ok(events.indexOf(died) < events.indexOf(ofWorkspace('restarted')))
  // Said once: the feed says it when it looks at the died container and finds it running
  // again, or on the engine's start event, not both.
  await new Promise((r) => setTimeout(r, 1500))
  const all = (state) => events.filter((e) => e.type === 'workspace' && e.workspaceId === 'crash' && e.state === state)
  assert.equal(all('restarted').length, 1, JSON.stringify(events.filter((e) => e.type === 'workspace')))
  assert.equal(all('died').length, 1, JSON.stringify(events.filter((e) => e.type === 'workspace')))
  // The port is published by the workspace's network namespace holder, which the crash did
  // not touch: the restarted container is back in the same namespace, behind the same port,
  // and status() says so, without any call to the provider.
  const holderId = inspect(c.containerId).HostConfig.NetworkMode.replace(/^container:/, '')
  const port = () => {
    const bindings = Object.values(inspect(holderId).NetworkSettings.Ports ?? {}).flat().filter(Boolean)
    return bindings.length ? Number(bindings[0].HostPort) : null
  }
  assert.equal(port(), c.hostPort)
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port()}/api/health`).catch(() => null))?.ok, 'the restarted server to answer on its port', 20000)
  assert.equal(layer.provider.status().workspaces[0].container.hostPort, port())
  assert.equal(layer.provider.status().workspaces[0].container.url, `http://127.0.0.1:${port()}`)
  assert.equal(layer.provider.status().workspaces[0].container.state, 'running')
  // A stop on request is not a death.
  assert.equal(await layer.containers.stop('crash'), true)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  assert.equal(events.filter((e) => e.type === 'workspace' && e.state === 'died').length, 1)
})

test('a workspace container left down by a start that failed while its holder was down (as an engine restart leaves it) is started once the holder runs, with the reason; status() shows it running', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  const ws = tempWorkspace(t)
  const { layer, events } = openLayer(baseOptions(poHome, owner, { workspaces: [{ id: 'order', path: ws }] }))
  const status = await layer.provider.ready()
  assert.equal(status.workspaces[0].state, 'running', JSON.stringify(status.workspaces))
  const c = status.workspaces[0].container
  const holderId = inspect(c.containerId).HostConfig.NetworkMode.replace(/^container:/, '')
  // The engine restart's race, made on purpose: the workspace starts while its holder is down.
  for (const id of [c.containerId, holderId]) assert.equal((await run('docker', ['stop', '-t', '1', id])).code, 0)
  const failed = await run('docker', ['start', c.containerId])
  assert.notEqual(failed.code, 0, 'a start without the holder fails')
  assert.notEqual(inspect(c.containerId).State.Error, '')
  assert.equal((await run('docker', ['start', holderId])).code, 0)
  await waitFor(() => inspect(c.containerId).State.Running, 'the hub to start the container left down', 20000)
  const again = (e) => e.type === 'workspace' && e.workspaceId === 'order' && e.state === 'restarted' && /start failed while its network namespace holder was down/.test(e.reason ?? '')
  await waitFor(() => events.some(again), 'a restarted event naming the failed start', 10000)
  await waitFor(() => layer.provider.status().workspaces[0].container?.state === 'running', 'status() to show it running', 10000)
  // The holder's restart may publish another port: status() says which.
  await waitFor(async () => (await fetch(`${layer.provider.status().workspaces[0].container.url}/api/health`).catch(() => null))?.ok, 'its server to answer behind the holder\'s port', 20000)
  // Stopped by someone with the holder running: left as it is.
  assert.equal((await run('docker', ['stop', '-t', '1', c.containerId])).code, 0)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  assert.equal(inspect(c.containerId).State.Running, false)
  assert.equal(events.filter(again).length, 1)
})
