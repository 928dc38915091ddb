// The owner id (issue 37): made once per Po home and kept in <poHome>/sandbox-owner, so two
// machines whose Po homes share a path never share an owner on a shared engine; a Po home an
// earlier version used keeps the id derived from its path, so its running sandboxes are adopted
// after an upgrade, not replaced.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import path from 'node:path'

import { addon } from './helpers.mjs'
import {
  baseOptions, brokerDirOf, containersWith, hostEnv, isRunning, killHub, openLayer, removeOwner, spawnHub, tempHome, tempWorkspace,
  useTestBaseImage, writeBundle, writeHubChild,
} from './provider-fixtures.mjs'

useTestBaseImage()

const derivedOf = (poHome) => createHash('sha256').update(poHome).digest('hex').slice(0, 12)
const ownerFile = (poHome) => path.join(poHome, 'sandbox-owner')

/** The provider's options without an owner: the Po home's is used. */
function unowned(poHome, brokerKey, extra) {
  const options = baseOptions(poHome, brokerKey, extra)
  delete options.owner
  return options
}

test('a Po home an earlier version used keeps its path-derived owner: its running sandbox is adopted, not replaced', async (t) => {
  const poHome = tempHome(t)
  writeBundle(poHome)
  const derived = derivedOf(poHome)
  t.after(() => removeOwner(derived))
  const workspaces = [{ id: 'kept', path: tempWorkspace(t) }]
  const script = writeHubChild(t)
  // An earlier version's hub: the owner derived from the path (given, so no file is made).
  const first = spawnHub(t, script, { options: baseOptions(poHome, derived, { workspaces }), mode: 'wait' })
  const s1 = await first.result()
  assert.equal(s1.state, 'ready', JSON.stringify(s1))
  const id = s1.workspaces[0].container.containerId
  assert.equal(existsSync(ownerFile(poHome)), false)
  await killHub(first)
  // This version's hub, no owner given: the Po home holds the derived id's folders, so it is
  // kept, and the sandbox is adopted.
  const second = spawnHub(t, script, { options: unowned(poHome, derived, { workspaces }), mode: 'wait' })
  const s2 = await second.result()
  assert.equal(s2.state, 'ready', JSON.stringify(s2))
  assert.equal(s2.owner, derived)
  assert.equal(s2.workspaces[0].container.containerId, id)
  assert.equal(s2.workspaces[0].container.adopted, true)
  assert.equal(readFileSync(ownerFile(poHome), 'utf8'), `${derived}\n`)
  assert.deepEqual(containersWith({ 'po.owner': derived }), [id])
  await killHub(second)
})

test('a fresh Po home gets an owner of its own, kept; the same path made anew (another machine) gets another', async (t) => {
  const poHome = tempHome(t)
  const first = await addon.listSandboxContainers({ poHome, engine: 'docker', env: hostEnv() })
  assert.deepEqual(first, [])
  const id = readFileSync(ownerFile(poHome), 'utf8').trim()
  assert.match(id, /^[0-9a-f]{12}$/)
  assert.notEqual(id, derivedOf(poHome), 'a fresh Po home took the id derived from its path')
  await addon.listSandboxContainers({ poHome, engine: 'docker', env: hostEnv() })
  assert.equal(readFileSync(ownerFile(poHome), 'utf8').trim(), id)
  rmSync(ownerFile(poHome))
  await addon.listSandboxContainers({ poHome, engine: 'docker', env: hostEnv() })
  assert.notEqual(readFileSync(ownerFile(poHome), 'utf8').trim(), id)
})

test('two hubs on one engine, each with its own Po home: neither lists or stops the other\'s sandbox; ls --all and the doctor show the other', async (t) => {
  const homes = [tempHome(t), tempHome(t)]
  const hubs = []
  for (const [i, poHome] of homes.entries()) {
    writeBundle(poHome)
    const key = `own${i}${Date.now().toString(36)}`
    t.after(() => rmSync(brokerDirOf(key), { recursive: true, force: true }))
    const { layer } = openLayer(unowned(poHome, key, { workspaces: [{ id: 'same', path: tempWorkspace(t) }] }))
    const status = await layer.provider.ready()
    assert.equal(status.state, 'ready', JSON.stringify(status))
    t.after(() => removeOwner(status.owner))
    hubs.push({ layer, owner: status.owner, container: status.workspaces[0].container.containerId })
  }
  const [a, b] = hubs
  assert.notEqual(a.owner, b.owner)
  for (const h of hubs) assert.equal(isRunning(h.container), true)
  const mine = await addon.listSandboxContainers({ poHome: homes[1], engine: 'docker', env: hostEnv() })
  assert.deepEqual(mine.map((r) => r.containerId), [b.container])
  const all = await addon.listSandboxContainers({ poHome: homes[1], allOwners: true, engine: 'docker', env: hostEnv() })
  for (const h of hubs) assert.ok(all.some((r) => r.owner === h.owner && r.containerId === h.container), JSON.stringify(all))
  const doctor = await addon.doctor(process.version, { poHome: homes[1], engine: 'docker', env: hostEnv() })
  assert.equal(doctor.hubs.owner, b.owner)
  assert.equal(doctor.hubs.sandboxes, 1)
  assert.ok(doctor.hubs.otherOwners.includes(a.owner), JSON.stringify(doctor.hubs))
  assert.match(doctor.text, new RegExp(`Hubs      owner ${b.owner} \\(1 sandbox\\); \\d+ of \\d+ other hubs? `))
  // B's stop of all its sandboxes leaves A's running.
  const stopped = await addon.stopSandboxContainers({ poHome: homes[1], all: true, engine: 'docker', env: hostEnv() })
  assert.deepEqual(containersWith({ 'po.owner': b.owner }), [], JSON.stringify(stopped))
  assert.equal(isRunning(a.container), true, JSON.stringify(stopped))
  await a.layer.containers.stopAll()
})
