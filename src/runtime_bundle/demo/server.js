'use strict'
// The demo runtime bundle of @agimon-ai/po-sandbox: used only when Po's own runtime bundle is
// not installed. A tiny server that answers the health path and shows the sandbox it runs in,
// read from inside: the same facts `/po-sandbox` reports, plus mounts, network and limits.
// No dependencies beyond Node itself.

const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')

const PORT = 7300

function read(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim()
  } catch {
    return undefined
  }
}

/** Mount points other than the engine's own plumbing, with their mode. */
function mounts() {
  const skip = /^\/(proc|sys|dev)(\/|$)|^\/etc\/(hosts|hostname|resolv\.conf)$/
  return (read('/proc/self/mountinfo') ?? '').split('\n').filter(Boolean).map((line) => {
    const f = line.split(' ')
    const options = f[5].split(',')
    return { path: f[4].replace(/\\040/g, ' '), mode: options.includes('ro') ? 'ro' : 'rw', type: f[f.indexOf('-') + 1] }
  }).filter((m) => !skip.test(m.path))
}

/** Capabilities and privilege flags of this process, from /proc/self/status. */
function privileges() {
  const status = read('/proc/self/status') ?? ''
  const field = (name) => status.match(new RegExp(`^${name}:\\s*(\\S+)`, 'm'))?.[1]
  return { effectiveCapabilities: field('CapEff'), boundingCapabilities: field('CapBnd'), noNewPrivileges: field('NoNewPrivs') === '1', seccomp: field('Seccomp') }
}

/** The cgroup limits this container runs under (v2, else v1). */
function limits() {
  const first = (...files) => files.map(read).find((v) => v !== undefined) ?? 'unknown'
  return {
    pids: first('/sys/fs/cgroup/pids.max', '/sys/fs/cgroup/pids/pids.max'),
    memory: first('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'),
    cpu: first('/sys/fs/cgroup/cpu.max', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us'),
  }
}

function network() {
  const interfaces = Object.entries(os.networkInterfaces()).map(([name, addrs]) => ({ name, addresses: addrs.map((a) => `${a.address}/${a.netmask}`) }))
  const routes = (read('/proc/net/route') ?? '').split('\n').slice(1).filter(Boolean)
  const gateway = routes.map((r) => r.split('\t')).find((f) => f[1] === '00000000')
  const hex = gateway?.[2]
  const via = hex ? [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.') : undefined
  return { hostname: os.hostname(), interfaces, defaultGateway: via ?? null }
}

/** The facts `/po-sandbox` reports, by the same rules, and what the container shows inside. */
function status() {
  const env = process.env
  const providers = (env.PO_BROKER_PROVIDERS ?? '').split(',').map((p) => p.trim()).filter(Boolean)
  const route = env.PO_BROKER_SOCKET ? { kind: 'socket', target: env.PO_BROKER_SOCKET } : env.PO_BROKER_ADDRESS ? { kind: 'tcp', target: env.PO_BROKER_ADDRESS } : null
  return {
    bundle: 'demo',
    contained: env.PO_SANDBOX === '1',
    workspace: env.PO_WORKSPACE ?? null,
    workspacePath: process.cwd(),
    user: { uid: process.getuid(), gid: process.getgid(), home: env.HOME ?? null },
    brokeredProviders: providers,
    brokerRoute: route,
    guardedPaths: (env.PO_SANDBOX_GUARDED_PATHS ?? '').split(',').map((p) => p.trim()).filter(Boolean),
    mounts: mounts(),
    network: network(),
    privileges: privileges(),
    limits: limits(),
    node: process.version,
  }
}

const escape = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c])

function page(s) {
  const rows = [
    ['Contained', s.contained ? 'yes: this server runs inside a Po sandbox container' : 'NO'],
    ['Workspace', `${s.workspace ?? '(none)'} at ${s.workspacePath}`],
    ['User', `uid ${s.user.uid}, gid ${s.user.gid}, home ${s.user.home}`],
    ['Brokered providers', s.brokeredProviders.join(', ') || '(none)'],
    ['Broker route', s.brokerRoute ? `${s.brokerRoute.kind} ${s.brokerRoute.target}` : '(none)'],
    ['Guarded (read-only: the host runs them later)', s.guardedPaths.join(', ') || '(none)'],
    ['Capabilities', `effective ${s.privileges.effectiveCapabilities}, no-new-privileges ${s.privileges.noNewPrivileges}`],
    ['Limits', `pids ${s.limits.pids}, memory ${s.limits.memory}, cpu ${s.limits.cpu}`],
    ['Network', `${s.network.interfaces.map((i) => `${i.name} ${i.addresses.join(' ')}`).join('; ')}; gateway ${s.network.defaultGateway ?? '(none)'}`],
    ['Mounts', s.mounts.map((m) => escape(`${m.path} (${m.mode})`)).join('<br>')],
  ]
  const body = rows.map(([k, v]) => `<tr><th>${escape(k)}</th><td>${k === 'Mounts' ? v : escape(v)}</td></tr>`).join('\n')
  return `<!doctype html><meta charset="utf-8"><title>Po sandbox (demo bundle)</title>
<h1>Po sandbox: demo runtime bundle</h1>
<p>This is the demo bundle of @agimon-ai/po-sandbox, used because Po's runtime bundle is not installed. JSON: <a href="/api/status">/api/status</a>.</p>
<table>${body}</table>\n`
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0]
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end()
  } else if (path === '/api/health') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"bundle":"demo"}\n')
  } else if (path === '/api/status') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(`${JSON.stringify(status(), null, 2)}\n`)
  } else if (path === '/') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page(status()))
  } else {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
  }
})

server.listen(PORT, '0.0.0.0', () => process.stdout.write(`po-sandbox demo bundle listening on ${PORT}\n`))
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)))
