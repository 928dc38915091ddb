// A Docker engine of a test's own (its own data root, socket and bridge; the shared dockerd of
// the other suites is never touched), with an image of the shared engine loaded into it.
import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import assert from 'node:assert/strict'

import { run, waitFor } from './helpers.mjs'
import { TEST_BASE } from './provider-fixtures.mjs'

/** Whether a process of that pid is there. */
export function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A free TCP port on 127.0.0.1 (bound and released). */
export async function freePort() {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** A CA (`ca.pem`, `ca.key`) in `dir`, and `issue(name, { server })` making `<name>-cert.pem`
 * and `<name>-key.pem` signed by it (a server certificate names 127.0.0.1 and localhost). */
export function testCa(dir, cn = 'po-sandbox test engine CA') {
  mkdirSync(dir, { recursive: true })
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${cn}`, '-keyout', 'ca.key', '-out', 'ca.pem', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign')
  return {
    dir,
    issue(name, { server = false } = {}) {
      openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${server ? 'localhost' : 'po-sandbox test client'}`, '-keyout', `${name}-key.pem`, '-out', `${name}.csr`)
      const ext = server ? 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth' : 'extendedKeyUsage=clientAuth'
      writeFileSync(path.join(dir, `${name}.ext`), ext + '\n')
      openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}-cert.pem`)
      return { cert: path.join(dir, `${name}-cert.pem`), key: path.join(dir, `${name}-key.pem`) }
    },
  }
}

/** A Docker engine of the test's own, removed with everything in it when the test ends. Its
 * containers sit on a bridge the test creates at a 10.213.x.0/24 address of this machine; it
 * leaves the host's iptables alone (ports are published by the userland proxy on loopback).
 * The test checks that the shared engine's `docker0` is still there afterwards.
 *
 * With `hostname`, the engine is another machine's in all but its network: its own UTS
 * namespace (that host name) and mount namespace, where /tmp, /work, /root and /home are empty,
 * so no path of the hub's exists for it. With `tls`, it also listens on TLS on 127.0.0.1
 * (`tlsPort`; certificates of a CA of the test's own, the client's in `clientCerts`: ca.pem,
 * cert.pem, key.pem, as the docker CLI lays them out). `load: null` loads no image. */
export async function privateEngine(t, { args: extra = [], load = TEST_BASE, resolvConf = null, hostname = null, tls = false } = {}) {
  if (process.getuid() !== 0) {
    throw new Error('This suite starts a Docker engine of its own and needs root for it (as scripts/ensure-engine.sh does): run npm test as root, or start this file with sudo.')
  }
  const dir = mkdtempSync('/tmp/po-pe-')
  const sock = path.join(dir, 'docker.sock')
  // Where the engine sees its own folder: the same, or (in a mount namespace of its own, where
  // /tmp is empty) a bind of it under /run.
  const inside = hostname === null ? dir : `/run/${path.basename(dir)}`
  const at = (...p) => path.join(inside, ...p)
  let tlsPort = null
  let clientCerts = null
  const tlsArgs = []
  if (tls) {
    const ca = testCa(path.join(dir, 'tls'))
    const server = ca.issue('server', { server: true })
    const client = ca.issue('client')
    clientCerts = path.join(dir, 'client')
    mkdirSync(clientCerts)
    writeFileSync(path.join(clientCerts, 'ca.pem'), readFileSync(path.join(ca.dir, 'ca.pem')))
    writeFileSync(path.join(clientCerts, 'cert.pem'), readFileSync(client.cert))
    writeFileSync(path.join(clientCerts, 'key.pem'), readFileSync(client.key))
    tlsPort = await freePort()
    const rel = (f) => at('tls', path.basename(f))
    tlsArgs.push('-H', `tcp://127.0.0.1:${tlsPort}`, '--tlsverify', '--tlscacert', at('tls', 'ca.pem'), '--tlscert', rel(server.cert), '--tlskey', rel(server.key))
  }
  const bridge = `po-pe-${randomBytes(3).toString('hex')}`
  const routes = (await run('ip', ['-4', 'route'])).stdout
  const used = new Set([...routes.matchAll(/^10\.213\.(\d+)\./gm)].map((m) => Number(m[1])))
  const third = [...Array(256).keys()].find((n) => !used.has(n) && n > 0)
  for (const args of [['link', 'add', bridge, 'type', 'bridge'], ['addr', 'add', `10.213.${third}.1/24`, 'dev', bridge], ['link', 'set', bridge, 'up']]) {
    const r = await run('ip', args)
    assert.equal(r.code, 0, `ip ${args.join(' ')}: ${r.stderr}`)
  }
  writeFileSync(path.join(dir, 'daemon.json'), '{}')
  if (resolvConf !== null) writeFileSync(path.join(dir, 'resolv.conf'), resolvConf)
  const args = [
    '--config-file', at('daemon.json'), '--data-root', at('data'), '--exec-root', at('exec'),
    '--pidfile', at('pid'), '-H', `unix://${at('docker.sock')}`, ...tlsArgs, '--bridge', bridge, '--iptables=false', '--ip6tables=false',
    // No --default-address-pool: with one, dockerd deletes the host's `docker0` on a restart
    // (moby's initBridgeDriver: removeDefaultBridgeInterface), which is the shared engine's.
    // Networks it makes avoid subnets the host routes already (libnetwork's overlap check).
    // A suite that gives one (`args`) must not restart the engine.
    ...extra,
  ]
  const log = path.join(dir, 'dockerd.log')
  let pid = null
  const docker = (...a) => run('docker', ['-H', `unix://${sock}`, ...a])
  const start = async () => {
    const out = openSync(log, 'a')
    // With `resolvConf`, the engine sees that text as the host's /etc/resolv.conf (a mount
    // namespace of its own; the host's file is untouched).
    const isolate = 'set -e; hostname "$2"; mkdir -p "$1"; mount --bind "$0" "$1"; for d in /tmp /work /root /home; do if [ -d "$d" ]; then mount -t tmpfs -o size=1m,mode=755 tmpfs "$d"; fi; done; shift 2; exec dockerd "$@"'
    const child = hostname !== null
      ? spawn('unshare', ['-m', '-u', '--propagation', 'private', 'sh', '-c', isolate, dir, inside, hostname, ...args], { stdio: ['ignore', out, out], detached: true })
      : resolvConf === null
        ? spawn('dockerd', args, { stdio: ['ignore', out, out], detached: true })
        : spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" /etc/resolv.conf && exec dockerd "$@"', path.join(dir, 'resolv.conf'), ...args], { stdio: ['ignore', out, out], detached: true })
    child.unref()
    pid = child.pid
    await waitFor(async () => (await docker('version', '--format', '{{.Server.Version}}')).code === 0, `the test's dockerd to answer (log: ${log})`, 60000)
  }
  const stop = async () => {
    if (pid === null || !alive(pid)) return
    process.kill(pid, 'SIGTERM')
    await waitFor(() => !alive(pid) && !existsSync(path.join(dir, 'pid')), "the test's dockerd to exit", 60000)
    pid = null
  }
  t.after(async () => {
    if (pid !== null && alive(pid)) {
      const ids = (await docker('ps', '-aq')).stdout.split(/\s+/).filter(Boolean)
      if (ids.length) await docker('rm', '-f', ...ids)
      // Its networks' bridges outlive a stopped dockerd (it keeps them for its next start):
      // removed with the networks, or every run would leave its br-… interfaces on the host.
      await docker('network', 'prune', '-f')
      await stop()
    }
    rmSync(dir, { recursive: true, force: true })
    if (inside !== dir) rmSync(inside, { recursive: true, force: true })
    await run('ip', ['link', 'del', bridge])
  })
  await start()
  if (load !== null) {
    const loaded = await run('sh', ['-c', `docker save ${load} | docker -H unix://${sock} load`])
    assert.equal(loaded.code, 0, loaded.stderr)
  }
  return {
    host: `unix://${sock}`,
    sock,
    dir,
    tlsPort,
    clientCerts,
    docker,
    log: () => readFileSync(log, 'utf8'),
    /** Stops the engine, runs `whileDown`, starts it again. */
    async restart(whileDown = async () => {}) {
      await stop()
      await whileDown()
      await start()
    },
  }
}
