// The full image recipe at run time, as far as this machine can build it: no registry (so no
// node:24-bookworm-slim) and no Debian packages on the local test base. The recipe's layers up
// to its toolchain step are real layers on the real engine: their image's environment is what
// every container of the full image starts with.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { addon, dockerCli, run } from './helpers.mjs'
import { TEST_BASE, newOwner, useTestBaseImage } from './provider-fixtures.mjs'

const { ensureSandboxImage } = addon

useTestBaseImage()

const RUNTIME_ENV = {
  CLOAKBROWSER_CACHE_DIR: '/opt/cloak/browser',
  CLOAKBROWSER_AUTO_UPDATE: 'false',
  NODE_PATH: '/opt/cloak/node_modules',
}

test('the full recipe sets the browser location before installing it, and its image carries it to every container', async (t) => {
  // A tag of our own for the test base: the build's layers are this test's to remove.
  const base = `po-sandbox-test-base:full-${newOwner().slice(1)}`
  dockerCli(['tag', TEST_BASE, base])
  const layers = []
  t.after(async () => { await run('docker', ['rmi', ...layers.reverse(), base]) })
  const events = []
  await assert.rejects(ensureSandboxImage({ baseImage: base, imageVariant: 'full', engine: 'docker' }, (e) => events.push(e)), (err) => {
    // The local test base has no apt-get: the toolchain step is where the full recipe stops here.
    assert.equal(err.code, 'IMAGE_BUILD_FAILED', err.message)
    assert.match(err.message, /failed at Step 4\/\d+ : RUN sh \/usr\/local\/lib\/po-sandbox\/setup-full\.sh/, err.message)
    assert.match(err.message, /apt-get: not found/, err.message)
    // Inside the toolchain step the browser's location was already set, by the layer before.
    assert.ok(err.message.includes('setup-full: CloakBrowser goes to /opt/cloak/browser'), err.message)
    return true
  })
  const lines = events.filter((e) => e.phase === 'progress').map((e) => e.message)
  const steps = lines.filter((m) => /^Step \d+\/\d+ : /.test(m)).map((m) => m.replace(/^Step (\d+)\/\d+ : /, '$1 '))
  assert.deepEqual(steps, [
    `1 FROM ${base}`,
    '2 ENV CLOAKBROWSER_CACHE_DIR=/opt/cloak/browser CLOAKBROWSER_AUTO_UPDATE=false NODE_PATH=/opt/cloak/node_modules PATH=/opt/cloak/node_modules/.bin:$PATH',
    '3 COPY setup-full.sh setup-dirs.sh /usr/local/lib/po-sandbox/',
    '4 RUN sh /usr/local/lib/po-sandbox/setup-full.sh',
  ])
  // The layers the build made before the toolchain step (" ---> <id>" after each step).
  const baseId = dockerCli(['image', 'inspect', '--format', '{{.Id}}', base]).replace(/^sha256:/, '').slice(0, 12)
  for (const m of lines) {
    const id = m.match(/^ ---> ([0-9a-f]{12})$/)?.[1]
    if (id && id !== baseId && !layers.includes(id)) layers.push(id)
  }
  assert.equal(layers.length, 2, `the ENV and COPY layers: ${JSON.stringify(lines)}`)
  const copied = layers.at(-1)
  assert.ok(copied, JSON.stringify(lines))
  // The image's run-time environment at the last layer before the toolchain step.
  const env = Object.fromEntries(JSON.parse(dockerCli(['image', 'inspect', '--format', '{{json .Config.Env}}', copied])).map((kv) => kv.split(/=(.*)/s).slice(0, 2)))
  for (const [k, v] of Object.entries(RUNTIME_ENV)) assert.equal(env[k], v, k)
  const basePath = JSON.parse(dockerCli(['image', 'inspect', '--format', '{{json .Config.Env}}', base])).find((kv) => kv.startsWith('PATH=')).slice(5)
  assert.equal(env.PATH, `/opt/cloak/node_modules/.bin:${basePath}`)
  // A container of it, run as the sandbox runs (another user, no network), starts with them.
  const seen = await run('docker', ['run', '--rm', '--network', 'none', '--user', '1000:1000', copied, 'node', '-e',
    'console.log(JSON.stringify({ cache: process.env.CLOAKBROWSER_CACHE_DIR, update: process.env.CLOAKBROWSER_AUTO_UPDATE, nodePath: process.env.NODE_PATH, path: process.env.PATH }))'])
  assert.equal(seen.code, 0, seen.stderr)
  assert.deepEqual(JSON.parse(seen.stdout), { cache: RUNTIME_ENV.CLOAKBROWSER_CACHE_DIR, update: 'false', nodePath: RUNTIME_ENV.NODE_PATH, path: env.PATH })
  // No image was tagged for the failed recipe.
  const tag = events.find((e) => e.phase === 'building')?.tag
  assert.equal((await run('docker', ['image', 'inspect', tag])).code, 1, `${tag} exists after a failed build`)
})

test('a base made anew under its name (pulled again for its fixes) gets a sandbox image of its own at the next ensure; the same base finds its image; the doctor says which base and how old', async (t) => {
  const base = `po-sandbox-test-base:rebase-${newOwner().slice(1)}`
  dockerCli(['tag', TEST_BASE, base])
  const made = []
  t.after(async () => { await run('docker', ['rmi', '-f', ...made.reverse(), base]) })
  const ask = { baseImage: base, imageVariant: 'minimal', engine: 'docker' }
  const idOf = (ref) => dockerCli(['image', 'inspect', '--format', '{{.Id}}', ref])
  const baseIdOf = (tag) => dockerCli(['image', 'inspect', '--format', '{{index .Config.Labels "po.image-base-id"}}', tag])
  const first = await ensureSandboxImage(ask)
  made.push(first.tag)
  assert.equal(first.built, true)
  assert.equal(baseIdOf(first.tag), idOf(base))
  const again = await ensureSandboxImage(ask)
  assert.deepEqual([again.tag, again.built], [first.tag, false])
  // The base pulled again: another image under the same name.
  const rebuilt = await run('docker', ['build', '-q', '-t', base, '-'], { input: `FROM ${TEST_BASE}\nLABEL po.test.rebased=${newOwner()}\n` })
  assert.equal(rebuilt.code, 0, rebuilt.stderr)
  made.push(rebuilt.stdout.trim())
  const second = await ensureSandboxImage(ask)
  made.push(second.tag)
  assert.equal(second.built, true)
  assert.notEqual(second.tag, first.tag)
  assert.equal(baseIdOf(second.tag), idOf(base))
  const doctor = await addon.doctor(process.version, { ...ask, env: { ...process.env, DOCKER_HOST: 'unix:///var/run/docker.sock' } })
  assert.equal(doctor.image.tag, second.tag)
  assert.equal(doctor.image.present, true)
  assert.equal(doctor.image.baseId, idOf(base))
  assert.match(doctor.text, new RegExp(`Image     ${second.tag} \\(minimal recipe on ${base} [0-9a-f]{12}, made (today|1 day ago|\\d+ days ago)\\): present`))
  // The base's name removed since (docker image prune -a, docker rmi): the image built on it
  // is kept and found, not built again (which would need a registry).
  assert.equal((await run('docker', ['rmi', base])).code, 0)
  const kept = await ensureSandboxImage(ask)
  assert.deepEqual([kept.tag, kept.built], [second.tag, false])
})
