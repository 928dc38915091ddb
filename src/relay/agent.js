'use strict'
// The container side of a forwarded port (src/relay): frames from stdin, one connection to
// 127.0.0.1:<port> per OPEN, everything back on stdout; exits when stdin ends. After a
// SOCKET frame, a DIAL's connection is carried over a connection of its own to the host's
// Unix socket instead (the secret and stream id first, then the bytes as they are).
// Run as `po-sandbox-carrier <dir> <name>…` it goes the other way: it listens on the Unix
// sockets <dir>/<name> inside, and each connection made to one is a CONNECT of a new stream
// (its id with the high bit set) that the host carries to its own socket of that name.
const net = require('node:net')
const HELLO = 1, OPEN = 2, OPENED = 3, DATA = 4, WINDOW = 5, END = 6, CLOSE = 7, SOCKET = 8, DIAL = 9, CONNECT = 10
const VERSION = 2, MAX = 65536, WINDOW_SIZE = 256 * 1024, GRANT_AT = WINDOW_SIZE / 4
const port = Number(process.argv[2])
const streams = new Map()

function send(kind, id, payload) {
  const head = Buffer.allocUnsafe(9)
  head[0] = kind
  head.writeUInt32BE(id, 1)
  head.writeUInt32BE(payload ? payload.length : 0, 5)
  if (!payload || !payload.length) return process.stdout.write(head)
  // One writev of both, without copying the payload.
  process.stdout.cork()
  process.stdout.write(head)
  process.stdout.write(payload)
  process.stdout.uncork()
}
function word(n) {
  const b = Buffer.allocUnsafe(4)
  b.writeUInt32BE(n >>> 0)
  return b
}
function close(id, s, reason) {
  if (!streams.has(id)) return
  streams.delete(id)
  s.sock.destroy()
  send(CLOSE, id, Buffer.from(reason || ''))
}
function why(err) {
  if (err.code === 'ECONNREFUSED') return `nothing listens on 127.0.0.1:${port} in the sandbox`
  return `127.0.0.1:${port} in the sandbox: ${err.code || err.message}`
}
// Sends what credit allows of the held bytes; reads on only while credit is left.
function flush(id, s) {
  while (s.held.length > 0 && s.credit > 0) {
    let chunk = s.held[0]
    if (chunk.length > Math.min(s.credit, MAX)) {
      s.held[0] = chunk.subarray(Math.min(s.credit, MAX))
      chunk = chunk.subarray(0, Math.min(s.credit, MAX))
    } else s.held.shift()
    s.credit -= chunk.length
    send(DATA, id, chunk)
  }
  if (s.held.length === 0 && s.readEnded && !s.sentEnd) {
    s.sentEnd = true
    send(END, id)
    done(id, s)
  }
  if (s.held.length === 0 && s.credit > 0) s.sock.resume()
  else s.sock.pause()
}
function done(id, s) {
  if (s.sentEnd && s.gotEnd && s.written) streams.delete(id)
}
function open(id) {
  const sock = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true })
  sock.setNoDelay(true)
  sock.on('connect', () => send(OPENED, id))
  attach(id, sock)
}
// One stream's connection: its bytes to the host within credit, the host's to it.
function attach(id, sock) {
  const s = { sock, credit: WINDOW_SIZE, held: [], drained: 0, readEnded: false, sentEnd: false, gotEnd: false, written: false }
  streams.set(id, s)
  sock.on('data', (chunk) => {
    s.held.push(chunk)
    flush(id, s)
  })
  sock.on('end', () => {
    s.readEnded = true
    flush(id, s)
  })
  sock.on('error', (err) => close(id, s, why(err)))
  // A clean close after the server's end: its held bytes and END still go (see flush).
  sock.on('close', (hadError) => {
    if (!hadError && s.readEnded) return
    close(id, s, 'the server in the sandbox closed the connection')
  })
}
// The host's socket: where, and the secret each connection presents first with its stream.
let carrier = null
function handshake(id) {
  return Buffer.concat([carrier.secret, word(id)])
}
// Proves the socket reachable (stream 0), or tells the host why not.
function offered(payload) {
  carrier = { secret: Buffer.from(payload.subarray(0, 32)), path: payload.subarray(32).toString() }
  const probe = net.connect(carrier.path, () => probe.end(handshake(0)))
  probe.on('error', (err) => send(CLOSE, 0, Buffer.from(`${carrier.path}: ${err.code || err.message}`)))
}
// The server's bytes are read into this (reads of up to 1 MiB: fewer, larger writes to the
// host), each read copied out at once.
const readInto = Buffer.allocUnsafe(1 << 20)
// One connection to the port, paired with one to the host's socket; bytes pass as they are,
// half-close kept; either failing drops both.
function dial(id) {
  const opts = { allowHalfOpen: true }
  const onread = { buffer: readInto, callback: (n, buf) => toHost(local, buf, n) }
  const local = net.connect({ host: '127.0.0.1', port, onread, ...opts })
  local.setNoDelay(true)
  local.on('error', (err) => {
    if (!local.paired) send(CLOSE, id, Buffer.from(why(err)))
    local.destroy()
    if (local.pair) local.pair.destroy()
  })
  local.on('connect', () => {
    const host = net.connect({ path: carrier.path, ...opts })
    local.pair = host
    host.on('error', (err) => {
      if (!local.paired) send(CLOSE, id, Buffer.from(`the forward's socket ${carrier.path}: ${err.code || err.message}`))
      local.paired = true
      host.destroy()
      local.destroy()
    })
    host.on('connect', () => {
      local.paired = true
      host.pipe(local)
    })
    host.write(handshake(id))
    local.on('end', () => host.end())
  })
}
// One read of the server's: to the host; reading pauses while the host's socket is full.
function toHost(local, buf, n) {
  if (local.pair.write(Buffer.from(buf.subarray(0, n)))) return true
  local.pair.once('drain', () => local.resume())
  return false
}
function received(kind, id, payload) {
  if (kind === OPEN) return open(id)
  if (kind === DIAL) return dial(id)
  if (kind === SOCKET) return offered(payload)
  const s = streams.get(id)
  if (!s) return
  if (kind === DATA) {
    s.sock.write(payload, () => {
      if (!streams.has(id)) return
      s.drained += payload.length
      if (s.drained >= GRANT_AT) {
        send(WINDOW, id, word(s.drained))
        s.drained = 0
      }
    })
  } else if (kind === WINDOW) {
    s.credit += payload.readUInt32BE(0)
    flush(id, s)
  } else if (kind === END) {
    s.gotEnd = true
    s.sock.end(() => {
      s.written = true
      done(id, s)
    })
  } else if (kind === CLOSE) {
    streams.delete(id)
    s.sock.destroy()
  }
}

let buf = Buffer.alloc(0)
process.stdin.on('data', (chunk) => {
  buf = buf.length ? Buffer.concat([buf, chunk]) : chunk
  let at = 0
  while (buf.length - at >= 9) {
    const len = buf.readUInt32BE(at + 5)
    if (buf.length - at < 9 + len) break
    received(buf[at], buf.readUInt32BE(at + 1), buf.subarray(at + 9, at + 9 + len))
    at += 9 + len
  }
  buf = buf.subarray(at)
})
// The host side went away (the forward closed, the hub or CLI ended): nothing is left behind.
process.stdin.on('end', () => process.exit(0))
// The reverse carrier: a listener per name; the socket files are replaced (a carrier before
// this one left them) and made reachable by this user's processes only.
if (process.argv[1] === 'po-sandbox-carrier') {
  const fs = require('node:fs')
  const dir = process.argv[2]
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  let next = 0
  for (const name of process.argv.slice(3)) {
    const file = `${dir}/${name}`
    try { fs.unlinkSync(file) } catch {}
    const server = net.createServer({ allowHalfOpen: true }, (sock) => {
      const id = (0x80000000 | (++next & 0x7fffffff)) >>> 0
      send(CONNECT, id, Buffer.from(name))
      attach(id, sock)
    })
    server.on('error', () => process.exit(3))
    server.listen(file)
  }
}
process.stdin.on('error', () => process.exit(0))
process.stdout.on('error', () => process.exit(0))
send(HELLO, 0, word(VERSION))
