// The bridges of a socket-route container: loopback ports its processes reach the host's
// broker by, each connection carried to a socket in /run/po-broker. The egress port
// (PO_SANDBOX_EGRESS_PORT, to PO_BROKER_EGRESS_SOCKET) is the HTTP(S)_PROXY of an allowlist
// container; the git port (PO_SANDBOX_GIT_PORT, to PO_BROKER_SOCKET) is where the container's
// git configuration sends git's HTTPS requests; each registry port (PO_SANDBOX_REGISTRY_PORTS,
// `port=socket,…`) is a registry route. It first writes npm's user config
// (PO_SANDBOX_NPMRC, to npm_config_userconfig), which names the registry routes. Started by the
// container's start gate beside its server; it lives with the container.
'use strict'
const fs = require('node:fs')
const net = require('node:net')
const env = process.env
if (env.PO_SANDBOX_NPMRC && env.npm_config_userconfig) {
  try {
    fs.writeFileSync(env.npm_config_userconfig, env.PO_SANDBOX_NPMRC, { mode: 0o644 })
  } catch {}
}
const pairs = [
  [env.PO_SANDBOX_EGRESS_PORT, env.PO_BROKER_EGRESS_SOCKET],
  [env.PO_SANDBOX_GIT_PORT, env.PO_BROKER_SOCKET],
  ...(env.PO_SANDBOX_REGISTRY_PORTS ?? '').split(',').filter(Boolean).map((p) => p.split('=')),
].filter(([port, socket]) => port && socket)
let listening = pairs.length
for (const [port, socket] of pairs) {
  const server = net.createServer((c) => {
    const u = net.connect(socket)
    c.pipe(u)
    u.pipe(c)
    c.on('error', () => u.destroy())
    u.on('error', () => c.destroy())
  })
  server.on('error', () => {
    listening -= 1
    if (listening === 0) process.exit(1)
  })
  server.listen(Number(port), '127.0.0.1')
}
if (listening === 0) process.exit(0)
