// Engine detection against real Podman's Docker-compatible API (`podman system service`).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { addon, isolatedEnv } from './helpers.mjs'

let dir
let sock
let service

before(async () => {
  try {
    execFileSync('podman', ['--version'], { stdio: 'ignore' })
  } catch {
    throw new Error("These tests need Podman: install it (Debian: sudo apt-get install -y podman) or run 'bash scripts/ensure-engine.sh' as root.")
  }
  dir = mkdtempSync(path.join(os.tmpdir(), 'po-sandbox-podman-'))
  sock = path.join(dir, 'podman.sock')
  service = spawn('podman', ['system', 'service', '--time=0', `unix://${sock}`], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  service.stderr.on('data', (d) => { stderr += d })
  const deadline = Date.now() + 30000
  while (!existsSync(sock)) {
    if (service.exitCode !== null) throw new Error(`podman system service exited (${service.exitCode}): ${stderr}`)
    if (Date.now() > deadline) throw new Error(`podman system service did not create ${sock} within 30 s: ${stderr}`)
    await new Promise((r) => setTimeout(r, 100))
  }
})

after(async () => {
  if (service && service.exitCode === null) {
    const exited = new Promise((r) => service.once('exit', r))
    service.kill('SIGTERM')
    await exited
  }
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('CONTAINER_HOST pointing at Podman: available and reported as podman', async () => {
  const r = await addon.checkEngine({ timeoutMs: 10000, env: isolatedEnv(dir, { CONTAINER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'podman' }) })
  assert.equal(r.available, true, r.reason)
  assert.equal(r.engine, 'podman')
  assert.equal(r.source, 'CONTAINER_HOST')
  assert.equal(r.endpoint, `unix://${sock}`)
  assert.equal(r.engineVersion, execFileSync('podman', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' }).trim())
  const [major, minor] = r.apiVersion.split('.').map(Number)
  assert.ok(major === 1 && minor >= 41, `API ${r.apiVersion}`)
  assert.equal(r.osType, 'linux')
})

test('a Podman socket behind DOCKER_HOST is still reported as podman', async () => {
  const r = await addon.checkEngine({ timeoutMs: 10000, env: isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}` }) })
  assert.equal(r.available, true, r.reason)
  assert.equal(r.engine, 'podman')
  assert.equal(r.source, 'DOCKER_HOST')
  assert.equal(r.candidates[0].engine, 'docker')
  assert.equal(r.candidates[0].outcome, 'available')
})
