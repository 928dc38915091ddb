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

/** A relay to dockerd's socket; `freeze()` holds every request byte until `thaw()`. */
async function freezableEngine(t, target = '/var/run/docker.sock') {
  const sock = path.join(tempDir(t, 'pef-'), 'engine.sock')
  let frozen = false
  const held = []
  const sockets = new Set()
  const server = net.createServer((client) => {
    const upstream = net.connect(target)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => { sockets.delete(s); client.destroy(); upstream.destroy() })
    }
    upstream.on('data', (d) => client.write(d))
    client.on('data', (d) => (frozen ? held.push([upstream, d]) : upstream.write(d)))
  })
  await new Promise((resolve, reject) => server.listen(sock, resolve).once('error', reject))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  return {
    sock,
    freeze() { frozen = true },
    thaw() {
      frozen = false
      for (const [u, d] of held.splice(0)) if (!u.destroyed) u.write(d)
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

test('a container whose server dies is restarted by the engine: died and restarted events with the reason, and status() follows its port with no call', async (t) => {
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
  // status() shows the port the engine publishes now, without any call to the provider.
  const port = () => {
    const bindings = Object.values(inspect(c.containerId).NetworkSettings.Ports ?? {}).flat().filter(Boolean)
    return bindings.length ? Number(bindings[0].HostPort) : null
  }
  await waitFor(() => port() && layer.provider.status().workspaces[0].container.hostPort === port(), 'status() to show the current port', 10000)
  // Docker's allocator hands out the next ephemeral port on a restart: the status really moved.
  assert.notEqual(port(), c.hostPort, 'the restarted container kept its port, so this proves nothing')
  assert.equal(layer.provider.status().workspaces[0].container.url, `http://127.0.0.1:${port()}`)
  assert.equal(layer.provider.status().workspaces[0].container.state, 'running')
  // A stop on request is not a death.
  assert.equal(await layer.containers.stop('crash'), true)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  assert.equal(events.filter((e) => e.type === 'workspace' && e.state === 'died').length, 1)
})
