// As a normal user (issue 9): the set-up creates an unprivileged user that may use the shared
// rootful Docker through its socket's group, and runs __test__/nonroot-child.mjs as that user.
// Checked on the host and in the engine's inspect data: the container runs as that user, what
// it writes in the workspace belongs to that user, its own folders are writable, the broker
// socket lives in that user's runtime folder (0700 / 0600), a socket the user may not open is
// ENGINE_PERMISSION_DENIED, and a broker folder another user could change is refused with
// nothing left behind.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

import { root, run } from './helpers.mjs'
import { containersWith, inspect, removeOwner, useTestBaseImage } from './provider-fixtures.mjs'

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

/** Runs one scenario of nonroot-child.mjs as the user, with a login-like environment. */
async function asUser(args) {
  const env = [
    `HOME=/home/${USER}`, `USER=${USER}`, `PATH=${process.env.PATH}`, `XDG_RUNTIME_DIR=/run/user/${uid}`, 'TMPDIR=/tmp',
  ]
  const r = await run('runuser', ['-u', USER, '--', 'env', '-i', ...env, process.execPath, path.join(root, '__test__', 'nonroot-child.mjs'), JSON.stringify(args)], { cwd: '/tmp' })
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
  const sockets = Object.entries(b.entries).filter(([, e]) => e.socket)
  assert.equal(sockets.length, 1, JSON.stringify(b.entries))
  assert.deepEqual([sockets[0][1].uid, sockets[0][1].mode], [uid, 0o600])
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
