// The po-sandbox CLI (bin/po-sandbox.js) and `npm start`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'

import { isolatedEnv, requireDocker, root, run, tempDir } from './helpers.mjs'

const bin = path.join(root, 'bin', 'po-sandbox.js')

test('doctor on this machine: ready, exit 0, every candidate and the chosen engine listed', async () => {
  await requireDocker()
  const r = await run(process.execPath, [bin, 'doctor'])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, new RegExp(`Node.js   ${process.version.replace(/\./g, '\\.')}: ok`))
  assert.match(r.stdout, /\[ok\] docker   unix:\/\/\/var\/run\/docker\.sock \(rootful\): Docker /)
  for (const engine of ['podman', 'nerdctl', 'finch']) assert.match(r.stdout, new RegExp(`\\] ${engine} `))
  assert.match(r.stdout, /Engine    docker .* at unix:\/\/\/var\/run\/docker\.sock/)
  assert.match(r.stdout, /Result    ready/)
})

test('doctor --json is machine-readable', async () => {
  await requireDocker()
  const r = await run(process.execPath, [bin, 'doctor', '--json'])
  assert.equal(r.code, 0, r.stderr)
  const report = JSON.parse(r.stdout)
  assert.equal(report.ok, true)
  assert.equal(report.node.version, process.version)
  assert.equal(report.engine.available, true)
  assert.ok(report.engine.candidates.length >= 4)
})

test('doctor without an engine: exit 1 and the reason', async (t) => {
  const dir = tempDir(t)
  const env = { ...isolatedEnv(dir, { DOCKER_HOST: `unix://${dir}/docker.sock`, PO_SANDBOX_ENGINE: 'docker' }), PATH: process.env.PATH }
  const r = await run(process.execPath, [bin, 'doctor'], { env })
  assert.equal(r.code, 1)
  assert.match(r.stdout, /Engine    none usable \[ENGINE_NOT_INSTALLED\]/)
  assert.match(r.stdout, /Result    not ready/)
})

test('doctor with PO_SANDBOX_ENGINE=bogus: exit 1 with the coded error', async () => {
  const r = await run(process.execPath, [bin, 'doctor', '--json'], { env: { ...process.env, PO_SANDBOX_ENGINE: 'bogus' } })
  assert.equal(r.code, 1)
  const out = JSON.parse(r.stdout)
  assert.equal(out.error.code, 'ENGINE_UNKNOWN')
})

test('usage errors exit 2 and print the usage', async () => {
  for (const args of [['frobnicate'], ['doctor', '--timeout-ms', 'soon'], ['doctor', '--nope']]) {
    const r = await run(process.execPath, [bin, ...args])
    assert.equal(r.code, 2, args.join(' '))
    assert.match(r.stderr, /Usage: po-sandbox/)
  }
  const help = await run(process.execPath, [bin, '--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /doctor/)
})

test('npm start runs the doctor', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  assert.equal(pkg.scripts.start, 'node bin/po-sandbox.js doctor')
  assert.equal(pkg.bin['po-sandbox'], 'bin/po-sandbox.js')
})

test('PO_SANDBOX_LOG turns on tracing to stderr; without it stderr stays quiet', async () => {
  const quiet = await run(process.execPath, [bin, 'doctor', '--engine', 'docker'], { env: { ...process.env, PO_SANDBOX_LOG: '' } })
  assert.equal(quiet.stderr, '')
  const loud = await run(process.execPath, [bin, 'doctor', '--engine', 'docker'], { env: { ...process.env, PO_SANDBOX_LOG: 'debug' } })
  assert.match(loud.stderr, /engine candidate probed/)
})
