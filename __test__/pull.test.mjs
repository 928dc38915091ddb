// `po-sandbox up --pull` against an image registry of the test's own (Debian's docker-registry,
// on a loopback port, which the engine trusts without TLS as it trusts every 127.0.0.0/8
// registry): the base is pulled through the engine's API; a base that changed in the registry
// gets a sandbox image of its own and replaces the running container, one that did not changes
// nothing; a base the registry cannot give is IMAGE_PULL_FAILED and nothing is made.
import { test, before } from 'node:test'
import { spawn } from 'node:child_process'
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { addon, dockerCli, homeOwner, requireDocker, root, run, tempDir, waitFor } from './helpers.mjs'
import { TEST_BASE, removeOwner } from './provider-fixtures.mjs'

const cli = path.join(root, 'bin', 'po-sandbox.js')

before(async () => {
  await requireDocker()
  const r = await run('bash', [path.join(root, 'scripts/build-test-base-image.sh')])
  assert.equal(r.code, 0, `build-test-base-image.sh failed:\n${r.stderr}`)
})

function po(args) {
  const env = { ...process.env }
  for (const k of ['PO_SANDBOX', 'PO_SANDBOX_LOG', 'PO_SANDBOX_BASE_IMAGE']) delete env[k]
  return run(process.execPath, [cli, ...args], { env })
}

/** A loopback port nothing listens on now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Debian's registry on a loopback port, its storage in `dir`; stopped when the test ends. */
async function registry(t, dir) {
  const registryBin = '/usr/bin/docker-registry'
  const port = await freePort()
  const config = path.join(dir, 'registry.yml')
  writeFileSync(config, [
    'version: 0.1',
    'log: { level: error }',
    `storage: { filesystem: { rootdirectory: ${path.join(dir, 'storage')} } }`,
    `http: { addr: "127.0.0.1:${port}" }`,
    '',
  ].join('\n'))
  const child = spawn(registryBin, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] })
  let said = ''
  child.stderr.on('data', (d) => { said += d })
  child.on('error', (e) => { said += `${e.message}: install Debian's docker-registry (bash scripts/ensure-engine.sh does)` })
  t.after(() => child.kill('SIGKILL'))
  await waitFor(async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/v2/`).catch(() => null)
    if (child.exitCode !== null || said.includes('install Debian')) throw new Error(`the registry did not start: ${said}`)
    return answer?.status === 200
  }, 'the registry answering', 15000)
  return `127.0.0.1:${port}`
}

const idOf = (ref) => dockerCli(['image', 'inspect', '--format', '{{.Id}}', ref])
const labelOf = (container, label) => dockerCli(['inspect', '--format', `{{index .Config.Labels "${label}"}}`, container])

test('up --pull: a base changed in its registry is pulled, built on and replaces the running container; an unchanged one adopts; a base the registry cannot give is IMAGE_PULL_FAILED and nothing is made', async (t) => {
  const dir = tempDir(t, 'po-pull-')
  const at = await registry(t, dir)
  const base = `${at}/po-test/base:1`
  const folder = path.join(dir, 'project')
  mkdirSync(folder)
  writeFileSync(path.join(folder, 'README.md'), 'pulled\n')
  const poHome = path.join(dir, 'po-home')
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  const made = []
  t.after(async () => {
    await addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true }).catch(() => {})
    await removeOwner(owner)
    await run('docker', ['rmi', '-f', ...made.reverse(), base])
  })
  const up = async (...extra) => {
    const r = await po(['up', folder, '--po-home', poHome, '--engine', 'docker', '--base-image', base, '--image-variant', 'minimal', '--json', ...extra])
    return { ...r, out: r.stdout ? JSON.parse(r.stdout) : undefined }
  }
  // The registry has the test base under its name; so does the engine (the same image).
  dockerCli(['tag', TEST_BASE, base])
  const push = await run('docker', ['push', base])
  assert.equal(push.code, 0, push.stderr)
  const first = await up('--pull')
  assert.equal(first.code, 0, first.stderr)
  assert.match(first.out.pulled, /^up to date \([0-9a-f]{12}\)$/)
  const a = first.out.container
  made.push(a.image)
  assert.equal(labelOf(a.containerId, 'po.image-base-id'), idOf(base))
  // Without --pull the running container is adopted and nothing is pulled.
  const again = await up()
  assert.equal(again.code, 0, again.stderr)
  assert.deepEqual([again.out.container.containerId, again.out.container.adopted, again.out.pulled], [a.containerId, true, undefined])
  // A newer base in the registry (its security fixes); the engine still has the old one.
  const oldId = idOf(base)
  const rebuilt = await run('docker', ['build', '-q', '-t', base, '-'], { input: `FROM ${TEST_BASE}\nLABEL po.test.pulled=${ws.id}\n` })
  assert.equal(rebuilt.code, 0, rebuilt.stderr)
  const newId = rebuilt.stdout.trim()
  made.push(newId)
  const pushed = await run('docker', ['push', base])
  assert.equal(pushed.code, 0, pushed.stderr)
  dockerCli(['tag', oldId, base])
  assert.equal(idOf(base), oldId)
  // Without --pull: still the running container, on the old base.
  const kept = await up()
  assert.deepEqual([kept.code, kept.out.container.containerId], [0, a.containerId], kept.stderr)
  // With it: the base pulled, a sandbox image built on it, the container replaced.
  const pulled = await up('--pull')
  assert.equal(pulled.code, 0, pulled.stderr)
  assert.match(pulled.out.pulled, new RegExp(`^a newer image \\(${newId.replace('sha256:', '').slice(0, 12)}\\)`))
  const b = pulled.out.container
  made.push(b.image)
  assert.equal(idOf(base), newId)
  assert.notEqual(b.containerId, a.containerId)
  assert.notEqual(b.image, a.image)
  assert.equal(b.adopted, false)
  assert.equal(labelOf(b.containerId, 'po.image-base-id'), newId)
  assert.equal((await run('docker', ['inspect', a.containerId])).code, 1, 'the container on the old base is gone')
  const seen = await po(['exec', folder, '--po-home', poHome, '--base-image', base, '--image-variant', 'minimal', '--', 'cat', 'README.md'])
  assert.deepEqual([seen.code, seen.stdout], [0, 'pulled\n'], seen.stderr)
  // Pulled again with nothing new: up to date, the same container adopted.
  const same = await up('--pull')
  assert.equal(same.code, 0, same.stderr)
  assert.match(same.out.pulled, /^up to date/)
  assert.equal(same.out.container.containerId, b.containerId)

  // A base the registry does not have, and a registry that does not answer: coded, named, and
  // nothing made for a new folder.
  const other = path.join(dir, 'other')
  mkdirSync(other)
  const otherWs = addon.workspaceForFolder(other)
  const closed = await freePort()
  for (const missing of [`${at}/po-test/none:1`, `127.0.0.1:${closed}/po-test/base:1`]) {
    const r = await po(['up', other, '--po-home', poHome, '--engine', 'docker', '--base-image', missing, '--image-variant', 'minimal', '--json', '--pull'])
    assert.notEqual(r.code, 0, r.stdout)
    const { error } = JSON.parse(r.stdout)
    assert.equal(error.code, 'IMAGE_PULL_FAILED', error.message)
    assert.ok(error.message.includes(`Pulling the base image ${missing} failed`), error.message)
    assert.match(error.message, /without --pull/)
    assert.equal(dockerCli(['ps', '-aq', '--filter', `label=po.workspace=${otherWs.id}`]), '', 'no container made')
    assert.equal(dockerCli(['volume', 'ls', '-q', '--filter', `label=po.workspace=${otherWs.id}`]), '', 'no volume made')
    assert.equal((await run('docker', ['image', 'inspect', missing])).code, 1)
  }
  // --pull belongs to up.
  const wrong = await po(['exec', folder, '--pull', '--', 'true'])
  assert.equal(wrong.code, 2)
  assert.match(wrong.stderr, /--pull is an option of up only/)
})
