// Benchmark: a sandbox on an engine on another machine, over SSH, against the docker CLI over the
// same SSH transport.
//
// The engine is a dockerd of the benchmark's own in its own mount and UTS namespace (another
// machine's in all but its network: no path of this one exists for it), behind a private sshd on
// a loopback port (the test fixtures). A wrapper `ssh` first on the PATH gives both po-sandbox and
// `docker -H ssh://…` the same client configuration (key, known hosts).
//
// In interleaved rounds:
// - `po-sandbox exec DIR -- echo x` against `docker -H ssh://… exec <id> echo x`, a new process
//   each time (process start included);
// - a new sandbox until its server answers: `po-sandbox up DIR` (engine check, volumes, the fill
//   container and its uploads, holder, rules helper, container, copy, start, the server's
//   forward) against the same containment made by hand with the docker CLI over SSH: the fill
//   container with the bundle, P and token volumes and its three uploads, the holder on the
//   per-hub network, the rules helper (the same rules), the workspace container in the holder's
//   namespace with the same volumes and hardening, the copy uploaded, its start, and one
//   `docker exec` that waits until the server answers inside. Each round's sandbox is removed
//   after it, untimed.
//
// Usage: node bench/remote.mjs [rounds=10]
// Needs root (a dockerd and an sshd of its own), Debian's openssh-server, a running Docker engine
// with the local test base image (scripts/build-test-base-image.sh).
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { privateEngine } from '../__test__/private-engine.mjs'
import { privateSshd } from '../__test__/private-sshd.mjs'

const ROUNDS = Number(process.argv[2] ?? 10)
const BASE = 'po-sandbox-test-base:node24-nft'
const cli = path.join(import.meta.dirname, '../bin/po-sandbox.js')
const cleanups = []
const t = { after: (fn) => cleanups.push(fn) }

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const p = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))]
  return { p50: p(0.5), p90: p(0.9), min: s[0], max: s[s.length - 1] }
}

execFileSync('bash', [path.join(import.meta.dirname, '../scripts/build-test-base-image.sh')], { stdio: 'ignore' })
const scratch = mkdtempSync(path.join(os.tmpdir(), 'po-bench-remote-'))
try {
  const engine = await privateEngine(t, { hostname: 'po-bench-box' })
  const sshd = await privateSshd(t, path.join(scratch, 'ssh'))
  // `ssh` with the fixture's configuration, for both clients.
  const bin = path.join(scratch, 'bin')
  mkdirSync(bin)
  writeFileSync(path.join(bin, 'ssh'), `#!/bin/sh\nexec /usr/bin/ssh ${sshd.command.slice(4)} "$@"\n`)
  chmodSync(path.join(bin, 'ssh'), 0o755)
  const host = `ssh://root@127.0.0.1:${sshd.port}${engine.sock}`
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, DOCKER_HOST: host }
  delete env.PO_SANDBOX_LOG
  delete env.PO_SANDBOX_SSH_COMMAND
  const timed = (argv, expect) => {
    const t0 = performance.now()
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env })
    const ms = performance.now() - t0
    if (r.status !== 0 || (expect && !r.stdout.includes(expect))) throw new Error(`${argv.join(' ')}: exit ${r.status}\n${r.stdout}\n${r.stderr}`)
    return { ms, out: r.stdout }
  }
  const docker = (...args) => timed(['docker', ...args])
  const home = ['--po-home', path.join(scratch, 'po-home')]
  const image = ['--base-image', BASE, '--image-variant', 'minimal']
  const folder = (n) => {
    const dir = path.join(scratch, `ws-${n}`)
    mkdirSync(dir, { recursive: true })
    writeFileSync(path.join(dir, 'hello.txt'), 'hello\n')
    return dir
  }

  // The sandbox exec runs in, and the one whose make-up the by-hand rounds copy.
  const main = folder('main')
  timed([process.execPath, cli, 'up', main, ...home, ...image])
  const listed = JSON.parse(timed([process.execPath, cli, 'ls', '--json', ...home]).out)
  const id = listed[0].containerId
  const info = JSON.parse(docker('inspect', id).out)[0]
  const holderId = info.HostConfig.NetworkMode.replace(/^container:/, '')
  const holder = JSON.parse(docker('inspect', holderId).out)[0]
  const rules = holder.Config.Env.find((e) => e.startsWith('PO_NET_RULES=')).slice('PO_NET_RULES='.length)
  const network = Object.keys(holder.NetworkSettings.Networks)[0]
  const port = Object.keys(holder.Config.ExposedPorts ?? { '7300/tcp': {} })[0]
  const token = path.join(scratch, 'token')
  writeFileSync(token, 'f'.repeat(64))
  // The embedded demo bundle `up` installed, and an empty P.
  const bundleDir = execFileSync('sh', ['-c', `ls -d ${path.join(scratch, 'po-home', 'demo-runtime')}/*/ | head -1`], { encoding: 'utf8' }).trim()
  const pDir = path.join(scratch, 'p')
  mkdirSync(pDir)

  /** The same containment by hand, for folder `dir`, named `n`: every call over SSH. */
  const byHand = (dir, n) => {
    const v = (s) => `po-bench-${n}-${s}`
    // The po-sandbox container's volumes, named for this round.
    const mine = (name) => name.replace(`${info.Name.slice(1)}-`, `po-bench-${n}-`)
    const volume = (suffix) => mine(info.Mounts.find((m) => m.Type === 'volume' && m.Name.includes(`-${suffix}`)).Name)
    let ms = 0
    const step = (...args) => { ms += docker(...args).ms }
    step('create', '--name', v('fill'), '--network', 'none', '-v', `${volume('token')}:/f/token`, '-v', `${volume('po')}:/f/p`, '-v', `${volume('bundle')}:/f/bundle`, info.Config.Image, '/bin/true')
    step('cp', token, `${v('fill')}:/f/token/token`)
    step('cp', pDir, `${v('fill')}:/f/p/p`)
    step('cp', `${bundleDir}.`, `${v('fill')}:/f/bundle`)
    step('rm', v('fill'))
    step('run', '-d', '--name', v('holder'), '--network', network, '-p', `127.0.0.1::${port.split('/')[0]}`, '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--entrypoint', 'sleep', info.Config.Image, 'infinity')
    step('run', '--rm', '--network', `container:${v('holder')}`, '--cap-drop', 'ALL', '--cap-add', 'NET_ADMIN', '--read-only', '-e', `PO_NET_RULES=${rules}`, '--entrypoint', '/bin/sh', info.Config.Image, '-c', 'printf "%s\\n" "$PO_NET_RULES" | nft -f /dev/stdin')
    const mounts = info.Mounts.filter((m) => m.Type === 'volume').flatMap((m) => ['--mount', `type=volume,src=${mine(m.Name)},dst=${m.Destination}${m.RW ? '' : ',readonly'}`])
    const copyDst = info.Mounts.find((m) => m.Name.endsWith('-copy')).Destination
    step('create', '--name', v('ws'), '--network', `container:${v('holder')}`, '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--tmpfs', '/tmp', '--tmpfs', '/run', ...mounts, '--user', info.Config.User, ...info.Config.Env.flatMap((e) => ['-e', e]), '--entrypoint', info.Config.Cmd[0], info.Config.Image, ...info.Config.Cmd.slice(1))
    step('cp', `${dir}/.`, `${v('ws')}:${copyDst}`)
    step('start', v('ws'))
    const running = spawnSync('docker', ['inspect', '-f', '{{.State.Running}}', v('ws')], { env, encoding: 'utf8' }).stdout.trim()
    if (running !== 'true') throw new Error(`the by-hand container stopped: ${spawnSync('docker', ['logs', v('ws')], { env, encoding: 'utf8' }).stderr}`)
    step('exec', v('ws'), 'node', '-e', "const t=()=>require('http').get('http://127.0.0.1:7300/api/health',r=>process.exit(r.statusCode===200?0:1)).on('error',()=>setTimeout(t,20));t()")
    return ms
  }
  const removeByHand = (n) => {
    spawnSync('docker', ['rm', '-f', `po-bench-${n}-ws`, `po-bench-${n}-holder`, `po-bench-${n}-fill`], { env })
    const vols = spawnSync('docker', ['volume', 'ls', '-q', '--filter', `name=bench-${n}`], { env, encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean)
    if (vols.length) spawnSync('docker', ['volume', 'rm', '-f', ...vols], { env })
  }
  const upNew = (n) => {
    const dir = folder(`po-${n}`)
    const ms = timed([process.execPath, cli, 'up', dir, ...home, ...image], 'http://127.0.0.1:').ms
    timed([process.execPath, cli, 'down', dir, '--discard', ...home])
    return ms
  }
  const runs = {
    'po-sandbox exec -- echo x': () => timed([process.execPath, cli, 'exec', main, ...home, '--', 'echo', 'x'], 'x').ms,
    'docker -H ssh:// exec <id> echo x': () => docker('exec', id, 'echo', 'x').ms,
    'po-sandbox up (new, until it answers)': (r) => upNew(r),
    'the same by hand (docker -H ssh://)': (r) => {
      try { return byHand(folder(`hand-${r}`), r) } finally { removeByHand(r) }
    },
  }
  for (const run of Object.values(runs)) run('warm')
  const times = Object.fromEntries(Object.keys(runs).map((k) => [k, []]))
  for (let r = 0; r < ROUNDS; r++) for (const [k, run] of Object.entries(runs)) times[k].push(run(r))
  const s = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, summary(v)]))
  const fmt = (x) => `${x.toFixed(1)} ms`
  console.log(`${ROUNDS} interleaved rounds over SSH to a dockerd in its own namespaces (${BASE}, minimal), Node ${process.version}`)
  for (const [k, v] of Object.entries(s)) console.log(`  ${k.padEnd(40)} p50 ${fmt(v.p50)}  p90 ${fmt(v.p90)}  min ${fmt(v.min)}  max ${fmt(v.max)}`)
  const ratio = (a, b) => `p50 ${(s[a].p50 / s[b].p50).toFixed(2)}x, p90 ${(s[a].p90 / s[b].p90).toFixed(2)}x`
  console.log(`  exec / docker exec: ${ratio('po-sandbox exec -- echo x', 'docker -H ssh:// exec <id> echo x')}`)
  console.log(`  up (new) / by hand: ${ratio('po-sandbox up (new, until it answers)', 'the same by hand (docker -H ssh://)')}`)
} finally {
  for (const fn of cleanups.reverse()) await fn()
  rmSync(scratch, { recursive: true, force: true })
}
