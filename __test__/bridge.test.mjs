// The loopback broker bridge through the built addon: 127.0.0.1:<port> relays raw bytes to a
// Unix socket peer made here, both ways, with half-close, and leaves nothing behind on close.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'

import { addon, tempDir } from './helpers.mjs'

const { startBrokerBridge } = addon

const MiB = 1024 * 1024

/** A Unix socket peer allowing half-open sockets; `onConnection` gets each. Closed at test end. */
async function peerServer(t, socketPath, onConnection) {
  const sockets = new Set()
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    onConnection(s)
  })
  await new Promise((resolve, reject) => server.listen(socketPath, resolve).once('error', reject))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  return server
}

/** A bridge to `socketPath`, closed at test end. */
async function bridgeTo(t, socketPath) {
  const bridge = await startBrokerBridge(socketPath)
  t.after(() => bridge.close())
  return bridge
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true }, () => resolve(s))
    s.once('error', reject)
  })
}

/** `total` deterministic pseudo-random bytes in 1 MiB chunks, hashed as they are produced. */
function body(total, seed) {
  const hash = createHash('sha256')
  let sent = 0
  let x = seed >>> 0
  const stream = new Readable({
    read() {
      if (sent >= total) {
        this.push(null)
        return
      }
      const chunk = Buffer.allocUnsafe(Math.min(MiB, total - sent))
      for (let i = 0; i < chunk.length; i += 4) {
        x = (Math.imul(x, 1664525) + 1013904223) >>> 0
        chunk.writeUInt32LE(x, i)
      }
      hash.update(chunk)
      sent += chunk.length
      this.push(chunk)
    },
  })
  return { stream, digest: () => hash.digest('hex') }
}

/** Resolves with the sha256 and length of everything `socket` reads until 'end'. */
function drain(socket) {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256')
    let length = 0
    socket.on('data', (d) => {
      hash.update(d)
      length += d.length
    })
    socket.once('end', () => resolve({ digest: hash.digest('hex'), length }))
    socket.once('error', reject)
  })
}

/** Resolves with everything `socket` reads until 'end', as a string. */
function readAll(socket) {
  return new Promise((resolve, reject) => {
    const parts = []
    socket.on('data', (d) => parts.push(d))
    socket.once('end', () => resolve(Buffer.concat(parts).toString()))
    socket.once('error', reject)
  })
}

test('the bridge listens on 127.0.0.1 only, with a url made of its port', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'broker.sock')
  await peerServer(t, sock, (s) => s.end())
  const bridge = await bridgeTo(t, sock)
  assert.ok(Number.isInteger(bridge.port) && bridge.port > 0 && bridge.port < 65536, `port ${bridge.port}`)
  assert.equal(bridge.url, `http://127.0.0.1:${bridge.port}`)
  assert.ok(bridge.url.startsWith('http://127.0.0.1:'))
  // Other local addresses, loopback or not, find nothing on that port.
  const others = ['127.0.0.2', ...Object.values(os.networkInterfaces()).flat()
    .filter((a) => a.family === 'IPv4' && !a.internal).map((a) => a.address)]
  for (const host of others) {
    const err = await new Promise((resolve) => {
      const s = net.connect({ host, port: bridge.port })
      s.once('connect', () => {
        s.destroy()
        resolve(null)
      })
      s.once('error', resolve)
    })
    assert.equal(err?.code, 'ECONNREFUSED', `${host}:${bridge.port}`)
  }
})

test('64 MiB both ways arrives intact', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'broker.sock')
  const size = 64 * MiB
  const fromPeer = body(size, 2)
  const peerGot = Promise.withResolvers()
  await peerServer(t, sock, (s) => {
    drain(s).then(peerGot.resolve, peerGot.reject)
    fromPeer.stream.pipe(s)
  })
  const bridge = await bridgeTo(t, sock)
  const client = await connect(bridge.port)
  const fromClient = body(size, 1)
  const clientGot = drain(client)
  fromClient.stream.pipe(client)
  const [atClient, atPeer] = await Promise.all([clientGot, peerGot.promise])
  assert.equal(atPeer.length, size)
  assert.equal(atClient.length, size)
  assert.equal(atPeer.digest, fromClient.digest(), 'client → peer')
  assert.equal(atClient.digest, fromPeer.digest(), 'peer → client')
  client.destroy()
})

test('half-close from the client: the peer sees its end, then replies, and the client gets it all', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'broker.sock')
  const peerSaw = Promise.withResolvers()
  await peerServer(t, sock, (s) => {
    const parts = []
    s.on('data', (d) => parts.push(d))
    s.once('end', () => {
      // Only after the request's end: a reply the client must still receive.
      s.write('reply, part one; ')
      setTimeout(() => s.end('part two after the request ended'), 50)
      peerSaw.resolve(Buffer.concat(parts).toString())
    })
  })
  const bridge = await bridgeTo(t, sock)
  const client = await connect(bridge.port)
  const reply = readAll(client)
  client.end('GET / HTTP/1.1\r\n\r\n')
  assert.equal(await peerSaw.promise, 'GET / HTTP/1.1\r\n\r\n')
  assert.equal(await reply, 'reply, part one; part two after the request ended')
  client.destroy()
})

test('half-close from the peer: the client sees its end, still sends, and the peer gets it all', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'broker.sock')
  const peerGot = Promise.withResolvers()
  await peerServer(t, sock, (s) => {
    readAll(s).then(peerGot.resolve, peerGot.reject)
    s.end('the peer is done writing')
  })
  const bridge = await bridgeTo(t, sock)
  const client = await connect(bridge.port)
  const greeting = await readAll(client)
  assert.equal(greeting, 'the peer is done writing')
  client.write('still sending ')
  client.end('after the peer ended')
  assert.equal(await peerGot.promise, 'still sending after the peer ended')
  client.destroy()
})

test('close() leaves no listener and a second close() resolves', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'broker.sock')
  const peerConnected = Promise.withResolvers()
  // The peer holds its side open: only the bridge closing can end the relay.
  await peerServer(t, sock, () => peerConnected.resolve())
  const bridge = await startBrokerBridge(sock)
  const { port } = bridge
  // A relay in flight is ended by close() too.
  const inFlight = await connect(port)
  await peerConnected.promise
  // With half-open allowed, a FIN from the bridge shows as 'end', a reset as 'close'.
  const ended = new Promise((resolve) => {
    inFlight.once('end', resolve)
    inFlight.once('close', resolve)
  })
  inFlight.on('error', () => {})
  inFlight.resume()
  await bridge.close()
  await ended
  const err = await new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port })
    s.once('connect', () => {
      s.destroy()
      resolve(null)
    })
    s.once('error', resolve)
  })
  assert.equal(err?.code, 'ECONNREFUSED')
  await bridge.close()
})

test('bad routes reject with OPTIONS_INVALID', async (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'file.sock')
  writeFileSync(file, '')
  const cases = [
    ['relative/broker.sock', /absolute/],
    [path.join(dir, 'missing.sock'), /missing/],
    [file, /a regular file/],
  ]
  for (const [route, message] of cases) {
    await assert.rejects(startBrokerBridge(route), (err) => {
      assert.equal(err.code, 'OPTIONS_INVALID', `${route}: ${err.message}`)
      assert.match(err.message, message)
      assert.match(err.message, /route/)
      return true
    }, route)
  }
})

test('brokerOrigin: the bridge for a socket route, the target for a tcp route; bad input is OPTIONS_INVALID', () => {
  const { brokerOrigin } = addon
  assert.equal(brokerOrigin({ kind: 'socket', target: '/run/po-broker/broker.sock' }, 41234), 'http://127.0.0.1:41234')
  assert.equal(brokerOrigin({ kind: 'tcp', target: 'host.docker.internal:40001' }), 'http://host.docker.internal:40001')
  for (const [route, port, says] of [
    [{ kind: 'pipe', target: 'x' }, 1, /^Invalid option route: the kind must be 'socket' or 'tcp', not "pipe"$/],
    [{ kind: 'socket', target: '/s' }, undefined, /^Invalid option bridgePort: /],
    [{ kind: 'socket', target: '/s' }, 70000, /^Invalid option bridgePort: must be a TCP port 1-65535$/],
    [{ kind: 'tcp', target: 'no-port' }, undefined, /^Invalid option route: a tcp route's target must be HOST:PORT/],
  ]) {
    assert.throws(() => brokerOrigin(route, port), (err) => {
      assert.equal(err.code, 'OPTIONS_INVALID')
      assert.match(err.message, says)
      return true
    })
  }
})
