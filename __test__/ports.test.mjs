// Forwarded ports against the real Docker engine and the local test base image: one sandbox
// (made by `po-sandbox up`) with servers of the test's own on its 127.0.0.1 only, reached
// through `containers.forwardPort` and `po-sandbox port`: HTTP, 100 concurrent echo
// connections through each of two carriers (the hub dialling inside the sandbox's namespace, as
// root gets by default; the forward's socket in the broker folder, PO_SANDBOX_FORWARD_CARRIER=socket,
// where a wrong secret from inside is refused), a WebSocket round trip, a closed port, coded refusals, and the forward's end
// (`port ls` and `ls` list it from the container's process list; Ctrl-C: exit 0 and no relay left, checked with `docker top`; the container stopping: exit 1
// with the reason; no forward's socket left either way).
import { test, before, after } from 'node:test'
import { spawn } from 'node:child_process'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readlinkSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { addon, dockerCli, requireDocker, root, run, tempDir, waitFor } from './helpers.mjs'

const cli = path.join(root, 'bin', 'po-sandbox.js')
const IMAGE = ['--base-image', 'po-sandbox-test-base:node24-nft', '--image-variant', 'minimal']
const HOST = { scope: 'global', identity: { contained: false }, registerSandboxProvider() {}, publishService() {} }

// Inside the sandbox, on 127.0.0.1 only: HTTP (and a WebSocket echo on upgrade) on 5173; an
// echo server on 5174 that writes `bytes: <n>` after the client's end.
const SERVERS = `
const http = require('node:http'), net = require('node:net'), crypto = require('node:crypto')
const web = http.createServer((req, res) => res.end('hello from 5173 ' + req.url))
web.on('upgrade', (req, sock) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
  sock.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + '\\r\\n\\r\\n')
  sock.once('data', (f) => {
    const len = f[1] & 127, mask = f.subarray(2, 6), text = Buffer.from(f.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]))
    const reply = Buffer.from('echo: ' + text)
    sock.write(Buffer.concat([Buffer.from([0x81, reply.length]), reply]))
  })
})
web.listen(5173, '127.0.0.1')
net.createServer((c) => { let n = 0; c.on('data', (d) => { n += d.length; c.write(d) }); c.on('end', () => c.end('bytes: ' + n)) }).listen(5174, '127.0.0.1')
`

let folder, poHome, ws, cid, layer, brokerFolder

/** The forwards' sockets in the sandbox's broker folder (the host's side of /run/po-broker). */
const forwardSockets = () => (existsSync(brokerFolder) ? readdirSync(brokerFolder).filter((n) => n.startsWith('fwd-')) : [])

// Inside: connects to a forward's socket, sends 36 random bytes (no secret), says what came back.
const INTRUDER = `const s = require('node:net').connect(process.argv[1], () => s.write(require('node:crypto').randomBytes(36)))
let n = 0; s.on('data', (d) => { n += d.length }); s.on('close', () => console.log('closed after ' + n + ' bytes')); s.on('error', (e) => console.log(e.code))`

function po(args) {
  return run(process.execPath, [cli, ...args])
}

before(async () => {
  await requireDocker()
  const dir = tempDir({ after: (fn) => process.on('exit', fn) }, 'po-ports-')
  folder = path.join(dir, 'project')
  mkdirSync(folder)
  poHome = path.join(dir, 'po-home')
  ws = addon.workspaceForFolder(folder)
  const up = await po(['up', folder, '--json', '--po-home', poHome, ...IMAGE])
  assert.equal(up.code, 0, up.stderr)
  cid = JSON.parse(up.stdout).container.containerId
  dockerCli(['exec', '-d', cid, 'node', '-e', SERVERS])
  const mounts = JSON.parse(dockerCli(['inspect', '-f', '{{json .Mounts}}', cid]))
  brokerFolder = mounts.find((m) => m.Destination === '/run/po-broker').Source
  layer = addon.registerSandboxLayer(HOST, { poHome, baseImage: IMAGE[1], imageVariant: 'minimal', demoRuntime: true })
})

after(() => addon.stopSandboxContainers({ poHome, workspace: ws.id, removeVolumes: true }))

/** Sends `bytes`, half-closes, and resolves with everything the other side sent back. */
function roundTrip(port, bytes) {
  return new Promise((resolve, reject) => {
    const chunks = []
    const sock = net.connect(port, '127.0.0.1', () => sock.end(bytes))
    sock.on('data', (d) => chunks.push(d))
    sock.on('end', () => resolve(Buffer.concat(chunks)))
    sock.on('error', reject)
  })
}

test('a server on the sandbox loopback answers through the forward; 100 connections each get their own bytes', async () => {
  const web = await layer.containers.forwardPort(ws.id, 5173)
  assert.match(web.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  assert.deepEqual([web.port, web.workspaceId, web.url], [5173, ws.id, `http://127.0.0.1:${web.hostPort}`])
  const text = await waitFor(async () => {
    try { return await (await fetch(`${web.url}/x`)).text() } catch { return null }
  }, 'the server inside answers through the forward', 15000)
  assert.equal(text, 'hello from 5173 /x')
  const echo = await layer.containers.forwardPort(ws.id, 5174)
  // The same port again, its carrier narrowed by the variable: to the socket, and to the exec
  // stream (what VM engines get).
  const narrowed = async (carrier) => {
    process.env.PO_SANDBOX_FORWARD_CARRIER = carrier
    try { return await layer.containers.forwardPort(ws.id, 5174) } finally { delete process.env.PO_SANDBOX_FORWARD_CARRIER }
  }
  const echoSocket = await narrowed('socket')
  const echoExec = await narrowed('exec')
  assert.equal(echoExec.carrier, 'exec')
  const listed = (await layer.containers.forwards()).filter((f) => f.hostPort !== echoExec.hostPort)
  assert.deepEqual(listed.map((f) => f.port).sort(), [5173, 5174, 5174])
  // This test runs as root against a rootful engine on this host: the hub dials inside the
  // sandbox's namespace itself, no socket in the broker folder; the narrowed one has a socket
  // of its own there. Neither carries bytes over the exec.
  assert.deepEqual([web.carrier, echo.carrier, echoSocket.carrier], ['namespace', 'namespace', 'socket'])
  assert.deepEqual(listed.map((f) => f.carrier).sort(), ['namespace', 'namespace', 'socket'])
  const sockets = forwardSockets()
  assert.equal(sockets.length, 1, sockets.join(' '))
  // A process inside without the secret is closed, nothing sent back; the forward works on.
  const intruder = dockerCli(['exec', cid, 'node', '-e', INTRUDER, `/run/po-broker/${sockets[0]}`])
  assert.equal(intruder.trim(), 'closed after 0 bytes')
  // The hub's forwards show in the container's posture.
  const postureOf = async () => (await layer.containers.list()).find((c) => c.containerId === cid).posture
  assert.deepEqual([...(await postureOf()).forwarded].sort(), [`127.0.0.1:${web.hostPort} -> 5173`, `127.0.0.1:${echo.hostPort} -> 5174`, `127.0.0.1:${echoSocket.hostPort} -> 5174`, `127.0.0.1:${echoExec.hostPort} -> 5174`].sort())
  // 100 connections at once through each carrier.
  const sent = Array.from({ length: 100 }, (_, i) => randomBytes(1000 + i * 3000))
  for (const fwd of [echo, echoSocket, echoExec]) {
    const got = await Promise.all(sent.map((b) => roundTrip(fwd.hostPort, b)))
    got.forEach((g, i) => assert.ok(g.equals(Buffer.concat([sent[i], Buffer.from(`bytes: ${sent[i].length}`)])), `${fwd.carrier}: connection ${i}`))
  }
  // The namespace carrier's dialling threads end once they made their socket: no thread of
  // this process stays in the sandbox's network namespace.
  const own = readlinkSync('/proc/self/ns/net')
  const elsewhere = () => readdirSync('/proc/self/task').filter((t) => { try { return readlinkSync(`/proc/self/task/${t}/ns/net`) !== own } catch { return false } })
  await waitFor(() => elsewhere().length === 0, `no thread in another network namespace (${elsewhere().join(' ')})`, 5000)
  for (const fwd of [echo, echoSocket, echoExec]) {
    await fwd.close()
    assert.deepEqual(await fwd.wait(), { reason: 'the forward was closed' })
  }
  await web.close()
  assert.deepEqual(forwardSockets(), [])
  assert.deepEqual(await layer.containers.forwards(), [])
  assert.deepEqual((await postureOf()).forwarded, [])
  await assert.rejects(fetch(web.url))
})

test('a WebSocket upgrade and one frame each way pass through unchanged', async () => {
  const fwd = await layer.containers.forwardPort(ws.id, 5173)
  const key = randomBytes(16).toString('base64')
  const sock = net.connect(fwd.hostPort, '127.0.0.1')
  let buf = Buffer.alloc(0)
  sock.on('data', (d) => { buf = Buffer.concat([buf, d]) })
  sock.write(`GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`)
  await waitFor(() => buf.includes('\r\n\r\n'), 'the 101 answer')
  const head = buf.subarray(0, buf.indexOf('\r\n\r\n') + 4).toString()
  const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
  assert.match(head, /^HTTP\/1\.1 101 /)
  assert.ok(head.includes(`Sec-WebSocket-Accept: ${accept}`), head)
  buf = buf.subarray(head.length)
  const mask = randomBytes(4)
  const text = Buffer.from('ping over the relay')
  sock.write(Buffer.concat([Buffer.from([0x81, 0x80 | text.length]), mask, text.map((b, i) => b ^ mask[i % 4])]))
  await waitFor(() => buf.length >= 2 && buf.length >= 2 + buf[1], 'the echoed frame')
  assert.equal(buf[0], 0x81)
  assert.equal(buf.subarray(2, 2 + buf[1]).toString(), 'echo: ping over the relay')
  sock.destroy()
  await fwd.close()
})

test('refusals are coded and leave nothing: a bad port, a taken host port, no sandbox; a closed port inside just closes', async () => {
  await assert.rejects(async () => layer.containers.forwardPort(ws.id, 0), { code: 'OPTIONS_INVALID' })
  await assert.rejects(async () => layer.containers.forwardPort(ws.id, 70000), { code: 'OPTIONS_INVALID' })
  const taken = net.createServer().listen(0, '127.0.0.1')
  await new Promise((r) => taken.once('listening', r))
  await assert.rejects(layer.containers.forwardPort(ws.id, 5173, { hostPort: taken.address().port }), (e) => e.code === 'PORT_IN_USE' && e.message.includes(`127.0.0.1:${taken.address().port}`))
  taken.close()
  await assert.rejects(layer.containers.forwardPort('po-no-such-workspace', 5173), { code: 'SANDBOX_NOT_RUNNING' })
  process.env.PO_SANDBOX_FORWARD_CARRIER = 'tunnel'
  await assert.rejects(layer.containers.forwardPort(ws.id, 5173).finally(() => { delete process.env.PO_SANDBOX_FORWARD_CARRIER }), (e) => e.code === 'OPTIONS_INVALID' && /PO_SANDBOX_FORWARD_CARRIER.*'tunnel'.*namespace.*socket.*exec/.test(e.message))
  assert.deepEqual(await layer.containers.forwards(), [])
  const closed = await layer.containers.forwardPort(ws.id, 5999)
  assert.equal((await roundTrip(closed.hostPort, Buffer.from('x'))).length, 0)
  await closed.close()
  await waitFor(() => !dockerCli(['top', cid, '-eo', 'pid,args']).includes('po-sandbox-forward'), 'no relay left in the container')
})

test('po-sandbox port: prints the URL, Ctrl-C ends it (exit 0, no relay left), the container stopping ends it (exit 1, with why)', async () => {
  const start = (env = {}) => {
    const child = spawn(process.execPath, [cli, 'port', folder, '5173', '--po-home', poHome, ...IMAGE], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    const out = { stdout: '', stderr: '' }
    child.stdout.on('data', (d) => { out.stdout += d })
    child.stderr.on('data', (d) => { out.stderr += d })
    const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
    return { child, out, exited }
  }
  const first = start()
  await waitFor(() => /Forwarding http:\/\/127\.0\.0\.1:\d+ /.test(first.out.stdout), `the URL (${first.out.stderr})`, 60000)
  const url = first.out.stdout.match(/http:\/\/127\.0\.0\.1:\d+/)[0]
  assert.equal(await (await fetch(`${url}/cli`)).text(), 'hello from 5173 /cli')
  const hostPort = Number(url.split(':')[2])
  const top = dockerCli(['top', cid, '-eo', 'pid,args'])
  assert.match(top, new RegExp(`po-sandbox-forward 5173 ${hostPort}`))
  // The CLI's forward (what a person gets) dials inside the namespace too: no socket.
  assert.equal(forwardSockets().length, 0)
  const listed = await po(['port', 'ls', '--json', '--po-home', poHome])
  assert.deepEqual(JSON.parse(listed.stdout), [{ workspaceId: ws.id, owner: JSON.parse(listed.stdout)[0]?.owner, port: 5173, hostPort, url }])
  const table = await po(['port', 'ls', '--po-home', poHome])
  assert.match(table.stdout, new RegExp(`^${ws.id} +5173 +${url}$`, 'm'))
  const ls = await po(['ls', '--po-home', poHome])
  assert.match(ls.stdout, new RegExp(`5173->127\\.0\\.0\\.1:${hostPort}`))
  first.child.kill('SIGINT')
  assert.equal(await first.exited, 0, first.out.stderr)
  await waitFor(() => !dockerCli(['top', cid, '-eo', 'pid,args']).includes('po-sandbox-forward'), 'no relay left after Ctrl-C')
  assert.deepEqual(forwardSockets(), [])
  // Narrowed to the socket carrier: its socket goes when the container stops.
  const second = start({ PO_SANDBOX_FORWARD_CARRIER: 'socket' })
  await waitFor(() => second.out.stdout.includes('Forwarding'), `the URL (${second.out.stderr})`, 60000)
  assert.equal(forwardSockets().length, 1)
  dockerCli(['stop', '-t', '1', cid])
  assert.equal(await second.exited, 1)
  assert.deepEqual(forwardSockets(), [])
  assert.match(second.out.stderr, /the forward of port 5173 ended: the sandbox container stopped; run `po-sandbox port …` again when it is back/)
})
