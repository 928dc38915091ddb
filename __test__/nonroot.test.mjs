// As a normal user (issue 9): the set-up creates an unprivileged user that may use the shared
// rootful Docker through its socket's group, and runs __test__/nonroot-child.mjs as that user.
// Checked on the host and in the engine's inspect data: the container runs as that user, what
// it writes in the workspace belongs to that user, its own folders are writable, the broker
// socket lives in that user's runtime folder (0700 / 0600), a socket the user may not open is
// ENGINE_PERMISSION_DENIED, and a broker folder another user could change is refused with
// nothing left behind. Then rootless Podman as that user (its own `podman system service`):
// keep-id (its files on the host are its own), the cgroup v1 limits warning, a second hub that
// adopts, clone mode (the copy, planting, diff and apply), and the forced TCP broker route
// through slirp4netns with the real pi inside.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

import { root, run } from './helpers.mjs'
import { TEST_BASE, containersWith, inspect, removeOwner, useTestBaseImage } from './provider-fixtures.mjs'

useTestBaseImage()

const USER = 'po-sandbox-nonroot'
let uid
let gid

before(async () => {
  if (process.getuid() !== 0) {
    throw new Error(`nonroot.test.mjs creates the unprivileged user ${USER} and runs as it: run npm test as root (CI does), or create that user in the docker group and run __test__/nonroot-child.mjs as it.`)
  }
  if ((await run('id', ['-u', USER])).code !== 0) {
    const made = await run('useradd', ['--create-home', '--shell', '/bin/sh', USER])
    assert.equal(made.code, 0, made.stderr)
  }
  // The group that may open the engine's socket (Debian's docker.io: `docker`, 0660).
  const sock = statSync('/var/run/docker.sock')
  const group = (await run('getent', ['group', String(sock.gid)])).stdout.split(':')[0]
  assert.ok(group, `no group name for gid ${sock.gid} of /var/run/docker.sock`)
  const joined = await run('usermod', ['-aG', group, USER])
  assert.equal(joined.code, 0, joined.stderr)
  uid = Number((await run('id', ['-u', USER])).stdout)
  gid = Number((await run('id', ['-g', USER])).stdout)
  // The user's runtime folder, as a login session would have it.
  const runtime = `/run/user/${uid}`
  mkdirSync(runtime, { recursive: true })
  chownSync(runtime, uid, gid)
  chmodSync(runtime, 0o700)
})

/** A folder the user owns (the workspace, say), removed afterwards. */
function userDir(t, prefix) {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), prefix)))
  chownSync(dir, uid, gid)
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Removes what a child's hub left: its containers and volumes, Po home and broker folder. */
async function cleanup(facts) {
  await removeOwner(facts.owner)
  for (const dir of [facts.poHome, facts.broker?.dir, facts.broker && `${facts.broker.dir}.lock`]) if (dir) rmSync(dir, { recursive: true, force: true })
}

/** A login-like environment of the user, for `runuser -u USER -- env -i …`. */
function userEnv() {
  return [`HOME=/home/${USER}`, `USER=${USER}`, `PATH=${process.env.PATH}`, `XDG_RUNTIME_DIR=/run/user/${uid}`, 'TMPDIR=/tmp', ...(process.env.PO_DEBUG_CHILD ? ['PO_DEBUG_CHILD=1'] : [])]
}

/** Runs one scenario of nonroot-child.mjs as the user, with a login-like environment. */
async function asUser(args) {
  const env = userEnv()
  const r = await run('runuser', ['-u', USER, '--', 'env', '-i', ...env, process.execPath, path.join(root, '__test__', 'nonroot-child.mjs'), JSON.stringify(args)], { cwd: '/tmp' })
  if (process.env.PO_DEBUG_CHILD) process.stderr.write(r.stderr)
  const line = r.stdout.trim().split('\n').pop()
  assert.equal(r.code, 0, `the child failed (${r.code}):\n${r.stdout}\n${r.stderr}`)
  return JSON.parse(line)
}

test('as a normal user on rootful Docker: the container runs as that user, its files are that user\'s, its folders writable, the broker socket in that user\'s runtime folder', async (t) => {
  const ws = userDir(t, 'po-nonroot-ws-')
  const facts = await asUser({ scenario: 'docker', workspace: ws })
  t.after(() => cleanup(facts))
  assert.equal(facts.uid, uid)
  assert.equal(facts.state, 'running', facts.error ?? '')
  assert.equal(facts.execCode, 0)
  const info = inspect(facts.containerId)
  assert.equal(info.Config.User, `${uid}:${gid}`, 'the container runs as the calling user, not root')
  // Written inside, owned outside by the user (no root-owned files in their workspace).
  assert.equal(readFileSync(path.join(ws, 'in-workspace.txt'), 'utf8').trim(), String(uid))
  for (const f of ['in-workspace.txt', 'made', 'made/sub', 'made/sub/f']) {
    const st = statSync(path.join(ws, f))
    assert.deepEqual([st.uid, st.gid], [uid, gid], `${f} belongs to ${st.uid}:${st.gid}`)
  }
  // The broker socket folder: under the user's runtime folder, the user's, 0700; its socket 0600.
  const mount = info.Mounts.find((m) => m.Destination === '/run/po-broker')
  assert.ok(mount, JSON.stringify(info.Mounts))
  assert.ok(mount.Source.startsWith(`/run/user/${uid}/po-broker/`), mount.Source)
  const b = facts.broker
  assert.equal(b.dir, mount.Source)
  assert.deepEqual([b.uid, b.mode], [uid, 0o700])
  // Its sockets: the broker's, and the exec spawner's the exec started (issue 26); both the
  // user's and 0600.
  const sockets = Object.entries(b.entries).filter(([, e]) => e.socket)
  assert.deepEqual(sockets.map(([name]) => name.replace(/^exec-[0-9a-f]{16}\.sock$/, 'exec-<hex>.sock')).sort(), ['broker.sock', 'exec-<hex>.sock'], JSON.stringify(b.entries))
  for (const [name, e] of sockets) assert.deepEqual([e.uid, e.mode], [uid, 0o600], name)
})

test('as a normal user: an engine socket the user may not open is ENGINE_PERMISSION_DENIED, saying what to do', async (t) => {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-engine-')))
  chmodSync(dir, 0o755)
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const socket = path.join(dir, 'engine.sock')
  const server = net.createServer((c) => c.destroy())
  await new Promise((resolve) => server.listen(socket, resolve))
  t.after(() => server.close())
  chmodSync(socket, 0o600)
  const facts = await asUser({ scenario: 'denied', socket })
  assert.equal(facts.available, false)
  assert.equal(facts.reasonCode, 'ENGINE_PERMISSION_DENIED', facts.reason)
  assert.match(facts.reason, new RegExp(socket.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
})

test('as a normal user: a broker folder another user could change is refused (BROKER_FAILED naming it), nothing left behind', async (t) => {
  const ws = userDir(t, 'po-nonroot-ws-')
  // Made by someone else (root here), writable by everyone, not sticky.
  const shared = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-shared-')))
  chmodSync(shared, 0o777)
  t.after(() => rmSync(shared, { recursive: true, force: true }))
  const facts = await asUser({ scenario: 'squatted', workspace: ws, socketDir: shared })
  t.after(() => cleanup(facts))
  assert.equal(facts.state, 'failed')
  assert.equal(facts.errorCode, 'BROKER_FAILED', facts.error)
  assert.match(facts.error, /can be changed by other users \(mode 777, not sticky\)/)
  assert.ok(facts.error.includes(shared), facts.error)
  assert.deepEqual(containersWith({ 'po.owner': facts.owner }), [], 'no container was left')
})

/** On cgroup v1 (no cgroup2 file system at /sys/fs/cgroup) a rootless engine cannot set limits. */
const CGROUP_V1 = statSync('/sys/fs/cgroup').isDirectory() && !readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => / \/sys\/fs\/cgroup .* - cgroup2 /.test(l))

/**
 * The user's rootless Podman for one test: sub-ids, /dev/net/tun as distributions ship it, the
 * test base image loaded into the user's storage, and `podman system service` on a socket in the
 * user's runtime folder. When the test ends: the service and everything else the user runs is
 * killed (the user is the test's own), /dev/net/tun restored, and nothing of the user's may be
 * left running.
 */
async function userPodman(t) {
  for (const file of ['/etc/subuid', '/etc/subgid']) {
    if (!readFileSync(file, 'utf8').split('\n').some((l) => l.startsWith(`${USER}:`))) {
      const added = await run('usermod', [file === '/etc/subuid' ? '--add-subuids' : '--add-subgids', '300000-365535', USER])
      assert.equal(added.code, 0, added.stderr)
    }
  }
  // Rootless networking (slirp4netns) opens /dev/net/tun, which distributions leave 0666; this
  // machine has it 0600, so the test opens it up as a distribution would, and restores it.
  const tun = statSync('/dev/net/tun').mode & 0o777
  chmodSync('/dev/net/tun', 0o666)
  const socket = `/run/user/${uid}/po-test-podman.sock`
  let service
  t.after(async () => {
    service?.kill('SIGKILL')
    await run('pkill', ['-KILL', '-u', USER])
    chmodSync('/dev/net/tun', tun)
    rmSync(socket, { force: true })
    let left = ''
    for (let i = 0; i < 50; i++) {
      left = (await run('pgrep', ['-a', '-u', USER])).stdout.trim()
      if (!left) break
      await new Promise((r) => setTimeout(r, 100))
    }
    assert.equal(left, '', `processes of ${USER} were left running`)
  })
  const asIt = (...a) => ['-u', USER, '--', 'env', '-i', ...userEnv(), ...a]
  const loaded = await run('bash', ['-c', `set -o pipefail; docker save ${TEST_BASE} | runuser ${asIt('podman', 'load', '-q').join(' ')}`])
  assert.equal(loaded.code, 0, loaded.stderr)
  service = spawn('runuser', asIt('podman', 'system', 'service', '--time=0', `unix://${socket}`), { stdio: 'ignore' })
  for (let i = 0; !existsSync(socket); i++) {
    assert.ok(i < 300 && service.exitCode === null, `podman system service (as ${USER}) did not create ${socket}`)
    await new Promise((r) => setTimeout(r, 100))
  }
  return socket
}

test('as a normal user on rootless Podman: keep-id maps the user, its files are that user\'s on the host, a brokered call goes through its runtime folder, a second hub adopts, a port forwards; beside it a clone-mode copy: planting, diff and apply', async (t) => {
  const socket = await userPodman(t)
  const ws = userDir(t, 'po-nonroot-ws-')
  const repo = userDir(t, 'po-nonroot-clone-')
  // The clone-mode scenario runs beside this one (another owner, Po home and workspace), so
  // their waits (image copies into vfs storage, health, the stop's grace) overlap.
  // Both end (and clean up) before either's failure fails the test.
  const settled = await Promise.allSettled(['podman', 'podman-clone'].map((scenario) => asUser({ scenario, workspace: scenario === 'podman' ? ws : repo, socket })))
  for (const s of settled) if (s.status === 'fulfilled') t.after(() => rmSync(s.value.poHome, { recursive: true, force: true }))
  const [facts, clone] = settled.map((s) => { if (s.status === 'rejected') throw s.reason; return s.value })
  assert.equal(facts.engine, 'podman')
  assert.equal(facts.state, 'running', facts.error ?? '')
  assert.equal(facts.user, `${uid}:${gid}`)
  assert.equal(facts.execCode, 0, facts.callError)
  // Without keep-id these would belong to a sub-uid (165536 + uid, say).
  assert.equal(readFileSync(path.join(ws, 'in-workspace.txt'), 'utf8').trim(), String(uid))
  for (const f of ['in-workspace.txt', 'made', 'made/sub', 'made/sub/f']) {
    const st = statSync(path.join(ws, f))
    assert.deepEqual([st.uid, st.gid], [uid, gid], `${f} belongs to ${st.uid}:${st.gid}`)
  }
  const p = statSync(facts.pFile)
  assert.deepEqual([p.uid, p.gid], [uid, gid], `P's file belongs to ${p.uid}:${p.gid}`)
  assert.equal(facts.callStatus, 200, facts.callError)
  assert.deepEqual(facts.upstreamSaw, [`Bearer sk-REAL-rootless-${'r'.repeat(24)}`])
  assert.equal(facts.keyInEnv, false)
  assert.ok(facts.brokerMount?.startsWith(`/run/user/${uid}/po-broker/`), facts.brokerMount)
  // The second hub adopted the very container (the rootless posture is no drift).
  assert.deepEqual(facts.second, { state: 'running', containerId: facts.containerId, adopted: true, replacedReason: null, removed: [] })
  assert.equal(facts.secondExec, 0)
  // Later execs through the container's spawner, on rootless Podman too.
  assert.equal(facts.spawnerExec, 0)
  assert.match(facts.spawnerParent, /po-sandbox-exec \/run\/po-broker\/exec-/)
  // A forward of the server's port reaches it as this user, on the host's loopback only.
  assert.match(facts.forwardUrl, /^http:\/\/127\.0\.0\.1:\d+$/)
  assert.equal(facts.forwardUid, uid)
  assert.equal(facts.forwardCarrier, 'socket')
  assert.equal(facts.relayLeft, false)
  // Limits: on cgroup v1 the engine cannot enforce them, and both the status and the doctor say so.
  assert.equal(facts.doctor.rootless, true)
  const warned = (list) => list.some((w) => w.includes('cgroup v1') && w.includes('Delegate=yes'))
  assert.equal(warned(facts.warnings), CGROUP_V1, JSON.stringify(facts.warnings))
  assert.equal(warned(facts.doctor.warnings), CGROUP_V1, JSON.stringify(facts.doctor))
  assert.equal(facts.doctor.cgroupVersion, CGROUP_V1 ? '1' : '2')
  // Nothing left: no container, no broker socket folder of the owner (the volumes were removed
  // by the child; the user's processes are checked when the test ends).
  assert.equal(facts.leftContainers, '')
  assert.deepEqual(facts.leftSockets, [])

  // Clone mode on the same rootless Podman: the copy uploaded through the engine is the user's
  // (keep-id) inside and on the host, readable there; every planting route leaves the host tree
  // byte for byte the same; diff, then apply as the user: the same commit ids on the named
  // branch, the host's HEAD, index and working tree untouched, a second apply a no-op, a host
  // commit on the branch meanwhile refused as a divergence (clone-fixtures' plantAndApply, which
  // asserts in the child); adopted; down keeps it, --discard removes it.
  assert.equal(clone.up.code, 0, clone.up.stderr)
  assert.equal(clone.user, `${uid}:${gid}`)
  assert.equal(clone.look.code, 0, clone.look.stderr)
  assert.equal(clone.look.log, clone.commit, 'the same commit id')
  assert.equal(clone.look.status, ' M tracked.txt|?? untracked.txt|')
  assert.equal(clone.look.tracked, 'changed on the host')
  assert.equal(clone.look.user, `${uid}:${gid}`)
  assert.equal(clone.look.owners, `${uid}:${gid}`, 'the copy is owned by the container user')
  assert.equal(clone.took.error, undefined, clone.took.error)
  assert.match(clone.took.agent ?? '', /^[0-9a-f]{40}$/)
  assert.deepEqual(clone.hostOwners, [`${uid}:${gid}`], 'on the host the copy is the user\'s')
  assert.equal(clone.hostRead, 'new on the host\n')
  assert.equal(clone.adopted, true, 'the running copy is adopted as it is')
  assert.equal(clone.keptHead, clone.took.second, 'the agent work is still there')
  assert.equal(clone.down.code, 0, clone.down.stderr)
  assert.deepEqual(clone.keptCopies, clone.copies, 'down keeps the copy')
  assert.equal(clone.discard.code, 0, clone.discard.stderr)
  assert.deepEqual(clone.leftCopies, [], '--discard removes the copy')
})

test('as a normal user on rootless Podman, the forced TCP broker route: the real pi inside completes a streamed call through slirp4netns to the host\'s loopback', async (t) => {
  const socket = await userPodman(t)
  const ws = userDir(t, 'po-nonroot-pi-')
  const facts = await asUser({ scenario: 'podman-pi', workspace: ws, socket })
  t.after(() => { for (const d of [facts.poHome, facts.svc]) rmSync(d, { recursive: true, force: true }) })
  assert.equal(facts.up.code, 0, facts.up.stderr)
  assert.equal(facts.error, undefined, facts.error)
  assert.match(facts.networkMode, /^container:[0-9a-f]{64}$/)
  assert.equal(facts.holderNetworkMode, 'slirp4netns')
  assert.equal(facts.holderLabels['po.net-mode'], 'open')
  // The container's route: the broker's TCP port at the address slirp4netns gives the host's
  // loopback, and no socket.
  const address = facts.env.find((kv) => kv.startsWith('PO_BROKER_ADDRESS='))
  assert.match(address ?? '', /^PO_BROKER_ADDRESS=host\.docker\.internal:\d+$/, JSON.stringify(facts.env))
  assert.ok(!facts.env.some((kv) => kv.startsWith('PO_BROKER_SOCKET=')), JSON.stringify(facts.env))
  assert.match(facts.hosts, /^10\.0\.2\.2\s+host\.docker\.internal/m)
  // The server's port answers on the published loopback port (the holder's input rules let it
  // in over loopback, where rootlessport connects from inside the namespace).
  assert.equal(facts.health?.ok, true, JSON.stringify(facts.health))
  assert.equal(facts.keyInEnv, false)
  assert.equal(facts.pi.code, 0, `pi in the container failed:\nstdout: ${facts.pi.stdout}\nstderr: ${facts.pi.stderr}`)
  assert.match(facts.pi.stdout, /pong from rootless-tcp/)
  const calls = facts.requests.filter((q) => q.api === 'anthropic-messages')
  assert.equal(calls.length, 1, JSON.stringify(facts.requests))
  assert.equal(calls[0].stream, true, 'pi streamed the call')
  assert.equal(calls[0].key, `sk-ant-api03-REAL-rootless-${'t'.repeat(32)}`)
  assert.ok(facts.requests.every((q) => !q.sawToken), 'the upstream saw a token')
  assert.equal(facts.sameContainer, true, 'exec adopted the container up made')
  // The git route: cloned and a new branch pushed with the host's token, through another hub's port.
  assert.equal(facts.git.code, 0, facts.git.out)
  assert.equal(facts.git.log, 'over-tcp', facts.git.out)
  assert.ok(facts.git.server.some((q) => q.path.startsWith('/acme/app.git/git-receive-pack') && q.auth === 'token'), JSON.stringify(facts.git.server))
  // The registry route: the package's document with the placeholder, 401 without it.
  assert.match(facts.registry.out, /^200 @acme\/private 401 http:\/\/host\.docker\.internal:\d+\/$/, JSON.stringify(facts.registry))
  assert.equal(facts.secretsInside, 'done', 'a host token is inside the container')
  assert.equal(facts.down.code, 0, facts.down.stderr)
  assert.equal(facts.left, '', 'a container was left')
})
