// The egress bridge of an allowlist container on the socket route: a loopback port the
// container's processes use as HTTP(S)_PROXY, each connection carried to the egress proxy's
// socket. Started by the container's start gate beside its server; it lives with the container.
// argv: po-sandbox-egress-bridge <port>; the socket is PO_BROKER_EGRESS_SOCKET.
'use strict'
const net = require('node:net')
const socket = process.env.PO_BROKER_EGRESS_SOCKET
const server = net.createServer((c) => {
  const u = net.connect(socket)
  c.pipe(u)
  u.pipe(c)
  c.on('error', () => u.destroy())
  u.on('error', () => c.destroy())
})
server.on('error', () => process.exit(1))
server.listen(Number(process.argv[2]), '127.0.0.1')
