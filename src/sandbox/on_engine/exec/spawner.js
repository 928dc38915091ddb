'use strict'
// The container side of a fast `po-sandbox exec` (src/sandbox/on_engine/exec/spawner.rs). An engine exec
// starts it once per container; it listens on a Unix socket in the broker's folder and runs
// each connection's command as a child of its own, so later execs skip the engine's exec.
// Frames both ways: [kind u8][length u32 BE][payload]. The host checks that this very process
// listens (its pid as the engine gave it, and its start time) before it sends anything.
// It passes the network rules' gate before it listens (when the host gives it one).
// A connection that goes away ends its command (SIGHUP, then SIGKILL 10 s later). Exits after
// <idle> seconds without a command, or once its socket is gone or replaced.
const net = require('node:net')
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { signals } = os.constants
const REQUEST = 1, STDIN = 2, STDIN_END = 3, STDOUT = 4, STDERR = 5, EXIT = 6
const MAX = 1 << 20
const where = process.argv[2], idleSeconds = Number(process.argv[3]) || 900
const base = { ...process.env }
delete base.PO_SANDBOX_SPAWNER
delete base.PO_SANDBOX_SPAWNER_GATE
// The network rules' gate first, when the host gives one: nothing runs before it passes.
const gate = process.env.PO_SANDBOX_SPAWNER_GATE
if (gate && spawnSync(process.execPath, ['-e', gate], { stdio: 'ignore', env: base }).status !== 0) process.exit(1)
let running = 0, idle
function rest() {
  clearTimeout(idle)
  if (running === 0) idle = setTimeout(() => server.close(() => process.exit(0)), idleSeconds * 1000)
}
function head(kind, length) {
  const b = Buffer.allocUnsafe(5)
  b[0] = kind
  b.writeUInt32BE(length, 1)
  return b
}
function envOf(list) {
  const env = { ...base }
  for (const entry of list) {
    const at = entry.indexOf('=')
    if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1)
  }
  return env
}
// The command's stdin, stdout and stderr are pipes, as the engine's exec gives them (Node's own
// are socket pairs, which `/dev/stdout` and the like cannot open): FIFOs made ahead in a
// folder of its own, each opened read-write and unlinked at once (nothing that walks the file
// system, a `grep -r /tmp`, ever finds one to block on), then reopened through /proc for a
// command's ends.
const fifoDir = fs.mkdtempSync(path.join(os.tmpdir(), 'po-exec-'))
const anchors = []
let made = 0
function moreFifos(sync) {
  const names = Array.from({ length: 12 }, () => path.join(fifoDir, String(made++)))
  const done = (status) => {
    for (const name of names) {
      try {
        if (status === 0) anchors.push(fs.openSync(name, fs.constants.O_RDWR | fs.constants.O_NONBLOCK))
      } catch {}
      try { fs.unlinkSync(name) } catch {}
    }
  }
  if (sync) done(spawnSync('mkfifo', ['-m', '600', ...names], { stdio: 'ignore' }).status)
  else spawn('mkfifo', ['-m', '600', ...names], { stdio: 'ignore' }).on('error', () => {}).on('close', done)
}
process.on('exit', () => fs.rmSync(fifoDir, { recursive: true, force: true }))
moreFifos(true)
if (anchors.length === 0) {
  // It cannot run in this container (no mkfifo, or a temporary folder that takes no FIFO): it
  // says so beside its socket, and the host stops launching it for this container.
  try { fs.writeFileSync(`${where}.failed`, `mkfifo could not make a FIFO in ${os.tmpdir()}`, { flag: 'wx', mode: 0o600 }) } catch {}
  process.exit(1)
}
/** Three pipes: [the command's end, ours] for stdin, stdout and stderr. */
function pipes() {
  if (anchors.length < 3) moreFifos(true)
  if (anchors.length < 3) throw new Error('no FIFO could be made')
  if (anchors.length < 9) moreFifos(false)
  const [i, o, e] = anchors.splice(0, 3)
  const { O_RDONLY, O_WRONLY, O_NONBLOCK } = fs.constants
  // The anchor is a reader and a writer of its FIFO: no open waits. Ours read without blocking.
  const reopen = (fd, flags) => fs.openSync(`/proc/self/fd/${fd}`, flags)
  const ends = [
    [reopen(i, O_RDONLY), reopen(i, O_WRONLY)],
    [reopen(o, O_WRONLY), reopen(o, O_RDONLY | O_NONBLOCK)],
    [reopen(e, O_WRONLY), reopen(e, O_RDONLY | O_NONBLOCK)],
  ]
  for (const fd of [i, o, e]) fs.closeSync(fd)
  return ends
}
function serve(sock) {
  running++
  clearTimeout(idle)
  let buf = Buffer.alloc(0), child = null, ended = false, input = null, hangup = null
  let open = 3 // the command's exit, its stdout's end, its stderr's end
  let code = 0
  const outputs = []
  const send = (kind, payload) => {
    if (sock.destroyed) return
    sock.cork()
    sock.write(head(kind, payload.length))
    const flowing = sock.write(payload)
    sock.uncork()
    if (!flowing) for (const o of outputs) o.pause()
  }
  sock.on('drain', () => { for (const o of outputs) o.resume() })
  const finish = (exit) => {
    if (ended) return
    ended = true
    const b = Buffer.allocUnsafe(4)
    b.writeInt32BE(exit)
    send(EXIT, b)
    sock.end()
  }
  const closed = () => { if (--open === 0) finish(code) }
  const start = (req) => {
    let ends
    try {
      ends = pipes()
    } catch (e) {
      send(STDERR, Buffer.from(`po-sandbox: the sandbox's spawner cannot make pipes: ${e.message}\n`))
      return finish(126)
    }
    child = spawn(req.argv[0], req.argv.slice(1), { cwd: req.cwd, env: envOf(req.env), stdio: ends.map((e) => e[0]) })
    for (const [theirs] of ends) fs.closeSync(theirs)
    input = fs.createWriteStream(null, { fd: ends[0][1] })
    input.on('error', () => {})
    for (const [[, fd], kind] of [[ends[1], STDOUT], [ends[2], STDERR]]) {
      const stream = new net.Socket({ fd, readable: true, writable: false })
      outputs.push(stream)
      stream.on('data', (chunk) => send(kind, chunk))
      stream.on('error', () => {})
      stream.on('close', closed)
    }
    child.on('error', (e) => {
      if (child.pid !== undefined) return // only a spawn that failed ends here
      send(STDERR, Buffer.from(`po-sandbox: cannot run ${req.argv[0]} in ${req.cwd}: ${e.code === 'ENOENT' ? 'no such program (or folder)' : e.code || e.message}\n`))
      code = 126
      input.destroy()
      for (const o of outputs) o.destroy()
      closed() // no exit comes
    })
    child.on('exit', (exit, signal) => {
      if (code !== 126) code = exit ?? 128 + (signals[signal] ?? 0)
      closed()
    })
  }
  sock.on('data', (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk
    while (buf.length >= 5) {
      const kind = buf[0], length = buf.readUInt32BE(1)
      if (length > MAX || (child === null) !== (kind === REQUEST)) return sock.destroy()
      if (buf.length < 5 + length) return
      const payload = buf.subarray(5, 5 + length)
      buf = buf.subarray(5 + length)
      if (kind === REQUEST) {
        try {
          start(JSON.parse(payload))
        } catch {
          return sock.destroy()
        }
      } else if (kind === STDIN) {
        if (!input.write(payload)) {
          sock.pause()
          input.once('drain', () => sock.resume())
        }
      } else if (kind === STDIN_END) input.end()
      else return sock.destroy()
    }
  })
  // The host never ends its side first: an end is the host gone.
  const hangUp = () => {
    if (child && child.exitCode === null && child.signalCode === null && !hangup) {
      child.kill('SIGHUP')
      hangup = setTimeout(() => child.kill('SIGKILL'), 10000)
      child.on('exit', () => clearTimeout(hangup))
    }
    sock.destroy()
  }
  sock.on('end', hangUp)
  sock.on('error', () => {})
  sock.on('close', () => {
    running--
    hangUp()
    rest()
  })
}
const server = net.createServer({ allowHalfOpen: true }, serve)
server.on('error', () => process.exit(1))
// Its socket gone or replaced (the host starts another, a stop sweeps the folder): it ends.
// The socket is owner-only from its making (never seen with the container's umask); its
// commands keep the container's umask.
const umask = process.umask(0o077)
server.listen(where, () => {
  process.umask(umask)
  fs.chmodSync(where, 0o600)
  const ino = fs.statSync(where).ino
  setInterval(() => {
    let now = null
    try { now = fs.lstatSync(where).ino } catch {}
    if (now !== ino && running === 0) process.exit(0)
  }, 5000)
  rest()
})
