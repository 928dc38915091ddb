// DNS in the network modes (issue 24, item 2) with a resolver of the test's own on the host's
// loopback: the case where Docker's embedded resolver (127.0.0.11) forwards a container's query
// from the host's own namespace, where the holder's rules never apply. The test starts a Docker
// engine of its own whose /etc/resolv.conf (in a mount namespace of its own; the host's file is
// untouched) names 127.0.0.1, where the test listens on port 53 (UDP and TCP) and answers every
// A question with a TEST-NET address. In `open` the workspace's lookup is answered through it
// (the control: the path exists); in `none` the embedded resolver is refused
// inside the namespace, over UDP and TCP, and the test's resolver sees no question at all.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import dgram from 'node:dgram'
import net from 'node:net'

import { privateEngine } from './private-engine.mjs'
import {
  baseOptions, hostEnv, newOwner, openLayer, removeOwner, tempHome, tempWorkspace, useTestBaseImage, writeBundle,
} from './provider-fixtures.mjs'

useTestBaseImage()

const ANSWER = '192.0.2.53'

/** A DNS answer to `query` (one question): the question, and one A record `ANSWER`. */
function answerTo(query) {
  let end = 12
  while (query[end] !== 0) end += query[end] + 1
  end += 5 // the root label, QTYPE, QCLASS
  const head = Buffer.from(query.subarray(0, 12))
  head.writeUInt16BE(0x8180, 2) // a response, recursion desired and available, no error
  head.writeUInt16BE(1, 4)
  head.writeUInt16BE(1, 6)
  head.writeUInt16BE(0, 8)
  head.writeUInt16BE(0, 10)
  const record = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...ANSWER.split('.').map(Number)])
  return Buffer.concat([head, query.subarray(12, end), record])
}

/** The name asked in `query`. */
function nameIn(query) {
  const labels = []
  for (let i = 12; query[i] !== 0; i += query[i] + 1) labels.push(query.subarray(i + 1, i + 1 + query[i]).toString())
  return labels.join('.')
}

/** The test's resolver on 127.0.0.1:53, UDP and TCP; `asked` lists the names it was asked. */
async function loopbackResolver(t) {
  const asked = []
  const udp = dgram.createSocket('udp4')
  udp.on('message', (msg, from) => {
    asked.push(nameIn(msg))
    udp.send(answerTo(msg), from.port, from.address)
  })
  await new Promise((resolve, reject) => udp.once('error', reject).bind(53, '127.0.0.1', resolve))
  const tcp = net.createServer((s) => {
    s.on('error', () => {})
    s.once('data', (d) => {
      const msg = d.subarray(2, 2 + d.readUInt16BE(0))
      asked.push(nameIn(msg))
      const out = answerTo(msg)
      const len = Buffer.alloc(2)
      len.writeUInt16BE(out.length)
      s.end(Buffer.concat([len, out]))
    })
  })
  await new Promise((resolve, reject) => tcp.once('error', reject).listen(53, '127.0.0.1', resolve))
  t.after(() => {
    udp.close()
    tcp.close()
  })
  return asked
}

/** Asks 127.0.0.11 inside `container` (on `engine`) for `name` over UDP, or over TCP (`tcp`):
 * `answered <address>` or the error's code. */
async function embeddedLookup(engine, container, name, tcp) {
  const script = tcp
    ? `const s=require('net').connect({host:'127.0.0.11',port:53});const n=process.argv[1];
       const q=Buffer.concat([Buffer.from([0,0,0x12,0x34,1,0,0,1,0,0,0,0,0,0]),...n.split('.').map(l=>Buffer.concat([Buffer.from([l.length]),Buffer.from(l)])),Buffer.from([0,0,1,0,1])]);
       q.writeUInt16BE(q.length-2,0);s.setTimeout(3000,()=>{console.log('TIMEOUT');process.exit(0)});
       s.on('connect',()=>s.write(q));s.on('error',e=>{console.log(e.code);process.exit(0)});
       s.on('data',d=>{console.log('answered '+[...d.subarray(d.length-4)].join('.'));process.exit(0)})`
    : "const r=new (require('dns').promises.Resolver)({timeout:1500,tries:1});r.setServers(['127.0.0.11']);r.resolve4(process.argv[1]).then(a=>console.log('answered '+a[0]),e=>console.log(e.code))"
  const r = await engine.docker('exec', '-w', '/', container, 'node', '-e', script, name)
  assert.equal(r.code, 0, r.stderr)
  return r.stdout.trim()
}

test('DNS: a loopback resolver of the host\'s answers through the embedded resolver in open; in none no question reaches it, over UDP or TCP', { timeout: 240000 }, async (t) => {
  if (process.getuid() !== 0) throw new Error('dns.test.mjs listens on port 53 and starts an engine of its own: run it as root (npm test does)')
  const asked = await loopbackResolver(t)
  const engine = await privateEngine(t, { resolvConf: 'nameserver 127.0.0.1\n' })
  const env = hostEnv({ DOCKER_HOST: engine.host })
  // `allowlist` refuses 127.0.0.11 by the same rule as `none` (network.test.mjs checks that it does).
  for (const mode of ['open', 'none']) {
    const poHome = tempHome(t)
    const owner = newOwner()
    t.after(() => removeOwner(owner))
    writeBundle(poHome)
    const { layer } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env, network: mode, workspaces: [{ id: 'dn', path: tempWorkspace(t) }] }))
    t.after(() => layer.containers.stopAll().catch(() => {}))
    const status = await layer.provider.ready()
    assert.equal(status.workspaces[0].state, 'running', JSON.stringify(status.workspaces))
    const id = status.workspaces[0].container.containerId
    const [udpName, tcpName] = [`udp-${mode}.po-sandbox.test`, `tcp-${mode}.po-sandbox.test`]
    const [overUdp, overTcp] = [await embeddedLookup(engine, id, udpName, false), await embeddedLookup(engine, id, tcpName, true)]
    if (mode === 'open') {
      assert.equal(overUdp, `answered ${ANSWER}`, 'open: the embedded resolver does not reach the test\'s loopback resolver (the control)')
      assert.equal(overTcp, `answered ${ANSWER}`, 'open: no answer over TCP (the control)')
      assert.ok(asked.includes(udpName) && asked.includes(tcpName), `the test's resolver was not asked: ${asked}`)
    } else {
      assert.equal(overUdp, 'ECONNREFUSED', `${mode}: a lookup over UDP was answered`)
      assert.equal(overTcp, 'ECONNREFUSED', `${mode}: a lookup over TCP was answered`)
      assert.deepEqual(asked.filter((n) => n.includes(`-${mode}.`)), [], `${mode}: the test's resolver was asked`)
    }
    await layer.containers.stopAll()
  }
})
