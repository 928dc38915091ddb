// A Docker engine of a test's own (its own data root, socket and bridge; the shared dockerd of
// the other suites is never touched), with an image of the shared engine loaded into it.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import assert from 'node:assert/strict'

import { run, waitFor } from './helpers.mjs'
import { TEST_BASE } from './provider-fixtures.mjs'

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A Docker engine of the test's own, removed with everything in it when the test ends. Its
 * containers sit on a bridge the test creates at a 10.213.x.0/24 address of this machine; it
 * leaves the host's iptables alone (ports are published by the userland proxy on loopback).
 * The test checks that the shared engine's `docker0` is still there afterwards. */
export async function privateEngine(t, { args: extra = [], load = TEST_BASE, resolvConf = null } = {}) {
  if (process.getuid() !== 0) {
    throw new Error('This suite starts a Docker engine of its own and needs root for it (as scripts/ensure-engine.sh does): run npm test as root, or start this file with sudo.')
  }
  const dir = mkdtempSync('/tmp/po-pe-')
  const sock = path.join(dir, 'docker.sock')
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
    '--config-file', path.join(dir, 'daemon.json'), '--data-root', path.join(dir, 'data'), '--exec-root', path.join(dir, 'exec'),
    '--pidfile', path.join(dir, 'pid'), '-H', `unix://${sock}`, '--bridge', bridge, '--iptables=false', '--ip6tables=false',
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
    const child = resolvConf === null
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
    await run('ip', ['link', 'del', bridge])
  })
  await start()
  const loaded = await run('sh', ['-c', `docker save ${load} | docker -H unix://${sock} load`])
  assert.equal(loaded.code, 0, loaded.stderr)
  return {
    host: `unix://${sock}`,
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
